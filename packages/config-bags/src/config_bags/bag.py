"""The base every bag derives from: a frozen, keyword-only msgspec struct that is valid whenever
it exists.

msgspec checks types and constraints when it decodes or converts, but a struct built in Python
(`ScheduleBag(page_size=-5)`) would take anything. So construction checks every leaf against its
annotation, through a shadow struct with the same fields and no checks of its own (one msgspec
conversion per bag), then runs the bag's cross-leaf check. Values are normalized as decoding
would (a list becomes a tuple, an int a float), so equal bags encode and hash alike.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from typing import Any

import msgspec

from config_bags.errors import LeafValueError
from config_bags.leaf_types import accepted_text, value_type_of

# Set while msgspec itself builds bags (decode, convert), which it has already checked.
_checked_by_msgspec: ContextVar[bool] = ContextVar("checked_by_msgspec", default=False)

_FIELD_PATH = re.compile(r"at `\$\.(\w+)")


class BagMeta(msgspec.StructMeta):
    """Makes every bag keyword-only without saying so (msgspec already inherits `frozen`), so a
    stack writes `class CacheBag(Bag):`."""

    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwargs: Any) -> Any:
        kwargs.setdefault("kw_only", True)
        return super().__new__(mcls, name, bases, namespace, **kwargs)


class Bag(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, metaclass=BagMeta):
    """A typed, frozen, keyword-only namespace of leaves. Assigning to a field raises
    `AttributeError`; building one with a value its leaf refuses raises `LeafValueError` naming
    the bag, the leaf, the value and what is accepted.

    A field holding a nested bag takes a bag as its default (`cache: CacheBag = CacheBag()`): a
    bag is frozen, so one default instance is shared safely and no `default_factory` is needed."""

    def __post_init__(self) -> None:
        if not _checked_by_msgspec.get():
            _check_leaves(self)
        self.check_leaves_together()

    def check_leaves_together(self) -> None:
        """A bag's own check across its leaves (none by default); raises LeafValueError."""


@contextmanager
def checked_by_msgspec() -> Iterator[None]:
    """Build bags inside this block without the construction check: for msgspec's own decode and
    convert, which check every type and constraint themselves (the cross-leaf checks still run)."""
    token = _checked_by_msgspec.set(True)
    try:
        yield
    finally:
        _checked_by_msgspec.reset(token)


@cache
def _shadow_of(cls: type[Bag]) -> tuple[type[msgspec.Struct], tuple[tuple[str, type[Bag]], ...]]:
    """A struct with `cls`'s leaf fields and annotations but none of its checks, and the fields
    that hold a nested bag with their bag type (checked by type: each checked itself when built)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    nested = tuple(
        (name, hints[name])
        for name in cls.__struct_fields__
        if isinstance(hints[name], type) and issubclass(hints[name], Bag)
    )
    fields = [(name, Any if name in dict(nested) else hints[name]) for name in cls.__struct_fields__]
    return msgspec.defstruct(f"Checked{cls.__name__}", fields, kw_only=True), nested


def _check_leaves(bag: Bag) -> None:
    shadow, nested = _shadow_of(type(bag))
    for name, bag_type in nested:
        value = getattr(bag, name)
        if not isinstance(value, bag_type):
            raise LeafValueError(
                f"{type(bag).__name__}.{name} = {value!r} is not accepted; accepted: a {bag_type.__name__}"
            )
    try:
        checked = msgspec.convert(bag, shadow, from_attributes=True, strict=True)
    except msgspec.ValidationError as err:
        raise LeafValueError(_refusal(bag, err)) from None
    for name in bag.__struct_fields__:
        value = getattr(checked, name)
        if value is not getattr(bag, name):
            msgspec.structs.force_setattr(bag, name, value)


def _refusal(bag: Bag, err: msgspec.ValidationError) -> str:
    cls = type(bag)
    found = _FIELD_PATH.search(str(err))
    if found is None or found.group(1) not in cls.__struct_fields__:
        return f"{cls.__name__}: {err}"
    name = found.group(1)
    accepted = accepted_text(value_type_of(typing.get_type_hints(cls, include_extras=True)[name]))
    return f"{cls.__name__}.{name} = {getattr(bag, name)!r} is not accepted ({err}); accepted: {accepted}"

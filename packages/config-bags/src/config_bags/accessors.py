"""Reading the published root: named accessors (`get_schedule()`), and `bag(kind)` by type.

Both keep what they answer where one read finds it (a closure cell, one dict) and rebind it
when a root is installed, so a read does no walking. With role checking off (the default) the
read path holds no role check at all; otherwise each read checks the top-level namespace.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from config_bags.bags.base import Bag
from config_bags.errors import ConfigError, NotPublishedError, UnknownBagError
from config_bags.roles import ROLE_CHECK_MODE, RoleCheckMode, check_role_read
from config_bags.root import Root
from config_bags.schema import bag_paths
from config_bags.state import PROCESS, on_install

R = TypeVar("R", bound=Root)
B = TypeVar("B")
K = TypeVar("K", bound=Bag)


def accessor(root_type: type[R], namespace: str, pick: Callable[[R], B]) -> Callable[[], B]:
    """A named accessor `get_<namespace>()` answering `pick(root)` of the published root, as
    fast as a read can be (one call, one cell load). `namespace` is the top-level field the
    role check reads. The accessor raises NotPublishedError before publish(), and
    UnknownBagError when the published root is not a `root_type` (a subclass is)."""
    current: B | None = None
    name = f"get_{namespace}"

    def put(root: Root | None) -> None:
        nonlocal current
        current = pick(root) if isinstance(root, root_type) else None

    if ROLE_CHECK_MODE is RoleCheckMode.OFF:

        def get() -> B:
            if current is None:
                raise _unreadable(f"{name}()", f"a {root_type.__name__} root")
            return current

    else:

        def get() -> B:
            if current is None:
                raise _unreadable(f"{name}()", f"a {root_type.__name__} root")
            check_role_read(PROCESS.role, PROCESS.reads, namespace)
            return current

    get.__name__ = get.__qualname__ = name
    get.__doc__ = f"The published `{namespace}` bag of this process. Raises NotPublishedError before publish()."
    on_install(put)
    return get


# Each bag type the published root holds exactly once -> (its top-level namespace, the bag).
# Any: each bag is of its key's type, which a mapping's type cannot say; bag() states it.
# Replaced whole on each install, never changed in place.
_held: dict[type[Bag], tuple[str, Any]] = {}


def _hold(root: Root | None) -> None:
    global _held
    held: dict[type[Bag], tuple[str, Any]] = {}
    if root is not None:
        for kind, paths in bag_paths(type(root)).items():
            if len(paths) == 1:  # a type held twice has no one answer; bag() says where it is
                node: Bag = root
                for part in paths[0]:
                    node = getattr(node, part)
                held[kind] = (paths[0][0], node)
    _held = held


on_install(_hold)


if ROLE_CHECK_MODE is RoleCheckMode.OFF:

    def bag(kind: type[K]) -> K:
        """The bag of type `kind` in the published root, wherever it is nested:
        `bag(EngineBag).block_size`. Raises NotPublishedError before publish(), and
        UnknownBagError for a type the published root does not hold once (naming those it does)."""
        try:
            found: K = _held[kind][1]
        except KeyError:
            raise _unheld(kind) from None
        return found

else:

    def bag(kind: type[K]) -> K:
        """The bag of type `kind` in the published root, wherever it is nested:
        `bag(EngineBag).block_size`. Raises NotPublishedError before publish(), UnknownBagError
        for a type the published root does not hold once (naming those it does), and in enforce
        mode RoleViolationError for a bag outside the role's namespaces."""
        try:
            namespace, found = _held[kind]
        except KeyError:
            raise _unheld(kind) from None
        check_role_read(PROCESS.role, PROCESS.reads, namespace)
        bag_of_kind: K = found
        return bag_of_kind


def _unreadable(what: str, needs: str) -> ConfigError:
    """The error of an accessor that has nothing to answer: unpublished, or a root without it."""
    root = PROCESS.bags
    if root is None:
        return NotPublishedError(f"{what} was read before publish(); publish the bags of this process first")
    return UnknownBagError(
        f"{what} reads {needs}, but the published root is {type(root).__name__}; "
        f"ask bag(kind) for one of its bags: {', '.join(k.__name__ for k in bag_paths(type(root)))}"
    )


def _unheld(kind: type[Bag]) -> ConfigError:
    root = PROCESS.bags
    name = getattr(kind, "__name__", repr(kind))
    if root is None:
        return NotPublishedError(f"bag({name}) was read before publish(); publish the bags of this process first")
    paths = bag_paths(type(root))
    if len(paths.get(kind, ())) > 1:
        where = ", ".join(".".join(p) for p in paths[kind])
        return UnknownBagError(
            f"bag({name}) is ambiguous: {type(root).__name__} holds it at {where}; read it through its parent bag"
        )
    held = ", ".join(k.__name__ for k, p in paths.items() if len(p) == 1)
    return UnknownBagError(f"bag({name}): the published {type(root).__name__} holds no {name}; it holds: {held}")

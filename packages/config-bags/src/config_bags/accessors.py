"""Reading the published root: named accessors (`get_schedule()`), and `bag(kind)` by type.

Both keep what they answer where one read finds it (a closure cell, one dict) and rebind it
when a root is installed, with whether the process's role reads that namespace, so a read does
no walking and a read the role may make costs no check; any other read goes through the role
check (`CONFIG_BAGS_ROLE_CHECK`: enforce by default).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from config_bags.bag import Bag
from config_bags.errors import ConfigError, DefinitionError, NotPublishedError, UnknownBagError
from config_bags.roles import check_role_read, may_read
from config_bags.root import Root
from config_bags.schema import bag_paths, root_fields
from config_bags.state import PROCESS, on_install

R = TypeVar("R", bound=Root)
B = TypeVar("B")
K = TypeVar("K", bound=Bag)


def accessor(root_type: type[R], namespace: str, pick: Callable[[R], B]) -> Callable[[], B]:
    """A named accessor `get_<namespace>()` answering `pick(root)` of the published root, as
    fast as a read can be (one call, two cell loads). `namespace` is the top-level field the
    role check reads, checked against `root_type` here (DefinitionError naming its namespaces).
    The accessor raises NotPublishedError before publish(), UnknownBagError when the published
    root is not a `root_type` (a subclass is), and RoleViolationError when enforcing and the
    process's role does not read `namespace`."""
    fields = root_fields(root_type)
    if namespace not in fields:
        raise DefinitionError(
            f"accessor({root_type.__name__}, {namespace!r}): {root_type.__name__} has no namespace {namespace!r}; "
            f"accepted: {', '.join(fields)}"
        )
    current: B | None = None
    readable = False  # whether this process's role reads `namespace` (or no check applies)
    name = f"get_{namespace}"

    def put(root: Root | None) -> None:
        nonlocal current, readable
        current = pick(root) if isinstance(root, root_type) else None
        readable = may_read(PROCESS.role, PROCESS.reads, namespace)

    def get() -> B:
        if readable and current is not None:
            return current
        if current is None:
            raise _unreadable(f"{name}()", f"a {root_type.__name__} root")
        check_role_read(PROCESS.role, PROCESS.reads, namespace)
        return current

    get.__name__ = get.__qualname__ = name
    get.__doc__ = f"The published `{namespace}` bag of this process. Raises NotPublishedError before publish()."
    on_install(put)
    return get


# Each bag type the published root holds exactly once -> (its top-level namespace, the bag,
# whether the role reads that namespace with no check). Any: each bag is of its key's type,
# which a mapping's type cannot say; bag() states it. Replaced whole on each install.
_held: dict[type[Bag], tuple[str, Any, bool]] = {}


def _hold(root: Root | None) -> None:
    global _held
    held: dict[type[Bag], tuple[str, Any, bool]] = {}
    if root is not None:
        for kind, paths in bag_paths(type(root)).items():
            if len(paths) == 1:  # a type held twice has no one answer; bag() says where it is
                node: Bag = root
                for part in paths[0]:
                    node = getattr(node, part)
                namespace = paths[0][0]
                held[kind] = (namespace, node, may_read(PROCESS.role, PROCESS.reads, namespace))
    _held = held


on_install(_hold)


def bag(kind: type[K]) -> K:
    """The bag of type `kind` in the published root, wherever it is nested:
    `bag(EngineBag).block_size`. Raises NotPublishedError before publish(), UnknownBagError for
    a type the published root does not hold once (naming those it does), and RoleViolationError
    when enforcing and the process's role does not read the bag's namespace."""
    try:
        namespace, found, readable = _held[kind]
    except KeyError:
        raise _unheld(kind) from None
    if not readable:
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

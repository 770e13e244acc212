"""Stamping what a factory path built: a backend with its effective name, a container's children with theirs.

A path that builds containers says so (`stamps_children=True`); a container reached on that path
without children raises rather than being skipped, so a wiring mistake cannot pass unstamped.
"""

from __future__ import annotations

from collections.abc import Sequence

from attn_backends.backend import AttentionBackend


def stamp_built(
    backend: AttentionBackend, effective_names: Sequence[str], *, stamps_children: bool
) -> AttentionBackend:
    """Stamp `backend` (one name), or with stamps_children=True each of its `attn_backends` children
    with its own name, in order; answers `backend`."""
    if not stamps_children:
        (name,) = effective_names
        backend.stamp(name)
        return backend
    children: Sequence[AttentionBackend] | None = getattr(backend, "attn_backends", None)
    if not children:
        raise TypeError(
            f"{type(backend).__name__} was built on a path that stamps children (stamps_children=True) "
            "but has no attn_backends children to stamp"
        )
    if len(children) != len(effective_names):
        raise ValueError(
            f"{type(backend).__name__} has {len(children)} children but {len(effective_names)} names to stamp them with"
        )
    for child, name in zip(children, effective_names, strict=True):
        child.stamp(name)
    return backend

"""Handlers for how the model is split across devices."""

from __future__ import annotations

from serve.record.resolution import Resolution

SPLIT_LEAVES = ("tp_size", "pp_size", "dp_size", "nnodes", "ep_size")


def one_device(res: Resolution) -> None:
    """This build's runner holds the whole model in one process on one device, so any other
    split would be silently ignored; it is refused instead."""
    for leaf in SPLIT_LEAVES:
        if res.server_args.value(leaf) != 1:
            raise res.refuse("one_device", leaf, "1", "this build runs the whole model in one process on one device")

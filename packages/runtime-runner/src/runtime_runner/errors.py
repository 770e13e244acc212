"""The runner's exceptions: each names what was wrong and what is accepted."""

from __future__ import annotations


class UnsupportedArchitectureError(ValueError):
    """A checkpoint whose `architectures[0]` has no registered model class."""


class UnsupportedConfigError(ValueError):
    """A checkpoint config value this implementation does not handle (a rope type, sliding windows)."""


class CheckpointError(ValueError):
    """A checkpoint directory with missing files or missing / mis-shaped tensors."""


class BatchError(ValueError):
    """A batch the runner refuses before touching the KV pool (sizes disagree, slots or pages out of range)."""

"""Handlers for what this build can run: no absent feature configured, and only attention
backends it can build. Both check the rules serve publishes with its bags (serve.launch_rules)."""

from __future__ import annotations

from serve.absent_features import absent_feature_rules
from serve.launch_rules import REGISTERED_ATTENTION_BACKENDS
from serve.record.resolution import Resolution


def absent_features(res: Resolution) -> None:
    """A leaf whose feature this build lacks would be accepted and ignored: set off its default,
    it is refused, naming the feature and the accepted value."""
    res.check(*absent_feature_rules())


def attention_backends_registered(res: Resolution) -> None:
    """Each attention backend the operator named must be one this build registers; the split
    fields are never filled from the base field (`attention_backends()` applies the fallback
    wherever the pair is read)."""
    res.check(REGISTERED_ATTENTION_BACKENDS)

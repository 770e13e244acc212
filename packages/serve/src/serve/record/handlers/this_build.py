"""Handlers for what this build can run: no absent feature configured, attention kernels that run
on this host, and a compiled decode step over a traceable decode half. Each checks a rule serve
publishes with its bags (serve.launch_rules)."""

from __future__ import annotations

from serve.absent_features import absent_feature_rules
from serve.launch_rules import ATTENTION_BACKENDS_RUN_HERE, COMPILED_DECODE_TRACEABLE
from serve.record.resolution import Resolution


def absent_features(res: Resolution) -> None:
    """A leaf whose feature this build lacks would be accepted and ignored: set off its default,
    it is refused, naming the feature and the accepted value."""
    res.check(*absent_feature_rules())


def attention_backends_run_here(res: Resolution) -> None:
    """Each half's backend (its split field, else the base field), resolved for this host as the
    factory resolves it (auto and aliases build a kernel), must run here: triton on a CPU only
    under its interpreter, flashinfer only on CUDA and installed, cpu_paged only on a CPU. The
    split fields are never filled from the base field (`attention_backends()` applies the
    fallback wherever the pair is read)."""
    res.check(ATTENTION_BACKENDS_RUN_HERE)


def compiled_decode_traceable(res: Resolution) -> None:
    """enable_torch_compile compiles the decode step, so it asks the decode half: that kernel must
    be one torch.compile traces."""
    res.check(COMPILED_DECODE_TRACEABLE)

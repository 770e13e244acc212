"""Handlers for what this build can run: no absent feature configured, attention kernels that run
on this host, a compiled decode step over a traceable decode half, deterministic inference
where its kernels are, and speculative decoding as this build runs it. Each checks a rule serve publishes
with its bags (serve.launch_rules)."""

from __future__ import annotations

from config_bags.server import deterministic_inference_of
from serve.absent_features import absent_feature_rules
from serve.launch_rules import (
    ATTENTION_BACKENDS_RUN_HERE,
    COMPILED_DECODE_TRACEABLE,
    DETERMINISTIC_KERNELS,
    DRAFT_ATTENTION_RUNS_HERE,
    SPECULATION_AS_BUILT,
)
from serve.record.resolution import Resolution
from serve.visible_device import visible_device_type


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


def deterministic_inference(res: Resolution) -> None:
    """Batch-invariant kernels, so that a request's tokens and logprobs never depend on its batch,
    its chunks or the prefix cache: on by default where this build has them (a CPU) and nothing
    configured stands against them (an attention half that is not batch-invariant, a compiled
    decode step); an operator's True must then hold (the rule deterministic_kernels)."""
    bags = res.bags()
    device_type = visible_device_type(bags)
    if device_type is None:
        return
    res.declare(
        "deterministic_inference", enable_deterministic_inference=deterministic_inference_of(bags.exec, device_type)
    )
    res.check(DETERMINISTIC_KERNELS)


def speculation_as_built(res: Resolution) -> None:
    """A speculative leaf is read only with the algorithm that uses it (any of them with ngram or
    draft_model; the draft's own leaves only with draft_model), so set without it, it is refused;
    and drafts are verified as a chain, so speculative_eagle_topk (a draft tree) stays 1."""
    res.check(SPECULATION_AS_BUILT)


def draft_attention_runs_here(res: Resolution) -> None:
    """The draft runner's own attention backend (speculative_draft_attention_backend) must run on
    this host, and be batch-invariant when deterministic inference is on, as the target's pair must."""
    res.check(DRAFT_ATTENTION_RUNS_HERE)

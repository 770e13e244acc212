"""The draft runner's attention-pair factory: its extend wrapper and one decode backend per draft step, stamped.

A speculative draft runner (a second runner, on the draft checkpoint, in the target's process)
calls it exactly as a runner calls `build_attention_pair`. It reads the published spec at call
time: `speculative_draft_attention_backend`, when set, builds both halves and the stamp says it is
the draft's own override; else the pair the runner was handed (the configured one) is built.
"""

from __future__ import annotations

from attn_backends.choice.registry import build_attention_backend
from attn_backends.choice.stamping import stamp_built
from attn_backends.dispatch import AttentionStamp
from attn_backends.drafts.extend import DraftExtendBackend
from attn_backends.drafts.multi_step import MultiStepDraftBackend
from attn_backends.drafts.runner_backend import DraftRunnerBackend
from config_bags.server import get_spec


class DraftBackendFactory:
    """Builds a draft runner's backend: a DraftExtendBackend on the prefill half and a
    MultiStepDraftBackend of `speculative_num_steps` decode-half backends, in a DraftRunnerBackend."""

    def __call__(
        self,
        prefill: str,
        decode: str,
        /,
        *,
        device_type: str,
        is_draft_override: bool = False,
        batch_invariant: bool = False,
    ) -> tuple[AttentionStamp, DraftRunnerBackend]:
        """Build the draft's halves for a `device_type` host (batch-invariant when `batch_invariant`,
        refused where it cannot be): the override when set, else `prefill` and `decode` as handed
        (kernels, aliases or auto); answers (stamp, backend). `is_draft_override` is decided here,
        from the spec, so a caller's True is refused."""
        if is_draft_override:
            raise ValueError(
                "the draft backend factory decides is_draft_override itself (set when "
                "spec.speculative_draft_attention_backend is); accepted from a caller: False, got True"
            )
        spec = get_spec()
        override = spec.speculative_draft_attention_backend
        if override is not None:
            prefill = decode = override
        prefill_kernel, prefill_backend = build_attention_backend(
            prefill, half="prefill", device_type=device_type, batch_invariant=batch_invariant
        )
        extend = DraftExtendBackend(stamp_built(prefill_backend, (prefill_kernel,), stamps_children=False))
        steps = [
            build_attention_backend(decode, half="decode", device_type=device_type, batch_invariant=batch_invariant)
            for _ in range(spec.speculative_num_steps)
        ]
        multi_step = MultiStepDraftBackend([backend for _, backend in steps])
        stamp_built(multi_step, [kernel for kernel, _ in steps], stamps_children=True)
        stamp = AttentionStamp(prefill=prefill_kernel, decode=steps[0][0], is_draft_override=override is not None)
        return stamp, DraftRunnerBackend(extend, multi_step)

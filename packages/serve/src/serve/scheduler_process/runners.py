"""The runners one scheduler process serves with: the target, and a draft when speculating with a draft model."""

from __future__ import annotations

from dataclasses import dataclass

from runtime_runner.runner import ModelRunner
from serve.ipc.messages import RunnerStamp


@dataclass(frozen=True)
class ModelRunners:
    """The target runner and its draft runner (None unless speculative_algorithm = draft_model)."""

    target: ModelRunner
    draft: ModelRunner | None

    def stamps(self) -> dict[str, RunnerStamp]:
        """Each runner's attention stamp (and a hybrid's linear-attention stamp), keyed "target" and
        "draft", as /server_info shows them."""
        named = {"target": self.target} if self.draft is None else {"target": self.target, "draft": self.draft}
        return {name: _stamp_of(runner) for name, runner in named.items()}


def _stamp_of(runner: ModelRunner) -> RunnerStamp:
    stamp = runner.attention_stamp
    linear = dict(runner.linear_attn_backends._asdict()) if runner.state_slots else None
    return RunnerStamp(
        prefill=stamp.prefill,
        decode=stamp.decode,
        is_draft_override=stamp.is_draft_override,
        batch_invariant=runner.batch_invariant,
        linear_attn=linear,
    )

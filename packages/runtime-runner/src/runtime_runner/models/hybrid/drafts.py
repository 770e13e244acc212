"""The hybrid draft entry classes: a Qwen3-Next or Qwen3.5 draft checkpoint loaded for a target.

Like the Llama-family drafts (runtime_runner.models.drafts), each is its own class answering every
loader hook its target family answers: through the families' shared HybridLoaderHooks. A hybrid draft holds its own
recurrent-state pool (of its target's slot count) and its own linear-attention stamp; it shares no
weights with its target (its checkpoint holds all of them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

import torch

from runtime_runner.errors import UnsupportedConfigError
from runtime_runner.loading.arch_config import ArchConfig
from runtime_runner.models.hybrid.decoder import (
    HybridDecoder,
    HybridLoaderHooks,
    Qwen3_5ForCausalLM,
    Qwen3NextForCausalLM,
)


class HybridDraftDecoder(HybridDecoder):
    """A hybrid draft checkpoint loaded for a target. It answers no loader hook itself."""

    @classmethod
    def load_for(
        cls,
        model_dir: Path,
        cfg: ArchConfig,
        dtype: torch.dtype,
        device: torch.device,
        *,
        batch_invariant: bool,
        target_vocab_size: int,
    ) -> Self:
        """Load the draft checkpoint in `model_dir`; a draft over another vocabulary than the target's
        raises UnsupportedConfigError."""
        if cfg.vocab_size != target_vocab_size:
            raise UnsupportedConfigError(
                f"the draft checkpoint {model_dir} has vocab_size {cfg.vocab_size}, the target "
                f"{target_vocab_size}; accepted: a draft over the target's vocabulary"
            )
        return cls.load(model_dir, cfg, dtype, device, batch_invariant=batch_invariant)


class Qwen3NextDraftForCausalLM(HybridLoaderHooks, HybridDraftDecoder):
    """A Qwen3-Next draft: every loader decision is Qwen3-Next's."""

    architecture = Qwen3NextForCausalLM.architecture
    linear_projections = Qwen3NextForCausalLM.linear_projections


class Qwen3_5DraftForCausalLM(HybridLoaderHooks, HybridDraftDecoder):
    """A Qwen3.5 text draft: every loader decision is Qwen3.5's."""

    architecture = Qwen3_5ForCausalLM.architecture
    linear_projections = Qwen3_5ForCausalLM.linear_projections

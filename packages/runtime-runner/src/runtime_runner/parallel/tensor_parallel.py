"""Tensor parallelism in a runner: its rank's place in a torch.distributed group, and the
projections that need the group's collectives.

A rank holds a slice of the model (rank_layout, rank_weights):
- column-parallel q|k|v (by heads) and gate|up (by intermediate rows) compute the rank's own
  outputs, and attention and SiLU-and-mul work on them with no collective;
- row-parallel o and down (`RowParallel`) multiply the rank's input columns; the ranks' partial
  products are summed across the group, then the bias is added once. On a CPU a bf16 or fp16
  model's partials are computed, summed and biased in fp32 (from an fp32 copy of the rank's
  columns) and rounded once, as one process's projection rounds its one fp32 chain once. Rounded
  each to bf16 first, they tied the default model's two best first tokens for "What is the
  capital of France?" over 3 ranks (one process: 25.75 against 25.5) and it answered in French;
  in fp32 it answers as one process does. On CUDA they are summed in the model's dtype, as NCCL
  all-reduces everywhere (an fp32 matmul there would cost far more than it buys);
- the vocabulary-parallel embedding (`VocabParallelEmbedding`) looks up the ids in the rank's
  vocabulary range (zero rows elsewhere), summed across the group: exact, one rank gives each row;
- the vocabulary-parallel LM head (`VocabParallelHead`) computes the logits of the rank's
  vocabulary slice, gathered along the vocabulary, so every rank holds the same full logits and
  samples the same token with the same generator.

How the sum adds: a batch-invariant runner (deterministic inference) gathers every rank's partial
and adds them in rank order on each rank, so a row's sum never depends on the batch; a ring
all-reduce adds a row's elements in an order set by the chunk they fall in, which moves with the
batch's size over three or more ranks. Otherwise torch.distributed's all_reduce.

A collective that fails (a rank died, its link broke) raises `GroupLostError`, which the scheduler
treats as unrecoverable: the rank's process ends rather than fail its requests and go on alone.

The runner decides from the configured sizes (`get_parallel().tp_size`), and reads only its rank
and the group's size from the group it is handed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar, cast

import torch
import torch.distributed as dist

from config_bags.server import get_exec, get_parallel
from runtime_runner.errors import UnsupportedConfigError
from runtime_runner.loading.arch_config import ArchConfig
from runtime_runner.loading.decoder_weights import DecoderWeights
from runtime_runner.parallel.rank_layout import RankLayout
from runtime_runner.parallel.rank_weights import rank_weights

# rows [T, in] -> rows [T, out]
Rows = Callable[[torch.Tensor], torch.Tensor]
Weight = TypeVar("Weight")


class GroupLostError(RuntimeError):
    """A collective of the tensor-parallel group failed: a rank is gone (or unreachable), and the
    others cannot compute another forward without it, so the serving process must end."""

    unrecoverable = True  # what the scheduler's is_unrecoverable reads


@contextmanager
def _collective(what: str) -> Iterator[None]:
    try:
        yield
    except RuntimeError as err:  # gloo and NCCL raise RuntimeError (DistBackendError) when a peer is gone
        raise GroupLostError(f"the tensor-parallel group's {what} failed, so this rank cannot go on: {err}") from err


@dataclass(frozen=True)
class TensorParallel:
    """One rank of a tensor-parallel group: the group, what the rank holds, and whether partial
    sums are added in rank order (a batch-invariant runner)."""

    group: dist.ProcessGroup
    layout: RankLayout
    rank_ordered_sum: bool

    @classmethod
    def of(cls, group: dist.ProcessGroup, cfg: ArchConfig, size: int, *, rank_ordered_sum: bool) -> TensorParallel:
        """This process's rank of `group`, configured as `size` ranks over `cfg`'s decoder;
        UnsupportedConfigError when the live group has another size or the decoder does not split."""
        live = dist.get_world_size(group)
        if live != size:
            raise UnsupportedConfigError(
                f"tp_size = {size} is configured but the tensor-parallel group handed to the runner has "
                f"{live} ranks; accepted: a group of tp_size ranks"
            )
        return cls(group, RankLayout.of(cfg, dist.get_rank(group), size), rank_ordered_sum)

    def weights(self, weights: DecoderWeights) -> DecoderWeights:
        """This rank's slices of a loaded decoder's weights."""
        return rank_weights(weights, self.layout)

    def summed(self, partial: torch.Tensor) -> torch.Tensor:
        """The sum over the group's ranks of each rank's `partial` (the same shape on each)."""
        partial = partial.contiguous()
        if not self.rank_ordered_sum:
            with _collective("all_reduce"):
                dist.all_reduce(partial, group=self.group)
            return partial
        parts = [torch.empty_like(partial) for _ in range(self.layout.size)]
        with _collective("all_gather"):
            dist.all_gather(parts, partial, group=self.group)
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        return total

    def gathered_columns(self, local: torch.Tensor) -> torch.Tensor:
        """Every rank's `local` [rows, width] side by side, in rank order: [rows, size * width]."""
        parts = [torch.empty_like(local) for _ in range(self.layout.size)]
        with _collective("all_gather"):
            dist.all_gather(parts, local.contiguous(), group=self.group)
        return torch.cat(parts, dim=-1)

    def row_parallel(
        self, linear: Callable[[Weight, torch.Tensor | None], Rows]
    ) -> Callable[[Weight, torch.Tensor | None], Rows]:
        """`linear` for a matrix holding this rank's input columns: its partial product summed
        across the group, the bias added after the sum."""

        def of(weight: Weight, bias: torch.Tensor | None) -> Rows:
            if not isinstance(weight, torch.Tensor):  # rank_weights refuses them first
                raise UnsupportedConfigError(
                    f"tensor parallelism slices dense weight matrices; got a {type(weight).__name__}"
                )
            dtype = torch.float32 if weight.device.type == "cpu" else weight.dtype
            return RowParallel(
                linear(cast(Weight, weight.to(dtype)), None), None if bias is None else bias.to(dtype), dtype, self
            )

        return of

    def embedding(self, lookup: Rows) -> Rows:
        """The embedding over the whole vocabulary, from `lookup` over this rank's rows."""
        return VocabParallelEmbedding(lookup, self.layout.vocab, self)

    def head(self, projection: Rows, vocab_size: int) -> Rows:
        """The LM head over the whole vocabulary, from `projection` over this rank's rows."""
        return VocabParallelHead(projection, vocab_size, self)


@dataclass(frozen=True)
class RowParallel:
    """A projection over this rank's input columns, summed across the group, plus the bias, all
    in `dtype` (fp32 on a CPU) and rounded once to the rows' dtype after."""

    partial: Rows
    bias: torch.Tensor | None
    dtype: torch.dtype
    tp: TensorParallel

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """The whole projection's output rows [T, out] in x's dtype, the same on every rank."""
        total = self.tp.summed(self.partial(x.to(self.dtype)))
        total = total if self.bias is None else total + self.bias
        return total.to(x.dtype)


@dataclass(frozen=True)
class VocabParallelEmbedding:
    """Embedding rows of any ids, from the rows of this rank's vocabulary range."""

    lookup: Rows
    vocab: range
    tp: TensorParallel

    def __call__(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The embedding rows [T, hidden] of `input_ids`, the same on every rank."""
        mine = (input_ids >= self.vocab.start) & (input_ids < self.vocab.stop)
        rows = self.lookup(torch.where(mine, input_ids - self.vocab.start, 0))
        return self.tp.summed(rows.masked_fill(~mine.unsqueeze(-1), 0))


@dataclass(frozen=True)
class VocabParallelHead:
    """Logits over the whole vocabulary, from this rank's slice of the LM head."""

    projection: Rows
    vocab_size: int
    tp: TensorParallel

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits [rows, vocab_size], the same on every rank (the padding rows' columns dropped)."""
        return self.tp.gathered_columns(self.projection(hidden))[:, : self.vocab_size]


def runner_tensor_parallel(
    group: dist.ProcessGroup | None, cfg: ArchConfig, *, batch_invariant: bool, draft: bool
) -> TensorParallel | None:
    """A runner's tensor parallelism: None for one process (tp_size 1, no group handed), else its
    rank of `group`. UnsupportedConfigError where the configuration and the runner disagree: a
    tp_size above 1 with no group, a draft runner, a hybrid model or a compiled decode step under
    it (none of them is sharded; serve's launch rules refuse them first)."""
    size = get_parallel().tp_size
    if size > 1:
        what = (
            "a draft runner"
            if draft
            else f"{cfg.architecture} (a Gated-DeltaNet hybrid)"
            if cfg.hybrid is not None
            else "a compiled decode step (enable_torch_compile)"
            if get_exec().graph.enable_torch_compile
            else None
        )
        if what is not None:
            raise UnsupportedConfigError(
                f"tp_size = {size}: {what} runs in one process, unsharded; accepted: tp_size = 1 with it"
            )
        if group is None:
            raise UnsupportedConfigError(
                f"tp_size = {size} needs this rank's tensor-parallel process group, and the runner was "
                "handed none; accepted: the group of this rank (serve starts torch.distributed and hands it)"
            )
    if group is None:
        return None
    return TensorParallel.of(group, cfg, size, rank_ordered_sum=batch_invariant)

"""The one-request decode step, compiled once with torch.compile (exec.graph.enable_torch_compile).

A batch-1 decode is bound by reading the weights, yet eagerly about a third of its time goes to
the ~400 small ops around the matmuls (norms, rotary, residual adds, attention, K/V writes),
each paying dispatch overhead. Traced into one graph, those fuse into a few kernels and every
projection becomes one pass over its weight (packed_linear); on the bundled model in bf16 a step
runs about twice as fast (docs/benchmarks.md). Only decode batches of exactly one request take this path:
at larger batches the matmuls dominate and oneDNN's packed kernels, which a graph cannot hold, are faster.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import torch

from runtime_runner.attention_seam import AttentionStamp
from runtime_runner.errors import UnsupportedConfigError
from runtime_runner.models.decoder import DecoderForCausalLM
from runtime_runner.models.layer_attention import LayerAttention

logger = logging.getLogger(__name__)

# The kernels whose decode attention torch.compile traces: torch_native's torch ops and cpu_paged's
# custom op (attn_backends::paged_attention). triton and flashinfer launch outside a graph.
TRACEABLE_DECODE_KERNELS = ("torch_native", "cpu_paged")


def check_compiled_decode_traceable(stamp: AttentionStamp) -> None:
    """The compiled step is a decode step, so it asks the decode half of the runner's stamp:
    refused (UnsupportedConfigError) when torch.compile cannot trace that kernel."""
    if stamp.decode not in TRACEABLE_DECODE_KERNELS:
        raise UnsupportedConfigError(
            f"enable_torch_compile compiles the decode step, but its decode half runs {stamp.decode}, "
            f"which torch.compile cannot trace; accepted decode halves: {', '.join(TRACEABLE_DECODE_KERNELS)}"
        )


# Iterations per thread below which inductor keeps a loop on one thread (its default is 512).
MIN_CHUNK_ROWS = 64


def _fixed_tensors(model: DecoderForCausalLM) -> Iterable[torch.Tensor]:
    """Every tensor of the model whose shape never changes between steps."""
    w = model.weights
    yield from (
        t
        for t in (w.embed, w.final_norm, w.lm_head, model.rope.cos, model.rope.signed_sin)
        if isinstance(t, torch.Tensor)
    )
    for layer in w.layers:
        yield from (t for t in vars(layer).values() if isinstance(t, torch.Tensor))


class CompiledDecode:
    """logits of a one-request decode step through a graph compiled on first call.

    Shapes that vary per step (the request's key count) are traced symbolically, so the graph
    compiles once; the weights, rotary tables and pool are marked static so their sizes are
    constants the compiler can specialize kernels on.
    """

    def __init__(self, model: DecoderForCausalLM, pool_tensors: Iterable[torch.Tensor]) -> None:
        self._model = model
        for tensor in (*_fixed_tensors(model), *pool_tensors):
            torch._dynamo.mark_static(tensor)
        # Inductor runs a loop on one thread unless it has min_chunk_size iterations per thread; a
        # projection's 576-3072 output rows fall below its default (512 x threads), which left the
        # second core idle. Measured on one projection per layer: 14 -> 24 GB/s of weights read at
        # two threads, 14 -> 19 at one.
        self._graph = torch.compile(self._logits, dynamic=True, options={"cpp.min_chunk_size": MIN_CHUNK_ROWS})
        self.steps = 0  # compiled steps run (read by tests to see the path was taken)

    def _logits(self, input_ids: torch.Tensor, positions: torch.Tensor, attention: LayerAttention) -> torch.Tensor:
        return self._model.logits(self._model.hidden_states(input_ids, positions, attention))

    def __call__(self, input_ids: torch.Tensor, positions: torch.Tensor, attention: LayerAttention) -> torch.Tensor:
        """fp32 logits [1, vocab] of the one new token (the first call compiles, logged)."""
        first = self.steps == 0
        if first:
            logger.info("compiling the one-request decode step with torch.compile (a minute or more on a CPU)")
        started = time.perf_counter()
        logits: torch.Tensor = self._graph(input_ids, positions, attention)
        if first:
            logger.info("compiled the one-request decode step in %.1f s", time.perf_counter() - started)
        self.steps += 1
        return logits

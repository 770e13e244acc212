"""torch on one thread for the per-input steps of an embedding forward (attention, pooling).

Each such step is one small torch call per input: too small to share, and on two threads each call
is an OpenMP region that waits for both, which a busy machine stretches (all-MiniLM-L6-v2, 256
inputs, bf16, a busy 2-core machine: the encoder ran 5 to 28 inputs/s with every step on two
threads, 75 to 83 with the attention's matmuls on one, 110 to 119 with its concatenation and the
pooling on one too). The projections keep every thread: their kernel splits columns, never k, so
the thread count changes no bits there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run the block with torch on one thread, then give back the thread count it had."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)

"""Running the runner without the scheduler (tests, the one-batch benchmark): a page free list and a
step that batches every active sequence, a prompt chunk for those still prefilling and one token
for those decoding (so a step may be extend, decode or mixed).

It reads the published bags (schedule.page_size) as the runner it drives does, so whoever builds
that runner publishes them first, in the role named after this driver:
`config_bags.publish(Bags(...), role="standalone")`.

This is deliberately minimal: no prefix sharing, no admission control, no eviction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch

from config_bags.server import get_schedule
from runtime_runner.batch import ForwardMode, TokenGrammar
from runtime_runner.errors import BatchError
from runtime_runner.kv_pool import KVPool
from runtime_runner.output import ForwardOutput


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters (greedy by default); fits SamplingView."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    logit_bias: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class Request:
    """One request's part of a batch; fits RequestView."""

    rid: str
    prefix_len: int
    extend_len: int
    page_table: tuple[int, ...]
    sample: bool
    sampling: Sampling
    prompt_ids: tuple[int, ...]
    output_ids: tuple[int, ...]
    state_slot: int = -1
    grammar: TokenGrammar | None = None
    restore_from: int = -1
    snapshot_to: int = -1


@dataclass(frozen=True)
class Batch:
    """One forward's batch; fits ForwardBatchView."""

    forward_mode: ForwardMode
    input_ids: tuple[int, ...]
    positions: tuple[int, ...]
    out_cache_loc: tuple[int, ...]
    requests: tuple[Request, ...]


class Forwarding(Protocol):
    """What the driver needs of a runner."""

    @property
    def pool(self) -> KVPool: ...

    @property
    def state_slots(self) -> int: ...  # recurrent-state slots (0 for a model without recurrent state)

    def forward(self, batch: Batch) -> ForwardOutput: ...


@dataclass
class Running:
    """A sequence the driver is running: its tokens, pages, and how many tokens are cached."""

    rid: str
    prompt: tuple[int, ...]
    sampling: Sampling
    pages: list[int] = field(default_factory=list)
    state_slot: int = -1
    cached: int = 0
    output: list[int] = field(default_factory=list)

    @property
    def tokens(self) -> list[int]:
        """Prompt then output tokens."""
        return list(self.prompt) + self.output

    @property
    def prefilling(self) -> bool:
        """Whether part of the prompt is not in the KV pool yet."""
        return self.cached < len(self.prompt)


class StandaloneDriver:
    """Allocates pages for sequences and steps them through a runner."""

    def __init__(self, runner: Forwarding) -> None:
        self.runner = runner
        self.free_pages = list(range(runner.pool.num_pages))
        self.free_state_slots = list(range(runner.state_slots))
        self.active: list[Running] = []
        self._next_id = 0

    def add(self, prompt: Sequence[int], sampling: Sampling | None = None) -> Running:
        """Start a sequence; it prefills on the following steps."""
        if not prompt:
            raise ValueError("a prompt needs at least one token")
        seq = Running(rid=f"r{self._next_id}", prompt=tuple(prompt), sampling=sampling or Sampling())
        if self.runner.state_slots:
            if not self.free_state_slots:
                raise BatchError(
                    f"sequence {seq.rid} needs a recurrent-state slot; all {self.runner.state_slots} are held"
                )
            seq.state_slot = self.free_state_slots.pop()
        self._next_id += 1
        self.active.append(seq)
        return seq

    def _grow(self, seq: Running, length: int) -> None:
        page_size = get_schedule().page_size
        need = -(-length // page_size) - len(seq.pages)
        if need > len(self.free_pages):
            raise BatchError(f"sequence {seq.rid} needs {need} more pages; {len(self.free_pages)} are free")
        for _ in range(max(0, need)):
            seq.pages.append(self.free_pages.pop())

    def step(self, chunk: int | None = None) -> ForwardOutput:
        """One forward over every active sequence: up to `chunk` prompt tokens each for those
        prefilling (all of it when None), one token for those decoding."""
        if not self.active:
            raise ValueError("no active sequences to step")
        page_size = get_schedule().page_size
        ids: list[int] = []
        positions: list[int] = []
        locs: list[int] = []
        requests: list[Request] = []
        for seq in self.active:
            tokens = seq.tokens
            if seq.prefilling:
                count = len(seq.prompt) - seq.cached if chunk is None else min(chunk, len(seq.prompt) - seq.cached)
            else:
                count = 1
            start = len(tokens) - 1 if not seq.prefilling else seq.cached
            self._grow(seq, start + count)
            for pos in range(start, start + count):
                ids.append(tokens[pos])
                positions.append(pos)
                locs.append(seq.pages[pos // page_size] * page_size + pos % page_size)
            ends_prompt = not seq.prefilling or start + count == len(seq.prompt)
            requests.append(
                Request(
                    seq.rid,
                    start,
                    count,
                    tuple(seq.pages),
                    ends_prompt,
                    seq.sampling,
                    seq.prompt,
                    tuple(seq.output),
                    seq.state_slot,
                )
            )
        decoding = [not s.prefilling for s in self.active]
        mode: ForwardMode = "decode" if all(decoding) else "extend" if not any(decoding) else "mixed"
        out = self.runner.forward(Batch(mode, tuple(ids), tuple(positions), tuple(locs), tuple(requests)))
        for seq, request, token in zip(self.active, requests, out.next_token_ids, strict=True):
            seq.cached = request.prefix_len + request.extend_len
            if request.sample:
                seq.output.append(token)
        return out

    def finish(self, seq: Running) -> None:
        """Stop a sequence and return its pages and its state slot."""
        self.active.remove(seq)
        self.free_pages.extend(seq.pages)
        seq.pages.clear()
        if seq.state_slot >= 0:
            self.free_state_slots.append(seq.state_slot)
            seq.state_slot = -1

    def prefill_logits(self, prompts: Sequence[Sequence[int]]) -> torch.Tensor:
        """The last-token logits of `prompts` [prompts, vocab], prefilled together in one step (a
        copy); their pages go back afterwards."""
        seqs = [self.add(p) for p in prompts]
        logits = self.step().logits.clone()
        for seq in seqs:
            self.finish(seq)
        return logits

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        max_new_tokens: int,
        sampling: Sampling | None = None,
        chunk: int | None = None,
    ) -> list[list[int]]:
        """Run `prompts` together to `max_new_tokens` each (no stop tokens) and answer their outputs."""
        seqs = [self.add(p, sampling) for p in prompts]
        while any(len(s.output) < max_new_tokens for s in seqs):
            self.step(chunk)
            for seq in seqs:
                if seq in self.active and len(seq.output) >= max_new_tokens:
                    self.finish(seq)
        return [s.output for s in seqs]

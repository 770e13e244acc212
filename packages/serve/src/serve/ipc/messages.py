"""Every message the processes exchange, as frozen msgspec structs tagged for one union decoder.

Routes (each arrow one ZMQ PUSH/PULL pipe; "scheduler" is the first rank of a data-parallel
replica, which takes every message of its replica):
    tokenizer manager -> scheduler:   GenerateRequest, AbortRequest, OverrideRequest, EmbedRequest
    detokenizer -> scheduler:         AbortRequest (a stop string matched; to the request's replica)
    scheduler -> detokenizer:         GenerateRequest, TokenBatch, SchedulerStats, OverrideRequest,
                                      OverrideAck, ProcessReady, EmbedResult
    detokenizer -> tokenizer manager: TextBatch, SchedulerStats, OverrideAck, ProcessReady, EmbedResult
The scheduler forwards each request before admitting it (so the detokenizer knows its stop strings before
its first token) and each override it applied (so the detokenizer applies it next); its acks and
readiness travel through the detokenizer too, so the tokenizer manager hears everything in order.
A replica's other tensor-parallel ranks get its messages from the first rank over torch.distributed,
and hand their acks and readiness to it the same way (serve.scheduler_process.lockstep).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from runtime_scheduler.metrics import SchedulerMetrics
from runtime_scheduler.request import Request

FinishReason = Literal["stop", "length", "abort"]


class GenerateRequest(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A tokenized request: the scheduler's own `Request` (checked again on decode) plus what
    the detokenizer needs to render its text."""

    request: Request
    stop_strings: tuple[str, ...] = ()  # matched by the detokenizer
    skip_special_tokens: bool = True
    replica: int = 0  # the data-parallel replica the tokenizer manager routed it to

    @property
    def rid(self) -> str:
        """The request's id."""
        return self.request.rid


class AbortRequest(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Stop a request now and free its pages (client gone, or a stop string matched)."""

    rid: str
    reason: str


class OverrideRequest(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Apply `leaves` (already validated by the tokenizer manager) at the next safe point."""

    seq: int
    source: str
    leaves: dict[str, Any]


class OverrideAck(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """One process (named as in /server_info) applied (or refused) override `seq`;
    `config_hash` is its hash afterwards."""

    seq: int
    process: str
    config_hash: str
    error: str | None = None


class RunnerStamp(msgspec.Struct, frozen=True, kw_only=True):
    """The attention kernels one runner stamped: each half's effective name, whether they are a
    draft runner's own override, and whether the runner is batch-invariant (deterministic inference);
    for a hybrid model's runner, its linear-attention stamp (decode, prefill, verify kernels)."""

    prefill: str
    decode: str
    is_draft_override: bool
    batch_invariant: bool
    linear_attn: dict[str, str] | None = None


class ModelInfo(msgspec.Struct, frozen=True, kw_only=True):
    """The served model as the scheduler's runners built it: its limits, each runner's attention
    stamp (keyed by runner: "target", and "draft" when a draft model speculates), the
    speculative algorithm it serves with (None: none), and what its weights are (None: dense as
    the checkpoint stores them; `int8`; or a GGUF file's tensor types)."""

    context_length: int  # longest prompt plus completion, tokens
    max_total_tokens: int  # KV-cache token slots
    vocab_size: int
    runners: dict[str, RunnerStamp]
    speculative_algorithm: str | None = None
    quantization: str | None = None
    # The instruction tier its integer kernels run on (native_build.cpu_tiers; None: none runs).
    cpu_tier: str | None = None
    # A hybrid model's recurrent state, apart from the KV cache: the state pool (one slot per running
    # request) and the snapshot pool of its prefix cache, in MiB; and the snapshot pool's slots.
    recurrent_state_mb: float = 0.0
    state_snapshot_slots: int = 0
    # An embedding model's vectors (task embed): their size, whether they are scaled to unit
    # length, and the shorter sizes the checkpoint declares (runtime_runner.loading.matryoshka:
    # None none, () any from 1 to the size).
    embedding_size: int = 0
    embeddings_normalized: bool = False
    matryoshka_dimensions: tuple[int, ...] | None = None


class ProcessReady(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A child finished constructing: its name (`serve.process_names`), the role it published,
    how its role checks run (`config_bags.ROLE_CHECK_MODE`), its hash; a replica's first
    scheduler rank also reports the model's limits."""

    name: str
    role: str
    pid: int
    config_hash: str
    role_check: str
    model: ModelInfo | None = None


class TokenLogprob(msgspec.Struct, frozen=True, array_like=True):
    """A token id and its log probability."""

    token_id: int
    logprob: float


class TokenDelta(msgspec.Struct, frozen=True, kw_only=True):
    """What one step produced for one request."""

    rid: str
    new_ids: tuple[int, ...]
    finish: FinishReason | None = None
    matched_stop: int | None = None  # the stop token that finished it
    prompt_tokens: int = 0
    cached_tokens: int = 0
    logprobs: tuple[TokenLogprob, ...] = ()  # one per new id when asked
    top_logprobs: tuple[tuple[TokenLogprob, ...], ...] = ()  # one tuple per new id when asked
    error: str | None = None  # the scheduler refused the request (finish is "abort")
    failure: str | None = None  # serving the request raised, and why: it failed alone (finish is "abort")


class TokenBatch(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Everything one scheduler step produced."""

    outputs: tuple[TokenDelta, ...]


class LogprobEntry(msgspec.Struct, frozen=True, kw_only=True):
    """A token's text, id and logprob, with its alternatives, for the API's logprobs fields."""

    token: str
    token_id: int
    logprob: float
    top: tuple[tuple[str, int, float], ...] = ()


class TextOutput(msgspec.Struct, frozen=True, kw_only=True):
    """New text of one request since its previous TextOutput."""

    rid: str
    text: str
    new_ids: tuple[int, ...]
    finish: FinishReason | None = None
    matched_stop: int | str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    logprobs: tuple[LogprobEntry, ...] = ()
    error: str | None = None  # the scheduler refused the request (finish is "abort")
    failure: str | None = None  # serving the request raised, and why (finish is "abort")


class TextBatch(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Text outputs forwarded by the detokenizer."""

    outputs: tuple[TextOutput, ...]


class EmbedRequest(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Inputs of token ids for the encoder, one output each (an encoder's task: no KV, no
    sampling): an embedding, or a cross-encoder's score of a pair in segments `token_types`."""

    rid: str
    inputs: tuple[tuple[int, ...], ...]
    token_types: tuple[tuple[int, ...], ...] = ()  # one per token of each input (unset: segment 0)


class EmbedResult(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The outputs of an EmbedRequest's inputs, in order, each its float32 values as bytes
    (little-endian, as OpenAI's base64 encoding carries them; a score is one value); or why it failed."""

    rid: str
    vectors: tuple[bytes, ...] = ()
    error: str | None = None


class SchedulerStats(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A replica's scheduler snapshot, sent between steps (a few times a second at most) and when idle."""

    metrics: SchedulerMetrics
    replica: int = 0


Message = (
    GenerateRequest
    | AbortRequest
    | OverrideRequest
    | OverrideAck
    | ProcessReady
    | TokenBatch
    | TextBatch
    | SchedulerStats
    | EmbedRequest
    | EmbedResult
)

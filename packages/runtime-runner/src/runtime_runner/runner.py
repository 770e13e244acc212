"""The model runner: loads the served checkpoint, owns the KV pool, runs `forward(batch)`.

Every setting comes from the published bags at the moment it is needed, so a runner is built only
after its process published them: serve publishes its resolved bags in each process, and a test or
a tool publishes its own (role standalone) first; a runner built before is refused. A runner built
with a `target` is that target's speculative draft runner: the draft checkpoint, loaded with its
draft entry class, over a pool of the target's slots.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from config_bags import NotPublishedError, is_published
from config_bags.server import (
    attention_backends,
    context_length_of,
    get_device,
    get_exec,
    get_memory,
    get_model,
    get_parallel,
    get_schedule,
    mamba_snapshot_slots,
)
from runtime_runner.attention_seam import AttentionBackend, AttentionMetadata, AttentionPairFactory, AttentionStamp
from runtime_runner.batch import SERVED_FORWARD_MODES, ForwardBatchView
from runtime_runner.determinism import batch_invariance_for
from runtime_runner.device_faults import marked_device_faults
from runtime_runner.errors import BatchError, UnsupportedConfigError
from runtime_runner.kv_pool import KVPool
from runtime_runner.linear_attention.plan import LinearAttnPlanner
from runtime_runner.linear_attention.recurrent_state_pool import LinearLayerState, RecurrentStatePool
from runtime_runner.linear_attention.seam import LinearAttnBackendView, LinearAttnFactory
from runtime_runner.loading.arch_config import ArchConfig
from runtime_runner.models.compiled_decode import CompiledDecode, check_compiled_decode_traceable
from runtime_runner.models.decoder import DecoderForCausalLM
from runtime_runner.models.hybrid.decoder import HybridDecoder
from runtime_runner.models.layer_attention import LayerAttention, LinearLayerAttention
from runtime_runner.models.model_loading import draft_checkpoint, load_model, target_checkpoint
from runtime_runner.models.native_step import NativeDecoderStep
from runtime_runner.output import ForwardOutput
from runtime_runner.placement import device_of, kv_dtype_of, model_dtype_of, torch_threads_of
from runtime_runner.sampling.sampler import sample
from runtime_runner.sampling.verify import sample_verify
from runtime_runner.standalone import StandaloneDriver


def _refuse_unpublished() -> None:
    """NotPublishedError, saying how to publish, when this process has published no bags."""
    if not is_published():
        raise NotPublishedError(
            "a ModelRunner reads every setting from the published bags, and this process has published none; publish "
            "them before building it, as serve does in each of its processes: a test or a tool publishes its own with "
            'config_bags.publish(Bags(...), role="standalone") (Bags() serves the bundled default model)'
        )


def _use_torch_threads() -> None:
    """Torch's intra-op threads: device.cpu_threads, else the node's cores shared among its ranks
    (torch_threads_of); torch's own default where the node runs one rank."""
    threads = torch_threads_of(get_device(), get_parallel(), len(os.sched_getaffinity(0)))
    if threads is not None:
        torch.set_num_threads(threads)


@dataclass(frozen=True)
class BatchTensors:
    """A checked batch on the device."""

    input_ids: torch.Tensor
    positions: torch.Tensor
    out_cache_loc: torch.Tensor
    metadata: AttentionMetadata


class ModelRunner:
    """One model on one device with its paged KV cache (and a hybrid's recurrent-state pool)."""

    def __init__(
        self,
        attention_pair_factory: AttentionPairFactory,
        *,
        target: ModelRunner | None = None,
        linear_attn_factory: LinearAttnFactory | None = None,
        tensor_parallel_group: dist.ProcessGroup | None = None,
    ) -> None:
        """Build the served model's runner; with `target`, that target's draft runner
        (spec.speculative_draft_model_path; serve hands it attn_backends.DraftBackendFactory).
        A model with linear-attention layers needs `linear_attn_factory` (serve hands it
        attn_backends.LinearAttnBackendFactory). With parallel.tp_size > 1 the runner holds its
        rank's slice of the model and needs `tensor_parallel_group`, its rank's torch.distributed
        group (runtime_runner.parallel.tensor_parallel). Built before this process published its
        bags, it is refused (NotPublishedError, saying how to publish) before anything is read."""
        _refuse_unpublished()
        _use_torch_threads()
        self.is_draft = target is not None
        checkpoint = target_checkpoint() if target is None else draft_checkpoint()
        device = device_of(get_device())
        dtype = model_dtype_of(get_model(), checkpoint.cfg.checkpoint_dtype, device, quantized=checkpoint.quantized)
        batch_invariant = batch_invariance_for(device.type)
        self.model: DecoderForCausalLM | HybridDecoder = load_model(
            checkpoint,
            dtype,
            device,
            batch_invariant=batch_invariant,
            tensor_parallel_group=tensor_parallel_group,
            target=None if target is None else target.model,
        )
        self.pool = self._kv_pool(checkpoint.cfg, dtype, device, target)
        self._generator = torch.Generator().manual_seed(get_device().random_seed)
        # The stamp first: every decision below that depends on a kernel asks it for its half.
        self.attention_stamp, self._attention = self._attention_pair(attention_pair_factory, device, batch_invariant)
        self._compiled_decode: CompiledDecode | None = None
        self._linear = self._linear_attention(checkpoint.cfg, linear_attn_factory, device, dtype, target)
        self.native_step = self._native_step()
        self._warm_up()

    def _kv_pool(self, cfg: ArchConfig, dtype: torch.dtype, device: torch.device, target: ModelRunner | None) -> KVPool:
        """The paged KV cache of the layers that hold K/V, over this rank's own KV heads under tensor
        parallelism; a draft's holds as many slots as its target's."""
        return KVPool(
            num_layers=cfg.kv_layers,
            num_kv_heads=self.arch.num_kv_heads,
            head_dim=cfg.head_dim,
            dtype=kv_dtype_of(get_memory(), dtype),
            device=device,
            num_slots=None if target is None else target.pool.num_slots,
        )

    @staticmethod
    def _attention_pair(
        factory: AttentionPairFactory, device: torch.device, batch_invariant: bool
    ) -> tuple[AttentionStamp, AttentionBackend]:
        """The configured (prefill, decode) pair built through `factory`, with its stamp; the compiled
        decode step (enable_torch_compile) refused where the stamp's decode half cannot be traced."""
        prefill, decode = attention_backends()
        stamp, backend = factory(prefill, decode, device_type=device.type, batch_invariant=batch_invariant)
        if get_exec().graph.enable_torch_compile:
            check_compiled_decode_traceable(stamp)
        return stamp, backend

    def _linear_attention(
        self,
        cfg: ArchConfig,
        factory: LinearAttnFactory | None,
        device: torch.device,
        dtype: torch.dtype,
        target: ModelRunner | None,
    ) -> LinearAttnPlanner | None:
        """A hybrid's linear attention (None for a model without linear-attention layers): the stamp
        first (`linear_attn_backends`, this runner's own choice, never recorded into the bags), then
        the backend that reads it off this runner, over a state pool of mamba_cache_slots() slots (a
        draft's: its target's count), and a target's snapshot pool of mamba_snapshot_slots() slots
        (a draft catches up from position 0 and keeps none)."""
        if cfg.hybrid is None:
            return None
        if factory is None:
            raise UnsupportedConfigError(
                f"{cfg.architecture} has linear-attention layers; its runner needs a linear-attention "
                "factory (serve passes attn_backends.LinearAttnBackendFactory), got none"
            )
        self.linear_attn_backends = factory.resolve(device_type=device.type, is_draft=self.is_draft)
        backend = factory.build(self, device_type=device.type)
        shape = cfg.hybrid.linear
        layer = LinearLayerState(
            conv_channels=shape.conv_channels,
            conv_width=shape.conv_width,
            heads=shape.value_heads,
            k_dim=shape.key_dim,
            v_dim=shape.value_dim,
        )
        slots = None if target is None else target.state_slots
        layers = [layer] * len(cfg.hybrid.linear_layers)
        pool = RecurrentStatePool(layers, conv_dtype=dtype, device=device, num_slots=slots)
        snapshot_slots = 0 if target is not None else mamba_snapshot_slots(pool.bytes_per_slot)
        snapshots = (
            RecurrentStatePool(layers, conv_dtype=dtype, device=device, num_slots=snapshot_slots)
            if snapshot_slots > 0
            else None
        )
        return LinearAttnPlanner(pool, shape, backend, snapshots)

    def _native_step(self) -> NativeDecoderStep | None:
        """The whole forward in one C++ call where every piece has a C entry (a CPU, native
        projections: NativeDecoderStep.of decides); None for a hybrid, and under tensor parallelism,
        whose collectives run between the ops."""
        if not isinstance(self.model, DecoderForCausalLM) or get_parallel().tp_size != 1:
            return None
        return NativeDecoderStep.of(self.model, self.pool)

    @property
    def state_slots(self) -> int:
        """Slots of the recurrent-state pool (0 for a model without linear-attention layers)."""
        return 0 if self._linear is None else self._linear.pool.num_slots

    @property
    def snapshot_slots(self) -> int:
        """Slots of the recurrent-state snapshot pool (0: the model keeps no snapshots)."""
        return 0 if self._linear is None or self._linear.snapshots is None else self._linear.snapshots.num_slots

    @property
    def recurrent_state_bytes(self) -> int:
        """Bytes of the recurrent-state pool and the snapshot pool (0 for a model without them)."""
        if self._linear is None:
            return 0
        pools = [self._linear.pool, *([] if self._linear.snapshots is None else [self._linear.snapshots])]
        return sum(p.bytes_per_slot * p.num_slots for p in pools)

    @property
    def linear_attn_backend(self) -> LinearAttnBackendView | None:
        """The backend this runner's linear-attention layers run (None for a model without them)."""
        return None if self._linear is None else self._linear.backend

    @property
    def state_pool(self) -> RecurrentStatePool | None:
        """The recurrent-state pool of a hybrid model (None for a model without one)."""
        return None if self._linear is None else self._linear.pool

    @property
    def batch_invariant(self) -> bool:
        """Whether this runner was built batch-invariant (exec.kernel.enable_deterministic_inference):
        its projections and its attention pair give a row the same bits in any batch."""
        return self.model.batch_invariant

    @property
    def arch(self) -> ArchConfig:
        """The loaded checkpoint's decoder shape."""
        return self.model.cfg

    @property
    def context_length(self) -> int:
        """Longest sequence served: model.context_length, capped by the model's maximum."""
        return context_length_of(get_model(), self.model.cfg.max_position_embeddings)

    def forward(self, batch: ForwardBatchView, *, draft_step: int | None = None) -> ForwardOutput:
        """Compute every request's new tokens, write their K/V into the pool, and sample the next
        token; a target_verify batch samples every position (`ForwardOutput.verified`). On a draft
        runner a decode is step `draft_step` of a proposal (unnamed: step 0, as in the warm-up); a
        target runner takes no draft_step.

        A request whose sampling fails alone gets token -1 and its error in `errors`; a device
        fault (out of memory, a CUDA error) is raised as a DeviceFaultError, which the scheduler
        lets end the process; any other exception fails the batch."""
        with torch.inference_mode(), marked_device_faults():
            tensors = self._checked(batch, draft_step)
            compiled = self._compiled_decode_for(batch)
            if compiled is not None:
                logits = compiled(tensors.input_ids, tensors.positions, self._planned_attention(tensors))
            else:
                hidden = self._hidden_states(batch, tensors)
                if batch.forward_mode == "target_verify":
                    return sample_verify(self.model.logits(hidden), batch, self._generator)
                last = torch.cumsum(tensors.metadata.extend_lens, 0) - 1
                logits = self.model.logits(hidden.index_select(0, last))
            sampled = sample(logits, batch.requests, self._generator)
        return ForwardOutput(sampled.token_ids, sampled.logprobs, sampled.top_logprobs, sampled.errors, logits)

    def fill_kv(self, batch: ForwardBatchView) -> None:
        """Write the batch's K/V into the pool and nothing more (no LM head, no sampling): a draft
        runner catches up this way on the positions it lacks before it proposes."""
        with torch.inference_mode(), marked_device_faults():
            tensors = self._checked(batch, None)
            self._hidden_states(batch, tensors)

    def _hidden_states(self, batch: ForwardBatchView, tensors: BatchTensors) -> torch.Tensor:
        """The model's final hidden states of the batch's new tokens; a hybrid's linear layers run
        over the state pool, whose slots then hold the states after the batch."""
        attention = self._planned_attention(tensors)
        if isinstance(self.model, DecoderForCausalLM):
            native = (
                None
                if self.native_step is None
                else self._attention.native_attention(self.model.dtype, self.pool.dtype)
            )
            if self.native_step is not None and native is not None:
                return self.native_step.hidden_states(
                    tensors.input_ids, tensors.positions, tensors.out_cache_loc, native
                )
            return self.model.hidden_states(tensors.input_ids, tensors.positions, attention)
        assert self._linear is not None  # a hybrid's runner built its planner
        draft_step = tensors.metadata.draft_step if batch.forward_mode == "decode" else None
        linear: LinearLayerAttention = self._linear.plan(batch.requests, batch.forward_mode, draft_step)
        hidden = self.model.hidden_states(tensors.input_ids, tensors.positions, attention, linear)
        self._linear.advance(batch.requests, batch.forward_mode, draft_step)
        return hidden

    def _planned_attention(self, tensors: BatchTensors) -> LayerAttention:
        """Plan the attention backend for this forward; the per-layer callable that writes each
        layer's new K/V into the pool and attends."""
        backend = self._attention
        backend.plan(tensors.metadata)
        pool, scale, loc = self.pool, self.model.attention_scale, tensors.out_cache_loc

        def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            pool.write(layer, loc, k, v)
            return backend.attend(q, pool.k[layer], pool.v[layer], scale=scale).to(q.dtype)

        return attend

    @property
    def compiled_decode_steps(self) -> int:
        """Decode steps run through the compiled one-request graph (0 when compiling is off)."""
        return 0 if self._compiled_decode is None else self._compiled_decode.steps

    def _compiled_decode_for(self, batch: ForwardBatchView) -> CompiledDecode | None:
        """The compiled graph when exec.graph.enable_torch_compile is on and `batch` decodes one request."""
        if (
            batch.forward_mode != "decode"
            or len(batch.requests) != 1
            or not get_exec().graph.enable_torch_compile
            or self.is_draft
        ):
            return None  # a draft runner decodes eagerly: its steps plan different backends
        if not isinstance(self.model, DecoderForCausalLM):
            return None  # a hybrid refused enable_torch_compile at construction
        if self._compiled_decode is None:
            self._compiled_decode = CompiledDecode(self.model, (*self.pool.k, *self.pool.v))
        return self._compiled_decode

    def _warm_up(self) -> None:
        """Pay the one-time costs at startup rather than on the first request (each attention
        half's first-use setup, such as cpu_paged building its C++ kernel; the compiled decode
        graph when exec.graph.enable_torch_compile is on): prefill two tokens into free pages (the
        prefill half), decode one (the decode half), give the pages back."""
        driver = StandaloneDriver(self)
        seq = driver.add([0, 0])
        driver.step()
        driver.step()
        driver.finish(seq)

    def _checked(self, batch: ForwardBatchView, draft_step: int | None) -> BatchTensors:
        """The batch as device tensors, refused with BatchError (before any pool write) when inconsistent."""
        requests = batch.requests
        if batch.forward_mode not in SERVED_FORWARD_MODES:
            raise BatchError(
                f"forward mode {batch.forward_mode!r} is not served by this build; accepted: "
                f"{', '.join(SERVED_FORWARD_MODES)}"
            )
        verify_or_draft = "target_verify" if self.is_draft else "draft_extend"
        if batch.forward_mode == verify_or_draft:
            raise BatchError(
                f"forward mode {verify_or_draft!r} is not a {'draft' if self.is_draft else 'target'} runner's; "
                f"a target verifies, a draft runner extends its drafts"
            )
        if draft_step is not None and (not self.is_draft or batch.forward_mode != "decode" or draft_step < 0):
            raise BatchError(
                f"draft_step={draft_step} names a step of a draft runner's decode proposal (an int >= 0); "
                f"this is a {'draft' if self.is_draft else 'target'} runner's {batch.forward_mode} forward"
            )
        if self.is_draft and batch.forward_mode == "decode" and draft_step is None:
            draft_step = 0
        if not requests:
            raise BatchError("batch has no requests; accepted: at least one request")
        prefix = [r.prefix_len for r in requests]
        extend = [r.extend_len for r in requests]
        tokens = sum(extend)
        if min(extend) < 1 or min(prefix) < 0:
            raise BatchError(
                f"extend_len must be >= 1 and prefix_len >= 0; got extend_len {extend}, prefix_len {prefix}"
            )
        if batch.forward_mode == "decode" and max(extend) != 1:
            raise BatchError(f"a decode batch computes one token per request; got extend_len {extend}")
        sizes = (len(batch.input_ids), len(batch.positions), len(batch.out_cache_loc))
        if sizes != (tokens, tokens, tokens):
            raise BatchError(
                f"input_ids, positions and out_cache_loc have lengths {sizes}; all must equal sum(extend_len) = "
                f"{tokens}"
            )
        seq = [p + e for p, e in zip(prefix, extend, strict=True)]
        limit = self.context_length
        if max(seq) > limit:
            raise BatchError(f"a request reaches {max(seq)} tokens; accepted: at most the context length {limit}")
        page_size = get_schedule().page_size
        tables = [list(r.page_table) for r in requests]
        for r, table, length in zip(requests, tables, seq, strict=True):
            if len(table) * page_size < length:
                raise BatchError(
                    f"request {r.rid!r} holds {length} tokens but its page table has {len(table)} pages of {page_size}"
                )
        # Checked on Python ints: a decode step's batch is a few values, and a dozen small torch ops
        # to check them cost more than a batch-1 step's attention (docs/benchmarks.md, CPU speed).
        lowest, highest = min(min(t) for t in tables), max(max(t) for t in tables)
        if lowest < 0 or highest >= self.pool.num_pages:
            raise BatchError(f"page table names pages {lowest}..{highest}; accepted: 0..{self.pool.num_pages - 1}")
        loc = list(batch.out_cache_loc)
        self.pool.check_slots(loc)
        if self._linear is not None:
            self._linear.check(requests)
        positions = list(batch.positions)
        expected_pos = [start + i for start, length in zip(prefix, extend, strict=True) for i in range(length)]
        if positions != expected_pos:
            raise BatchError(
                "positions must run prefix_len, prefix_len+1, ... within each request; "
                f"got {positions[:16]}, expected {expected_pos[:16]}"
            )
        owners = [table for table, length in zip(tables, extend, strict=True) for _ in range(length)]
        expected_loc = [
            table[pos // page_size] * page_size + pos % page_size for table, pos in zip(owners, positions, strict=True)
        ]
        if loc != expected_loc:
            raise BatchError(
                "out_cache_loc must be the page-table slot of each token's position; "
                f"got {loc[:16]}, expected {expected_loc[:16]}"
            )
        width = max(len(t) for t in tables)
        page_table = torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int64)
        prefix_t, extend_t = torch.tensor(prefix), torch.tensor(extend)
        device = self.model.device
        metadata = AttentionMetadata(
            forward_mode=batch.forward_mode,
            page_size=page_size,
            page_table=page_table.to(device),
            prefix_lens=prefix_t.to(device),
            extend_lens=extend_t.to(device),
            seq_lens=(prefix_t + extend_t).to(device),
            num_tokens=tokens,
            max_extend_len=max(extend),
            draft_step=draft_step,
        )
        as_tensor = functools.partial(torch.tensor, dtype=torch.int64, device=device)
        return BatchTensors(as_tensor(batch.input_ids), as_tensor(positions), as_tensor(loc), metadata)

"""The native step: a Llama-family decoder's whole forward over a batch in one C++ call.

Op by op from Python a batch-1 decode step of the default model is about 400 small calls, and
their dispatch cost more than reading every weight once (docs/benchmarks.md, CPU speed). The
native step (native_step.cpp) runs the layer loop in C++ and calls the same kernels through their C
entries: each projection through the native projection ABI (native_projection.py), the fused CPU
ops, and the attention backend's native entry. A row's bits are therefore the op-by-op forward's
(tests/test_native_step.py holds them equal), and so is batch invariance.

A decoder gets one only where every piece has a C entry: on a CPU, in fp32/bf16/fp16 with a pool
of the same dtype (or a bf16 pool under fp32, which the step rounds its new keys and values into as
the op-by-op forward's KVPool.write does), every projection native (the batch-invariant linear, a
quantized matrix, or a group of those run side by side through the projection stack, as a group
whose matrices differ in kind runs; not oneDNN's packed linear), and, per forward, an attention
backend that answers `native_attention` (cpu_paged). Otherwise the forward runs op by op, as before.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from pathlib import Path

import torch

from native_build import load_library
from runtime_runner.attention_seam import NativeAttentionView
from runtime_runner.kernels import cpu_fused_ops
from runtime_runner.kernels.native_projection import NativeProjection, NativeProjectionEntry
from runtime_runner.kv_pool import KVPool
from runtime_runner.models.decoder import DecoderForCausalLM, LayerProjections

WHAT = "the runner's native decoder step"
SOURCE = Path(__file__).with_name("native_step.cpp")
# The step computes nothing but copies: it only calls the kernels' own entries.
FLAGS = ("-O3", "-march=native", "-shared", "-fPIC", "-std=c++17")
_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_POOL_DTYPES = {(dtype, dtype) for dtype in _DTYPES} | {(torch.float32, torch.bfloat16)}  # (model, pool)


class _ProjectionCall(ctypes.Structure):
    _fields_ = [("entry", ctypes.c_void_p), ("matrix", ctypes.c_void_p)]


class _Layer(ctypes.Structure):
    _fields_ = [
        ("qkv", _ProjectionCall),
        ("o", _ProjectionCall),
        ("gate_up", _ProjectionCall),
        ("down", _ProjectionCall),
        ("q_norm", ctypes.c_void_p),
        ("k_norm", ctypes.c_void_p),
        ("post_norm", ctypes.c_void_p),
        ("next_norm", ctypes.c_void_p),
        ("k_pool", ctypes.c_void_p),
        ("v_pool", ctypes.c_void_p),
    ]


class _Model(ctypes.Structure):
    _fields_ = [
        ("layers", ctypes.c_int64),
        ("hidden", ctypes.c_int64),
        ("heads", ctypes.c_int64),
        ("kv_heads", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("intermediate", ctypes.c_int64),
        ("element_size", ctypes.c_int64),
        ("kv_element_size", ctypes.c_int64),
        ("kv_head_stride", ctypes.c_int64),
        ("kv_slot_stride", ctypes.c_int64),
        ("eps", ctypes.c_double),
        ("scale", ctypes.c_double),
        ("add_rms_norm", ctypes.c_void_p),
        ("silu_mul", ctypes.c_void_p),
        ("rope", ctypes.c_void_p),
        ("layer", ctypes.POINTER(_Layer)),
    ]


class _Step(ctypes.Structure):
    _fields_ = [("rows", ctypes.c_int64), ("threads", ctypes.c_int64)] + [
        (name, ctypes.c_void_p)
        for name in (
            "h",
            "x",
            "first_norm",
            "cos",
            "sin",
            "slots",
            "attend",
            "attention_plan",
            "qkv",
            "q_normed",
            "k_normed",
            "attn",
            "delta",
            "gate_up",
            "act",
        )
    ]


@functools.cache
def _library() -> ctypes.CDLL:
    """The step, loaded once per process (built first on a machine that never had it)."""
    library = load_library(SOURCE, FLAGS, package="runtime-runner", what=WHAT)
    library.native_decoder_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    library.native_decoder_forward.restype = None
    return library


def _native_of(projection: object) -> NativeProjectionEntry | None:
    """A projection's native entry, None when it has none."""
    return projection.native if isinstance(projection, NativeProjection) else None


def _call_of(entry: NativeProjectionEntry) -> _ProjectionCall:
    return _ProjectionCall(entry.entry, entry.matrix)


@dataclass(frozen=True)
class _Workspace:
    """The step's intermediate buffers for up to `rows` rows (each buffer's first r rows are a
    contiguous [r, width] for any r <= rows)."""

    rows: int
    qkv: torch.Tensor
    q_normed: torch.Tensor
    k_normed: torch.Tensor
    attn: torch.Tensor
    delta: torch.Tensor
    gate_up: torch.Tensor
    act: torch.Tensor


class NativeDecoderStep:
    """One decoder's forward in C++, over its runner's KV pool (see the module)."""

    def __init__(
        self, model: DecoderForCausalLM, pool: KVPool, layers: tuple[tuple[NativeProjectionEntry, ...], ...]
    ) -> None:
        """Use `of`, which checks that every piece has a C entry."""
        cfg, w = model.cfg, model.weights
        self.model = model
        next_norms = [layer.input_norm for layer in w.layers[1:]] + [w.final_norm]
        self._layers = (_Layer * cfg.num_layers)(
            *[
                _Layer(
                    *(_call_of(entry) for entry in entries),
                    None if layer.q_norm is None else layer.q_norm.data_ptr(),
                    None if layer.k_norm is None else layer.k_norm.data_ptr(),
                    layer.post_norm.data_ptr(),
                    next_norm.data_ptr(),
                    k.data_ptr(),
                    v.data_ptr(),
                )
                for entries, layer, next_norm, k, v in zip(layers, w.layers, next_norms, pool.k, pool.v, strict=True)
            ]
        )
        norm, silu, rope = cpu_fused_ops.native_entries(model.dtype)
        self._model = _Model(
            cfg.num_layers,
            cfg.hidden_size,
            cfg.num_heads,
            cfg.num_kv_heads,
            cfg.head_dim,
            cfg.intermediate_size,
            model.dtype.itemsize,
            pool.k[0].element_size(),
            pool.k[0].stride(0),
            pool.k[0].stride(1),
            cfg.rms_norm_eps,
            model.attention_scale,
            norm,
            silu,
            rope,
            self._layers,
        )
        self._workspace: _Workspace | None = None
        self.forwards = 0  # forwards run through the step (what /server_info and the tests read)

    @classmethod
    def of(cls, model: DecoderForCausalLM, pool: KVPool) -> NativeDecoderStep | None:
        """The native step of `model` over `pool`, or None when some piece has no C entry (the
        forward then runs op by op)."""
        if model.device.type != "cpu" or (model.dtype, pool.dtype) not in _POOL_DTYPES:
            return None
        layers = []
        for projections in model.projections:
            entries = tuple(_native_of(p) for p in _in_order(projections))
            if any(entry is None for entry in entries):
                return None
            layers.append(tuple(entry for entry in entries if entry is not None))
        _library()  # built now, at load, rather than on the first request
        return cls(model, pool, tuple(layers))

    def hidden_states(
        self, input_ids: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor, attention: NativeAttentionView
    ) -> torch.Tensor:
        """Final-normed hidden states [tokens, hidden] of the new tokens, their K/V written into the
        pool at `slots` (int64, one per token): what DecoderForCausalLM.hidden_states answers."""
        rows = int(input_ids.shape[0])
        space = self._workspace_for(rows)
        h = self.model.embeddings(input_ids).contiguous()
        x = torch.empty_like(h)
        cos, sin = self.model.rope_rows(positions)
        slots = slots.contiguous()
        first_norm = self.model.weights.layers[0].input_norm
        step = _Step(
            rows,
            torch.get_num_threads(),
            h.data_ptr(),
            x.data_ptr(),
            first_norm.data_ptr(),
            cos.data_ptr(),
            sin.data_ptr(),
            slots.data_ptr(),
            attention.entry,
            attention.plan,
            space.qkv.data_ptr(),
            space.q_normed.data_ptr(),
            space.k_normed.data_ptr(),
            space.attn.data_ptr(),
            space.delta.data_ptr(),
            space.gate_up.data_ptr(),
            space.act.data_ptr(),
        )
        _library().native_decoder_forward(ctypes.byref(self._model), ctypes.byref(step))
        self.forwards += 1
        return x

    def _workspace_for(self, rows: int) -> _Workspace:
        """Buffers for `rows` rows: the last ones, or larger ones when they are too small."""
        if self._workspace is not None and self._workspace.rows >= rows:
            return self._workspace
        cfg, dtype = self.model.cfg, self.model.dtype
        d = cfg.head_dim

        def buffer(width: int) -> torch.Tensor:
            return torch.empty(rows, width, dtype=dtype)

        self._workspace = _Workspace(
            rows,
            buffer((cfg.num_heads + 2 * cfg.num_kv_heads) * d),
            buffer(cfg.num_heads * d),
            buffer(cfg.num_kv_heads * d),
            buffer(cfg.num_heads * d),
            buffer(cfg.hidden_size),
            buffer(2 * cfg.intermediate_size),
            buffer(cfg.intermediate_size),
        )
        return self._workspace


def _in_order(projections: LayerProjections) -> tuple[object, ...]:
    """A layer's projections in the order the step's Layer holds them."""
    return projections.qkv, projections.o, projections.gate_up, projections.down

"""One Gated-DeltaNet layer, per call: our linear-attention kernels against transformers' torch fallback.

A Qwen3-Next linear-attention layer (transformers' Qwen3NextGatedDeltaNet, fp32, random weights)
at real-model dimensions by default: hidden 2048, 16 key heads and 32 value heads of 128, conv
width 4 (flags shrink them). Prefill of one prompt at each of `--lengths` tokens, and one decode
step at each of `--batches` requests (each request with 8 tokens already prefilled, so every state
is a real one). Each kernel set that runs here is measured: torch_native and cpu_fused on a CPU,
torch_native and triton on CUDA. transformers runs on the same weights with its torch fallbacks,
checked to be bound (not flash-linear-attention or causal-conv1d); its decode step goes through its
cache (DynamicCache), so it takes its single-token recurrent path.

Columns, microseconds per call, best of `--repeats` alternating timings:

  kernels    the layer's two kernels alone, on operands prepared outside the timing: for ours the
             causal conv and the gated delta rule entry points (prefill: causal_conv_prefill +
             gated_delta_prefill over a pool slot; decode: causal_conv_decode + gated_delta_decode);
             for transformers causal_conv1d_fn + torch_chunk_gated_delta_rule (prefill) or
             causal_conv1d_update + torch_recurrent_gated_delta_rule (decode) on its layout.
  layer      the whole layer from hidden states to its output: for ours, written out here with
             torch matmuls on the module's own weights (in_proj_qkvz / in_proj_ba carved per key-head
             group, the conv, the gates g and beta, q/k repeated to the value heads, the gated delta
             rule, the gated RMSNorm, out_proj), the states in pools; for transformers the module's
             forward (prefill with a fresh cache, decode with the prefilled one).
  vs hf      transformers' time / this time (above 1: faster than transformers), kernels and layer.
  max |diff| the largest difference of the layer's output from transformers' (on the first call,
             when both hold the same states).

    uv run python tools/bench_gdn_layer.py [--lengths 16 64 256 1024] [--batches 1 32] [--repeats 3]
        [--hidden 2048 --key-heads 16 --value-heads 32 --head-dim 128 --conv 4] [--threads N] [--device cpu]
"""

from __future__ import annotations

import argparse
import inspect
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from transformers.cache_utils import DynamicCache
from transformers.models.qwen3_next import modeling_qwen3_next as reference
from transformers.models.qwen3_next.configuration_qwen3_next import Qwen3NextConfig

from attn_backends import AttentionBackendUnavailableError, LinearAttnKernels, linear_attn_kernels_for
from config_bags.server.bags.attention_names import LinearAttnBackendName

BACKENDS_OF_DEVICE: dict[str, tuple[LinearAttnBackendName, ...]] = {
    "cpu": ("torch_native", "cpu_fused"),
    "cuda": ("torch_native", "triton"),
}
TORCH_FALLBACKS = (
    "torch_chunk_gated_delta_rule",
    "torch_recurrent_gated_delta_rule",
    "causal_conv1d_fn",
    "causal_conv1d_update",
)
PREFILLED = 8  # tokens each decode request has prefilled before the timed step
MIN_TIMED_S = 0.05  # calls per timing are repeated until one timing lasts about this long


@dataclass(frozen=True)
class Layer:
    """The module's weights and dimensions, as our layer reads them."""

    qkvz: torch.Tensor  # [2 Dk + 2 Dv, hidden], interleaved per key-head group
    ba: torch.Tensor  # [2 nv, hidden], likewise
    conv: torch.Tensor  # [C, W], C = 2 Dk + Dv
    a_log: torch.Tensor
    dt_bias: torch.Tensor
    norm: torch.Tensor
    norm_eps: float
    out: torch.Tensor
    key_heads: int
    value_heads: int
    dk: int
    dv: int

    @staticmethod
    def of(module: Any) -> Layer:
        """The weights of transformers' Qwen3NextGatedDeltaNet `module`."""
        return Layer(
            module.in_proj_qkvz.weight,
            module.in_proj_ba.weight,
            module.conv1d.weight.squeeze(1),
            module.A_log,
            module.dt_bias,
            module.norm.weight,
            module.norm.variance_epsilon,
            module.out_proj.weight,
            module.num_k_heads,
            module.num_v_heads,
            module.head_k_dim,
            module.head_v_dim,
        )


@dataclass(frozen=True)
class Projected:
    """A batch's projections: the conv's input and the gates' inputs, one row per token."""

    mixed: torch.Tensor  # [T, C]: all q, then all k, then all v
    z: torch.Tensor  # [T, nv, dv]
    b: torch.Tensor  # [T, nv]
    a: torch.Tensor  # [T, nv]


@dataclass(frozen=True)
class Rule:
    """The gated delta rule's operands, q and k repeated to the value heads."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    g: torch.Tensor
    beta: torch.Tensor


@dataclass(frozen=True)
class Pools:
    """Our state pools (one slot per request) and the slots and flags of a batch."""

    state: torch.Tensor  # [S, nv, dk, dv]
    conv: torch.Tensor  # [S, C, W-1]
    slots: torch.Tensor
    fresh: torch.Tensor  # has_initial all False


def projected(w: Layer, x: torch.Tensor) -> Projected:
    """in_proj_qkvz and in_proj_ba of x [T, hidden], carved per key-head group (docs/hybrid-models-reference.md)."""
    tokens, per_group = x.shape[0], w.value_heads // w.key_heads
    q, k, v, z = torch.split(
        (x @ w.qkvz.T).view(tokens, w.key_heads, -1), [w.dk, w.dk, per_group * w.dv, per_group * w.dv], -1
    )
    b, a = torch.split((x @ w.ba.T).view(tokens, w.key_heads, -1), [per_group, per_group], -1)
    mixed = torch.cat([t.reshape(tokens, -1) for t in (q, k, v)], dim=-1)
    return Projected(mixed, z.reshape(tokens, w.value_heads, w.dv), b.reshape(tokens, -1), a.reshape(tokens, -1))


def rule_operands(w: Layer, conv_out: torch.Tensor, p: Projected) -> Rule:
    """The conv's output split into q, k, v (q and k repeated to the value heads) and the gates."""
    tokens, per_group = conv_out.shape[0], w.value_heads // w.key_heads
    q, k, v = torch.split(conv_out, [w.key_heads * w.dk, w.key_heads * w.dk, w.value_heads * w.dv], -1)
    q, k = (t.reshape(tokens, w.key_heads, w.dk).repeat_interleave(per_group, dim=1) for t in (q, k))
    g = -w.a_log.float().exp() * F.softplus(p.a.float() + w.dt_bias)
    return Rule(q, k, v.reshape(tokens, w.value_heads, w.dv), g, p.b.sigmoid())


def gated_norm_out(w: Layer, o: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """The gated RMSNorm per value head (plain weight, SiLU(z) gate), then out_proj: [T, hidden]."""
    of = o.float()
    normed = w.norm * (of * torch.rsqrt(of.pow(2).mean(-1, keepdim=True) + w.norm_eps)).to(o.dtype)
    gated = (normed * F.silu(z.float())).to(o.dtype)
    return gated.reshape(o.shape[0], -1) @ w.out.T


def our_prefill(
    kernels: LinearAttnKernels, w: Layer, x: torch.Tensor, cu_seqlens: torch.Tensor, pools: Pools
) -> torch.Tensor:
    """The whole layer over a varlen batch of fresh prompts x [T, hidden], states into the pools."""
    p = projected(w, x)
    conv_out = kernels.causal_conv_prefill(p.mixed, w.conv, None, cu_seqlens, pools.conv, pools.slots, pools.fresh)
    r = rule_operands(w, conv_out, p)
    o = kernels.gated_delta_prefill(r.q, r.k, r.v, r.g, r.beta, cu_seqlens, pools.state, pools.slots, pools.fresh)
    return gated_norm_out(w, o, p.z)


def our_decode(kernels: LinearAttnKernels, w: Layer, x: torch.Tensor, pools: Pools) -> torch.Tensor:
    """The whole layer for one token per request x [B, hidden], the pools' states stepped."""
    p = projected(w, x)
    conv_out = kernels.causal_conv_decode(p.mixed, w.conv, None, pools.conv, pools.slots)
    r = rule_operands(w, conv_out, p)
    o = kernels.gated_delta_decode(r.q, r.k, r.v, r.g, r.beta, pools.state, pools.slots)
    return gated_norm_out(w, o, p.z)


def assert_torch_fallbacks() -> None:
    """Raise unless transformers' Gated-DeltaNet functions are bound to its own torch code, as the
    project's reference model checks (serve_testing.tiny_hybrid_checkpoint)."""
    for name in TORCH_FALLBACKS:
        bound = inspect.getclosurevars(getattr(reference, name)).nonlocals
        if bound.get("torch_function") is None or bound.get("implementation") is not bound.get("torch_function"):
            raise RuntimeError(
                f"transformers' {name} is bound to {bound.get('implementation')!r}, not its torch fallback; "
                "run without flash-linear-attention, causal-conv1d and hub kernels"
            )


def seconds_per_call(call: Callable[[], object], calls: int, device: torch.device) -> float:
    """Seconds of one call of `call`, over `calls` calls (the device's queue drained)."""
    started = time.perf_counter()
    for _ in range(calls):
        call()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - started) / calls


def best_us(calls: dict[str, Callable[[], object]], repeats: int, device: torch.device) -> dict[str, float]:
    """Microseconds per call of each, best of `repeats` timings taken in turn."""
    counts = {}
    for name, call in calls.items():
        call()  # warm: first touch of outputs and scratch, and cpu_fused's build
        counts[name] = max(1, math.ceil(MIN_TIMED_S / seconds_per_call(call, 1, device)))
    best = dict.fromkeys(calls, math.inf)
    for _ in range(repeats):
        for name, call in calls.items():
            best[name] = min(best[name], seconds_per_call(call, counts[name], device) * 1e6)
    return best


def fresh_pools(w: Layer, requests: int, width: int, device: torch.device) -> Pools:
    channels = 2 * w.key_heads * w.dk + w.value_heads * w.dv
    return Pools(
        torch.zeros(requests, w.value_heads, w.dk, w.dv, device=device),
        torch.zeros(requests, channels, width - 1, device=device),
        torch.arange(requests, device=device),
        torch.zeros(requests, dtype=torch.bool, device=device),
    )


def row(case: str, name: str, kernels_us: float, layer_us: float, hf: tuple[float, float], diff: float | None) -> str:
    ratios = f"{hf[0] / kernels_us:.2f}x | {hf[1] / layer_us:.2f}x"
    return (
        f"| {case} | {name} | {kernels_us:,.0f} | {layer_us:,.0f} | {ratios} "
        f"| {'' if diff is None else f'{diff:.1e}'} |"
    )


def bench_prefill(
    module: Any,
    config: Qwen3NextConfig,
    kernel_sets: dict[str, LinearAttnKernels],
    length: int,
    args: argparse.Namespace,
    device: torch.device,
) -> list[str]:
    """Table rows for one prompt of `length` tokens."""
    w, width = Layer.of(module), config.linear_conv_kernel_dim
    gen = torch.Generator().manual_seed(args.seed + length)
    x = torch.randn(length, config.hidden_size, generator=gen).to(device)
    cu_seqlens = torch.tensor([0, length], device=device)
    p = projected(w, x)
    pools = {name: fresh_pools(w, 1, width, device) for name in kernel_sets}
    # Kernel operands, each set's own conv output feeding its own rule.
    rules = {
        name: rule_operands(
            w,
            kernels.causal_conv_prefill(
                p.mixed, w.conv, None, cu_seqlens, pools[name].conv, pools[name].slots, pools[name].fresh
            ),
            p,
        )
        for name, kernels in kernel_sets.items()
    }
    r = next(iter(rules.values()))
    hf_conv_in = p.mixed.T[None].contiguous()
    hf_rule = [t[None].contiguous() for t in (r.q, r.k, r.v, r.g, r.beta)]

    def hf_kernels() -> object:
        reference.causal_conv1d_fn(hf_conv_in, w.conv, None, activation="silu")
        return reference.torch_chunk_gated_delta_rule(
            *hf_rule, initial_state=None, output_final_state=True, use_qk_l2norm_in_kernel=True
        )

    def hf_layer() -> torch.Tensor:
        out: torch.Tensor = module(x[None], cache_params=DynamicCache(config=config))
        return out

    def kernels_of(kernels: LinearAttnKernels, pool: Pools, r: Rule) -> Callable[[], object]:
        def call() -> object:
            kernels.causal_conv_prefill(p.mixed, w.conv, None, cu_seqlens, pool.conv, pool.slots, pool.fresh)
            return kernels.gated_delta_prefill(
                r.q, r.k, r.v, r.g, r.beta, cu_seqlens, pool.state, pool.slots, pool.fresh
            )

        return call

    def layer_of(kernels: LinearAttnKernels, pool: Pools) -> Callable[[], object]:
        return lambda: our_prefill(kernels, w, x, cu_seqlens, pool)

    calls: dict[str, Callable[[], object]] = {"hf kernels": hf_kernels, "hf layer": hf_layer}
    for name, kernels in kernel_sets.items():
        calls[f"{name} kernels"] = kernels_of(kernels, pools[name], rules[name])
        calls[f"{name} layer"] = layer_of(kernels, pools[name])
    expected = hf_layer()[0]
    diffs = {
        name: float((our_prefill(kernels, w, x, cu_seqlens, pools[name]) - expected).abs().max())
        for name, kernels in kernel_sets.items()
    }
    best = best_us(calls, args.repeats, device)
    hf = (best["hf kernels"], best["hf layer"])
    case = f"prefill {length} tokens"
    return [row(case, "transformers", *hf, hf, None)] + [
        row(case, name, best[f"{name} kernels"], best[f"{name} layer"], hf, diffs[name]) for name in kernel_sets
    ]


def bench_decode(
    module: Any,
    config: Qwen3NextConfig,
    kernel_sets: dict[str, LinearAttnKernels],
    batch: int,
    args: argparse.Namespace,
    device: torch.device,
) -> list[str]:
    """Table rows for one decode step of `batch` requests, each with PREFILLED tokens behind it."""
    w, width = Layer.of(module), config.linear_conv_kernel_dim
    gen = torch.Generator().manual_seed(args.seed + 1000 + batch)
    prompts = torch.randn(batch, PREFILLED, config.hidden_size, generator=gen).to(device)
    x = torch.randn(batch, config.hidden_size, generator=gen).to(device)
    cache = DynamicCache(config=config)
    module(prompts, cache_params=cache)
    cu_seqlens = torch.arange(batch + 1, device=device) * PREFILLED
    pools = {name: fresh_pools(w, batch, width, device) for name in kernel_sets}
    for name, kernels in kernel_sets.items():
        our_prefill(kernels, w, prompts.reshape(-1, config.hidden_size), cu_seqlens, pools[name])
    expected = module(x[:, None], cache_params=cache)[:, 0]  # the first step, from equal states
    diffs = {
        name: float((our_decode(kernels, w, x, pools[name]) - expected).abs().max())
        for name, kernels in kernel_sets.items()
    }
    p = projected(w, x)
    r = rule_operands(w, torch.nn.functional.silu(p.mixed), p)  # kernel operands: any values of the right shapes
    layer_cache: Any = cache.layers[0]  # a LinearAttentionLayer: its conv and recurrent states
    hf_conv_state, hf_state = layer_cache.conv_states[0].clone(), layer_cache.recurrent_states[0].clone()
    hf_conv_in = p.mixed[:, :, None].contiguous()
    hf_rule = [t[:, None].contiguous() for t in (r.q, r.k, r.v, r.g, r.beta)]

    def hf_kernels() -> object:
        reference.causal_conv1d_update(hf_conv_in, hf_conv_state, w.conv, None, "silu")
        return reference.torch_recurrent_gated_delta_rule(
            *hf_rule, initial_state=hf_state, output_final_state=True, use_qk_l2norm_in_kernel=True
        )

    def hf_layer() -> object:
        return module(x[:, None], cache_params=cache)

    def kernels_of(kernels: LinearAttnKernels, pool: Pools) -> Callable[[], object]:
        def call() -> object:
            kernels.causal_conv_decode(p.mixed, w.conv, None, pool.conv, pool.slots)
            return kernels.gated_delta_decode(r.q, r.k, r.v, r.g, r.beta, pool.state, pool.slots)

        return call

    def layer_of(kernels: LinearAttnKernels, pool: Pools) -> Callable[[], object]:
        return lambda: our_decode(kernels, w, x, pool)

    calls: dict[str, Callable[[], object]] = {"hf kernels": hf_kernels, "hf layer": hf_layer}
    for name, kernels in kernel_sets.items():
        calls[f"{name} kernels"] = kernels_of(kernels, pools[name])
        calls[f"{name} layer"] = layer_of(kernels, pools[name])
    best = best_us(calls, args.repeats, device)
    hf = (best["hf kernels"], best["hf layer"])
    case = f"decode batch {batch}"
    return [row(case, "transformers", *hf, hf, None)] + [
        row(case, name, best[f"{name} kernels"], best[f"{name} layer"], hf, diffs[name]) for name in kernel_sets
    ]


def kernels_here(device: torch.device) -> dict[str, LinearAttnKernels]:
    """Every kernel set that runs on this device, by name; a refusal is printed, not raised."""
    found: dict[str, LinearAttnKernels] = {}
    for name in BACKENDS_OF_DEVICE.get(device.type, ("torch_native",)):
        try:
            found[name] = linear_attn_kernels_for(name, device.type)
        except AttentionBackendUnavailableError as refusal:
            print(f"skipping {name}: {refusal}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--lengths", type=int, nargs="+", default=[16, 64, 256, 1024], help="prefill prompt lengths (batch 1)"
    )
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 32], help="decode batch sizes")
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--key-heads", type=int, default=16)
    parser.add_argument("--value-heads", type=int, default=32)
    parser.add_argument("--head-dim", type=int, default=128, help="dk = dv")
    parser.add_argument("--conv", type=int, default=4, help="conv width")
    parser.add_argument("--repeats", type=int, default=3, help="alternating timings per column; the best is reported")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cpu", "cuda"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    # transformers' one-time "falling back to torch" notices: assert_torch_fallbacks checks that instead.
    logging.getLogger("transformers").setLevel(logging.ERROR)
    assert_torch_fallbacks()
    device = torch.device(args.device)
    config = Qwen3NextConfig(
        hidden_size=args.hidden,
        linear_num_key_heads=args.key_heads,
        linear_num_value_heads=args.value_heads,
        linear_key_head_dim=args.head_dim,
        linear_value_head_dim=args.head_dim,
        linear_conv_kernel_dim=args.conv,
        num_hidden_layers=1,
        layer_types=["linear_attention"],
    )
    torch.manual_seed(args.seed)
    module = reference.Qwen3NextGatedDeltaNet(config, layer_idx=0).to(device).eval()
    kernel_sets = kernels_here(device)
    print(
        f"Gated-DeltaNet layer, hidden {args.hidden}, {args.key_heads} key / {args.value_heads} value heads of "
        f"{args.head_dim}, conv {args.conv}, fp32, on {args.device}, {torch.get_num_threads()} threads, best of "
        f"{args.repeats}; microseconds per call; vs hf = transformers' time / this time\n"
    )
    print("| case | kernels of | kernels us | layer us | kernels vs hf | layer vs hf | layer max abs diff |")
    print("|---|---|---|---|---|---|---|")
    with torch.inference_mode():
        for length in args.lengths:
            print("\n".join(bench_prefill(module, config, kernel_sets, length, args, device)), flush=True)
        for batch in args.batches:
            print("\n".join(bench_decode(module, config, kernel_sets, batch, args, device)), flush=True)


if __name__ == "__main__":
    main()

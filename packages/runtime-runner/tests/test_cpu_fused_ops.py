"""The runner's fused CPU ops give what their torch forms give (the forms transformers' Llama code
writes): bit for bit in bf16, whose rounding they reproduce step by step, and to the last bit or
two in fp16 and fp32, where only the order of the norm's sum of squares (and SiLU's exp) differs.
They take rows of strided views as the decoder hands them, and refuse shapes they cannot index."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from runtime_runner.kernels import cpu_fused_ops
from runtime_runner.models.mlp_activation import silu_and_mul
from runtime_runner.models.norm import add_rms_norm, rms_norm
from runtime_runner.models.rope import apply_rope

DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def _rms_norm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm, op for op."""
    hidden = x.to(torch.float32)
    hidden = hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + eps)
    return weight * hidden.to(x.dtype)


def _assert_matches(got: torch.Tensor, want: torch.Tensor, *, exact: bool) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    if exact:
        assert torch.equal(got, want), f"{int((got != want).sum())} of {got.numel()} elements differ"
    else:  # a last-bit difference in a few elements, from the order of the fp32 sum
        torch.testing.assert_close(got, want, rtol=2e-6 if got.dtype == torch.float32 else 2e-3, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_rms_norm_equals_the_residual_add_and_transformers_norm(dtype: torch.dtype) -> None:
    """Reverse-verified: dropping the rounding of the normalized row before the weight multiply
    (held<T> in cpu_fused_ops.cpp) makes about a quarter of the bf16 elements differ."""
    gen = _gen()
    x = (torch.randn(300, 576, generator=gen) * 3).to(dtype)
    delta = torch.randn(300, 576, generator=gen).to(dtype)
    weight = (torch.rand(576, generator=gen) + 0.5).to(dtype)
    assert cpu_fused_ops.handles(x, delta, weight)
    summed, normed = add_rms_norm(x, delta, weight, 1e-5)
    assert torch.equal(summed, x + delta)
    _assert_matches(normed, _rms_norm_reference(x + delta, weight, 1e-5), exact=dtype == torch.bfloat16)
    _assert_matches(rms_norm(x, weight, 1e-5), _rms_norm_reference(x, weight, 1e-5), exact=dtype == torch.bfloat16)
    wide = torch.randn(3, 20000, generator=gen).to(dtype)  # wider than any hidden size in use: rows are heap-buffered
    _assert_matches(
        rms_norm(wide, torch.ones(20000, dtype=dtype), 1e-5),
        _rms_norm_reference(wide, torch.ones(20000, dtype=dtype), 1e-5),
        exact=dtype == torch.bfloat16,
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_of_per_head_rows_of_a_strided_view(dtype: torch.dtype) -> None:
    """Qwen3's q/k norm: rows of [tokens, heads, head_dim] cut out of the wider qkv projection."""
    gen = _gen()
    qkv = torch.randn(7, 12 * 64, generator=gen).to(dtype)
    q = qkv[:, 2 * 64 : 10 * 64].view(7, 8, 64)
    weight = (torch.rand(64, generator=gen) + 0.5).to(dtype)
    _assert_matches(rms_norm(q, weight, 1e-6), _rms_norm_reference(q, weight, 1e-6), exact=dtype == torch.bfloat16)


@pytest.mark.parametrize("dtype", DTYPES)
def test_silu_and_mul_equals_silu_of_gate_times_up(dtype: torch.dtype) -> None:
    """Gates from -40 to 40 (exp's clamped range) and a row of a wider tensor. Reverse-verified:
    multiplying by the unrounded silu (no held<T>) makes bf16 and fp16 elements differ."""
    gen = _gen()
    gate_up = (torch.randn(33, 2 * 1536, generator=gen) * 8).clamp(-40, 40).to(dtype)
    wide = torch.cat([gate_up, gate_up[:, :16]], dim=1)[:, : 2 * 1536]
    for rows in (gate_up, wide):
        gate, up = rows.chunk(2, -1)
        _assert_matches(silu_and_mul(rows), F.silu(gate) * up, exact=dtype != torch.float32)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rope_rotates_in_place_as_q_cos_plus_rotate_half_q_sin(dtype: torch.dtype) -> None:
    """On q and k heads of the fused qkv rows, in place; v untouched. Reverse-verified: a roll that
    does not wrap (the second half reading itself) fails every dtype."""
    gen = _gen()
    qkv = torch.randn(5, 15 * 64, generator=gen).to(dtype)
    angles = torch.rand(5, 32, generator=gen) * 6
    cos = torch.cat([angles.cos(), angles.cos()], -1).to(dtype)
    signed_sin = torch.cat([-angles.sin(), angles.sin()], -1).to(dtype)
    qk, v_before = qkv[:, : 12 * 64].view(5, 12, 64), qkv[:, 12 * 64 :].clone()
    half_one, half_two = qk[..., :32], qk[..., 32:]
    want = qk * cos[:, None] + torch.cat([-half_two, half_one], -1) * angles.sin().repeat(1, 2).to(dtype)[:, None]
    got = apply_rope(qk, cos, signed_sin)
    assert got.data_ptr() == qk.data_ptr()
    _assert_matches(got, want, exact=True)
    assert torch.equal(qkv[:, 12 * 64 :], v_before)


def test_refuses_what_it_cannot_index() -> None:
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match="a contiguous weight \\[8\\].*a delta shaped like x \\(4, 8\\)"):
        cpu_fused_ops.add_rms_norm(x, torch.randn(4, 7), torch.ones(8), 1e-6)
    with pytest.raises(ValueError, match="unit stride along cols"):
        cpu_fused_ops.add_rms_norm(x.t(), None, torch.ones(4), 1e-6)
    with pytest.raises(ValueError, match="silu_mul takes \\[rows, 2 \\* inter\\]"):
        cpu_fused_ops.silu_mul(torch.randn(4, 7))
    with pytest.raises(ValueError, match="rope_ takes x \\[tokens, heads, head_dim\\] \\(head_dim even\\)"):
        cpu_fused_ops.rope_(torch.randn(2, 3, 8), torch.randn(2, 6), torch.randn(2, 6))


def test_the_public_ops_take_the_cpp_path_on_a_cpu() -> None:
    """norm.py and mlp_activation.py route CPU tensors to the C++ ops (rope's routing shows in its
    in-place result above). In fp32 the C++ results differ from the torch forms in the last bit of
    some elements (the sum's order, the polynomial exp), so equality with the C++ call tells the
    paths apart. Reverse-verified: returning the torch form from silu_and_mul, or from add_rms_norm,
    fails here."""
    gen = _gen()
    x, delta = torch.randn(64, 576, generator=gen), torch.randn(64, 576, generator=gen)
    weight, gate_up = torch.rand(576, generator=gen) + 0.5, torch.randn(64, 2 * 1536, generator=gen) * 4
    assert not torch.equal(cpu_fused_ops.silu_mul(gate_up), F.silu(gate_up[:, :1536]) * gate_up[:, 1536:])
    assert torch.equal(silu_and_mul(gate_up), cpu_fused_ops.silu_mul(gate_up))
    assert not torch.equal(
        cpu_fused_ops.add_rms_norm(x, delta, weight, 1e-6)[1], _rms_norm_reference(x + delta, weight, 1e-6)
    )
    assert torch.equal(add_rms_norm(x, delta, weight, 1e-6)[1], cpu_fused_ops.add_rms_norm(x, delta, weight, 1e-6)[1])
    assert torch.equal(rms_norm(x, weight, 1e-6), cpu_fused_ops.add_rms_norm(x, None, weight, 1e-6)[1])


def test_other_dtypes_and_traced_code_keep_the_torch_forms() -> None:
    """fp64 has no C++ entry; under torch.compile inductor fuses the torch form itself."""
    x = torch.randn(3, 16, dtype=torch.float64)
    assert not cpu_fused_ops.handles(x)
    assert not cpu_fused_ops.handles(x.float(), x)
    torch.testing.assert_close(
        rms_norm(x, torch.ones(16, dtype=torch.float64), 1e-6), x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    )

    @torch.compile(backend="eager", fullgraph=True)
    def traced(t: torch.Tensor) -> torch.Tensor:
        return torch.tensor(cpu_fused_ops.handles(t))

    assert not bool(traced(x.float()))

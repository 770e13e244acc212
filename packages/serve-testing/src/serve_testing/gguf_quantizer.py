"""Float rows quantized into GGUF blocks, laid out byte for byte as ggml lays them out, for test
fixtures: the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, super-blocks of 256 values) and IQ4_NL, which
gguf-py de-quantizes but cannot quantize, and the 32-value types gguf-py quantizes itself.

No search for the best scales (llama.cpp's quantizers do one): each sub-block takes the scale (and
minimum) of its own range, the super-block's fp16 scale covers the largest of them, and every
value rounds to its nearest level, which gives valid blocks with the error a level's width implies.
gguf-py's de-quantization is the independent judge of the layouts (tests/test_gguf_quantizer.py).
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, quants

Q = GGMLQuantizationType
SUPER = 256  # values per K-quant super-block
# The 16 levels of IQ4_NL, as ggml's kvalues_iq4nl: an index per value, times the block's scale.
IQ4_NL_LEVELS = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.float32)


def _fp16(values: np.ndarray) -> np.ndarray:
    """`values` as the fp16 numbers a block stores, back in fp32."""
    return values.astype(np.float16).astype(np.float32)


def _fp16_bytes(values: np.ndarray) -> np.ndarray:
    """fp32 `values` [blocks] as fp16 bytes [blocks, 2]."""
    return values.astype(np.float16).view(np.uint8).reshape(-1, 2)


def _ratio(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    """top / bottom, 0 where bottom is 0 (a zero scale quantizes everything to level 0)."""
    safe = np.where(bottom == 0, 1, bottom)
    return np.where(bottom == 0, 0, top / safe)


def _with_minimum(
    sub: np.ndarray, levels: int, scale_levels: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sub-blocks [blocks, subs, size] as value = d * sc * q - dmin * m (q in 0..levels, sc and m in
    0..scale_levels): answers (d, dmin) [blocks] fp32-of-fp16, (sc, m) [blocks, subs], q."""
    low = np.minimum(sub.min(axis=-1), 0)  # ggml's minimum is never above 0
    scale, offset = (sub.max(axis=-1) - low) / levels, -low
    d = _fp16(scale.max(axis=-1) / scale_levels)
    dmin = _fp16(offset.max(axis=-1) / scale_levels)
    sc = np.clip(np.rint(_ratio(scale, d[:, None])), 0, scale_levels)
    m = np.clip(np.ceil(_ratio(offset, dmin[:, None])), 0, scale_levels)  # up: the offset covers the minimum
    step, shift = d[:, None] * sc, dmin[:, None] * m
    q = np.clip(np.rint(_ratio(sub + shift[..., None], step[..., None])), 0, levels)
    return d, dmin, sc.astype(np.uint8), m.astype(np.uint8), q.astype(np.uint8)


def _symmetric(sub: np.ndarray, lowest: int, scale_levels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sub-blocks [blocks, subs, size] as value = d * sc * q (q in lowest..-lowest - 1, sc in
    -scale_levels..scale_levels), the largest magnitude at q = lowest: answers d [blocks], sc, q (int)."""
    at = np.abs(sub).argmax(axis=-1)[..., None]
    scale = np.take_along_axis(sub, at, axis=-1)[..., 0] / lowest
    d = _fp16(np.abs(scale).max(axis=-1) / scale_levels)
    sc = np.clip(np.rint(_ratio(scale, d[:, None])), -scale_levels, scale_levels)
    step = d[:, None] * sc
    q = np.clip(np.rint(_ratio(sub, step[..., None])), lowest, -lowest - 1)
    return d, sc.astype(np.int32), q.astype(np.int32)


def _bits_at(q: np.ndarray, shift: int, width: int) -> np.ndarray:
    """Bits shift..shift + width - 1 of unsigned q, as uint8."""
    return ((q.astype(np.int32) >> shift) & ((1 << width) - 1)).astype(np.uint8)


def _packed_scales_4k(sc: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Q4_K/Q5_K's 12 bytes of eight 6-bit scales and eight 6-bit minimums: bytes 0..3 hold sc 0..3
    (and the top two bits of sc 4..7), bytes 4..7 m 0..3 (and those of m 4..7), bytes 8..11 the low
    four bits of sc 4..7 and of m 4..7."""
    low, high = slice(0, 4), slice(4, 8)
    first = sc[:, low] | (_bits_at(sc[:, high], 4, 2) << 6)
    second = m[:, low] | (_bits_at(m[:, high], 4, 2) << 6)
    third = _bits_at(sc[:, high], 0, 4) | (_bits_at(m[:, high], 0, 4) << 4)
    return np.concatenate([first, second, third], axis=1)


def _q4_k(blocks: np.ndarray) -> np.ndarray:
    """d, dmin, 12 scale bytes, 128 bytes: byte 32j + l holds value 64j + l (low) and 64j + 32 + l (high)."""
    d, dmin, sc, m, q = _with_minimum(blocks.reshape(-1, 8, 32), 15, 63)
    pairs = q.reshape(-1, 4, 2, 32)
    qs = (pairs[:, :, 0] | (pairs[:, :, 1] << 4)).reshape(-1, 128)
    return np.concatenate([_fp16_bytes(d), _fp16_bytes(dmin), _packed_scales_4k(sc, m), qs], axis=1)


def _q5_k(blocks: np.ndarray) -> np.ndarray:
    """Q4_K's fields with the fifth bits first: bit c of high byte l is that of value 32c + l."""
    d, dmin, sc, m, q = _with_minimum(blocks.reshape(-1, 8, 32), 31, 63)
    fifth = _bits_at(q, 4, 1)  # [blocks, 8 sub-blocks c, 32 l]
    qh = np.bitwise_or.reduce(fifth << np.arange(8, dtype=np.uint8)[None, :, None], axis=1)
    pairs = _bits_at(q, 0, 4).reshape(-1, 4, 2, 32)
    qs = (pairs[:, :, 0] | (pairs[:, :, 1] << 4)).reshape(-1, 128)
    return np.concatenate([_fp16_bytes(d), _fp16_bytes(dmin), _packed_scales_4k(sc, m), qh, qs], axis=1)


def _q6_k(blocks: np.ndarray) -> np.ndarray:
    """128 low-nibble bytes, 64 high-pair bytes, 16 int8 scales, d: value 128h + 32g + l has its low
    nibble in byte 64h + 32(g % 2) + l (the high nibble when g >= 2), its top two bits at 2g of byte
    32h + l, its scale in sub-block 8h + 2g + l / 16 (every 16 values)."""
    d, sc, q = _symmetric(blocks.reshape(-1, 16, 16), -32, 127)
    u = (q + 32).reshape(-1, 2, 4, 32)  # [blocks, h, g, l]
    low, top = _bits_at(u, 0, 4), _bits_at(u, 4, 2)
    ql = np.concatenate([low[:, :, 0] | (low[:, :, 2] << 4), low[:, :, 1] | (low[:, :, 3] << 4)], axis=2)
    qh = top[:, :, 0] | (top[:, :, 1] << 2) | (top[:, :, 2] << 4) | (top[:, :, 3] << 6)
    scales = sc.astype(np.int8).view(np.uint8)
    return np.concatenate([ql.reshape(-1, 128), qh.reshape(-1, 64), scales, _fp16_bytes(d)], axis=1)


def _two_bit_planes(u: np.ndarray) -> np.ndarray:
    """Q2_K/Q3_K's 64 bytes of 2-bit values: value 128h + 32g + l at bits 2g of byte 32h + l."""
    crumbs = _bits_at(u, 0, 2).reshape(-1, 2, 4, 32)
    shifted = crumbs << (2 * np.arange(4, dtype=np.uint8))[None, None, :, None]
    planes: np.ndarray = np.bitwise_or.reduce(shifted, axis=2)
    return planes.reshape(-1, 64)


def _q2_k(blocks: np.ndarray) -> np.ndarray:
    """16 scale bytes (a 4-bit scale low, a 4-bit minimum high, per 16 values), 64 bytes of 2-bit
    values, d, dmin."""
    d, dmin, sc, m, q = _with_minimum(blocks.reshape(-1, 16, 16), 3, 15)
    return np.concatenate([sc | (m << 4), _two_bit_planes(q), _fp16_bytes(d), _fp16_bytes(dmin)], axis=1)


def _q3_k(blocks: np.ndarray) -> np.ndarray:
    """32 bytes of third bits (bit c of byte l: value 32c + l), 64 bytes of 2-bit values, 12 bytes of
    sixteen 6-bit scales stored + 32 (low nibbles in bytes 0..7: scale i low, i + 8 high; top two
    bits of scale i at 2(i / 4) of byte 8 + i % 4), d. A value is its three bits - 4."""
    d, sc, q = _symmetric(blocks.reshape(-1, 16, 16), -4, 31)
    u = (q + 4).reshape(-1, 8, 32)  # [blocks, c, l]
    third = _bits_at(u, 2, 1)
    hmask = np.bitwise_or.reduce(third << np.arange(8, dtype=np.uint8)[None, :, None], axis=1)
    stored = (sc + 32).astype(np.uint8)
    nibbles = _bits_at(stored[:, :8], 0, 4) | (_bits_at(stored[:, 8:], 0, 4) << 4)
    tops = _bits_at(stored, 4, 2).reshape(-1, 4, 4)  # [blocks, i / 4, i % 4]
    high = tops[:, 0] | (tops[:, 1] << 2) | (tops[:, 2] << 4) | (tops[:, 3] << 6)
    return np.concatenate([hmask, _two_bit_planes(u), nibbles, high, _fp16_bytes(d)], axis=1)


def _iq4_nl(blocks: np.ndarray) -> np.ndarray:
    """d, 16 bytes of level indices (byte l: value l low, value l + 16 high); the largest magnitude
    at level -127."""
    at = np.abs(blocks).argmax(axis=-1)[:, None]
    d = _fp16(np.take_along_axis(blocks, at, axis=-1)[:, 0] / -127)
    scaled = _ratio(blocks, d[:, None])
    index = np.abs(scaled[..., None] - IQ4_NL_LEVELS).argmin(axis=-1).astype(np.uint8)
    return np.concatenate([_fp16_bytes(d), index[:, :16] | (index[:, 16:] << 4)], axis=1)


_PACKERS = MappingProxyType(
    {Q.Q4_K: _q4_k, Q.Q5_K: _q5_k, Q.Q6_K: _q6_k, Q.Q2_K: _q2_k, Q.Q3_K: _q3_k, Q.IQ4_NL: _iq4_nl}
)
# Quantized by gguf-py itself (its quantizers are ggml's reference ones for these types).
_BY_GGUF = (Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1)
QUANTIZED_TYPES = (*_BY_GGUF, *_PACKERS)


def quantize_rows(values: np.ndarray, kind: GGMLQuantizationType) -> np.ndarray:
    """`values` [..., K] (fp32, finite) as `kind`'s blocks, uint8 [..., K / block * block bytes];
    ValueError for a type not quantized here or a row not of whole blocks."""
    if kind not in QUANTIZED_TYPES:
        raise ValueError(f"{kind.name} is not quantized here; accepted: {', '.join(t.name for t in QUANTIZED_TYPES)}")
    block, block_bytes = GGML_QUANT_SIZES[kind]
    if values.shape[-1] % block:
        raise ValueError(f"{kind.name} quantizes rows of whole {block}-value blocks; a row here is {values.shape[-1]}")
    if kind in _BY_GGUF:
        return np.asarray(quants.quantize(values.astype(np.float32), kind))
    blocks = values.astype(np.float32).reshape(-1, block)
    packed = _PACKERS[kind](blocks)
    assert packed.shape[1] == block_bytes, (kind.name, packed.shape)
    return np.ascontiguousarray(packed).reshape(*values.shape[:-1], values.shape[-1] // block * block_bytes)

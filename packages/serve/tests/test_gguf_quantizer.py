"""serve_testing.gguf_quantizer writes ggml's block layouts: gguf-py's own de-quantization (written
apart from it, from ggml's) reads its blocks back to the input within the error each type's levels
imply, so a field in the wrong place, a nibble on the wrong side or a scale bit lost shows as an
error of the value's own size."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, quants

from serve_testing.gguf_quantizer import QUANTIZED_TYPES, quantize_rows

# Type -> (bound on a row's RMS error over its RMS, bound on a value's error over its block's largest
# magnitude): a level's width is the block's range over the levels (3 for Q2_K, 7 for Q3_K, 15 for
# 4 bits, 31 for 5, 63 for 6, about 240 / 15 for IQ4_NL's uneven ones), a value is at most half of
# one away, a few of the sub-block scales round (or clip) by a little more.
BOUNDS = {
    "Q2_K": (0.40, 0.40),
    "Q3_K": (0.20, 0.25),
    "Q4_K": (0.10, 0.08),
    "Q5_K": (0.05, 0.04),
    "Q6_K": (0.025, 0.03),
    "IQ4_NL": (0.10, 0.12),
    "Q5_0": (0.055, 0.07),
    "Q5_1": (0.05, 0.04),
}


def _rows(rows: int, length: int, seed: int) -> np.ndarray:
    """Gaussian rows whose every 16 values have their own magnitude (1/20 to 1 of the row's), so the
    sub-block scales span their whole range; one block of zeros, one row all positive."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal((rows, length)) * rng.uniform(0.01, 3, (rows, 1))
    values *= np.repeat(rng.uniform(0.05, 1, (rows, length // 16)), 16, axis=1)
    values[1, :256] = 0
    values[2] = np.abs(values[2]) + 0.5
    return values.astype(np.float32)


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_gguf_reads_the_blocks_back_within_the_types_error(name: str) -> None:
    """Reverse-verified by hand: moving Q4_K's scale bits of sub-blocks 4..7 one place, swapping
    Q6_K's nibble halves, and dropping Q3_K's third bit each made their cases fail by an error of
    the values' own size (RMS ratios 0.2 to 1.6)."""
    kind = GGMLQuantizationType[name]
    values = _rows(6, 512, seed=len(name))
    blocks = quantize_rows(values, kind)
    block, block_bytes = GGML_QUANT_SIZES[kind]
    assert blocks.dtype == np.uint8 and blocks.shape == (6, 512 // block * block_bytes)
    back = np.asarray(quants.dequantize(blocks, kind)).reshape(values.shape)
    error = back - values
    rms_bound, value_bound = BOUNDS[name]
    rms = np.sqrt((error**2).mean(axis=1) / (values**2).mean(axis=1).clip(1e-30))
    assert float(np.delete(rms, 1).max()) <= rms_bound, f"{name}: RMS error ratio {rms}"
    assert bool((back[1, :256] == 0).all()), f"{name}: a block of zeros reads back as zeros"
    per_block = np.abs(error).reshape(-1, block).max(axis=1)
    largest = np.abs(values).reshape(-1, block).max(axis=1)
    assert bool((per_block <= value_bound * largest).all()), (
        f"{name}: worst value error {float((per_block / largest.clip(1e-30)).max()):.3f} of its block's largest"
    )


def test_every_fixture_type_is_quantized_and_others_are_refused() -> None:
    assert {t.name for t in QUANTIZED_TYPES} == {*BOUNDS, "Q8_0", "Q4_0", "Q4_1"}
    with pytest.raises(ValueError, match="IQ2_XS is not quantized here; accepted: Q8_0"):
        quantize_rows(np.zeros((1, 256), np.float32), GGMLQuantizationType.IQ2_XS)
    with pytest.raises(ValueError, match="Q4_K quantizes rows of whole 256-value blocks; a row here is 288"):
        quantize_rows(np.zeros((1, 288), np.float32), GGMLQuantizationType.Q4_K)

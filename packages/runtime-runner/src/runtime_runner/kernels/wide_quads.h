// weight_quads.h's quads for all 16 rows of a panel in one 512-bit register (the avx512 tier):
// rows 0..7 in its low half and rows 8..15 in its high half, the same bytes the two 256-bit quads
// hold. A plane's chunk keeps rows 0..7 then rows 8..15 in 64 consecutive bytes, so one load, a
// shift and a mask give every row's four values.

#pragma once

#include "quantized_blocks.h"
#include "weight_quads.h"

#if QL_VNNI

namespace quantized {

inline __m512i and_bytes512(__m512i v, int mask) {
    return _mm512_and_si512(v, _mm512_set1_epi8(static_cast<char>(mask)));
}

// plane_quads for both halves at once.
template <int BITS, int TO>
inline __m512i wide_plane_quads(const uint8_t* plane, int first, int j) {
    constexpr int kPerChunk = 32 / BITS;
    __m512i v = _mm512_loadu_si512(plane + 64 * (j / kPerChunk));
    if constexpr (BITS == 8) return v;
    if (first != 0) v = _mm512_srl_epi16(v, _mm_cvtsi32_si128(first * BITS));
    const int shift = j % kPerChunk / 4 * BITS;
    const __m512i moved = shift >= TO ? _mm512_srli_epi16(v, shift - TO) : _mm512_slli_epi16(v, TO - shift);
    return and_bytes512(moved, ((1 << BITS) - 1) << TO);
}

// quads<KIND> for rows 0..15 in one register.
template <int64_t KIND>
inline __m512i wide_quads(const uint8_t* low, const uint8_t* high, int high_first, int j) {
    constexpr Format f = format_of(KIND);
    __m512i rows = wide_plane_quads<f.low_bits, 0>(low, 0, j);
    if constexpr (f.high_bits != 0) {
        const int first = KIND == kQ3K ? high_first : 0;
        rows = _mm512_or_si512(rows, wide_plane_quads<f.high_bits, f.low_bits>(high, first, j));
    }
    if constexpr (KIND == kIq4Nl) {
        const __m512i levels =
            _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4NlLevels)));
        rows = _mm512_shuffle_epi8(levels, rows);
    }
    return rows;
}

// lo | hi << 256: a run's 16 scales (or minimums) as one vector.
inline __m512 joined(__m256 lo, __m256 hi) { return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1); }

}  // namespace quantized

#endif

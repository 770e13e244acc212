// A GGUF panel's integer weights as quads for int8 dot products (quantized_linear.cpp's integer
// path): four consecutive values of one row in four bytes, eight rows to a 256-bit register, the
// shape _mm256_maddubs_epi16 then _mm256_madd_epi16 sum into one int32 per row.
//
// The integer of a value is its q as THE LAYOUT stores it (quantized_blocks.h): low | high << low
// bits, unsigned; for q8_0 its signed byte, for iq4_nl its signed level. The kind's constant offset
// (q4_0's 8, q6_k's 32, ...) and the scales are applied per run by the caller, in integers and then
// once in fp32, so the int32 sums are exact.

#pragma once

#include "quantized_blocks.h"

#if QL_AVX2

namespace quantized {

inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i and_bytes(__m256i v, int mask) { return _mm256_and_si256(v, _mm256_set1_epi8(static_cast<char>(mask))); }

// One plane's BITS-bit parts of values j..j+3 (j a multiple of 4) of the run whose first unit is at
// `plane`, each at bit 0 of its byte, 16 rows per 128-bit lane: `lo` holds values j (low lane) and
// j + 2 (high lane), `hi` values j + 1 and j + 3.
template <int BITS>
inline void plane_pairs(const uint8_t* plane, int j, __m256i& lo, __m256i& hi) {
    if constexpr (BITS == 8) {  // a unit per value
        const __m256i first = load256(plane + kPanel * j), second = load256(plane + kPanel * (j + 2));
        lo = _mm256_permute2x128_si256(first, second, 0x20);
        hi = _mm256_permute2x128_si256(first, second, 0x31);
    } else if constexpr (BITS == 4) {  // a unit per two values: j and j + 1, then j + 2 and j + 3
        const __m256i both = load256(plane + kPanel * (j / 2));
        lo = and_bytes(both, 15);
        hi = and_bytes(_mm256_srli_epi16(both, 4), 15);
    } else {  // one unit holds all four: value v's bits at (v % (8 / BITS)) * BITS
        const __m256i unit =
            _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(plane + kPanel * (j * BITS / 8))));
        const int s = j % (8 / BITS) * BITS;
        // Shifting whole dwords drags the next byte's bits into the top of each; the mask drops them.
        lo = and_bytes(_mm256_srlv_epi32(unit, _mm256_setr_epi32(s, s, s, s, s + 2 * BITS, s + 2 * BITS, s + 2 * BITS,
                                                                 s + 2 * BITS)),
                       (1 << BITS) - 1);
        hi = and_bytes(_mm256_srlv_epi32(unit, _mm256_setr_epi32(s + BITS, s + BITS, s + BITS, s + BITS, s + 3 * BITS,
                                                                 s + 3 * BITS, s + 3 * BITS, s + 3 * BITS)),
                       (1 << BITS) - 1);
    }
}

// Rows 0..7 (`rows0`) and 8..15 (`rows8`) of the integer weights at values j..j+3 of the current
// run (the Decoder's `low` and `high`), each row's four in one dword, in value order.
template <int64_t KIND>
inline void quads(const uint8_t* low, const uint8_t* high, int j, __m256i& rows0, __m256i& rows8) {
    constexpr Format f = format_of(KIND);
    __m256i lo, hi;
    plane_pairs<f.low_bits>(low, j, lo, hi);
    if constexpr (f.high_bits != 0) {
        __m256i top_lo, top_hi;
        plane_pairs<f.high_bits>(high, j, top_lo, top_hi);
        // At most two bits moved up by at most four: they stay inside their byte.
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(top_lo, f.low_bits));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(top_hi, f.low_bits));
    }
    if constexpr (KIND == kIq4Nl) {
        const __m256i levels =
            _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4NlLevels)));
        lo = _mm256_shuffle_epi8(levels, lo);
        hi = _mm256_shuffle_epi8(levels, hi);
    }
    // Per lane, rows 0..7 as pairs (j, j + 1) in the low lane and (j + 2, j + 3) in the high one;
    // the 64-bit permute puts rows 0..3's two pairs in one lane, the byte shuffle each row's four together.
    const __m256i order = _mm256_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15, 0, 1, 8, 9, 2, 3, 10,
                                           11, 4, 5, 12, 13, 6, 7, 14, 15);
    rows0 = _mm256_shuffle_epi8(_mm256_permute4x64_epi64(_mm256_unpacklo_epi8(lo, hi), 0xD8), order);
    rows8 = _mm256_shuffle_epi8(_mm256_permute4x64_epi64(_mm256_unpackhi_epi8(lo, hi), 0xD8), order);
}

// Whether a kind's integers are signed (multiplied as |w| times x with w's sign).
constexpr bool signed_quads(int64_t kind) { return kind == kQ8_0 || kind == kIq4Nl; }

// Quads a 16-bit lane of maddubs may sum before it is widened: each product pair is at most
// 2 * 127 * |w|, and the sum must stay within int16 (so no saturation ever rounds it).
constexpr int quads_per_widen(int64_t kind) {
    const Format f = format_of(kind);
    const int largest = signed_quads(kind) ? 128 : (1 << (f.low_bits + f.high_bits)) - 1;
    return 32767 / (2 * 127 * largest);
}

// The constant subtracted from q (w = d * (q - offset)), applied to the int32 sums exactly.
constexpr int integer_offset(int64_t kind) {
    switch (kind) {
        case kQ4_0: return 8;
        case kQ5_0: return 16;
        case kQ3K: return 4;
        case kQ6K: return 32;
        default: return 0;
    }
}

// Whether a kind adds a per-run minimum (w = d * q + m: q4_1, q5_1, q2_k, q4_k, q5_k).
constexpr bool adds_minimum(int64_t kind) {
    return kind == kQ4_1 || kind == kQ5_1 || kind == kQ2K || kind == kQ4K || kind == kQ5K;
}

}  // namespace quantized

#endif

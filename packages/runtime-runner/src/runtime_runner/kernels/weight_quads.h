// A GGUF panel's integer weights as quads for int8 dot products (the integer rule of
// integer_linear.h): four consecutive values of one row in four bytes, eight rows to a 256-bit
// register, the shape _mm256_maddubs_epi16 then _mm256_madd_epi16 sum into one int32 per row. A
// matrix packed for that rule keeps its planes in this shape (THE LAYOUT in quads), so a load, a
// shift and a mask give a plane's quads.
//
// The integer of a value is its q: low | high << low bits, unsigned; for q8_0 its signed byte, for
// iq4_nl its signed level. The kind's constant offset (q4_0's 8, q6_k's 32, ...) and the scales are
// applied per run by the caller, in integers and then once in fp32, so the int32 sums are exact.

#pragma once

#include "quantized_blocks.h"

#if QL_AVX2

namespace quantized {

inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i and_bytes(__m256i v, int mask) { return _mm256_and_si256(v, _mm256_set1_epi8(static_cast<char>(mask))); }

// One plane's BITS-bit parts of values j..j+3 (j a multiple of 4) of the current run, for rows
// 0..7 (half 0) or 8..15 (half 1), each at bit TO of its byte, a row's four in one dword. `plane`
// is the chunk that holds the run's first value, at field `first` of it (0 but where a run starts
// inside a chunk: q3_k's one-bit plane, runs of 16 in chunks of 32 values).
template <int BITS, int TO>
inline __m256i plane_quads(const uint8_t* plane, int first, int j, int half) {
    constexpr int kPerChunk = 32 / BITS;  // values per chunk
    __m256i v = load256(plane + 64 * (j / kPerChunk) + 32 * half);
    if constexpr (BITS == 8) return v;
    if (first != 0) v = _mm256_srl_epi16(v, _mm_cvtsi32_si128(first * BITS));
    const int shift = j % kPerChunk / 4 * BITS;  // where the values' bits are in their bytes
    // Shifting 16-bit lanes drags bits across bytes, but never into bit TO..TO+BITS: the mask keeps those.
    const __m256i moved = shift >= TO ? _mm256_srli_epi16(v, shift - TO) : _mm256_slli_epi16(v, TO - shift);
    return and_bytes(moved, ((1 << BITS) - 1) << TO);
}

// Rows 0..7 (`rows0`) and 8..15 (`rows8`) of the integer weights at values j..j+3 of the current
// run, each row's four in one dword, in value order: the run's chunks in the low and high planes
// (THE LAYOUT in quads, quantized_blocks.h), the high plane's at field `high_first`.
template <int64_t KIND>
inline void quads(const uint8_t* low, const uint8_t* high, int high_first, int j, __m256i& rows0, __m256i& rows8) {
    constexpr Format f = format_of(KIND);
    rows0 = plane_quads<f.low_bits, 0>(low, 0, j, 0);
    rows8 = plane_quads<f.low_bits, 0>(low, 0, j, 1);
    if constexpr (f.high_bits != 0) {
        const int first = KIND == kQ3K ? high_first : 0;  // known 0 at compile time for the others
        rows0 = _mm256_or_si256(rows0, plane_quads<f.high_bits, f.low_bits>(high, first, j, 0));
        rows8 = _mm256_or_si256(rows8, plane_quads<f.high_bits, f.low_bits>(high, first, j, 1));
    }
    if constexpr (KIND == kIq4Nl) {
        const __m256i levels =
            _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4NlLevels)));
        rows0 = _mm256_shuffle_epi8(levels, rows0);
        rows8 = _mm256_shuffle_epi8(levels, rows8);
    }
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

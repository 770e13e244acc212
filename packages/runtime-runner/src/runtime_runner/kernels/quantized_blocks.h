// The weight formats quantized_linear.cpp reads, and each one's de-quantization: GGUF's block types
// (ggml's layouts, read from ggml-common.h) and int8 with one fp32 scale per row.
//
// THE VALUES (every path de-quantizes exactly so): w is what gguf-py's numpy de-quantization gives,
// bit for bit, signed zeros included. Every product below is exact in fp32 (an fp16 scale times
// integers of at most 13 bits together), so the only rounding is the one subtraction or addition
// of the kinds with a minimum, which an fma rounds once as numpy's separate ops do:
//   q8_0  d * q                  q4_0  d * (q - 8)            q5_0  d * (q - 16)
//   q4_1  fma(d, q, m)           q5_1  fma(d, q, m)           iq4_nl  d * level[q]
//   q2_k  fma(d * sc, q, -(dmin * mn))   (sc, mn: 4 bits per 16 values; q: 2 bits)
//   q3_k  (d * (sc - 32)) * (q - 4)       (sc: 6 bits per 16 values; q: 3 bits)
//   q4_k  fma(d * sc, q, -(dmin * mn))   (sc, mn: 6 bits per 32 values; q: 4 bits)
//   q5_k  the same, q of 5 bits
//   q6_k  (d * sc) * (q - 32)            (sc: int8 per 16 values; q: 6 bits)
//   int8  q * s                          (rounded once)
//
// THE LAYOUT (packed once in Python, quantized_linear.pack_panels): rows are grouped into panels
// of 16 (N padded with zero rows); a GGUF panel is its blocks in k order, each block the same
// number of bytes as the 16 rows' blocks in the file, as FIELDS of 16-row units (unit u of the
// block at byte 16 u; an fp16 field is two units, the 16 rows' numbers side by side):
//   d (fp16) | m or dmin (fp16, the kinds with a minimum) | the sub-block scale bytes (the
//   K-quants, as ggml packs them) | the low plane | the high plane (q5_*, q3_k, q6_k)
// where a plane holds one part of every value IN VALUE ORDER: b bits of value v in unit
// v * b / 8, at bit (v % (8 / b)) * b (ggml interleaves values 16, 32, 64 or 128 apart in a
// byte; here consecutive values share one, so one load serves 2, 4 or 8 of them and every shift
// is known when the kernel is compiled). A value's q is low | high << (the low plane's bits).
// A matrix packed for the integer rule (Matrix::activations == kInt8Activations) keeps its planes
// IN QUADS instead, the shape its int8 dot products take (weight_quads.h): a plane of b bits is
// chunks of 64 bytes, each holding 4 * 8 / b values of the 16 rows; in a chunk, byte 4 c + t holds
// row c's values 4 f + t (t < 4) at bits f * b. So one 32-byte load is rows 0..7 (or 8..15), and
// a shift and a mask give four consecutive values of each row, one row per dword.
// An int8 panel is [K][16 rows] int8, its scales fp32 [16 * panels].

#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define QL_AVX2 1
#else
#define QL_AVX2 0
#endif
// The instruction tiers above AVX2 (native_build.cpu_tiers), as the build's flags allow them: the
// integer rule's products in 512-bit vpdpbusd (avx512), and its many-rows products on AMX-INT8
// tiles (amx). A build for a lower tier on a higher CPU leaves them out.
#if QL_AVX2 && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__)
#define QL_VNNI 1
#else
#define QL_VNNI 0
#endif
#if QL_VNNI && defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__linux__)
#define QL_AMX 1
#else
#define QL_AMX 0
#endif

namespace quantized {

constexpr int64_t kPanel = 16;  // rows of W (output columns) per panel

// The codes quantized_linear.py's _KIND_CODE gives each kind.
enum Kind : int64_t {
    kQ8_0 = 0, kQ4_0 = 1, kQ4_1 = 2, kInt8 = 3, kQ5_0 = 4, kQ5_1 = 5, kIq4Nl = 6,
    kQ2K = 7, kQ3K = 8, kQ4K = 9, kQ5K = 10, kQ6K = 11,
};

// The descriptor the Python object keeps alive (quantized_linear.py's Matrix, field for field).
struct Matrix {
    int64_t kind;
    int64_t n, k;          // out_features, in_features
    int64_t panels;        // ceil(n / 16)
    const uint8_t* data;   // the packed panels
    const float* scales;   // int8: fp32 [16 * panels]; otherwise null
    const float* bias;     // fp32 [16 * panels] or null
    int64_t activations;   // kFloat32Activations or kInt8Activations (quantized_linear.cpp's rule, integer_linear.h's)
};

// How a linear reads x: in fp32 (THE RULE of quantized_linear.cpp, bitwise the de-quantized
// matrix's fp32 linear) or quantized to int8 blocks (its integer rule; GGUF kinds, AVX2).
enum Activations : int64_t { kFloat32Activations = 0, kInt8Activations = 1 };

// A kind's block in THE LAYOUT: values per block, per run of one sub-block scale, fp16 fields,
// scale bytes, and the bits of each value in the low and high planes (int8: 32 k of 8 bits).
struct Format {
    int64_t values, run, halves, scale_bytes, low_bits, high_bits;
    constexpr int64_t low_at() const { return 2 * halves + scale_bytes; }  // in 16-row units
    constexpr int64_t high_at() const { return low_at() + values * low_bits / 8; }
    constexpr int64_t bytes() const { return high_at() + values * high_bits / 8; }  // one row's block
};
constexpr Format format_of(int64_t kind) {
    switch (kind) {
        case kQ8_0: return {32, 32, 1, 0, 8, 0};
        case kQ4_0: return {32, 32, 1, 0, 4, 0};
        case kQ4_1: return {32, 32, 2, 0, 4, 0};
        case kQ5_0: return {32, 32, 1, 0, 4, 1};
        case kQ5_1: return {32, 32, 2, 0, 4, 1};
        case kIq4Nl: return {32, 32, 1, 0, 4, 0};
        case kQ2K: return {256, 16, 2, 16, 2, 0};
        case kQ3K: return {256, 16, 1, 12, 2, 1};
        case kQ4K: return {256, 32, 2, 12, 4, 0};
        case kQ5K: return {256, 32, 2, 12, 4, 1};
        case kQ6K: return {256, 16, 1, 16, 4, 2};
        default: return {32, 32, 0, 0, 8, 0};  // int8
    }
}
// Bytes of one block of a panel (16 rows' blocks side by side; int8: 32 k of its [K][16]).
template <int64_t KIND> constexpr int64_t kPanelBlock = kPanel * format_of(KIND).bytes();

inline int64_t panel_bytes(const Matrix& m) {
    const Format f = format_of(m.kind);
    return m.kind == kInt8 ? m.k * kPanel : m.k / f.values * kPanel * f.bytes();
}

inline float half(const uint8_t* p) {
    _Float16 h;
    std::memcpy(&h, p, sizeof h);
    return static_cast<float>(h);
}

// IQ4_NL's 16 levels (ggml's kvalues_iq4nl), indexed by a 4-bit q.
alignas(16) constexpr int8_t kIq4NlLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                 1,    13,   25,  38,  53,  69,  89,  113};

// Q4_K/Q5_K's 6-bit scale (which 0) or minimum (which 1) of sub-block s (0..7), from their 12
// scale bytes (byte i: b(i)): the first four in the low 6 bits of bytes 0..3 (minimums: 4..7), the
// last four in the nibbles of bytes 8..11 with their top two bits in the top bits of bytes 0..7.
template <typename Byte>
inline int scale_min_4k(Byte b, int s, int which) {
    if (s < 4) return b(s + 4 * which) & 63;
    const int nibble = which == 0 ? b(s + 4) & 15 : b(s + 4) >> 4;
    return nibble | ((b(s - 4 + 4 * which) >> 6) << 4);
}

// Q3_K's 6-bit scale of sub-block s (0..15) stored + 32, from its 12 bytes: the low four bits in
// bytes 0..7 (sub-block s low nibble, s + 8 high), the top two at 2 (s / 4) of byte 8 + s % 4.
template <typename Byte>
inline int scale_3k(Byte b, int s) {
    const int low = s < 8 ? b(s) & 15 : b(s - 8) >> 4;
    return low | (((b(8 + s % 4) >> (2 * (s / 4))) & 3) << 4);
}

// The de-quantized value of row c (0..15) at k of panel p (THE VALUES' w), one at a time: the
// reference every faster path must equal, the portable path's, and the embedding rows' source.
inline float weight_at(const Matrix& m, int64_t p, int c, int64_t k) {
    const uint8_t* panel = m.data + p * panel_bytes(m);
    if (m.kind == kInt8) return static_cast<float>(static_cast<int8_t>(panel[k * kPanel + c])) * m.scales[p * kPanel + c];
    const Format f = format_of(m.kind);
    const uint8_t* block = panel + k / f.values * kPanel * f.bytes();
    const int v = static_cast<int>(k % f.values);
    auto unit = [&](int64_t at) -> int { return block[kPanel * at + c]; };  // row c's byte of unit `at`
    auto plane = [&](int64_t at, int64_t bits) {  // value v's bits in the plane at unit `at`
        if (m.activations == kInt8Activations) {      // in quads: chunk, then row c's byte t, field f
            const int64_t per_chunk = 32 / bits, f = v % per_chunk / 4;
            return (block[kPanel * at + 64 * (v / per_chunk) + 4 * c + v % 4] >> (f * bits)) & ((1 << bits) - 1);
        }
        return (unit(at + v * bits / 8) >> (v % (8 / bits) * bits)) & ((1 << bits) - 1);
    };
    const float d = half(block + 2 * c), second = f.halves == 2 ? half(block + 2 * kPanel + 2 * c) : 0.0f;
    const int q = plane(f.low_at(), f.low_bits) | (f.high_bits ? plane(f.high_at(), f.high_bits) << f.low_bits : 0);
    auto scale = [&](int at) { return unit(2 * f.halves + at); };  // scale byte `at`
    const int r = v / static_cast<int>(f.run);
    switch (m.kind) {
        case kQ8_0: return d * static_cast<float>(static_cast<int8_t>(q));
        case kQ4_0: return d * static_cast<float>(q - 8);
        case kQ5_0: return d * static_cast<float>(q - 16);
        case kQ4_1:
        case kQ5_1: return std::fma(d, static_cast<float>(q), second);
        case kIq4Nl: return d * static_cast<float>(kIq4NlLevels[q]);
        case kQ2K:
            return std::fma(d * static_cast<float>(scale(r) & 15), static_cast<float>(q),
                            -(second * static_cast<float>(scale(r) >> 4)));
        case kQ3K: return (d * static_cast<float>(scale_3k(scale, r) - 32)) * static_cast<float>(q - 4);
        case kQ4K:
        case kQ5K:
            return std::fma(d * static_cast<float>(scale_min_4k(scale, r, 0)), static_cast<float>(q),
                            -(second * static_cast<float>(scale_min_4k(scale, r, 1))));
        default: return (d * static_cast<float>(static_cast<int8_t>(scale(r)))) * static_cast<float>(q - 32);  // q6_k
    }
}

#if QL_AVX2

// One kind's de-quantization of a panel, in registers: per block, `start` reads its fp16 fields;
// per run of values sharing a sub-block scale, `run` reads that run's scale d and offset m; then
// `weights` gives the 16 weights at value j of the run as w = fma(d, q, m) (or d * q), columns
// 0..7 in lo and 8..15 in hi: THE VALUES' w. A constant offset of q (q4_0's -8, q6_k's -32, ...)
// is folded into m = -8 d, -32 d, ...: d * q and m are exact, so the fma is d * (q - 8) exactly,
// only its zeros all +0, which no chain can tell from -0 (an fma chain from +0 never holds -0;
// the embedding rows take weight_at's signed zeros). The fused kernels and the scratch
// de-quantizer both use these, so the two paths multiply by the same values.
inline __m256 halves(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m128i eight(const uint8_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }
inline __m128i sixteen(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m256i and32(__m256i v, int mask) { return _mm256_and_si256(v, _mm256_set1_epi32(mask)); }
inline __m128i and8(__m128i v, int mask) { return _mm_and_si128(v, _mm_set1_epi8(static_cast<char>(mask))); }
inline __m256 negated(__m256 v) { return _mm256_xor_ps(v, _mm256_set1_ps(-0.0f)); }  // -v, zeros too
inline __m256 times(__m256 d, float by) { return _mm256_mul_ps(d, _mm256_set1_ps(by)); }
inline __m256 widened(__m128i bytes) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)); }

// Value j's BITS bits from a plane (its run's first unit at `plane`), 8 rows from `rows`, moved
// to bit TO: a plane's unit holds 8 / BITS consecutive values, so j fixes the unit and the shift.
template <int BITS, int TO>
inline __m256i plane_bits(const uint8_t* plane, int j, int rows) {
    const __m256i v = _mm256_cvtepu8_epi32(eight(plane + kPanel * (j * BITS / 8) + rows));
    const int shift = j % (8 / BITS) * BITS;  // where value j's bits are in its byte
    const __m256i moved = shift >= TO ? _mm256_srli_epi32(v, shift - TO) : _mm256_slli_epi32(v, TO - shift);
    // Nothing to clear where the bits were the byte's top ones and went to bit 0 (the rest shifted out).
    return TO == 0 && shift + BITS == 8 ? moved : and32(moved, ((1 << BITS) - 1) << TO);
}

// A kind's q from its planes (value j of the run whose first value is at units `low`, `high`).
template <int64_t KIND>
inline __m256i q_at(const uint8_t* low, const uint8_t* high, int j, int rows) {
    constexpr Format f = format_of(KIND);
    if constexpr (f.low_bits == 8) return _mm256_cvtepi8_epi32(eight(low + kPanel * j + rows));  // q8_0's, int8's int8
    const __m256i q = plane_bits<f.low_bits, 0>(low, j, rows);
    if constexpr (f.high_bits == 0) return q;
    return _mm256_or_si256(q, plane_bits<f.high_bits, f.low_bits>(high, j, rows));
}

// The scale d and the offset m added of the current run, for columns 0..7 (lo) and 8..15 (hi).
struct Scales {
    __m256 d_lo, d_hi, m_lo, m_hi;
};

// Q3_K/Q4_K/Q5_K's 6-bit scales of run r, for the 16 rows at once (scale_3k, scale_min_4k in bytes).
template <typename Byte>
inline __m128i scales_3k(Byte b, int r) {
    const __m128i low = r < 8 ? and8(b(r), 15) : and8(_mm_srli_epi16(b(r - 8), 4), 15);
    const __m128i top = and8(_mm_srl_epi16(b(8 + r % 4), _mm_cvtsi32_si128(2 * (r / 4))), 3);
    return _mm_or_si128(low, _mm_slli_epi16(top, 4));
}
template <typename Byte>
inline __m128i scales_4k(Byte b, int r, int which) {
    if (r < 4) return and8(b(r + 4 * which), 63);
    const __m128i both = b(r + 4);
    const __m128i nibble = which == 0 ? and8(both, 15) : and8(_mm_srli_epi16(both, 4), 15);
    return _mm_or_si128(nibble, _mm_slli_epi16(and8(_mm_srli_epi16(b(r - 4 + 4 * which), 6), 3), 4));
}

template <int64_t KIND> struct Decoder {
    static constexpr Format kFormat = format_of(KIND);
    static constexpr int64_t kValues = kFormat.values, kSub = kFormat.run;
    // w = fma(d, q, m) but for the kinds of w = d * q exactly (q8_0, iq4_nl's levels, int8).
    static constexpr bool kOffset = !(KIND == kQ8_0 || KIND == kIq4Nl || KIND == kInt8);
    Scales s;
    __m256 first_lo, first_hi, second_lo, second_hi;  // d, and m or dmin (K-quants: of the block)
    const uint8_t* low = nullptr;                      // the current run's first unit in each plane
    const uint8_t* high = nullptr;

    void start(const uint8_t* block, const float* scales) {
        if constexpr (KIND == kInt8) {
            s.d_lo = _mm256_loadu_ps(scales);
            s.d_hi = _mm256_loadu_ps(scales + 8);
            low = block;
            return;
        }
        first_lo = halves(block);
        first_hi = halves(block + 16);
        if constexpr (kFormat.halves == 2) {
            second_lo = halves(block + 2 * kPanel);
            second_hi = halves(block + 2 * kPanel + 16);
        }
        if constexpr (kValues == 32) {  // one run: the block's own d (and m)
            s.d_lo = first_lo;
            s.d_hi = first_hi;
            if constexpr (KIND == kQ4_1 || KIND == kQ5_1) {
                s.m_lo = second_lo;
                s.m_hi = second_hi;
            } else if constexpr (kOffset) {
                constexpr float centre = KIND == kQ4_0 ? -8.0f : -16.0f;
                s.m_lo = times(first_lo, centre);
                s.m_hi = times(first_hi, centre);
            }
        }
        low = block + kPanel * kFormat.low_at();
        high = block + kPanel * kFormat.high_at();
    }

    // Run r's scale and offset (the K-quants), and its first value's units in the planes.
    void run(const uint8_t* block, int r) {
        if constexpr (kValues == 256) {
            auto b = [&](int at) { return sixteen(block + kPanel * (2 * kFormat.halves + at)); };  // scale byte `at`
            __m128i sc;
            if constexpr (KIND == kQ2K) sc = and8(b(r), 15);
            if constexpr (KIND == kQ3K) sc = _mm_sub_epi8(scales_3k(b, r), _mm_set1_epi8(32));
            if constexpr (KIND == kQ4K || KIND == kQ5K) sc = scales_4k(b, r, 0);
            if constexpr (KIND == kQ6K) sc = b(r);
            s.d_lo = _mm256_mul_ps(first_lo, widened(sc));
            s.d_hi = _mm256_mul_ps(first_hi, widened(_mm_unpackhi_epi64(sc, sc)));
            if constexpr (KIND == kQ3K || KIND == kQ6K) {
                constexpr float centre = KIND == kQ3K ? -4.0f : -32.0f;
                s.m_lo = times(s.d_lo, centre);
                s.m_hi = times(s.d_hi, centre);
            } else {
                const __m128i mn = KIND == kQ2K ? and8(_mm_srli_epi16(b(r), 4), 15) : scales_4k(b, r, 1);
                s.m_lo = negated(_mm256_mul_ps(second_lo, widened(mn)));
                s.m_hi = negated(_mm256_mul_ps(second_hi, widened(_mm_unpackhi_epi64(mn, mn))));
            }
            low = block + kPanel * (kFormat.low_at() + r * kSub * kFormat.low_bits / 8);
            high = block + kPanel * (kFormat.high_at() + r * kSub * kFormat.high_bits / 8);
        }
    }

    // The 16 weights at value j (0..kSub-1) of the current run.
    void weights(int j, __m256& lo, __m256& hi) const {
        __m256 q_lo, q_hi;
        if constexpr (KIND == kIq4Nl) {  // the nibble's level, 16 rows by one byte shuffle
            const __m128i packed = sixteen(low + kPanel * (j / 2));
            const __m128i index = and8(j % 2 == 0 ? packed : _mm_srli_epi16(packed, 4), 15);
            const __m128i level = _mm_shuffle_epi8(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4NlLevels)), index);
            q_lo = widened(level);
            q_hi = widened(_mm_unpackhi_epi64(level, level));
        } else {
            q_lo = _mm256_cvtepi32_ps(q_at<KIND>(low, high, j, 0));
            q_hi = _mm256_cvtepi32_ps(q_at<KIND>(low, high, j, 8));
        }
        if constexpr (kOffset) {
            lo = _mm256_fmadd_ps(s.d_lo, q_lo, s.m_lo);
            hi = _mm256_fmadd_ps(s.d_hi, q_hi, s.m_hi);
        } else {
            lo = _mm256_mul_ps(s.d_lo, q_lo);
            hi = _mm256_mul_ps(s.d_hi, q_hi);
        }
    }
};

#endif

}  // namespace quantized

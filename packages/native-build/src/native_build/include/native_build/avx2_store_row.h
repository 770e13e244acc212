// Sixteen fp32 results held as two AVX2 vectors stored as fp32, bf16 or fp16 (with F16C), and the linear kernels'
// epilogue over a block of rows and panels (store_rows), shared by their kernels (include
// <native_build/avx2_store_row.h>). Defined only where the target has AVX2; elsewhere the header is empty, and the
// kernels' portable paths store element by element.
#pragma once

#if defined(__AVX2__)

#include <cstdint>
#include <cstring>
#include <immintrin.h>
#include <native_build/widen_narrow.h>

namespace native_build {

// Static: of internal linkage, as the kernels' own copies in their unnamed namespaces were. GCC's inliner weighs such a
// function as one whose body need not be kept; with external linkage it left some micro-kernels out of line.

constexpr int64_t kRowColumns = 16;  // one row: columns 0..7 in one vector, 8..15 in the other

// 8 bf16 bit patterns (in the low halves of 32-bit lanes) of v, rounded as narrow<bf16>.
static inline __m256i bf16_bits(__m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i biased = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb);
    const __m256i rounded = _mm256_srli_epi32(biased, 16);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(rounded, quiet, nan);
}

// 16 results (columns 0..7 in lo, 8..15 in hi) stored as the output dtype, the first `cols` of them.
static inline void store_row(float* out, __m256 lo, __m256 hi, int64_t cols) {
    if (cols == kRowColumns) {
        _mm256_storeu_ps(out, lo);
        _mm256_storeu_ps(out + 8, hi);
        return;
    }
    alignas(32) float row[kRowColumns];
    _mm256_store_ps(row, lo);
    _mm256_store_ps(row + 8, hi);
    std::memcpy(out, row, cols * sizeof(float));
}
static inline void store_row(bf16* out, __m256 lo, __m256 hi, int64_t cols) {
    // packus works within 128-bit lanes: [lo0-3 hi0-3 | lo4-7 hi4-7]; the permute restores column order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(bf16_bits(lo), bf16_bits(hi)), 0xD8);
    if (cols == kRowColumns) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), packed);
        return;
    }
    alignas(32) uint16_t row[kRowColumns];
    _mm256_store_si256(reinterpret_cast<__m256i*>(row), packed);
    std::memcpy(out, row, cols * sizeof(uint16_t));
}

#if defined(__F16C__)
static inline void store_row(_Float16* out, __m256 lo, __m256 hi, int64_t cols) {
    const __m128i l = _mm256_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m128i h = _mm256_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    if (cols == kRowColumns) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out), l);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 8), h);
        return;
    }
    alignas(16) uint16_t row[kRowColumns];
    _mm_store_si128(reinterpret_cast<__m128i*>(row), l);
    _mm_store_si128(reinterpret_cast<__m128i*>(row + 8), h);
    std::memcpy(out, row, cols * sizeof(uint16_t));
}
#endif

// A kernel's epilogue: acc + bias (fp32; the bias loaded once per panel), rounded once, for MR rows x NP panels of
// 16 columns. Row r of panel p goes to out + r * ldo + 16 p, its first min(16, cols - 16 p) columns; a panel past
// `cols` is not stored. `bias` (at panel 0's first column) may be null.
template <int MR, int NP, typename T>
static inline void store_rows(const __m256 (&acc)[MR][NP][2], T* out, int64_t ldo, const float* bias, int64_t cols) {
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p) {
        const int64_t left = cols - p * kRowColumns < kRowColumns ? cols - p * kRowColumns : kRowColumns;
        if (left <= 0) break;
        __m256 b_lo = _mm256_setzero_ps(), b_hi = _mm256_setzero_ps();
        if (bias != nullptr) {
            b_lo = _mm256_loadu_ps(bias + p * kRowColumns);
            b_hi = _mm256_loadu_ps(bias + p * kRowColumns + 8);
        }
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
            __m256 lo = acc[r][p][0], hi = acc[r][p][1];
            if (bias != nullptr) {
                lo = _mm256_add_ps(lo, b_lo);
                hi = _mm256_add_ps(hi, b_hi);
            }
            store_row(out + r * ldo + p * kRowColumns, lo, hi, left);
        }
    }
}

}  // namespace native_build

#endif

// Rows of x quantized to int8 in blocks of 32 values, for the integer rule of integer_linear.h (the
// way llama.cpp's Q8_0 activations are, one fp32 scale per block):
//   d = max |x| / 127 over the block,  q = round_to_nearest_even(x * (127 / max |x|)),  q = 0 where max is 0
// so |q| <= 127 and x ~= d * q. Each row's blocks depend on that row alone, so a linear that reads
// them stays batch-invariant. The AVX2 and scalar loops give the same bits (the same two fp32
// operations per value, the same rounding).

#pragma once

#include <cmath>
#include <cstdint>
#include <native_build/widen_narrow.h>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace quantized {

constexpr int64_t kActivationBlock = 32;  // values per activation scale

// M rows of x as int8 blocks: q [M][k], the scales d [M][k / 32], and the sums of q per run of 16
// and per run of 32 values (the weight runs' lengths), [M][k / 16 + k / 32], each as int32 (for the
// integer offsets) and as float (for the minimums; exact, as |sum| <= 32 * 127). The integer rule's
// epilogue reads a run's sum with one broadcast: computing it there (two loads, an add and a
// conversion per row and run) cost ~6% of a many-rows Q4_K product (AVX2 EPYC, one thread).
struct ActivationBlocks {
    int8_t* q;
    float* d;
    int32_t* sums;
    float* float_sums;
    int64_t k;
    static int64_t sums_per_row(int64_t k) { return k / 16 + k / 32; }
    int8_t* q_of(int64_t row) const { return q + row * k; }
    float* d_of(int64_t row) const { return d + row * (k / kActivationBlock); }
    // Where row `row`'s sums of runs of RUN values (16 or 32) begin, one per run in k order.
    template <int64_t RUN> int64_t sums_at(int64_t row) const {
        static_assert(RUN == 16 || RUN == 32, "the weight runs are 16 or 32 values");
        return row * sums_per_row(k) + (RUN == 32 ? k / 16 : 0);
    }
};

// One row x [k] (k a multiple of 32) into row `row` of `blocks`.
template <typename T>
inline void quantize_row(const T* x, const ActivationBlocks& blocks, int64_t row) {
    const int64_t k = blocks.k;
    int8_t* q = blocks.q_of(row);
    float* d = blocks.d_of(row);
    int32_t* sums16 = blocks.sums + blocks.sums_at<16>(row);
    int32_t* sums32 = blocks.sums + blocks.sums_at<32>(row);
    float* float16 = blocks.float_sums + blocks.sums_at<16>(row);
    float* float32 = blocks.float_sums + blocks.sums_at<32>(row);
    for (int64_t b = 0; b < k / kActivationBlock; ++b) {
        float v[kActivationBlock];
        for (int i = 0; i < kActivationBlock; ++i) v[i] = native_build::widen(x[b * kActivationBlock + i]);
        // amax is NaN where the block holds a NaN, so d is, and every output of the row (as the
        // float32 rule's chain would make it); an inf makes d inf and the row's outputs non-finite.
        float amax = 0.0f;
#if defined(__AVX2__)
        // The order of maxima cannot change their result, so this is the scalar loop's amax, bit for bit.
        const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
        __m256 m = _mm256_setzero_ps(), unordered = _mm256_setzero_ps();
        for (int i = 0; i < 4; ++i) {
            const __m256 value = _mm256_loadu_ps(v + 8 * i);
            m = _mm256_max_ps(_mm256_and_ps(value, magnitude), m);
            unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(value, value, _CMP_UNORD_Q));
        }
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        amax = _mm256_movemask_ps(unordered) != 0 ? NAN : _mm_cvtss_f32(_mm_max_ss(h, _mm_shuffle_ps(h, h, 1)));
#else
        for (float value : v) amax = std::isnan(value) || std::isnan(amax) ? NAN : std::fmax(amax, std::fabs(value));
#endif
        d[b] = amax / 127.0f;
        const float inverse = amax > 0.0f ? 127.0f / amax : 0.0f;  // 0 for a NaN amax: q stays defined
        int8_t* qb = q + b * kActivationBlock;
#if defined(__AVX2__)
        const __m256 by = _mm256_set1_ps(inverse);
        __m256i n[4];
        for (int i = 0; i < 4; ++i) n[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v + 8 * i), by));
        // int32 -> int16 -> int8 packs per 128-bit lane; the permute puts the 32 back in order.
        const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(n[0], n[1]), _mm256_packs_epi32(n[2], n[3]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb),
                            _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
#else
        for (int i = 0; i < kActivationBlock; ++i) qb[i] = static_cast<int8_t>(std::nearbyint(v[i] * inverse));
#endif
        int32_t whole = 0;
        for (int h = 0; h < 2; ++h) {
            int32_t sum = 0;
            for (int i = 0; i < 16; ++i) sum += qb[h * 16 + i];
            sums16[2 * b + h] = sum;
            float16[2 * b + h] = static_cast<float>(sum);
            whole += sum;
        }
        sums32[b] = whole;
        float32[b] = static_cast<float>(whole);
    }
}

}  // namespace quantized

// The integer rule's products on the avx512 tier (integer_linear.h states the rule): all 16 rows
// of a panel in one 512-bit register, and vpdpbusd summing four u8 x s8 products per dword
// straight into int32, where AVX2 needs maddubs, an int16 add and a widening madd. The int32 sums
// per run are the same integers (the AVX2 path's never saturate), and the epilogue is the same fp32
// operations lane by lane, so the outputs are the AVX2 tier's, bit for bit.

#pragma once

#include <cstdint>
#include <cstring>

#include "activation_blocks.h"
#include "panel_tasks.h"
#include "quantized_blocks.h"
#include "weight_quads.h"
#include "wide_quads.h"

#if QL_VNNI

namespace quantized {

// Rows at most per block of the avx512 kernel: 32 vector registers hold 8 rows' sums and chains.
constexpr int kVnniRows = 8;

// One row's int32 sums n of a run (before the offset), scaled into its chain `acc` as the rule
// says, lane for lane integer_linear.h's fused_int8 epilogue: `a` and `minimum` are the run's 16
// scales and minimums, `run_sum` and `float_run_sum` the row's sum of xq over the run, `dx` its
// activation scale there.
template <int64_t KIND>
inline __m512 chained(__m512 acc, __m512i n, __m512 a, __m512 minimum, int32_t run_sum, float float_run_sum, float dx) {
    constexpr int kOffset = integer_offset(KIND);
    if constexpr (kOffset != 0) n = _mm512_sub_epi32(n, _mm512_set1_epi32(kOffset * run_sum));
    __m512 t;
    if constexpr (adds_minimum(KIND)) {
        t = _mm512_fmadd_ps(a, _mm512_cvtepi32_ps(n), _mm512_mul_ps(minimum, _mm512_set1_ps(float_run_sum)));
    } else {
        t = _mm512_mul_ps(a, _mm512_cvtepi32_ps(n));
    }
    return _mm512_fmadd_ps(t, _mm512_set1_ps(dx), acc);
}

// A run's 16 scales and minimums (the latter zero for the kinds without one) as 512-bit vectors.
template <int64_t KIND>
inline void run_scales(const Scales& s, __m512& a, __m512& minimum) {
    a = joined(s.d_lo, s.d_hi);
    minimum = adds_minimum(KIND) ? joined(s.m_lo, s.m_hi) : _mm512_setzero_ps();
}

// MR rows' chains as the shared epilogue takes them (two 256-bit halves a row), stored by it.
template <int MR, typename T>
inline void finish_wide(const __m512 (&acc)[MR], const Target<T>& to) {
    __m256 halves[MR][1][2];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
        halves[i][0][0] = _mm512_castps512_ps256(acc[i]);
        halves[i][0][1] = _mm512_extractf32x8_ps(acc[i], 1);
    }
    finish<MR, 1>(halves, to);
}

// fused_int8 on the avx512 tier: MR rows of x (int8 blocks, from row i0) x one panel's runs.
template <int64_t KIND, int MR, typename Runs, typename T>
void fused_vnni(const Matrix& m, const ActivationBlocks& xa, int64_t i0, Runs runs, const Target<T>& to) {
    constexpr Format f = format_of(KIND);
    constexpr int kRun = static_cast<int>(f.run);
    __m512 acc[MR];
    const float* dx_of[MR];
    const int32_t* sums_of[MR];
    const float* float_sums_of[MR];
    const int8_t* q_of[MR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
        acc[i] = _mm512_setzero_ps();
        dx_of[i] = xa.d_of(i0 + i);
        sums_of[i] = xa.sums + xa.sums_at<kRun>(i0 + i);
        float_sums_of[i] = xa.float_sums + xa.sums_at<kRun>(i0 + i);
        q_of[i] = xa.q_of(i0 + i);
    }
    for (int64_t b = 0; b < m.k / f.values; ++b) {
        runs.start(b);
        for (int r = 0; r < f.values / kRun; ++r) {
            runs.run(r);
            const int64_t k = b * f.values + r * kRun;
            // Few rows keep several sums a row, quads taking turns, so that vpdpbusd's latency is not
            // one chain per run (one row on one sum ran slower than AVX2's two); exact in int32 either way.
            constexpr int kChains = MR >= 4 ? 1 : (MR >= 2 ? 2 : 4);
            __m512i sum[MR], chain[MR][kChains];
#pragma GCC unroll 8
            for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
                for (int c = 0; c < kChains; ++c) chain[i][c] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int j = 0; j < kRun; j += 4) {
                const __m512i w = runs.wide_quads_at(j);
                // A signed kind multiplies |w| by x carrying w's sign (w = 0 adds 0 either way).
                const __m512i magnitude = signed_quads(KIND) ? _mm512_abs_epi8(w) : w;
                const __mmask64 negative = signed_quads(KIND) ? _mm512_movepi8_mask(w) : 0;
#pragma GCC unroll 8
                for (int i = 0; i < MR; ++i) {
                    int32_t four;
                    std::memcpy(&four, q_of[i] + k + j, sizeof four);
                    __m512i xq = _mm512_set1_epi32(four);
                    if constexpr (signed_quads(KIND)) xq = _mm512_mask_sub_epi8(xq, negative, _mm512_setzero_si512(), xq);
                    chain[i][j / 4 % kChains] = _mm512_dpbusd_epi32(chain[i][j / 4 % kChains], magnitude, xq);
                }
            }
#pragma GCC unroll 8
            for (int i = 0; i < MR; ++i) {
                sum[i] = chain[i][0];
#pragma GCC unroll 4
                for (int c = 1; c < kChains; ++c) sum[i] = _mm512_add_epi32(sum[i], chain[i][c]);
            }
            __m512 a, minimum;
            run_scales<KIND>(runs.scales(), a, minimum);
            const int64_t g = k / kRun;  // the run's index in the row
#pragma GCC unroll 8
            for (int i = 0; i < MR; ++i)
                acc[i] = chained<KIND>(acc[i], sum[i], a, minimum, sums_of[i][g], float_sums_of[i][g],
                                       dx_of[i][k / kActivationBlock]);
        }
    }
    finish_wide<MR>(acc, to);
}

// Rows [i0, i1) over panel p on the avx512 tier, in even blocks of up to kVnniRows rows.
template <int64_t KIND, typename Runs, typename T>
void rows_vnni(const Matrix& m, const ActivationBlocks& xa, int64_t i0, int64_t i1, int64_t p, Runs runs, T* out) {
    in_row_blocks(m, i0, i1, p, kVnniRows, out, [&](int64_t i, int rows, const Target<T>& to) {
        switch (rows) {
            case 8: fused_vnni<KIND, 8>(m, xa, i, runs, to); break;
            case 7: fused_vnni<KIND, 7>(m, xa, i, runs, to); break;
            case 6: fused_vnni<KIND, 6>(m, xa, i, runs, to); break;
            case 5: fused_vnni<KIND, 5>(m, xa, i, runs, to); break;
            case 4: fused_vnni<KIND, 4>(m, xa, i, runs, to); break;
            case 3: fused_vnni<KIND, 3>(m, xa, i, runs, to); break;
            case 2: fused_vnni<KIND, 2>(m, xa, i, runs, to); break;
            default: fused_vnni<KIND, 1>(m, xa, i, runs, to); break;
        }
    });
}

}  // namespace quantized

#endif

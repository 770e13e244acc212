// y = x @ W.T + b for a GGUF matrix packed for int8 activations (its planes IN QUADS,
// quantized_blocks.h), on an AVX2 CPU: quantized_linear.cpp's second rule.
//
// THE INTEGER RULE (Matrix::activations == kInt8Activations), the way llama.cpp computes, chosen
// per matrix when it is packed and then kept at every M:
//   x[i] is quantized in blocks of 32 (activation_blocks.h: xq, dx, and the sums of xq per run);
//   per run of values sharing a weight scale (32, or 16 for q2_k, q3_k, q6_k), in k order,
//     n = sum over the run of q[j,k] * xq[i,k] - offset * sum(xq)     exact, in int32
//     t = a * float(n) (+ m * float(sum(xq)) for the kinds with a minimum)   (w = a (q - offset) + m)
//     acc = fma(t, dx, acc)                                            from acc = +0,
//   then out = round_to_dtype(acc + bias[j]). Row i still depends on x[i] and the matrix alone, so
//   the output is batch-invariant; it differs from the de-quantized fp32 linear by x's rounding to
//   int8 (a relative error of about 1/254 per value).
// Its two paths read the same runs (the scales as the Decoder gives them, the integers as
// weight_quads.h's quads): few rows straight from the blocks (BlockRuns); more rows from a group
// of panels unpacked once per task into quads and scales in L2 (UnpackedRuns), so the planes'
// shifts and the scales' decoding are paid once per panel, not once per 4 rows.

#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "activation_blocks.h"
#include "integer_linear_vnni.h"
#include "integer_tiles.h"
#include "panel_runs.h"
#include "panel_tasks.h"
#include "quantized_blocks.h"
#include "weight_quads.h"

#if QL_AVX2

namespace quantized {

// Rows at most for which the kernel reads the blocks themselves (BlockRuns); more rows unpack
// each panel once per task (UnpackedRuns).
constexpr int64_t kBlockRunsRows = 16;

// MR rows of x (int8 blocks, from row i0) x one panel's runs, by THE INTEGER RULE: per run, exact
// int32 sums of the weights' integers times xq (maddubs pairs summed in int16 while they cannot
// overflow, then widened), scaled once in fp32 into one chain per output.
template <int64_t KIND, int MR, typename Runs, typename T>
void fused_int8(const Matrix& m, const ActivationBlocks& xa, int64_t i0, Runs runs, const Target<T>& to) {
    constexpr Format f = format_of(KIND);
    constexpr int kRun = static_cast<int>(f.run);
    constexpr int kGroup = quads_per_widen(KIND) < kRun / 4 ? quads_per_widen(KIND) : kRun / 4;
    constexpr int kOffset = integer_offset(KIND);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[MR][1][2];
    // Each row's scales and run sums, found once: computing their places per run cost ~10% of a
    // many-rows product (Q4_K and Q6_K, AVX2 EPYC, one thread) and ~5% at 8 rows.
    const float* dx_of[MR];
    const int32_t* sums_of[MR];
    const float* float_sums_of[MR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
        acc[i][0][0] = acc[i][0][1] = _mm256_setzero_ps();
        dx_of[i] = xa.d_of(i0 + i);
        sums_of[i] = xa.sums + xa.sums_at<kRun>(i0 + i);
        float_sums_of[i] = xa.float_sums + xa.sums_at<kRun>(i0 + i);
    }
    for (int64_t b = 0; b < m.k / f.values; ++b) {
        runs.start(b);
        for (int r = 0; r < f.values / kRun; ++r) {
            runs.run(r);
            const int64_t k = b * f.values + r * kRun;
            __m256i sum[MR][2];
#pragma GCC unroll 8
            for (int i = 0; i < MR; ++i) sum[i][0] = sum[i][1] = _mm256_setzero_si256();
            // The run's quads in groups of at most quads_per_widen: their int16 pair sums cannot overflow.
#pragma GCC unroll 16
            for (int g = 0; g < kRun; g += 4 * kGroup) {
                __m256i part[MR][2];
#pragma GCC unroll 8
                for (int i = 0; i < MR; ++i) part[i][0] = part[i][1] = _mm256_setzero_si256();
#pragma GCC unroll 16
                for (int quad = 0; quad < kGroup; ++quad) {
                    const int j = g + 4 * quad;
                    __m256i w0, w1;
                    runs.quads_at(j, w0, w1);
                    const __m256i m0 = signed_quads(KIND) ? _mm256_abs_epi8(w0) : w0;
                    const __m256i m1 = signed_quads(KIND) ? _mm256_abs_epi8(w1) : w1;
#pragma GCC unroll 8
                    for (int i = 0; i < MR; ++i) {
                        int32_t four;
                        std::memcpy(&four, xa.q_of(i0 + i) + k + j, sizeof four);
                        const __m256i xq = _mm256_set1_epi32(four);
                        const __m256i x0 = signed_quads(KIND) ? _mm256_sign_epi8(xq, w0) : xq;
                        const __m256i x1 = signed_quads(KIND) ? _mm256_sign_epi8(xq, w1) : xq;
                        part[i][0] = _mm256_add_epi16(part[i][0], _mm256_maddubs_epi16(m0, x0));
                        part[i][1] = _mm256_add_epi16(part[i][1], _mm256_maddubs_epi16(m1, x1));
                        // Keeps each sum in its register as it goes: left free, GCC computes every
                        // product of the run first and spills them all to the stack.
                        asm("" : "+x"(part[i][0]), "+x"(part[i][1]));
                    }
                }
#pragma GCC unroll 8
                for (int i = 0; i < MR; ++i) {
                    sum[i][0] = _mm256_add_epi32(sum[i][0], _mm256_madd_epi16(part[i][0], ones));
                    sum[i][1] = _mm256_add_epi32(sum[i][1], _mm256_madd_epi16(part[i][1], ones));
                }
            }
            const Scales& s = runs.scales();
#pragma GCC unroll 8
            for (int i = 0; i < MR; ++i) {
                const __m256 dx = _mm256_broadcast_ss(dx_of[i] + k / kActivationBlock);
                for (int h = 0; h < 2; ++h) {
                    __m256i n = sum[i][h];
                    if constexpr (kOffset != 0) n = _mm256_sub_epi32(n, _mm256_set1_epi32(kOffset * sums_of[i][k / kRun]));
                    const __m256 a = h == 0 ? s.d_lo : s.d_hi;
                    __m256 t;
                    if constexpr (adds_minimum(KIND)) {
                        const __m256 minimum = h == 0 ? s.m_lo : s.m_hi;
                        t = _mm256_fmadd_ps(a, _mm256_cvtepi32_ps(n),
                                            _mm256_mul_ps(minimum, _mm256_broadcast_ss(float_sums_of[i] + k / kRun)));
                    } else {
                        t = _mm256_mul_ps(a, _mm256_cvtepi32_ps(n));
                    }
                    acc[i][0][h] = _mm256_fmadd_ps(t, dx, acc[i][0][h]);
                }
            }
        }
    }
    finish<MR, 1>(acc, to);
}

// Rows [i0, i1) over panel p by the integer rule, in even blocks of up to 4 rows, reading the
// panel's runs from `runs` (BlockRuns or UnpackedRuns).
template <int64_t KIND, typename Runs, typename T>
void rows_int8(const Matrix& m, const ActivationBlocks& xa, int64_t i0, int64_t i1, int64_t p, Runs runs, T* out) {
    in_row_blocks(m, i0, i1, p, 4, out, [&](int64_t i, int rows, const Target<T>& to) {
        switch (rows) {
            case 4: fused_int8<KIND, 4>(m, xa, i, runs, to); break;
            case 3: fused_int8<KIND, 3>(m, xa, i, runs, to); break;
            case 2: fused_int8<KIND, 2>(m, xa, i, runs, to); break;
            default: fused_int8<KIND, 1>(m, xa, i, runs, to); break;
        }
    });
}

// Rows [i0, i1) over panel p by the integer rule on the build's highest tier (the same bits on each):
// the avx512 tier's kernel where the build has it, else the AVX2 one.
template <int64_t KIND, typename Runs, typename T>
void rows_on_tier(const Matrix& m, const ActivationBlocks& xa, int64_t i0, int64_t i1, int64_t p, Runs runs, T* out) {
#if QL_VNNI
    rows_vnni<KIND>(m, xa, i0, i1, p, runs, out);
#else
    rows_int8<KIND>(m, xa, i0, i1, p, runs, out);
#endif
}

// Whether this call's many-rows products run on AMX tiles: an amx build, in a process Linux grants them.
inline bool int8_tiles_here() {
#if QL_AMX
    return native_build::amx_permitted();
#else
    return false;
#endif
}

// Rows per step of a many-rows row block: whole tiles where tiles run them.
template <int64_t KIND> inline int64_t row_block_step() {
    return format_of(KIND).run == 32 && int8_tiles_here() ? 16 : 4;
}

// Panels per task of the integer path with many rows: their unpacked runs (`panel_bytes` each)
// fill about half of L2, read from there once per 4 rows of the task's row block.
inline int64_t int8_group_panels(int64_t panel_bytes) {
    const int64_t group = (256 * 1024) / panel_bytes;
    return group < 1 ? 1 : group;
}

// The integer rule's linear: x's rows quantized once (activation_blocks.h), then tasks as
// linear_of's: one panel each (all rows) for few rows; else a group of panels x a block of rows.
template <int64_t KIND, typename T>
void linear_int8_of(const Matrix& m, const T* x, int64_t ldx, int64_t M, T* out, int64_t threads) {
    // The calling thread's scratch, kept between calls (it only grows): no fresh pages per call.
    thread_local std::vector<int8_t> q;
    thread_local std::vector<float> d;
    thread_local std::vector<int32_t> sums;
    thread_local std::vector<float> float_sums;
    if (static_cast<int64_t>(q.size()) < M * m.k) {
        q.resize(M * m.k);
        d.resize(M * m.k / kActivationBlock);
        sums.resize(M * ActivationBlocks::sums_per_row(m.k));
        float_sums.resize(M * ActivationBlocks::sums_per_row(m.k));
    }
    const ActivationBlocks xa{q.data(), d.data(), sums.data(), float_sums.data(), m.k};
    // One panel's unpacked runs, in vectors (the many-rows path's scratch).
    const int64_t panel_scratch = m.k / UnpackedRuns<KIND>::kRun * UnpackedRuns<KIND>::kRunBytes /
                                  static_cast<int64_t>(sizeof(__m256i));
    const int64_t useful = M * m.k * m.panels * kPanel / kMinMacsPerThread;
    const int nt = static_cast<int>(threads < useful ? (threads < 1 ? 1 : threads) : (useful < 1 ? 1 : useful));
    int64_t row_blocks = 1, row_block = M, group = 1;
    if (M > kBlockRunsRows) {
        row_blocks = (M + kMaxRowBlock - 1) / kMaxRowBlock;
        const int64_t step = row_block_step<KIND>();
        row_block = ((M + row_blocks - 1) / row_blocks + step - 1) / step * step;
        row_blocks = (M + row_block - 1) / row_block;
        const int64_t fits = int8_group_panels(panel_scratch * static_cast<int64_t>(sizeof(__m256i)));
        int64_t groups = (m.panels + fits - 1) / fits;
        if (groups * row_blocks % nt != 0) groups = (groups + nt - 1) / nt * nt;
        group = (m.panels + groups - 1) / groups;
    }
    const int64_t tasks = (m.panels + group - 1) / group * row_blocks;

#pragma omp parallel num_threads(nt)
    {
#pragma omp for schedule(static)
        for (int64_t i = 0; i < M; ++i)
            quantize_row(x + i * ldx, xa, i);
        // Many rows: each panel of the task unpacked once into the thread's scratch, kept between
        // calls (it only grows; 32-byte aligned by the vector's element type).
        thread_local std::vector<__m256i> unpacked;
        if (M > kBlockRunsRows && static_cast<int64_t>(unpacked.size()) < group * panel_scratch)
            unpacked.resize(group * panel_scratch);
        int64_t held = -1;  // the group unpacked in `unpacked` by this thread's last task
        // Tiles for the kinds of 32-value runs: a 16-value run's tile product is too small to pay for
        // storing its sums (q6_k at 128 rows ran 8% slower on tiles than on the avx512 kernel).
        const bool tiles = M > kBlockRunsRows && format_of(KIND).run == 32 && int8_tiles_here();
#if QL_AMX
        if (tiles) configure_int8_tiles<KIND>();
#endif
#pragma omp for schedule(static)
        for (int64_t t = 0; t < tasks; ++t) {
            const int64_t g = t / row_blocks, rb = t % row_blocks;
            const int64_t p0 = g * group, p1 = (g + 1) * group < m.panels ? (g + 1) * group : m.panels;
            const int64_t i1 = (rb + 1) * row_block < M ? (rb + 1) * row_block : M;
            if (M <= kBlockRunsRows) {
                for (int64_t p = p0; p < p1; ++p)
                    rows_on_tier<KIND>(m, xa, 0, M, p, BlockRuns<KIND>(m.data + p * panel_bytes(m)), out);
                continue;
            }
            auto* scratch = reinterpret_cast<uint8_t*>(unpacked.data());
            if (g != held) {
                for (int64_t p = p0; p < p1; ++p)
                    unpack_panel<KIND>(m, p, scratch + (p - p0) * panel_scratch * sizeof(__m256i));
                held = g;
            }
            for (int64_t p = p0; p < p1; ++p) {
                const uint8_t* panel = scratch + (p - p0) * panel_scratch * sizeof(__m256i);
#if QL_AMX
                if (tiles) {
                    rows_tiles<KIND>(m, xa, rb * row_block, i1, p, panel, out);
                    continue;
                }
#endif
                rows_on_tier<KIND>(m, xa, rb * row_block, i1, p, UnpackedRuns<KIND>(panel), out);
            }
        }
#if QL_AMX
        if (tiles) _tile_release();
#endif
    }
}

}  // namespace quantized

#endif

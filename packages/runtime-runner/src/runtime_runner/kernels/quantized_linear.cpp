// y = x @ W.T + b on a CPU for a weight W kept quantized in memory (GGUF's block types, or int8
// with one fp32 scale per row: quantized_blocks.h holds their layouts and de-quantization),
// batch-invariant as batch_invariant_linear.cpp is.
//
// THE RULE (every path, micro-kernel shape, tail and thread split keeps it):
//   w[j,k] is the de-quantized weight, computed exactly as the reference de-quantizes it, in fp32
//   (quantized_blocks.h's THE VALUES), and every output element (i, j) is ONE fp32 chain over
//   k = 0..K-1 in increasing order,
//     acc = fma(x[i,k], w[j,k], acc)      from acc = +0,
//   then out = round_to_dtype(acc + bias[j]) (the bias in fp32), or round(acc) without a bias.
// So the result is, bit for bit, the batch-invariant fp32 linear of the de-quantized matrix: row
// i depends on x[i] and the matrix alone, whatever M, the row's position or the thread count.
//
// Two paths compute the rule, from the same de-quantization (quantized_blocks.h's Decoder<KIND>):
// - few rows (M <= 16, decode): each block's weights are de-quantized in registers and used at
//   once, so the quantized bytes stream from memory once per call, never widened; one row runs
//   over two panels at a time (four independent chains), 2..16 rows in even blocks of up to 4.
// - more rows (prefill): a task de-quantizes a group of panels into an fp32 scratch (about half
//   of L2), once, and runs 6-row micro-kernels over it, as the bf16 kernel does over its panels.
// Threads split the panels (output columns) in contiguous runs; x is never split along k.
//
// THE INTEGER RULE, for a GGUF matrix packed for int8 activations on AVX2, is integer_linear.h's;
// linear_by_rule below sends each matrix to the rule it was packed for.

#include <cmath>
#include <cstdint>
#include <native_build/widen_narrow.h>
#include <type_traits>
#include <vector>

#include "integer_linear.h"
#include "panel_tasks.h"
#include "quantized_blocks.h"

namespace {

using namespace quantized;

constexpr int kMaxRows = 6;  // rows of x per micro-kernel

using native_build::bf16;
using native_build::narrow;
using native_build::widen;

#if QL_AVX2

// Panel p de-quantized into w [K][16] fp32.
template <int64_t KIND>
void dequantize_panel(const Matrix& m, int64_t p, float* w) {
    const uint8_t* block = m.data + p * panel_bytes(m);
    const float* scales = m.scales == nullptr ? nullptr : m.scales + p * kPanel;
    using D = Decoder<KIND>;
    D dec;
    for (int64_t k0 = 0; k0 < m.k; k0 += D::kValues, block += kPanelBlock<KIND>) {
        dec.start(block, scales);
        for (int r = 0; r < D::kValues / D::kSub && k0 + r * D::kSub < m.k; ++r) {
            dec.run(block, r);
            float* wr = w + (k0 + r * D::kSub) * kPanel;
            auto put = [&](int j) {
                __m256 lo, hi;
                dec.weights(j, lo, hi);
                _mm256_storeu_ps(wr + j * kPanel, lo);
                _mm256_storeu_ps(wr + j * kPanel + 8, hi);
            };
            if (m.k - k0 - r * D::kSub >= D::kSub) {
#pragma GCC unroll 32
                for (int j = 0; j < D::kSub; ++j) put(j);  // every shift known at compile time
            } else {  // int8's last partial 32
                for (int j = 0; j < m.k - k0 - r * D::kSub; ++j) put(j);
            }
        }
    }
}

// MR rows x NP panels straight from the quantized bytes, de-quantizing in registers (few rows:
// the weights are read once per MR rows, at the speed memory gives them).
template <int64_t KIND, int MR, int NP, typename T>
void fused(const Matrix& m, const float* x, int64_t ldx, int64_t p0, const Target<T>& to) {
    using D = Decoder<KIND>;
    const int64_t stride = panel_bytes(m);
    const uint8_t* block = m.data + p0 * stride;
    const float* scales = m.scales == nullptr ? nullptr : m.scales + p0 * kPanel;
    __m256 acc[MR][NP][2];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
        for (int p = 0; p < NP; ++p) acc[r][p][0] = acc[r][p][1] = _mm256_setzero_ps();
    D dec[NP];
    // One k of all NP panels: each panel's 16 weights, times each row's x[k].
    auto step = [&](int j, const float* xk) {
#pragma GCC unroll 8
        for (int p = 0; p < NP; ++p) {
            __m256 lo, hi;
            dec[p].weights(j, lo, hi);
#pragma GCC unroll 8
            for (int r = 0; r < MR; ++r) {
                const __m256 xs = _mm256_broadcast_ss(xk + r * ldx);
                acc[r][p][0] = _mm256_fmadd_ps(xs, lo, acc[r][p][0]);
                acc[r][p][1] = _mm256_fmadd_ps(xs, hi, acc[r][p][1]);
            }
        }
    };
    for (int64_t k0 = 0; k0 < m.k; k0 += D::kValues, block += kPanelBlock<KIND>) {
#pragma GCC unroll 8
        for (int p = 0; p < NP; ++p) dec[p].start(block + p * stride, scales == nullptr ? nullptr : scales + p * kPanel);
        for (int r = 0; r < D::kValues / D::kSub && k0 + r * D::kSub < m.k; ++r) {
#pragma GCC unroll 8
            for (int p = 0; p < NP; ++p) dec[p].run(block + p * stride, r);
            const float* xr = x + k0 + r * D::kSub;
            if (m.k - k0 - r * D::kSub >= D::kSub) {
#pragma GCC unroll 32
                for (int j = 0; j < D::kSub; ++j) step(j, xr + j);
            } else {  // int8's last partial 32 (the GGUF kinds have whole blocks)
                for (int j = 0; j < m.k - k0 - r * D::kSub; ++j) step(j, xr + j);
            }
        }
    }
    finish<MR, NP>(acc, to);
}

// MR rows x one de-quantized panel w [K][16]: 2 * MR chains of the rule (many rows: the panel was
// de-quantized once into L2 for all of them).
template <int MR, typename T>
inline void block(const float* x, int64_t ldx, int64_t K, const float* w, const Target<T>& to) {
    __m256 acc[MR][1][2];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) acc[r][0][0] = acc[r][0][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; ++k, w += kPanel) {
        const __m256 lo = _mm256_loadu_ps(w), hi = _mm256_loadu_ps(w + 8);
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
            const __m256 xs = _mm256_broadcast_ss(x + r * ldx + k);
            acc[r][0][0] = _mm256_fmadd_ps(xs, lo, acc[r][0][0]);
            acc[r][0][1] = _mm256_fmadd_ps(xs, hi, acc[r][0][1]);
        }
    }
    finish<MR, 1>(acc, to);
}

#else  // the portable path: the same values and chains with std::fma, one column at a time

template <int64_t KIND>
void dequantize_panel(const Matrix& m, int64_t p, float* w) {
    for (int64_t k = 0; k < m.k; ++k)
        for (int c = 0; c < kPanel; ++c) w[k * kPanel + c] = weight_at(m, p, c, k);
}

template <int MR, typename T>
inline void block(const float* x, int64_t ldx, int64_t K, const float* w, const Target<T>& to) {
    float acc[MR][kPanel] = {};
    for (int64_t k = 0; k < K; ++k)
        for (int r = 0; r < MR; ++r)
            for (int c = 0; c < kPanel; ++c) acc[r][c] = std::fma(x[r * ldx + k], w[k * kPanel + c], acc[r][c]);
    for (int r = 0; r < MR; ++r)
        for (int64_t c = 0; c < kPanel && c < to.cols; ++c)
            to.out[r * to.ldo + c] = narrow<T>(to.bias != nullptr ? acc[r][c] + to.bias[c] : acc[r][c]);
}

#endif

// Rows [i0, i1) of x over panels [p0, p1), de-quantized in w ([K][16] each, in order): each
// block of 6 rows runs over every panel while its rows stay in L1 and the panels in L2.
template <typename T>
void rows_from(const Matrix& m, const float* x, int64_t ldx, const float* w, int64_t p0, int64_t p1, int64_t i0,
               int64_t i1, T* out) {
    for (int64_t i = i0; i < i1; i += kMaxRows) {
        const float* xi = x + i * ldx;
        const int64_t rows = i1 - i < kMaxRows ? i1 - i : kMaxRows;
        for (int64_t p = p0; p < p1; ++p) {
            const float* wp = w + (p - p0) * m.k * kPanel;
            const Target<T> to = target_of(m, i, p, out);
            switch (rows) {
                case 6: block<6>(xi, ldx, m.k, wp, to); break;
                case 5: block<5>(xi, ldx, m.k, wp, to); break;
                case 4: block<4>(xi, ldx, m.k, wp, to); break;
                case 3: block<3>(xi, ldx, m.k, wp, to); break;
                case 2: block<2>(xi, ldx, m.k, wp, to); break;
                default: block<1>(xi, ldx, m.k, wp, to); break;
            }
        }
    }
}

// Panels per task of the scratch path: their de-quantized fp32 fits in about half of L2.
inline int64_t group_panels(int64_t K) {
    const int64_t group = (256 * 1024) / ((K > 0 ? K : 1) * kPanel * static_cast<int64_t>(sizeof(float)));
    return group < 1 ? 1 : group;
}

#if QL_AVX2
// Rows of x at most, in one call, for which de-quantizing in registers beats a scratch panel.
// Up to 16, de-quantizing once per 4 rows beats writing the fp32 scratch and reading it back
// (tools/bench_linear.py at M = 9 and 16: 0.67-0.72x the bf16 kernel's speed, the scratch 0.38-0.50x).
constexpr int64_t kFusedRows = 16;
// Panels per fused task: the one-row kernel runs two panels (four chains) to hide the FMA latency.
constexpr int64_t kFusedPanels = 2;

// All M (<= kFusedRows) rows over panels [p0, p1), de-quantizing in registers: one row over two
// panels at a time, else blocks of up to 4 rows over one panel (5..16 rows in 2..4 even blocks).
template <int64_t KIND, typename T>
void rows_fused(const Matrix& m, const float* x, int64_t ldx, int64_t M, int64_t p0, int64_t p1, T* out) {
    const int64_t blocks = (M + 3) / 4;  // of at most 4 rows, as even as they go
    const int64_t first = (M + blocks - 1) / blocks;
    for (int64_t p = p0; p < p1;) {
        const bool pair = M == 1 && p + 1 < p1;
        for (int64_t i = 0; i < M; i += first) {
            const float* xi = x + i * ldx;
            const Target<T> to = target_of(m, i, p, out);
            if (pair) {
                fused<KIND, 1, 2>(m, xi, ldx, p, to);
                continue;
            }
            switch (M - i < first ? M - i : first) {
                case 4: fused<KIND, 4, 1>(m, xi, ldx, p, to); break;
                case 3: fused<KIND, 3, 1>(m, xi, ldx, p, to); break;
                case 2: fused<KIND, 2, 1>(m, xi, ldx, p, to); break;
                default: fused<KIND, 1, 1>(m, xi, ldx, p, to); break;
            }
        }
        p += pair ? 2 : 1;
    }
}
#else
constexpr int64_t kFusedRows = 0;
constexpr int64_t kFusedPanels = 1;
template <int64_t KIND, typename T>
void rows_fused(const Matrix&, const float*, int64_t, int64_t, int64_t, int64_t, T*) {}
#endif

template <int64_t KIND, typename T>
void linear_of(const Matrix& m, const T* x, int64_t ldx, int64_t M, T* out, int64_t threads) {
    // x widened to fp32 once (exactly), unless it already is fp32, into the calling thread's
    // scratch: kept between calls (it only grows), so that a call maps no fresh pages.
    thread_local std::vector<float> widened;
    const float* xf;
    int64_t ldf;
    if constexpr (std::is_same_v<T, float>) {
        xf = x;
        ldf = ldx;
    } else {
        if (static_cast<int64_t>(widened.size()) < M * m.k) widened.resize(M * m.k);
        xf = widened.data();
        ldf = m.k;
    }
    float* wide = widened.data();
    const int64_t useful = M * m.k * m.panels * kPanel / kMinMacsPerThread;
    const int nt = static_cast<int>(threads < useful ? (threads < 1 ? 1 : threads) : (useful < 1 ? 1 : useful));
    const bool few = M <= kFusedRows;
    // Tasks, group major and statically split, so that each thread streams its own run of the
    // weights: few rows, kFusedPanels panels (all rows) each; else a group of panels x a block
    // of rows, the groups as many as L2 asks, rounded up so that every thread gets as many.
    int64_t row_blocks = 1, row_block = M, group = kFusedPanels;
    if (!few) {
        row_blocks = (M + kMaxRowBlock - 1) / kMaxRowBlock;
        row_block = ((M + row_blocks - 1) / row_blocks + kMaxRows - 1) / kMaxRows * kMaxRows;
        row_blocks = (M + row_block - 1) / row_block;
        int64_t groups = (m.panels + group_panels(m.k) - 1) / group_panels(m.k);
        if (groups * row_blocks % nt != 0) groups = (groups + nt - 1) / nt * nt;
        group = (m.panels + groups - 1) / groups;
    }
    const int64_t tasks = (m.panels + group - 1) / group * row_blocks;

#pragma omp parallel num_threads(nt)
    {
        if constexpr (!std::is_same_v<T, float>) {
#pragma omp for schedule(static)
            for (int64_t i = 0; i < M; ++i)
                for (int64_t k = 0; k < m.k; ++k) wide[i * m.k + k] = widen(x[i * ldx + k]);
        }
        thread_local std::vector<float> scratch;
        if (!few && static_cast<int64_t>(scratch.size()) < group * m.k * kPanel) scratch.resize(group * m.k * kPanel);
        int64_t held = -1;  // the group de-quantized in `scratch` by this thread's last task
#pragma omp for schedule(static)
        for (int64_t t = 0; t < tasks; ++t) {
            const int64_t g = t / row_blocks, rb = t % row_blocks;
            const int64_t p0 = g * group, p1 = p0 + group < m.panels ? p0 + group : m.panels;
            if (few) {
                rows_fused<KIND>(m, xf, ldf, M, p0, p1, out);
                continue;
            }
            if (g != held) {
                for (int64_t p = p0; p < p1; ++p) dequantize_panel<KIND>(m, p, scratch.data() + (p - p0) * m.k * kPanel);
                held = g;
            }
            const int64_t i1 = (rb + 1) * row_block < M ? (rb + 1) * row_block : M;
            rows_from(m, xf, ldf, scratch.data(), p0, p1, rb * row_block, i1, out);
        }
    }
}

// One kind's linear by the rule its matrix was packed for (the integer rule: the GGUF kinds on
// AVX2 only, which quantized_linear.py enforces).
template <int64_t KIND, typename T>
void linear_by_rule(const Matrix& m, const T* x, int64_t ldx, int64_t M, T* out, int64_t threads) {
#if QL_AVX2
    if constexpr (KIND != kInt8) {
        if (m.activations == kInt8Activations) return linear_int8_of<KIND>(m, x, ldx, M, out, threads);
    }
#endif
    linear_of<KIND>(m, x, ldx, M, out, threads);
}

template <typename T>
void linear(const Matrix& m, const T* x, int64_t ldx, int64_t M, T* out, int64_t threads) {
    if (M <= 0 || m.panels <= 0) return;
    switch (m.kind) {
        case kQ8_0: linear_by_rule<kQ8_0>(m, x, ldx, M, out, threads); break;
        case kQ4_0: linear_by_rule<kQ4_0>(m, x, ldx, M, out, threads); break;
        case kQ4_1: linear_by_rule<kQ4_1>(m, x, ldx, M, out, threads); break;
        case kQ5_0: linear_by_rule<kQ5_0>(m, x, ldx, M, out, threads); break;
        case kQ5_1: linear_by_rule<kQ5_1>(m, x, ldx, M, out, threads); break;
        case kIq4Nl: linear_by_rule<kIq4Nl>(m, x, ldx, M, out, threads); break;
        case kQ2K: linear_by_rule<kQ2K>(m, x, ldx, M, out, threads); break;
        case kQ3K: linear_by_rule<kQ3K>(m, x, ldx, M, out, threads); break;
        case kQ4K: linear_by_rule<kQ4K>(m, x, ldx, M, out, threads); break;
        case kQ5K: linear_by_rule<kQ5K>(m, x, ldx, M, out, threads); break;
        case kQ6K: linear_by_rule<kQ6K>(m, x, ldx, M, out, threads); break;
        default: linear_by_rule<kInt8>(m, x, ldx, M, out, threads); break;
    }
}

// Rows `ids` of the matrix, de-quantized (the rule's w, exactly) and rounded once to T: [count][K].
template <typename T>
void rows(const Matrix& m, const int64_t* ids, int64_t count, T* out) {
    for (int64_t i = 0; i < count; ++i) {
        const int64_t p = ids[i] / kPanel;
        const int c = static_cast<int>(ids[i] % kPanel);
        for (int64_t k = 0; k < m.k; ++k) out[i * m.k + k] = narrow<T>(weight_at(m, p, c, k));
    }
}

}  // namespace

extern "C" int quantized_linear_has_avx2() { return QL_AVX2; }

// The instruction tier this build's integer rule runs (native_build.cpu_tiers' order): 0 without
// AVX2, 1 avx2, 2 avx512 (vpdpbusd), 3 amx (its many-rows products on tiles, where Linux grants them).
extern "C" int quantized_linear_tier() {
#if QL_AVX2
    if (quantized::int8_tiles_here()) return 3;
#endif
    return QL_VNNI ? 2 : QL_AVX2;
}

#define QUANTIZED_LINEAR(SUFFIX, T)                                                                                 \
    extern "C" void quantized_linear_##SUFFIX(const void* matrix, const void* x, int64_t ldx, int64_t rows,        \
                                              void* out, int64_t threads) {                                         \
        linear<T>(*static_cast<const Matrix*>(matrix), static_cast<const T*>(x), ldx, rows, static_cast<T*>(out),    \
                  threads);                                                                                         \
    }                                                                                                               \
    extern "C" void quantized_rows_##SUFFIX(const void* matrix, const int64_t* ids, int64_t count, void* out) {     \
        rows<T>(*static_cast<const Matrix*>(matrix), ids, count, static_cast<T*>(out));                              \
    }

QUANTIZED_LINEAR(float32, float)
QUANTIZED_LINEAR(bfloat16, bf16)

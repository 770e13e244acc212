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
// THE INTEGER RULE (Matrix::activations == kInt8Activations; the GGUF kinds on AVX2), the way
// llama.cpp computes, chosen per matrix when it is packed and then kept at every M:
//   x[i] is quantized in blocks of 32 (activation_blocks.h: xq, dx, and the sums of xq per 16);
//   per run of values sharing a weight scale (32, or 16 for q2_k, q3_k, q6_k), in k order,
//     n = sum over the run of q[j,k] * xq[i,k] - offset * sum(xq)     exact, in int32
//     t = a * float(n) (+ m * float(sum(xq)) for the kinds with a minimum)   (w = a (q - offset) + m)
//     acc = fma(t, dx, acc)                                            from acc = +0,
//   then out = round_to_dtype(acc + bias[j]). Row i still depends on x[i] and the matrix alone, so
//   the output is batch-invariant; it differs from the de-quantized fp32 linear by x's rounding to
//   int8 (a relative error of about 1/254 per value).
// Its two paths read the same runs (the scales as the Decoder gives them, the integers as
// weight_quads.h's quads): few rows straight from the blocks (BlockRuns); more rows from a group
// of panels unpacked once per task into quads and scales in L2 (UnpackedRuns), so the bit
// shuffling of the unpacking is paid once per panel, not once per 4 rows.

#include <cmath>
#include <cstdint>
#include <native_build/widen_narrow.h>
#include <type_traits>
#include <vector>

#include "activation_blocks.h"
#include "quantized_blocks.h"
#include "weight_quads.h"

#if QL_AVX2
#include <native_build/avx2_store_row.h>
#endif

namespace {

using namespace quantized;

constexpr int kMaxRows = 6;  // rows of x per micro-kernel

using native_build::bf16;
using native_build::narrow;
using native_build::widen;

// Rows r0.. of the output: store `acc` + bias, rounded, for MR rows and the first `cols` of NP panels.
template <typename T> struct Target {
    T* out;              // row r0, column 16 * p0
    int64_t ldo;         // N
    const float* bias;   // at column 16 * p0, or null
    int64_t cols;        // columns left from 16 * p0 (may exceed 16 * NP)
};

#if QL_AVX2

// The shared stores (native_build/avx2_store_row.h) write one panel row of results.
static_assert(kPanel == native_build::kRowColumns, "a panel row of results is stored by one store_row");
using native_build::store_row;

// The epilogue of every kernel: acc + bias (fp32), rounded once, for MR rows x NP panels.
template <int MR, int NP, typename T>
inline void finish(const __m256 (&acc)[MR][NP][2], const Target<T>& to) {
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p) {
        const int64_t cols = to.cols - p * kPanel < kPanel ? to.cols - p * kPanel : kPanel;
        if (cols <= 0) break;
        __m256 b_lo = _mm256_setzero_ps(), b_hi = _mm256_setzero_ps();
        if (to.bias != nullptr) {
            b_lo = _mm256_loadu_ps(to.bias + p * kPanel);
            b_hi = _mm256_loadu_ps(to.bias + p * kPanel + 8);
        }
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
            __m256 lo = acc[r][p][0], hi = acc[r][p][1];
            if (to.bias != nullptr) {
                lo = _mm256_add_ps(lo, b_lo);
                hi = _mm256_add_ps(hi, b_hi);
            }
            store_row(to.out + r * to.ldo + p * kPanel, lo, hi, cols);
        }
    }
}

// Bytes of one block of a panel (16 rows' blocks side by side; int8: 32 k of its [K][16]).
template <int64_t KIND> constexpr int64_t kPanelBlock = kPanel * format_of(KIND).bytes();

// Bytes of one run of a panel's block (the 16 rows' share of it; int8: the whole 32 k).
template <int64_t KIND> constexpr int64_t kRunBytes = kPanelBlock<KIND> * format_of(KIND).run / format_of(KIND).values;

// The integer kernel reads a panel's bytes in order, once per call, faster than a core's own
// prefetchers bring them: perf put most of a decode step's samples on the first use of each
// weight load. Asking for the bytes kPrefetchAhead further on as each run starts keeps them
// coming: the 1B-shaped Q4_K_M model decodes one stream at ~34 tok/s instead of ~24 (AVX2 EPYC,
// 2 cores; 2-16 KiB ahead measured alike; past the matrix's end it is harmless). The float32
// rule's kernels, bound by their arithmetic, measured slower with it, so they go without.
constexpr int64_t kPrefetchAhead = 16 * 1024;
inline void prefetch_ahead(const uint8_t* from, int64_t bytes) {
    for (int64_t at = 0; at < bytes; at += 64)
        _mm_prefetch(reinterpret_cast<const char*>(from + kPrefetchAhead + at), _MM_HINT_T0);
}

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

// Where the integer kernel reads a panel's runs (their scales, and their weights as quads):
// straight from the quantized blocks, de-quantizing the scales as it goes (few rows) ...
template <int64_t KIND> struct BlockRuns {
    static constexpr Format kFormat = format_of(KIND);
    const uint8_t* block;
    Decoder<KIND> dec;
    const uint8_t* low = nullptr;  // the chunks (THE LAYOUT in quads) that hold the run's first value
    const uint8_t* high = nullptr;
    int high_first = 0;            // that value's field in its high chunk
    explicit BlockRuns(const uint8_t* panel) : block(panel) {}
    void start(int64_t b) {  // block b, in order from 0
        if (b > 0) block += kPanelBlock<KIND>;
        dec.start(block, nullptr);
    }
    void run(int r) {
        dec.run(block, r);
        prefetch_ahead(block + r * kRunBytes<KIND>, kRunBytes<KIND>);
        const int64_t v = r * kFormat.run;
        low = block + kPanel * kFormat.low_at() + 64 * (v / (32 / kFormat.low_bits));
        if constexpr (kFormat.high_bits != 0) {
            constexpr int64_t per_chunk = 32 / kFormat.high_bits;
            high = block + kPanel * kFormat.high_at() + 64 * (v / per_chunk);
            high_first = static_cast<int>(v % per_chunk / 4);
        }
    }
    const Scales& scales() const { return dec.s; }
    void quads_at(int j, __m256i& rows0, __m256i& rows8) const { quads<KIND>(low, high, high_first, j, rows0, rows8); }
};

// ... or from a scratch the panel was unpacked into once, for every row of a task (many rows):
// per run in k order, its Scales, then its quads (rows 0..7, rows 8..15) in value order.
template <int64_t KIND> struct UnpackedRuns {
    static constexpr int64_t kRun = format_of(KIND).run;
    static constexpr int64_t kRunBytes = sizeof(Scales) + kRun / 4 * 2 * sizeof(__m256i);
    const uint8_t* base;
    const uint8_t* at = nullptr;
    int64_t runs_before = 0;  // runs of the blocks before the current one
    explicit UnpackedRuns(const uint8_t* scratch) : base(scratch) {}
    void start(int64_t b) { runs_before = b * (format_of(KIND).values / kRun); }
    void run(int r) { at = base + (runs_before + r) * kRunBytes; }
    const Scales& scales() const { return *reinterpret_cast<const Scales*>(at); }
    void quads_at(int j, __m256i& rows0, __m256i& rows8) const {
        const uint8_t* q = at + sizeof(Scales) + j / 4 * 2 * sizeof(__m256i);
        rows0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(q));
        rows8 = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + sizeof(__m256i)));
    }
};

// Panel p unpacked into `scratch` (UnpackedRuns' layout; 32-byte aligned).
template <int64_t KIND>
void unpack_panel(const Matrix& m, int64_t p, uint8_t* scratch) {
    constexpr Format f = format_of(KIND);
    BlockRuns<KIND> runs(m.data + p * panel_bytes(m));
    for (int64_t b = 0; b < m.k / f.values; ++b) {
        runs.start(b);
        for (int r = 0; r < f.values / f.run; ++r, scratch += UnpackedRuns<KIND>::kRunBytes) {
            runs.run(r);
            std::memcpy(scratch, &runs.scales(), sizeof(Scales));
            auto* q = reinterpret_cast<__m256i*>(scratch + sizeof(Scales));
#pragma GCC unroll 8
            for (int j = 0; j < f.run; j += 4) runs.quads_at(j, q[j / 2], q[j / 2 + 1]);
        }
    }
}

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
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) acc[r][0][0] = acc[r][0][1] = _mm256_setzero_ps();
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
                const int32_t* sums = xa.sums_of(i0 + i) + k / kSumRun;
                const int32_t xsum = kRun == 32 ? sums[0] + sums[1] : sums[0];
                const __m256 dx = _mm256_set1_ps(xa.d_of(i0 + i)[k / kActivationBlock]);
                for (int h = 0; h < 2; ++h) {
                    __m256i n = sum[i][h];
                    if constexpr (kOffset != 0) n = _mm256_sub_epi32(n, _mm256_set1_epi32(kOffset * xsum));
                    const __m256 a = h == 0 ? s.d_lo : s.d_hi;
                    __m256 t;
                    if constexpr (adds_minimum(KIND)) {
                        const __m256 minimum = h == 0 ? s.m_lo : s.m_hi;
                        t = _mm256_fmadd_ps(a, _mm256_cvtepi32_ps(n),
                                            _mm256_mul_ps(minimum, _mm256_set1_ps(static_cast<float>(xsum))));
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
    const int64_t count = i1 - i0, blocks = (count + 3) / 4, first = (count + blocks - 1) / blocks;
    for (int64_t i = i0; i < i1; i += first) {
        const Target<T> to{out + i * m.n + p * kPanel, m.n, m.bias == nullptr ? nullptr : m.bias + p * kPanel,
                           m.n - p * kPanel};
        switch (i1 - i < first ? i1 - i : first) {
            case 4: fused_int8<KIND, 4>(m, xa, i, runs, to); break;
            case 3: fused_int8<KIND, 3>(m, xa, i, runs, to); break;
            case 2: fused_int8<KIND, 2>(m, xa, i, runs, to); break;
            default: fused_int8<KIND, 1>(m, xa, i, runs, to); break;
        }
    }
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
            const Target<T> to{out + i * m.n + p * kPanel, m.n, m.bias == nullptr ? nullptr : m.bias + p * kPanel,
                               m.n - p * kPanel};
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
            const Target<T> to{out + i * m.n + p * kPanel, m.n, m.bias == nullptr ? nullptr : m.bias + p * kPanel,
                               m.n - p * kPanel};
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

// Below this many multiply-adds per thread the OpenMP hand-off costs more than it saves.
constexpr int64_t kMinMacsPerThread = 1 << 16;
// Rows per task at most: a task's de-quantized panels are read from L2 once per 6 of its rows.
constexpr int64_t kMaxRowBlock = 96;

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

#if QL_AVX2
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
    if (static_cast<int64_t>(q.size()) < M * m.k) {
        q.resize(M * m.k);
        d.resize(M * m.k / kActivationBlock);
        sums.resize(M * m.k / kSumRun);
    }
    const ActivationBlocks xa{q.data(), d.data(), sums.data(), m.k};
    // One panel's unpacked runs, in vectors (the many-rows path's scratch).
    const int64_t panel_scratch = m.k / UnpackedRuns<KIND>::kRun * UnpackedRuns<KIND>::kRunBytes /
                                  static_cast<int64_t>(sizeof(__m256i));
    const int64_t useful = M * m.k * m.panels * kPanel / kMinMacsPerThread;
    const int nt = static_cast<int>(threads < useful ? (threads < 1 ? 1 : threads) : (useful < 1 ? 1 : useful));
    int64_t row_blocks = 1, row_block = M, group = 1;
    if (M > kFusedRows) {
        row_blocks = (M + kMaxRowBlock - 1) / kMaxRowBlock;
        row_block = ((M + row_blocks - 1) / row_blocks + 3) / 4 * 4;
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
        if (M > kFusedRows && static_cast<int64_t>(unpacked.size()) < group * panel_scratch)
            unpacked.resize(group * panel_scratch);
        int64_t held = -1;  // the group unpacked in `unpacked` by this thread's last task
#pragma omp for schedule(static)
        for (int64_t t = 0; t < tasks; ++t) {
            const int64_t g = t / row_blocks, rb = t % row_blocks;
            const int64_t p0 = g * group, p1 = (g + 1) * group < m.panels ? (g + 1) * group : m.panels;
            const int64_t i1 = (rb + 1) * row_block < M ? (rb + 1) * row_block : M;
            if (M <= kFusedRows) {
                for (int64_t p = p0; p < p1; ++p)
                    rows_int8<KIND>(m, xa, 0, M, p, BlockRuns<KIND>(m.data + p * panel_bytes(m)), out);
                continue;
            }
            auto* scratch = reinterpret_cast<uint8_t*>(unpacked.data());
            if (g != held) {
                for (int64_t p = p0; p < p1; ++p)
                    unpack_panel<KIND>(m, p, scratch + (p - p0) * panel_scratch * sizeof(__m256i));
                held = g;
            }
            for (int64_t p = p0; p < p1; ++p)
                rows_int8<KIND>(m, xa, rb * row_block, i1, p,
                                UnpackedRuns<KIND>(scratch + (p - p0) * panel_scratch * sizeof(__m256i)), out);
        }
    }
}
#endif

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

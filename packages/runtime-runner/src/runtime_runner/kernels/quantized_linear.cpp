// y = x @ W.T + b on a CPU for a weight W kept quantized in memory (GGUF Q8_0 / Q4_0 / Q4_1
// blocks, or int8 with one fp32 scale per row), batch-invariant as batch_invariant_linear.cpp is.
//
// THE RULE (every path, micro-kernel shape, tail and thread split keeps it):
//   w[j,k] is the de-quantized weight, computed exactly as the reference de-quantizes it, in fp32:
//     q8_0  d * q               q4_0  d * (q - 8)        (both exact in fp32)
//     q4_1  fma(d, q, m)        (d * q is exact, so this is (d * q) + m rounded once)
//     int8  q * s               (rounded once)
//   and every output element (i, j) is ONE fp32 chain over k = 0..K-1 in increasing order,
//     acc = fma(x[i,k], w[j,k], acc)      from acc = +0,
//   then out = round_to_dtype(acc + bias[j]) (the bias in fp32), or round(acc) without a bias.
// So the result is, bit for bit, the batch-invariant fp32 linear of the de-quantized matrix: row
// i depends on x[i] and the matrix alone, whatever M, the row's position or the thread count.
//
// Layout (packed once in Python, quantized_linear.py): rows are grouped into panels of 16 (N
// padded with zero rows); a GGUF panel is its blocks in k order, each block the 16 rows' block
// of 32 values transposed so that one k (or one nibble pair) of the 16 rows is 16 consecutive bytes:
//     q8_0  16 fp16 d | [32 k][16 rows] int8                                   (16 * 34 bytes)
//     q4_0  16 fp16 d | [16 j][16 rows] bytes, value 2j low nibble, 2j+1 high  (16 * 18 bytes)
//     q4_1  16 fp16 d | 16 fp16 m | [16 j][16 rows] nibble bytes               (16 * 20 bytes)
// an int8 panel is [K][16 rows] int8, its scales fp32 [16 * panels]. The bytes are the file's
// bytes reordered (a GGUF byte j holds values j and j+16; here one load serves two neighbouring
// k): the same size as the quantized matrix, never widened in memory.
//
// Two paths compute the rule, from the same de-quantization (Decoder<KIND>, below):
// - few rows (M <= 8, decode): each block's weights are de-quantized in registers and used at
//   once, so the quantized bytes stream from memory once per call, never widened; one row runs
//   over two panels at a time (four independent chains), 2..8 rows in blocks of up to 4.
// - more rows (prefill): a task de-quantizes a group of panels into an fp32 scratch (about half
//   of L2), once, and runs 6-row micro-kernels over it, as the bf16 kernel does over its panels.
// Threads split the panels (output columns) in contiguous runs; x is never split along k.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <native_build/widen_narrow.h>
#include <type_traits>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include <native_build/avx2_store_row.h>
#define QL_AVX2 1
#else
#define QL_AVX2 0
#endif

namespace {

constexpr int64_t kPanel = 16;  // rows of W (output columns) per panel
constexpr int64_t kBlock = 32;  // values per GGUF block
constexpr int kMaxRows = 6;     // rows of x per micro-kernel

enum Kind : int64_t { kQ8_0 = 0, kQ4_0 = 1, kQ4_1 = 2, kInt8 = 3 };

// The descriptor the Python object keeps alive (quantized_linear.py's Matrix, field for field).
struct Matrix {
    int64_t kind;
    int64_t n, k;          // out_features, in_features
    int64_t panels;        // ceil(n / 16)
    const uint8_t* data;   // the packed panels
    const float* scales;   // int8: fp32 [16 * panels]; otherwise null
    const float* bias;     // fp32 [16 * panels] or null
};

using native_build::bf16;
using native_build::narrow;
using native_build::widen;

inline float half(const uint8_t* p) {
    _Float16 h;
    std::memcpy(&h, p, sizeof h);
    return static_cast<float>(h);
}

// Bytes of one GGUF block of 16 rows, and of its header (the d, and q4_1's m, of the 16 rows).
inline int64_t block_bytes(int64_t kind) { return kind == kQ8_0 ? 16 * 34 : kind == kQ4_0 ? 16 * 18 : 16 * 20; }
inline int64_t header_bytes(int64_t kind) { return kind == kQ4_1 ? 64 : 32; }
inline int64_t panel_bytes(const Matrix& m) {
    return m.kind == kInt8 ? m.k * kPanel : m.k / kBlock * block_bytes(m.kind);
}

// De-quantized value of row c (0..15) at k of panel p (the rule's w), one at a time: the
// reference every faster path must equal, and the embedding rows' source.
inline float weight_at(const Matrix& m, int64_t p, int c, int64_t k) {
    const uint8_t* panel = m.data + p * panel_bytes(m);
    if (m.kind == kInt8) return static_cast<float>(static_cast<int8_t>(panel[k * kPanel + c])) * m.scales[p * kPanel + c];
    const uint8_t* block = panel + k / kBlock * block_bytes(m.kind);
    const int64_t at = k % kBlock;
    const float d = half(block + 2 * c);
    if (m.kind == kQ8_0) return d * static_cast<float>(static_cast<int8_t>(block[32 + at * kPanel + c]));
    const uint8_t byte = block[header_bytes(m.kind) + at / 2 * kPanel + c];
    const int q = at % 2 == 0 ? byte & 0x0F : byte >> 4;
    if (m.kind == kQ4_0) return d * static_cast<float>(q - 8);
    return std::fma(d, static_cast<float>(q), half(block + 32 + 2 * c));
}

// Rows r0.. of the output: store `acc` + bias, rounded, for MR rows and the first `cols` of NP panels.
template <typename T> struct Target {
    T* out;              // row r0, column 16 * p0
    int64_t ldo;         // N
    const float* bias;   // at column 16 * p0, or null
    int64_t cols;        // columns left from 16 * p0 (may exceed 16 * NP)
};

#if QL_AVX2

inline __m256 halves(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256i signed8(const uint8_t* p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
inline __m256i unsigned8(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
inline __m256 scaled(__m256i q, __m256 d) { return _mm256_mul_ps(_mm256_cvtepi32_ps(q), d); }

// One kind's de-quantization of a panel, a block of 32 k at a time (int8: 32 k of its [K][16]):
// `start` reads the block's scales, `at` gives the 16 weights at k (0..31) of the block, columns
// 0..7 in lo and 8..15 in hi: the rule's w exactly. The fused kernels and the scratch de-quantizer
// both use these, so the two paths multiply by the same values.
template <int64_t KIND> struct Decoder;

template <> struct Decoder<kQ8_0> {
    static constexpr int64_t kBytes = 16 * 34;
    __m256 d_lo, d_hi;
    void start(const uint8_t* block, const float*) {
        d_lo = halves(block);
        d_hi = halves(block + 16);
    }
    void at(const uint8_t* block, int k, __m256& lo, __m256& hi) const {
        lo = scaled(signed8(block + 32 + k * kPanel), d_lo);
        hi = scaled(signed8(block + 40 + k * kPanel), d_hi);
    }
};

// q4_0 and q4_1: value k is the low nibble of byte row k / 2 when k is even, else its high one.
inline __m256i nibble(const uint8_t* bytes, int k) {
    const __m256i v = unsigned8(bytes + k / 2 * kPanel);
    return k % 2 == 0 ? _mm256_and_si256(v, _mm256_set1_epi32(0x0F)) : _mm256_srli_epi32(v, 4);
}

// d * (q - 8) as fma(d, q, -8 d): exact, as d * (q - 8) and -8 d are (fp16 d times a small
// integer), and one instruction fewer; only a zero's sign may differ, which no chain can see
// (an fma chain from +0 never holds -0).
template <> struct Decoder<kQ4_0> {
    static constexpr int64_t kBytes = 16 * 18;
    __m256 d_lo, d_hi, m_lo, m_hi;
    void start(const uint8_t* block, const float*) {
        d_lo = halves(block);
        d_hi = halves(block + 16);
        m_lo = _mm256_mul_ps(d_lo, _mm256_set1_ps(-8.0f));
        m_hi = _mm256_mul_ps(d_hi, _mm256_set1_ps(-8.0f));
    }
    void at(const uint8_t* block, int k, __m256& lo, __m256& hi) const {
        lo = _mm256_fmadd_ps(d_lo, _mm256_cvtepi32_ps(nibble(block + 32, k)), m_lo);
        hi = _mm256_fmadd_ps(d_hi, _mm256_cvtepi32_ps(nibble(block + 40, k)), m_hi);
    }
};

template <> struct Decoder<kQ4_1> {
    static constexpr int64_t kBytes = 16 * 20;
    __m256 d_lo, d_hi, m_lo, m_hi;
    void start(const uint8_t* block, const float*) {
        d_lo = halves(block);
        d_hi = halves(block + 16);
        m_lo = halves(block + 32);
        m_hi = halves(block + 48);
    }
    void at(const uint8_t* block, int k, __m256& lo, __m256& hi) const {
        lo = _mm256_fmadd_ps(d_lo, _mm256_cvtepi32_ps(nibble(block + 64, k)), m_lo);
        hi = _mm256_fmadd_ps(d_hi, _mm256_cvtepi32_ps(nibble(block + 72, k)), m_hi);
    }
};

template <> struct Decoder<kInt8> {
    static constexpr int64_t kBytes = kBlock * kPanel;
    __m256 s_lo, s_hi;
    void start(const uint8_t*, const float* scales) {
        s_lo = _mm256_loadu_ps(scales);
        s_hi = _mm256_loadu_ps(scales + 8);
    }
    void at(const uint8_t* block, int k, __m256& lo, __m256& hi) const {
        lo = scaled(signed8(block + k * kPanel), s_lo);
        hi = scaled(signed8(block + k * kPanel + 8), s_hi);
    }
};

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

// Panel p de-quantized into w [K][16] fp32.
template <int64_t KIND>
void dequantize_panel(const Matrix& m, int64_t p, float* w) {
    const uint8_t* block = m.data + p * panel_bytes(m);
    const float* scales = m.scales == nullptr ? nullptr : m.scales + p * kPanel;
    Decoder<KIND> dec;
    for (int64_t k0 = 0; k0 < m.k; k0 += kBlock, block += Decoder<KIND>::kBytes) {
        dec.start(block, scales);
        const int n = m.k - k0 < kBlock ? static_cast<int>(m.k - k0) : static_cast<int>(kBlock);
        for (int k = 0; k < n; ++k) {
            __m256 lo, hi;
            dec.at(block, k, lo, hi);
            _mm256_storeu_ps(w + (k0 + k) * kPanel, lo);
            _mm256_storeu_ps(w + (k0 + k) * kPanel + 8, hi);
        }
    }
}

// MR rows x NP panels straight from the quantized bytes, de-quantizing in registers (few rows:
// the weights are read once per MR rows, at the speed memory gives them).
template <int64_t KIND, int MR, int NP, typename T>
void fused(const Matrix& m, const float* x, int64_t ldx, int64_t p0, const Target<T>& to) {
    const int64_t stride = panel_bytes(m);
    const uint8_t* block = m.data + p0 * stride;
    const float* scales = m.scales == nullptr ? nullptr : m.scales + p0 * kPanel;
    __m256 acc[MR][NP][2];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
        for (int p = 0; p < NP; ++p) acc[r][p][0] = acc[r][p][1] = _mm256_setzero_ps();
    Decoder<KIND> dec[NP];
    auto step = [&](int k, int64_t at) {
#pragma GCC unroll 8
        for (int p = 0; p < NP; ++p) {
            __m256 lo, hi;
            dec[p].at(block + p * stride, k, lo, hi);
#pragma GCC unroll 8
            for (int r = 0; r < MR; ++r) {
                const __m256 xs = _mm256_broadcast_ss(x + r * ldx + at);
                acc[r][p][0] = _mm256_fmadd_ps(xs, lo, acc[r][p][0]);
                acc[r][p][1] = _mm256_fmadd_ps(xs, hi, acc[r][p][1]);
            }
        }
    };
    int64_t k0 = 0;
    for (; k0 + kBlock <= m.k; k0 += kBlock, block += Decoder<KIND>::kBytes) {
#pragma GCC unroll 8
        for (int p = 0; p < NP; ++p) dec[p].start(block + p * stride, scales == nullptr ? nullptr : scales + p * kPanel);
#pragma GCC unroll 32
        for (int k = 0; k < kBlock; ++k) step(k, k0 + k);
    }
    if (k0 < m.k) {  // int8's last partial 32 (the GGUF kinds have whole blocks)
        for (int p = 0; p < NP; ++p) dec[p].start(block + p * stride, scales == nullptr ? nullptr : scales + p * kPanel);
        for (int k = 0; k < m.k - k0; ++k) step(k, k0 + k);
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
constexpr int64_t kFusedRows = 8;
// Panels per fused task: the one-row kernel runs two panels (four chains) to hide the FMA latency.
constexpr int64_t kFusedPanels = 2;

// All M (<= kFusedRows) rows over panels [p0, p1), de-quantizing in registers: one row over two
// panels at a time, else blocks of up to 4 rows over one panel (5..8 rows as two even blocks).
template <int64_t KIND, typename T>
void rows_fused(const Matrix& m, const float* x, int64_t ldx, int64_t M, int64_t p0, int64_t p1, T* out) {
    const int64_t first = M <= 4 ? M : (M + 1) / 2;
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

template <typename T>
void linear(const Matrix& m, const T* x, int64_t ldx, int64_t M, T* out, int64_t threads) {
    if (M <= 0 || m.panels <= 0) return;
    switch (m.kind) {
        case kQ8_0: linear_of<kQ8_0>(m, x, ldx, M, out, threads); break;
        case kQ4_0: linear_of<kQ4_0>(m, x, ldx, M, out, threads); break;
        case kQ4_1: linear_of<kQ4_1>(m, x, ldx, M, out, threads); break;
        default: linear_of<kInt8>(m, x, ldx, M, out, threads); break;
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

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
//     q4_0  16 fp16 d | [16 j][16 rows] bytes, value j low nibble, j+16 high   (16 * 18 bytes)
//     q4_1  16 fp16 d | 16 fp16 m | [16 j][16 rows] nibble bytes               (16 * 20 bytes)
// an int8 panel is [K][16 rows] int8, its scales fp32 [16 * panels]. The bytes are the file's
// bytes reordered: the same size as the quantized matrix, never widened in memory.
//
// A task de-quantizes its panels into an fp32 scratch ([K][16] per panel, in L2), once, and runs
// the chain over its rows from there (6-row micro-kernels, as the bf16 kernel's).

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define QL_AVX2 1
#else
#define QL_AVX2 0
#endif

namespace {

constexpr int64_t kPanel = 16;  // rows of W (output columns) per panel
constexpr int64_t kBlock = 32;  // values per GGUF block
constexpr int kMaxRows = 6;     // rows of x per micro-kernel

enum Kind : int64_t { kQ8_0 = 0, kQ4_0 = 1, kQ4_1 = 2, kInt8 = 3 };

// The descriptor the Python object keeps alive (quantized_linear.py's _Matrix, field for field).
struct Matrix {
    int64_t kind;
    int64_t n, k;          // out_features, in_features
    int64_t panels;        // ceil(n / 16)
    const uint8_t* data;   // the packed panels
    const float* scales;   // int8: fp32 [16 * panels]; otherwise null
    const float* bias;     // fp32 [16 * panels] or null
};

struct bf16 {
    uint16_t bits;
};

inline float widen(float x) { return x; }
inline float widen(bf16 x) {
    uint32_t u = static_cast<uint32_t>(x.bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

template <typename T> T narrow(float x);
template <> inline float narrow<float>(float x) { return x; }
// Round to nearest even, as torch does; a NaN stays a (quiet) NaN.
template <> inline bf16 narrow<bf16>(float x) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    uint16_t rounded = static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    return bf16{std::isnan(x) ? static_cast<uint16_t>((u >> 16) | 0x40u) : rounded};
}

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
    const uint8_t byte = block[header_bytes(m.kind) + (at % 16) * kPanel + c];
    const int q = at < 16 ? byte & 0x0F : byte >> 4;
    if (m.kind == kQ4_0) return d * static_cast<float>(q - 8);
    return std::fma(d, static_cast<float>(q), half(block + 32 + 2 * c));
}

#if QL_AVX2

// 8 int32 lanes as fp32 times the 8 scales d: the q8_0 / q4_0 / int8 de-quantization.
inline __m256 scaled(__m256i q, __m256 d) { return _mm256_mul_ps(_mm256_cvtepi32_ps(q), d); }

// Panel p de-quantized into w [K][16] fp32.
void dequantize_panel(const Matrix& m, int64_t p, float* w) {
    const uint8_t* panel = m.data + p * panel_bytes(m);
    if (m.kind == kInt8) {
        const __m256 s_lo = _mm256_loadu_ps(m.scales + p * kPanel), s_hi = _mm256_loadu_ps(m.scales + p * kPanel + 8);
        for (int64_t k = 0; k < m.k; ++k, panel += kPanel, w += kPanel) {
            _mm256_storeu_ps(w, scaled(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(panel))), s_lo));
            _mm256_storeu_ps(w + 8, scaled(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(panel + 8))), s_hi));
        }
        return;
    }
    const int64_t blocks = m.k / kBlock, bytes = block_bytes(m.kind), head = header_bytes(m.kind);
    for (int64_t b = 0; b < blocks; ++b, panel += bytes, w += kBlock * kPanel) {
        const __m256 d_lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(panel)));
        const __m256 d_hi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(panel + 16)));
        const uint8_t* q = panel + head;
        if (m.kind == kQ8_0) {
            for (int k = 0; k < kBlock; ++k) {
                const __m128i* row = reinterpret_cast<const __m128i*>(q + k * kPanel);
                _mm256_storeu_ps(w + k * kPanel, scaled(_mm256_cvtepi8_epi32(_mm_loadl_epi64(row)), d_lo));
                _mm256_storeu_ps(w + k * kPanel + 8, scaled(_mm256_cvtepi8_epi32(_mm_srli_si128(_mm_loadu_si128(row), 8)), d_hi));
            }
            continue;
        }
        const __m256i low = _mm256_set1_epi32(0x0F), eight = _mm256_set1_epi32(8);
        __m256 m_lo = _mm256_setzero_ps(), m_hi = _mm256_setzero_ps();
        if (m.kind == kQ4_1) {
            m_lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(panel + 32)));
            m_hi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(panel + 48)));
        }
        for (int j = 0; j < 16; ++j) {
            const __m128i pair = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + j * kPanel));
            const __m256i lo8 = _mm256_cvtepu8_epi32(pair), hi8 = _mm256_cvtepu8_epi32(_mm_srli_si128(pair, 8));
            const __m256i v[4] = {_mm256_and_si256(lo8, low), _mm256_and_si256(hi8, low), _mm256_srli_epi32(lo8, 4),
                                  _mm256_srli_epi32(hi8, 4)};
            float* at[2] = {w + j * kPanel, w + (j + 16) * kPanel};
            for (int h = 0; h < 2; ++h) {
                if (m.kind == kQ4_0) {
                    _mm256_storeu_ps(at[h], scaled(_mm256_sub_epi32(v[2 * h], eight), d_lo));
                    _mm256_storeu_ps(at[h] + 8, scaled(_mm256_sub_epi32(v[2 * h + 1], eight), d_hi));
                } else {
                    _mm256_storeu_ps(at[h], _mm256_fmadd_ps(d_lo, _mm256_cvtepi32_ps(v[2 * h]), m_lo));
                    _mm256_storeu_ps(at[h] + 8, _mm256_fmadd_ps(d_hi, _mm256_cvtepi32_ps(v[2 * h + 1]), m_hi));
                }
            }
        }
    }
}

// 8 bf16 bit patterns (in the low halves of 32-bit lanes) of v, rounded as narrow<bf16>.
inline __m256i bf16_bits(__m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(rounded, quiet, nan);
}

// 16 results (columns 0..7 in lo, 8..15 in hi) stored as the output dtype, the first `cols` of them.
inline void store_row(float* out, __m256 lo, __m256 hi, int64_t cols) {
    if (cols == kPanel) {
        _mm256_storeu_ps(out, lo);
        _mm256_storeu_ps(out + 8, hi);
        return;
    }
    alignas(32) float row[kPanel];
    _mm256_store_ps(row, lo);
    _mm256_store_ps(row + 8, hi);
    std::memcpy(out, row, cols * sizeof(float));
}
inline void store_row(bf16* out, __m256 lo, __m256 hi, int64_t cols) {
    // packus works within 128-bit lanes: [lo0-3 hi0-3 | lo4-7 hi4-7]; the permute restores column order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(bf16_bits(lo), bf16_bits(hi)), 0xD8);
    if (cols == kPanel) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), packed);
        return;
    }
    alignas(32) uint16_t row[kPanel];
    _mm256_store_si256(reinterpret_cast<__m256i*>(row), packed);
    std::memcpy(out, row, cols * sizeof(uint16_t));
}

// Rows r0..r0+MR-1 x de-quantized panels w [NP][K][16]: 2 * MR * NP chains of the rule.
template <int MR, int NP, typename T>
inline void block(const float* x, int64_t ldx, int64_t K, const float* w, const float* bias, T* out, int64_t ldo,
                  int64_t cols_left) {
    const float* xr[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) xr[r] = x + r * ldx;
    __m256 acc[MR][NP][2];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
        for (int p = 0; p < NP; ++p) acc[r][p][0] = acc[r][p][1] = _mm256_setzero_ps();
    const int64_t panel = K * kPanel;
    for (int64_t k = 0; k < K; ++k, w += kPanel) {
#pragma GCC unroll 8
        for (int p = 0; p < NP; ++p) {
            // As in the bf16 kernel: re-broadcasting x per panel keeps everything in 16 registers.
            if constexpr (MR > 1 && NP > 1) asm volatile("" ::: "memory");
            const __m256 lo = _mm256_loadu_ps(w + p * panel), hi = _mm256_loadu_ps(w + p * panel + 8);
#pragma GCC unroll 8
            for (int r = 0; r < MR; ++r) {
                const __m256 xs = _mm256_broadcast_ss(xr[r] + k);
                acc[r][p][0] = _mm256_fmadd_ps(xs, lo, acc[r][p][0]);
                acc[r][p][1] = _mm256_fmadd_ps(xs, hi, acc[r][p][1]);
            }
        }
    }
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p) {
        const int64_t cols = cols_left - p * kPanel < kPanel ? cols_left - p * kPanel : kPanel;
        if (cols <= 0) break;
        __m256 b_lo = _mm256_setzero_ps(), b_hi = _mm256_setzero_ps();
        if (bias != nullptr) {
            b_lo = _mm256_loadu_ps(bias + p * kPanel);
            b_hi = _mm256_loadu_ps(bias + p * kPanel + 8);
        }
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
            __m256 lo = acc[r][p][0], hi = acc[r][p][1];
            if (bias != nullptr) {
                lo = _mm256_add_ps(lo, b_lo);
                hi = _mm256_add_ps(hi, b_hi);
            }
            store_row(out + r * ldo + p * kPanel, lo, hi, cols);
        }
    }
}

#else  // the portable path: the same values and chains with std::fma, one column at a time

void dequantize_panel(const Matrix& m, int64_t p, float* w) {
    for (int64_t k = 0; k < m.k; ++k)
        for (int c = 0; c < kPanel; ++c) w[k * kPanel + c] = weight_at(m, p, c, k);
}

template <int MR, int NP, typename T>
inline void block(const float* x, int64_t ldx, int64_t K, const float* w, const float* bias, T* out, int64_t ldo,
                  int64_t cols_left) {
    float acc[MR][NP][kPanel] = {};
    for (int64_t k = 0; k < K; ++k)
        for (int p = 0; p < NP; ++p)
            for (int r = 0; r < MR; ++r)
                for (int c = 0; c < kPanel; ++c)
                    acc[r][p][c] = std::fma(x[r * ldx + k], w[(p * K + k) * kPanel + c], acc[r][p][c]);
    for (int p = 0; p < NP; ++p)
        for (int r = 0; r < MR; ++r)
            for (int64_t c = 0; c < kPanel && p * kPanel + c < cols_left; ++c)
                out[r * ldo + p * kPanel + c] =
                    narrow<T>(bias != nullptr ? acc[r][p][c] + bias[p * kPanel + c] : acc[r][p][c]);
}

#endif

// Rows [r0, r1) of x over NP de-quantized panels starting at panel p0.
template <int NP, typename T>
void rows_over(const Matrix& m, const float* x, int64_t ldx, const float* w, int64_t p0, int64_t r0, int64_t r1, T* out) {
    const float* bias = m.bias == nullptr ? nullptr : m.bias + p0 * kPanel;
    const int64_t cols_left = m.n - p0 * kPanel;
    for (int64_t i = r0; i < r1; i += kMaxRows) {
        const float* xi = x + i * ldx;
        T* oi = out + i * m.n + p0 * kPanel;
        switch (r1 - i < kMaxRows ? r1 - i : kMaxRows) {
            case 6: block<6, NP>(xi, ldx, m.k, w, bias, oi, m.n, cols_left); break;
            case 5: block<5, NP>(xi, ldx, m.k, w, bias, oi, m.n, cols_left); break;
            case 4: block<4, NP>(xi, ldx, m.k, w, bias, oi, m.n, cols_left); break;
            case 3: block<3, NP>(xi, ldx, m.k, w, bias, oi, m.n, cols_left); break;
            case 2: block<2, NP>(xi, ldx, m.k, w, bias, oi, m.n, cols_left); break;
            default: block<1, NP>(xi, ldx, m.k, w, bias, oi, m.n, cols_left); break;
        }
    }
}

// Below this many multiply-adds per thread the OpenMP hand-off costs more than it saves.
constexpr int64_t kMinMacsPerThread = 1 << 16;
// Rows per task at most: a task's de-quantized panel is read from L2 once per 6 of its rows.
constexpr int64_t kMaxRowBlock = 96;

template <typename T>
void linear(const Matrix& m, const T* x, int64_t ldx, int64_t M, T* out, int64_t threads) {
    if (M <= 0 || m.panels <= 0) return;
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
    const int64_t useful = M * m.k * m.panels * kPanel / kMinMacsPerThread;
    const int nt = static_cast<int>(threads < useful ? (threads < 1 ? 1 : threads) : (useful < 1 ? 1 : useful));
    // Tasks: one panel x a block of rows, panel major so that threads split the weights.
    const int64_t row_blocks = (M + kMaxRowBlock - 1) / kMaxRowBlock;
    const int64_t row_block = (M + row_blocks - 1) / row_blocks;
    const int64_t tasks = m.panels * row_blocks;
    float* wide = widened.data();

#pragma omp parallel num_threads(nt)
    {
        if constexpr (!std::is_same_v<T, float>) {
#pragma omp for schedule(static)
            for (int64_t i = 0; i < M; ++i)
                for (int64_t k = 0; k < m.k; ++k) wide[i * m.k + k] = widen(x[i * ldx + k]);
        }
        thread_local std::vector<float> panel;
        if (static_cast<int64_t>(panel.size()) < m.k * kPanel) panel.resize(m.k * kPanel);
        int64_t held = -1;  // the panel de-quantized in `panel` by this thread's last task
#pragma omp for schedule(static)
        for (int64_t t = 0; t < tasks; ++t) {
            const int64_t p = t / row_blocks, rb = t % row_blocks;
            if (p != held) {
                dequantize_panel(m, p, panel.data());
                held = p;
            }
            const int64_t i1 = (rb + 1) * row_block < M ? (rb + 1) * row_block : M;
            rows_over<1>(m, xf, ldf, panel.data(), p, rb * row_block, i1, out);
        }
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

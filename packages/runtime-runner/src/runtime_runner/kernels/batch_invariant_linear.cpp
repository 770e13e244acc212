// y = x @ W.T + b on a CPU whose row i is a function of x[i], W and b alone: bitwise the same
// whether the row is computed alone or among any number of rows, at any position, on any number
// of threads. oneDNN / aten pick kernels and blockings by M (and split K when it pays), so a
// request's logits could change with the batch it happened to share; this kernel cannot.
//
// THE RULE (keep it in every path, micro-kernel shape and tail):
//   Every output element (i, j) is accumulated in fp32 as ONE sequential chain over k = 0..K-1,
//       acc = fma(x[i,k], w[j,k], acc)        starting from acc = 0, k increasing,
//   one fused multiply-add per k: never split over k into lanes or partial sums, never
//   reassociated. Vectorization runs across output columns j (and reuse across rows i), never
//   across k. Then out = round_to_dtype(acc + bias[j]) with the bias widened to fp32, or
//   round(acc) without a bias. (The chain starts at +0, so an all-zero chain is +0, never -0.)
// An fma is correctly rounded, so vfmadd231ps and std::fma give the same bits: every blocking
// (rows per micro-kernel, panels per micro-kernel, M and N tails), every thread split and the
// portable path compute the identical chain, and the result cannot depend on M, on the row's
// position, or on threads. Caching-driven K blocking would be allowed only if it stored the fp32
// partial and continued the same chain; at the decoder's K (<= a few thousand) none is needed.
//
// Layout: the weight [N, K] is prepacked once (in Python, batch_invariant_linear.py) into column
// panels, panel p = columns 16p..16p+15 as [K][16] in the weight's own dtype, N padded to a
// multiple of 16 with zero columns. bf16 panels hold each row of 16 columns in the order
// 0,8,1,9,...,7,15, so that 32-bit lane l of a 256-bit load holds columns l (low half) and l+8
// (high half): one load, a shift and a mask widen both halves, with no shuffle. x's rows are widened to fp32 once per call (bf16/fp16) or read in place
// (fp32); the bias comes as fp32 [16 * panels], zero-padded.
//
// bf16 on a CPU with AMX (amx_bf16: tile matrix multiply), K a multiple of 32: the weight is packed
// in AMX's pair layout instead (panel p = [K/2][16][2], k pairs of each column side by side), and
// every output element is ONE chain of tile dot products over the k blocks 0..31, 32..63, ... in
// increasing order, from +0: acc = tdpbf16ps(acc, x[i, block], w[block, j]), then the bias and the
// rounding as above. The hardware computes element (i, j) of a tile product from row i of the x
// tile and column j of the weight tile alone, whichever rows share the tile, so this chain too is
// a function of x[i], W and b alone: batch-invariant, as the fp32 chain is, though not bitwise
// equal to it (the hardware's own rounding inside a block, and bf16 inputs below the normal range
// read as zero). Prompts run about ten times faster this way than through the fp32 chain's FMAs.
//
// Micro-kernels are MR rows x NP panels, each panel two 8-float accumulators: 6x1 (12
// accumulators, 2 weight, 1 broadcast register) for the bulk of M, and for fewer rows wider
// ones (1x6, 2x3, 3x2, 4x1, 5x1) so that 8-12 independent FMA chains hide the FMA latency at
// decode batch sizes. Work is split over OpenMP threads by (panel group x row block); inside a
// task 6-row blocks run over the group's panels, so the group's weights stay in L2 while each
// block of x sits in L1.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <native_build/widen_narrow.h>
#include <type_traits>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include <native_build/avx2_store_row.h>
#define BIL_AVX2 1
#else
#define BIL_AVX2 0
#endif

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BW__) && defined(__linux__)
#include <immintrin.h>
#include <native_build/amx_tiles.h>
#include <omp.h>
#define BIL_AMX 1
#else
#define BIL_AMX 0
#endif

namespace {

constexpr int64_t kPanel = 16;  // output columns per panel
constexpr int kMaxRows = 6;     // rows of the widest micro-kernel

using native_build::bf16;
using native_build::narrow;
using native_build::widen;

// Panel row position of column c (0..15): bf16 rows are interleaved (see the header), others not.
template <typename W> constexpr int slot_of(int c) { return c; }
template <> constexpr int slot_of<bf16>(int c) { return c < 8 ? 2 * c : 2 * (c - 8) + 1; }

// Where one call's operands are: x rows (fp32, widened), panels, bias, output.
template <typename W> struct Operands {
    const float* x;      // [M][ldx], fp32
    int64_t ldx;
    const W* panels;     // [P][K][16]
    const float* bias;   // [16 P] or null
    W* out;              // [M][N], in the weight's (= x's) dtype
    int64_t M, K, N, P;
};

#if BIL_AVX2

// One panel row of 16 weights as two vectors of columns 0..7 and 8..15.
inline void load_row(const float* w, __m256& lo, __m256& hi) {
    lo = _mm256_loadu_ps(w);
    hi = _mm256_loadu_ps(w + 8);
}
inline void load_row(const bf16* w, __m256& lo, __m256& hi) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
    lo = _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
    hi = _mm256_castsi256_ps(_mm256_and_si256(u, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
}
inline void load_row(const _Float16* w, __m256& lo, __m256& hi) {
    lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
    hi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 8)));
}

// The shared epilogue (native_build/avx2_store_row.h) stores one panel row of results at a time.
static_assert(kPanel == native_build::kRowColumns, "a panel row of results is stored by one store_row");

// Rows r0..r0+MR-1 x panels p0..p0+NP-1: 2 * MR * NP chains, each the rule's one fma per k.
template <int MR, int NP, typename W>
inline void block(const Operands<W>& o, int64_t r0, int64_t p0) {
    // Everything the k loop reads is a local, so that nothing is reloaded after the barrier below.
    const int64_t K = o.K, panel_size = K * kPanel;
    const float* xr[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) xr[r] = o.x + (r0 + r) * o.ldx;
    const W* w = o.panels + p0 * panel_size;
    // Every loop over r and p is unrolled, so that acc lives in registers, not on the stack.
    __m256 acc[MR][NP][2];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
        for (int p = 0; p < NP; ++p) acc[r][p][0] = acc[r][p][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; ++k, w += kPanel) {
#pragma GCC unroll 8
        for (int p = 0; p < NP; ++p) {
            // With several rows and panels, broadcasting x again per panel (loads are cheap) keeps
            // the kernel within 16 registers; the barrier stops the compiler reusing the broadcasts
            // and spilling accumulators instead.
            if constexpr (MR > 1 && NP > 1) asm volatile("" ::: "memory");
            __m256 lo, hi;
            load_row(w + p * panel_size, lo, hi);
#pragma GCC unroll 8
            for (int r = 0; r < MR; ++r) {
                const __m256 xs = _mm256_broadcast_ss(xr[r] + k);
                acc[r][p][0] = _mm256_fmadd_ps(xs, lo, acc[r][p][0]);
                acc[r][p][1] = _mm256_fmadd_ps(xs, hi, acc[r][p][1]);
            }
        }
    }
    native_build::store_rows(acc, o.out + r0 * o.N + p0 * kPanel, o.N,
                             o.bias == nullptr ? nullptr : o.bias + p0 * kPanel, o.N - p0 * kPanel);
}

#else  // the portable path: the same chains with std::fma, one column at a time

template <int MR, int NP, typename W>
inline void block(const Operands<W>& o, int64_t r0, int64_t p0) {
    const int64_t K = o.K, panel_size = K * kPanel;
    float acc[MR][NP][kPanel] = {};
    for (int64_t k = 0; k < K; ++k)
        for (int p = 0; p < NP; ++p) {
            const W* row = o.panels + (p0 + p) * panel_size + k * kPanel;
            for (int r = 0; r < MR; ++r) {
                const float xs = o.x[(r0 + r) * o.ldx + k];
                for (int c = 0; c < kPanel; ++c) acc[r][p][c] = std::fma(xs, widen(row[slot_of<W>(c)]), acc[r][p][c]);
            }
        }
    for (int p = 0; p < NP; ++p) {
        const int64_t col = (p0 + p) * kPanel, cols = o.N - col < kPanel ? o.N - col : kPanel;
        for (int r = 0; r < MR; ++r)
            for (int64_t c = 0; c < cols; ++c)
                o.out[(r0 + r) * o.N + col + c] = narrow<W>(o.bias != nullptr ? acc[r][p][c] + o.bias[col + c] : acc[r][p][c]);
    }
}

#endif

// MR rows over panels [p0, p1): NP panels at a time, the remainder by narrower kernels.
template <int MR, int NP, typename W>
inline void sweep(const Operands<W>& o, int64_t r0, int64_t p0, int64_t p1) {
    for (; p0 + NP <= p1; p0 += NP) block<MR, NP>(o, r0, p0);
    if constexpr (NP > 1) sweep<MR, NP - 1>(o, r0, p0, p1);
}

// `rows` (1..6) rows from r0 over panels [p0, p1), with the widest kernel that fits the registers.
template <typename W>
void rows_over(const Operands<W>& o, int64_t r0, int rows, int64_t p0, int64_t p1) {
    switch (rows) {
        case 6: sweep<6, 1>(o, r0, p0, p1); break;
        case 5: sweep<5, 1>(o, r0, p0, p1); break;
        case 4: sweep<4, 1>(o, r0, p0, p1); break;
        case 3: sweep<3, 2>(o, r0, p0, p1); break;
        case 2: sweep<2, 3>(o, r0, p0, p1); break;
        default: sweep<1, 6>(o, r0, p0, p1); break;
    }
}

// Panels per task: a group whose weights fit in (about half of) L2, so that every 6-row block of
// the task finds them there; a multiple of 6 so the one-row kernel runs at full width.
template <typename W> int64_t group_panels(int64_t K) {
    const int64_t bytes = (K > 0 ? K : 1) * kPanel * static_cast<int64_t>(sizeof(W));
    int64_t group = (256 * 1024) / bytes / 6 * 6;
    return group < 6 ? 6 : group;
}

// Below this many multiply-adds per thread the OpenMP hand-off costs more than it saves.
constexpr int64_t kMinMacsPerThread = 1 << 16;
// Rows per task at most: a task's weights are read from L2 once per 6 of its rows.
constexpr int64_t kMaxRowBlock = 96;

#if BIL_AMX

// A process Linux withholds the tiles from keeps the fp32 chain, and its panels are packed for that.
bool amx_layout(int64_t K) { return K > 0 && K % 32 == 0 && native_build::amx_permitted(); }

// Tile registers: 0-3 accumulators (rows a|b x panels 0|1), 4-5 x rows a|b, 6-7 panels 0|1.
void configure_tiles(int a, int b) {
    native_build::TileConfig c;
    const int rows[8] = {a, a, b, b, a, b, 16, 16};
    for (int t = 0; t < 8; ++t) {
        c.rows[t] = static_cast<uint8_t>(rows[t]);
        c.colsb[t] = rows[t] > 0 ? 64 : 0;
    }
    native_build::load_tile_config(c);
}

// narrow<bf16> of 16 lanes at once, bit for bit: round to nearest even, a NaN kept a quiet NaN.
// (Not vcvtneps2bf16, which flushes values below bf16's normal range to zero.)
inline __m256i bf16_lanes(__m512 x) {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), quiet));
}

// One tile of accumulators (rows x 16 fp32, as _tile_stored left them) + bias, rounded, stored:
// a row at a time in one vector (the tile's scalar loop cost more than its tile products).
void finish_tile(const float* acc, int rows, const float* bias, bf16* out, int64_t ldo, int64_t cols) {
    const __mmask16 live = static_cast<__mmask16>((1u << cols) - 1u);
    const __m512 b = bias != nullptr ? _mm512_maskz_loadu_ps(live, bias) : _mm512_setzero_ps();
    for (int r = 0; r < rows; ++r) {
        __m512 row = _mm512_load_ps(acc + r * kPanel);
        if (bias != nullptr) row = _mm512_add_ps(row, b);
        _mm256_mask_storeu_epi16(out + r * ldo, live, bf16_lanes(row));
    }
}

// Bytes of panels a thread runs all its rows over before it moves on: about a quarter of a core's
// L2, so that each weight is read from memory once per call rather than once per 32 rows.
constexpr int64_t kPanelBlockBytes = 512 * 1024;

// Rows [0, M) over panels [p0, p1), two row tiles x two panels at a time, in blocks of panels that
// stay in L2 while every row passes over them. The order of (rows, panels) changes no output: each
// is still its own chain over k.
void tiles_over(const bf16* x, int64_t ldx, int64_t M, int64_t K, const bf16* panels, int64_t p0, int64_t p1,
                const float* bias, bf16* out, int64_t N) {
    alignas(64) float acc[4][16 * kPanel];
    const int64_t panel_size = K * kPanel, x_stride = ldx * static_cast<int64_t>(sizeof(bf16));
    const int64_t block = std::max<int64_t>(2, kPanelBlockBytes / (panel_size * static_cast<int64_t>(sizeof(bf16))) / 2 * 2);
    int configured_a = -1, configured_b = -1;
    for (int64_t pb = p0; pb < p1; pb += block)
    for (int64_t i = 0; i < M; i += 32) {
        const int a = static_cast<int>(M - i < 16 ? M - i : 16);
        const int b = static_cast<int>(M - i - a < 16 ? M - i - a : 16);
        if (a != configured_a || b != configured_b) {
            configure_tiles(a, b);
            configured_a = a, configured_b = b;
        }
        for (int64_t p = pb; p < std::min(p1, pb + block); p += 2) {
            const bool two = p + 1 < p1;
            _tile_zero(0);
            if (two) _tile_zero(1);
            if (b > 0) _tile_zero(2);
            if (b > 0 && two) _tile_zero(3);
            const bf16* xa = x + i * ldx;
            const bf16* xb = xa + 16 * ldx;
            const bf16* w0 = panels + p * panel_size;
            for (int64_t k = 0; k < K; k += 32) {
                _tile_loadd(4, xa + k, x_stride);
                _tile_stream_loadd(6, w0 + k * kPanel, 64);
                _tile_dpbf16ps(0, 4, 6);
                if (two) {
                    _tile_stream_loadd(7, w0 + panel_size + k * kPanel, 64);
                    _tile_dpbf16ps(1, 4, 7);
                }
                if (b > 0) {
                    _tile_loadd(5, xb + k, x_stride);
                    _tile_dpbf16ps(2, 5, 6);
                    if (two) _tile_dpbf16ps(3, 5, 7);
                }
            }
            _tile_stored(0, acc[0], 64);
            if (two) _tile_stored(1, acc[1], 64);
            if (b > 0) _tile_stored(2, acc[2], 64);
            if (b > 0 && two) _tile_stored(3, acc[3], 64);
            for (int q = 0; q < (two ? 2 : 1); ++q) {
                const int64_t col = (p + q) * kPanel, cols = N - col < kPanel ? N - col : kPanel;
                const float* b_col = bias == nullptr ? nullptr : bias + col;
                finish_tile(acc[q], a, b_col, out + i * N + col, N, cols);
                if (b > 0) finish_tile(acc[2 + q], b, b_col, out + (i + 16) * N + col, N, cols);
            }
        }
    }
}

// The tile chain over all of x: threads split the panels in contiguous, even-sized runs.
void linear_amx(const bf16* x, int64_t ldx, int64_t M, int64_t K, const bf16* panels, int64_t P, const float* bias,
                bf16* out, int64_t N, int nt) {
    const int64_t pairs = (P + 1) / 2, per = (pairs + nt - 1) / nt;
#pragma omp parallel num_threads(nt)
    {
        const int64_t t = omp_get_thread_num();
        const int64_t p0 = 2 * per * t, p1 = 2 * per * (t + 1) < P ? 2 * per * (t + 1) : P;
        if (p0 < p1) {
            tiles_over(x, ldx, M, K, panels, p0, p1, bias, out, N);
            _tile_release();
        }
    }
}

#endif

template <typename W>
void linear(const W* x, int64_t ldx, int64_t M, int64_t K, const W* panels, int64_t P, const float* bias, W* out,
            int64_t N, int64_t threads) {
    if (M <= 0 || P <= 0) return;
    const int64_t macs = M * K * P * kPanel;
    const int64_t useful = macs / kMinMacsPerThread;
    const int64_t most = threads < useful ? threads : useful;
    const int nt = static_cast<int>(most < 1 ? 1 : most);
#if BIL_AMX
    if constexpr (std::is_same_v<W, bf16>) {
        if (amx_layout(K)) return linear_amx(x, ldx, M, K, panels, P, bias, out, N, nt);
    }
#endif
    // x widened to fp32 once (exactly), unless it already is fp32, into the calling thread's
    // scratch: kept between calls (it only grows), so that a call maps no fresh pages.
    thread_local std::vector<float> scratch;
    float* widened = nullptr;
    const float* xf;
    int64_t ldf;
    if constexpr (std::is_same_v<W, float>) {
        xf = x;
        ldf = ldx;
    } else {
        if (static_cast<int64_t>(scratch.size()) < M * K) scratch.resize(M * K);
        widened = scratch.data();
        xf = widened;
        ldf = K;
    }
    const Operands<W> o{xf, ldf, panels, bias, out, M, K, N, P};

    // Tasks: panel groups x row blocks, panel-group major so that threads split the weights. The
    // groups are as many as L2 asks, rounded up so that every thread gets as many tasks.
    int64_t row_blocks = (M + kMaxRowBlock - 1) / kMaxRowBlock;
    const int64_t row_block = row_blocks == 1 ? M : ((M + row_blocks - 1) / row_blocks + kMaxRows - 1) / kMaxRows * kMaxRows;
    row_blocks = (M + row_block - 1) / row_block;
    int64_t groups = (P + group_panels<W>(K) - 1) / group_panels<W>(K);
    if (groups * row_blocks % nt != 0) groups = (groups + nt - 1) / nt * nt;
    const int64_t group = (P + groups - 1) / groups;
    groups = (P + group - 1) / group;
    const int64_t tasks = groups * row_blocks;

#pragma omp parallel num_threads(nt)
    {
        if constexpr (!std::is_same_v<W, float>) {
#pragma omp for schedule(static)
            for (int64_t i = 0; i < M; ++i)
                for (int64_t k = 0; k < K; ++k) widened[i * K + k] = widen(x[i * ldx + k]);
        }
#pragma omp for schedule(static)
        for (int64_t t = 0; t < tasks; ++t) {
            const int64_t g = t / row_blocks, rb = t % row_blocks;
            const int64_t p0 = g * group, p1 = p0 + group < P ? p0 + group : P;
            const int64_t i1 = (rb + 1) * row_block < M ? (rb + 1) * row_block : M;
            for (int64_t i = rb * row_block; i < i1; i += kMaxRows) {
                const int rows = static_cast<int>(i1 - i < kMaxRows ? i1 - i : kMaxRows);
                rows_over(o, i, rows, p0, p1);
            }
        }
    }
}

}  // namespace

extern "C" int batch_invariant_linear_has_avx2() { return BIL_AVX2; }

// Whether bf16 panels of this K are packed in AMX's pair layout (and run the tile chain).
extern "C" int batch_invariant_linear_bf16_amx_layout(int64_t k) {
#if BIL_AMX
    return amx_layout(k) ? 1 : 0;
#else
    (void)k;
    return 0;
#endif
}

// The native projection ABI (native_projection.py): the descriptor of one packed matrix, and an
// entry per dtype that runs the same `linear` the entries above run.
struct InvariantMatrix {
    const void* panels;
    int64_t n_panels, k, n;
    const float* bias;
};

#define BATCH_INVARIANT_LINEAR(SUFFIX, T)                                                                           \
    extern "C" void batch_invariant_linear_##SUFFIX(const void* x, int64_t ldx, int64_t rows, int64_t k,           \
                                                    const void* panels, int64_t n_panels, const float* bias,       \
                                                    void* out, int64_t n, int64_t threads) {                        \
        linear<T>(static_cast<const T*>(x), ldx, rows, k, static_cast<const T*>(panels), n_panels, bias,             \
                  static_cast<T*>(out), n, threads);                                                                \
    }                                                                                                               \
    extern "C" void batch_invariant_linear_native_##SUFFIX(const void* matrix, const void* x, int64_t ldx,         \
                                                           int64_t rows, void* out, int64_t threads) {             \
        const InvariantMatrix& m = *static_cast<const InvariantMatrix*>(matrix);                                    \
        linear<T>(static_cast<const T*>(x), ldx, rows, m.k, static_cast<const T*>(m.panels), m.n_panels, m.bias,     \
                  static_cast<T*>(out), m.n, threads);                                                              \
    }

BATCH_INVARIANT_LINEAR(float32, float)
BATCH_INVARIANT_LINEAR(bfloat16, bf16)
BATCH_INVARIANT_LINEAR(float16, _Float16)

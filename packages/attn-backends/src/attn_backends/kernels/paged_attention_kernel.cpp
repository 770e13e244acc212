// Attention read straight from the paged KV pool, on the CPU. Each query row sees the first
// seq_len keys of its request: a decode sees them all; the i-th new token of a prompt whose first
// `prefix` tokens are cached sees prefix + i + 1, which is causal attention.
//
// The torch path has to gather each request's keys out of the pool into a copy before a matmul
// can read them; at decode shapes that copy costs more than the attention itself. Here each
// (query row, KV head) walks its request's pages, so key and value rows are read where they lie.
// The query heads sharing a KV head are scored together against each key row; softmax is online
// (flash-decoding) in fp32 (fp64 for fp64 pools). A long request is split into key ranges whose
// partial results are merged, so that a small batch still keeps every thread busy.
//
// Queries and outputs are in the compute dtype; the pools are in it too, or in bf16 under fp32
// compute (a float32 model with a bf16 KV cache reads half the bytes per key).
//
// Batch invariance: a row's output is a function of its query, its keys and values and its key
// count alone. Key ranges are fixed by position (keys [r * kSplitKeys, (r + 1) * kSplitKeys)),
// never sized by the batch or the thread count; blocks of kBlock keys start at multiples of kBlock;
// the ranges are merged in position order. So a token's attention is bitwise the same alone or in
// any batch, and whether it is a decode row, a prompt row, or a prompt row after a prefix-cache hit.
//
// Built and loaded by paged_attention_kernel.py; its OpenMP is torch's own runtime (same soname).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <native_build/widen_narrow.h>
#include <type_traits>
#include <vector>

#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif

#if defined(__AVX512BF16__) && defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__linux__)
#include <native_build/amx_tiles.h>
#define PA_AMX 1
#else
#define PA_AMX 0
#endif

namespace {

using bf16_t = native_build::bf16;

constexpr int64_t kBlock = 32;  // keys scored before their values are summed
// Keys per range: one range per 256 positions is few enough merges to cost nothing measurable
// and, for a long request, enough ranges to keep every thread busy at batch 1.
constexpr int64_t kSplitKeys = 256;
static_assert(kSplitKeys % kBlock == 0, "a range holds whole blocks, so block boundaries stay fixed by position");

// Scores and sums are kept in fp32, or fp64 for fp64 pools.
template <typename T> struct Accumulator { using type = float; };
template <> struct Accumulator<double> { using type = double; };

using native_build::widen;
inline double widen(double x) { return x; }  // fp64 pools are summed in fp64

template <typename T> inline void store(T* out, float x) { *out = native_build::narrow<T>(x); }
inline void store(double* out, double x) { *out = x; }

// exp(x) for x <= 0 (a score minus its running max): 2^k * e^r with |r| <= ln2/2 and a degree-6
// polynomial for e^r (relative error about 1e-7). std::exp would not vectorize without -ffast-math.
inline float exp_nonpositive(float x) {
  x = std::max(x, -87.0f);
  const float k = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = x - k * 0.693145751953125f - k * 1.428606765330187045e-06f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const uint32_t bits = uint32_t(int32_t(k) + 127) << 23;
  float two_k;
  std::memcpy(&two_k, &bits, sizeof(two_k));
  return p * two_k;
}
inline double exp_nonpositive(double x) { return std::exp(x); }

template <typename T, typename A>
inline void widen_row(const T* row, int64_t d, A* out) {
#pragma omp simd
  for (int64_t i = 0; i < d; ++i) out[i] = widen(row[i]);
}

inline int64_t slot_of(const int64_t* pages, int64_t key, int64_t page_size) {
  return pages[key / page_size] * page_size + key % page_size;
}

struct Shape {
  int64_t heads, kv_heads, head_dim, page_size;
  int64_t q_row_stride, q_head_stride;     // elements
  int64_t kv_head_stride, kv_slot_stride;  // elements, the same for the K and V pools
  int64_t page_table_stride;               // elements per page-table row
  double scale;
};

// One (query row, KV head, key range): the unnormalized output rows [group][head_dim], then their
// running maxima [group] and sums [group], written to `partial`. kDim is the head size when known
// at compile time (the inner loops then unroll and stay in registers), 0 for any other size.
template <typename T, typename KV, int64_t kDim>
void attend_range(const T* q, const KV* k_pool, const KV* v_pool, const int64_t* pages, int64_t kv_head,
                  int64_t key_begin, int64_t key_end, const Shape& s, typename Accumulator<T>::type* partial) {
  using A = typename Accumulator<T>::type;
  const int64_t group = s.heads / s.kv_heads, d = kDim > 0 ? kDim : s.head_dim;
  std::vector<A> query(group * d), acc(group * d, A(0)), scores(group * kBlock), row(d);
  std::vector<A> running_max(group, -INFINITY), running_sum(group, A(0));
  for (int64_t g = 0; g < group; ++g) {
    const T* q_row = q + (kv_head * group + g) * s.q_head_stride;
    for (int64_t i = 0; i < d; ++i) query[g * d + i] = widen(q_row[i]) * A(s.scale);
  }
  const KV* key_rows[kBlock];
  const KV* value_rows[kBlock];
  for (int64_t start = key_begin; start < key_end; start += kBlock) {
    const int64_t n = std::min(kBlock, key_end - start);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t key = start + j;
      const int64_t slot = slot_of(pages, key, s.page_size);
      key_rows[j] = k_pool + kv_head * s.kv_head_stride + slot * s.kv_slot_stride;
      value_rows[j] = v_pool + kv_head * s.kv_head_stride + slot * s.kv_slot_stride;
    }
    for (int64_t j = 0; j < n; ++j) {
      const A* key = row.data();
      widen_row(key_rows[j], d, row.data());
      for (int64_t g = 0; g < group; ++g) {
        const A* qg = query.data() + g * d;
        A dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t i = 0; i < d; ++i) dot += qg[i] * key[i];
        scores[g * kBlock + j] = dot;
      }
    }
    for (int64_t g = 0; g < group; ++g) {
      A* sg = scores.data() + g * kBlock;
      A block_max = running_max[g];
      for (int64_t j = 0; j < n; ++j) block_max = std::max(block_max, sg[j]);
      const A rescale = exp_nonpositive(running_max[g] - block_max);
      running_max[g] = block_max;
      A block_sum = 0;
#pragma omp simd reduction(+ : block_sum)
      for (int64_t j = 0; j < n; ++j) {
        sg[j] = exp_nonpositive(sg[j] - block_max);
        block_sum += sg[j];
      }
      running_sum[g] = running_sum[g] * rescale + block_sum;
      A* ag = acc.data() + g * d;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) ag[i] *= rescale;
    }
    for (int64_t j = 0; j < n; ++j) {
      const A* value = row.data();
      widen_row(value_rows[j], d, row.data());
      for (int64_t g = 0; g < group; ++g) {
        const A weight = scores[g * kBlock + j];
        A* ag = acc.data() + g * d;
#pragma omp simd
        for (int64_t i = 0; i < d; ++i) ag[i] += weight * value[i];
      }
    }
  }
  std::copy(acc.begin(), acc.end(), partial);
  std::copy(running_max.begin(), running_max.end(), partial + group * d);
  std::copy(running_sum.begin(), running_sum.end(), partial + group * d + group);
}

#if defined(__AVX512BF16__)
// bf16 pools on CPUs with AVX512-BF16: the same walk in explicit vector code. 16 keys' dot
// products per query head come from dpbf16 (two bf16 pairs per fp32 lane), summed across lanes
// by one transpose tree rather than a horizontal sum per key; values are widened once per block.

// out[j] = the sum of the 16 lanes of r[j]: a transpose-and-add tree, about 3 instructions per key.
inline __m512 lane_sums(const __m512 (&r)[16]) {
  __m512 a[8], b[4];
  for (int i = 0; i < 8; ++i)  // per 128-bit lane: two partials of r[2i], two of r[2i+1]
    a[i] = _mm512_add_ps(_mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]), _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: one partial of each of r[4i..4i+3]
    const __m512d x = _mm512_castps_pd(a[2 * i]), y = _mm512_castps_pd(a[2 * i + 1]);
    b[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  const auto fold = [](__m512 x, __m512 y) {  // add the 128-bit lanes pairwise: (0+1, 2+3) of x, then of y
    return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(3, 1, 3, 1)));
  };
  return fold(fold(b[0], b[1]), fold(b[2], b[3]));
}

inline __m512 exp_nonpositive(__m512 x) {  // exp_nonpositive(float), 16 lanes at once
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 k = _mm512_roundscale_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
                                        _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  for (const float c : {1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f}) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
  const __m512i two_k = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(two_k));
}

inline __m512 widen16(const bf16_t* x) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x))), 16));
}

// acc[g] += sum over the block's keys j of weights[g][j] * value_rows[j], for the `group` query
// heads. With the group size known at compile time (kGroup > 0), every head's output row stays
// in registers while each value row is widened once; otherwise the rows are widened into a
// scratch block first and each head's row is summed from it.
template <int64_t kDim, int64_t kGroup>
inline void add_weighted_values(const bf16_t* const* value_rows, int64_t n, const float* weights, int64_t group, float* acc) {
  constexpr int64_t kLanes = kDim / 16;
  if constexpr (kGroup > 0) {
    __m512 out[kGroup][kLanes];
    for (int64_t g = 0; g < kGroup; ++g)
      for (int64_t c = 0; c < kLanes; ++c) out[g][c] = _mm512_loadu_ps(acc + g * kDim + 16 * c);
    for (int64_t j = 0; j < n; ++j) {
      __m512 value[kLanes];
      for (int64_t c = 0; c < kLanes; ++c) value[c] = widen16(value_rows[j] + 16 * c);
      for (int64_t g = 0; g < kGroup; ++g) {
        const __m512 weight = _mm512_set1_ps(weights[g * 16 + j]);
        for (int64_t c = 0; c < kLanes; ++c) out[g][c] = _mm512_fmadd_ps(weight, value[c], out[g][c]);
      }
    }
    for (int64_t g = 0; g < kGroup; ++g)
      for (int64_t c = 0; c < kLanes; ++c) _mm512_storeu_ps(acc + g * kDim + 16 * c, out[g][c]);
  } else {
    alignas(64) float values[16 * kDim];
    for (int64_t j = 0; j < n; ++j)
      for (int64_t c = 0; c < kLanes; ++c) _mm512_store_ps(values + j * kDim + 16 * c, widen16(value_rows[j] + 16 * c));
    for (int64_t g = 0; g < group; ++g) {
      __m512 out[kLanes];
      for (int64_t c = 0; c < kLanes; ++c) out[c] = _mm512_loadu_ps(acc + g * kDim + 16 * c);
      for (int64_t j = 0; j < n; ++j) {
        const __m512 weight = _mm512_set1_ps(weights[g * 16 + j]);
        for (int64_t c = 0; c < kLanes; ++c) out[c] = _mm512_fmadd_ps(weight, _mm512_load_ps(values + j * kDim + 16 * c), out[c]);
      }
      for (int64_t c = 0; c < kLanes; ++c) _mm512_storeu_ps(acc + g * kDim + 16 * c, out[c]);
    }
  }
}

template <int64_t kDim, int64_t kGroup>
void attend_range_bf16(const bf16_t* q, const bf16_t* k_pool, const bf16_t* v_pool, const int64_t* pages, int64_t kv_head,
                       int64_t key_begin, int64_t key_end, const Shape& s, float* partial) {
  constexpr int64_t kPairs = kDim / 32, kLanes = kDim / 16;  // zmm of bf16 pairs / of fp32 per row
  const int64_t group = s.heads / s.kv_heads;
  std::vector<float> acc(group * kDim, 0.0f), weights(group * 16);
  std::vector<float> running_max(group, -INFINITY), running_sum(group, 0.0f);
  const bf16_t* key_rows[16];
  const bf16_t* value_rows[16];
  for (int64_t start = key_begin; start < key_end; start += 16) {
    const int64_t n = std::min<int64_t>(16, key_end - start);
    const __mmask16 valid = __mmask16((1u << n) - 1u);
    for (int64_t j = 0; j < 16; ++j) {  // past the end: the last key again, masked out below
      const int64_t key = start + std::min(j, n - 1);
      const int64_t slot = slot_of(pages, key, s.page_size);
      key_rows[j] = k_pool + kv_head * s.kv_head_stride + slot * s.kv_slot_stride;
      value_rows[j] = v_pool + kv_head * s.kv_head_stride + slot * s.kv_slot_stride;
    }
    for (int64_t g = 0; g < group; ++g) {
      const bf16_t* q_row = q + (kv_head * group + g) * s.q_head_stride;
      __m512bh qv[kPairs];
      for (int64_t c = 0; c < kPairs; ++c) qv[c] = (__m512bh)_mm512_loadu_si512(q_row + 32 * c);
      __m512 dots[16];
      for (int64_t j = 0; j < 16; ++j) {
        dots[j] = _mm512_setzero_ps();
        for (int64_t c = 0; c < kPairs; ++c) dots[j] = _mm512_dpbf16_ps(dots[j], qv[c], (__m512bh)_mm512_loadu_si512(key_rows[j] + 32 * c));
      }
      const __m512 scores = _mm512_mask_blend_ps(valid, _mm512_set1_ps(-INFINITY),
                                                 _mm512_mul_ps(lane_sums(dots), _mm512_set1_ps(float(s.scale))));
      const float block_max = std::max(running_max[g], _mm512_reduce_max_ps(scores));
      const float rescale = exp_nonpositive(running_max[g] - block_max);
      running_max[g] = block_max;
      const __m512 p = _mm512_maskz_mov_ps(valid, exp_nonpositive(_mm512_sub_ps(scores, _mm512_set1_ps(block_max))));
      running_sum[g] = running_sum[g] * rescale + _mm512_reduce_add_ps(p);
      _mm512_storeu_ps(weights.data() + g * 16, p);
      for (int64_t c = 0; c < kLanes; ++c)
        _mm512_storeu_ps(acc.data() + g * kDim + 16 * c, _mm512_mul_ps(_mm512_loadu_ps(acc.data() + g * kDim + 16 * c), _mm512_set1_ps(rescale)));
    }
    add_weighted_values<kDim, kGroup>(value_rows, n, weights.data(), group, acc.data());
  }
  std::copy(acc.begin(), acc.end(), partial);
  std::copy(running_max.begin(), running_max.end(), partial + group * kDim);
  std::copy(running_sum.begin(), running_sum.end(), partial + group * kDim + group);
}

// Common query-heads-per-KV-head counts get their own code (their output rows fit in registers).
template <int64_t kDim>
void attend_range_bf16_of_group(const bf16_t* q, const bf16_t* k_pool, const bf16_t* v_pool, const int64_t* pages, int64_t kv_head,
                                int64_t key_begin, int64_t key_end, const Shape& s, float* partial) {
  switch (s.heads / s.kv_heads) {
    case 1: return attend_range_bf16<kDim, 1>(q, k_pool, v_pool, pages, kv_head, key_begin, key_end, s, partial);
    case 2: return attend_range_bf16<kDim, 2>(q, k_pool, v_pool, pages, kv_head, key_begin, key_end, s, partial);
    case 3: return attend_range_bf16<kDim, 3>(q, k_pool, v_pool, pages, kv_head, key_begin, key_end, s, partial);
    case 4: return attend_range_bf16<kDim, 4>(q, k_pool, v_pool, pages, kv_head, key_begin, key_end, s, partial);
    default: return attend_range_bf16<kDim, 0>(q, k_pool, v_pool, pages, kv_head, key_begin, key_end, s, partial);
  }
}
#endif

#if PA_AMX
// bf16 q and pools on a CPU with AMX tiles: the rows of one request are scored together. A tile
// lane is one (query row, head of the KV group) pair, up to 16 of them; for each block of 16 keys
// one tile product gives every lane's 16 scores at once (keys as the tile's rows, read from a
// staging copy since pages need not be contiguous; the lanes' queries as its pair-packed columns,
// packed once per key range). The softmax then runs down the lanes, one vector per key, and each
// lane's values are summed in fp32 as above.
//
// Batch invariance holds lane by lane: the hardware computes a product element from its own key
// row and query column alone, every other step is lane-wise or per lane, a lane is updated only by
// blocks holding its own keys, and its value sum runs over its own keys in position order. So a
// row's output is the same bits alone (a decode, or a tile of one row) or beside any other rows.
// Every bf16 row takes this walk when the process may use the tiles, none otherwise.

// Tiles: 0 the scores [16 keys][16 lanes] fp32, 1 a key block [16 keys][32 bf16], 2 the lanes'
// queries [16 pairs][16 lanes][2 bf16]; all 16 rows of 64 bytes.
native_build::TileConfig scoring_tiles() {
  native_build::TileConfig config;
  for (int t = 0; t < 3; ++t) config.rows[t] = 16, config.colsb[t] = 64;
  return config;
}

// One key range [begin, begin + kSplitKeys) of up to 16 / group query rows of one request for one
// KV head; rows[m] is the m-th row's index in the plan. Writes each row's partial as attend_range does.
template <int64_t kDim>
void attend_tile_amx(const bf16_t* q, const bf16_t* k_pool, const bf16_t* v_pool, const int64_t* pages, int64_t kv_head,
                     const int64_t* rows, int64_t query_rows, const int64_t* q_row_of, const int64_t* seq_len_of,
                     int64_t begin, const Shape& s, float* const* partials) {
  constexpr int64_t kPairs = kDim / 2, kLanes = kDim / 16;
  const int64_t group = s.heads / s.kv_heads, lanes = query_rows * group;
  alignas(64) uint32_t packed_q[kPairs][16] = {};  // pair p of lane t at [p][t]; lanes past `lanes` stay zero
  alignas(64) bf16_t keys[16][kDim];
  alignas(64) float scores[16][16], weights[16][16], values[16][kDim], acc[16][kDim];
  alignas(64) int32_t seq_of_lane[16] = {};  // 0 for lanes not in use: never updated
  int64_t end = begin;
  for (int64_t m = 0; m < query_rows; ++m) {
    const int64_t i = rows[m];
    end = std::max(end, std::min(seq_len_of[i], begin + kSplitKeys));
    for (int64_t g = 0; g < group; ++g) {
      const int64_t lane = m * group + g;
      const uint32_t* q_pairs = reinterpret_cast<const uint32_t*>(q + q_row_of[i] * s.q_row_stride + (kv_head * group + g) * s.q_head_stride);
      for (int64_t p = 0; p < kPairs; ++p) packed_q[p][lane] = q_pairs[p];
      seq_of_lane[lane] = int32_t(seq_len_of[i]);
    }
  }
  const __m512i seq = _mm512_load_si512(seq_of_lane);
  const __m512 scale = _mm512_set1_ps(float(s.scale));
  __m512 running_max = _mm512_set1_ps(-INFINITY), running_sum = _mm512_setzero_ps();
  std::memset(acc, 0, sizeof(acc));
  for (int64_t start = begin; start < end; start += 16) {
    const int64_t n = std::min<int64_t>(16, end - start);
    for (int64_t j = 0; j < 16; ++j) {  // past the end: the last key again, masked out below
      const int64_t slot = slot_of(pages, start + std::min(j, n - 1), s.page_size);
      std::memcpy(keys[j], k_pool + kv_head * s.kv_head_stride + slot * s.kv_slot_stride, sizeof(keys[j]));
      if (j < n) {
        const bf16_t* value = v_pool + kv_head * s.kv_head_stride + slot * s.kv_slot_stride;
        for (int64_t c = 0; c < kLanes; ++c) _mm512_store_ps(values[j] + 16 * c, widen16(value + 16 * c));
      }
    }
    _tile_zero(0);
    for (int64_t c = 0; c < kDim / 32; ++c) {
      _tile_loadd(1, keys[0] + 32 * c, kDim * sizeof(bf16_t));
      _tile_loadd(2, packed_q[16 * c], 64);
      _tile_dpbf16ps(0, 1, 2);
    }
    _tile_stored(0, scores, 64);
    const __mmask16 live = _mm512_cmpgt_epi32_mask(seq, _mm512_set1_epi32(int32_t(start)));  // lanes with keys here
    __mmask16 valid[16];
    __m512 block[16], block_max = running_max;
    for (int64_t j = 0; j < 16; ++j) {
      valid[j] = _mm512_cmpgt_epi32_mask(seq, _mm512_set1_epi32(int32_t(start + j)));
      block[j] = _mm512_mask_blend_ps(valid[j], _mm512_set1_ps(-INFINITY), _mm512_mul_ps(_mm512_load_ps(scores[j]), scale));
      block_max = _mm512_max_ps(block_max, block[j]);
    }
    const __m512 rescale = _mm512_maskz_mov_ps(live, exp_nonpositive(_mm512_sub_ps(running_max, block_max)));
    running_max = _mm512_mask_mov_ps(running_max, live, block_max);
    __m512 block_sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < 16; ++j) {
      const __m512 p = _mm512_maskz_mov_ps(valid[j], exp_nonpositive(_mm512_sub_ps(block[j], block_max)));
      block_sum = _mm512_add_ps(block_sum, p);
      _mm512_store_ps(weights[j], p);
    }
    running_sum = _mm512_mask_mov_ps(running_sum, live, _mm512_fmadd_ps(running_sum, rescale, block_sum));
    alignas(64) float lane_rescale[16];
    _mm512_store_ps(lane_rescale, rescale);
    for (int64_t lane = 0; lane < lanes; ++lane) {
      const int64_t own = std::min<int64_t>(16, seq_of_lane[lane] - start);  // this lane's keys in the block
      if (own <= 0) continue;
      __m512 out[kLanes];
      const __m512 r = _mm512_set1_ps(lane_rescale[lane]);
      for (int64_t c = 0; c < kLanes; ++c) out[c] = _mm512_mul_ps(_mm512_load_ps(acc[lane] + 16 * c), r);
      for (int64_t j = 0; j < own; ++j) {
        const __m512 weight = _mm512_set1_ps(weights[j][lane]);
        for (int64_t c = 0; c < kLanes; ++c) out[c] = _mm512_fmadd_ps(weight, _mm512_load_ps(values[j] + 16 * c), out[c]);
      }
      for (int64_t c = 0; c < kLanes; ++c) _mm512_store_ps(acc[lane] + 16 * c, out[c]);
    }
  }
  alignas(64) float lane_max[16], lane_sum[16];
  _mm512_store_ps(lane_max, running_max);
  _mm512_store_ps(lane_sum, running_sum);
  for (int64_t m = 0; m < query_rows; ++m) {
    float* partial = partials[m];
    for (int64_t g = 0; g < group; ++g) {
      const int64_t lane = m * group + g;
      std::copy(acc[lane], acc[lane] + kDim, partial + g * kDim);
      partial[group * kDim + g] = lane_max[lane];
      partial[group * kDim + group + g] = lane_sum[lane];
    }
  }
}

// Whether bf16 rows of this shape take the tile walk.
bool tiles_attend(int64_t head_dim, int64_t group) {
  return (head_dim == 64 || head_dim == 128) && group <= 16 && native_build::amx_permitted();
}

// The tile walk over all rows: consecutive rows of one request share tiles (16 / group rows each),
// and each (tile, key range, KV head) is one work item; the partials are laid out and merged as
// paged_attention's are.
void attend_tiles(const bf16_t* q, const bf16_t* k_pool, const bf16_t* v_pool, const int64_t* page_table,
                  const int64_t* request_of, const int64_t* q_row_of, const int64_t* seq_len_of, int64_t rows,
                  int64_t threads, const Shape& s, const std::vector<int64_t>& first_range, int64_t partial_size,
                  float* partials) {
  const int64_t group = s.heads / s.kv_heads, per_tile = 16 / group;
  std::vector<int64_t> tile_start{0};
  for (int64_t i = 1; i < rows; ++i)
    if (request_of[i] != request_of[i - 1] || i - tile_start.back() == per_tile) tile_start.push_back(i);
  tile_start.push_back(rows);
  struct Item { int64_t tile, range; };
  std::vector<Item> work;
  for (int64_t t = 0; t + 1 < int64_t(tile_start.size()); ++t) {
    int64_t longest = 0;
    for (int64_t i = tile_start[t]; i < tile_start[t + 1]; ++i) longest = std::max(longest, seq_len_of[i]);
    for (int64_t r = 0; r * kSplitKeys < longest; ++r) work.push_back({t, r});
  }
  const int64_t items = int64_t(work.size()) * s.kv_heads;
#pragma omp parallel num_threads(threads)
  {
    const native_build::TileConfig config = scoring_tiles();
    native_build::load_tile_config(config);
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < items; ++item) {
      const Item& w = work[item / s.kv_heads];
      const int64_t kv_head = item % s.kv_heads, begin = w.range * kSplitKeys;
      int64_t active[16];
      float* partial_of_row[16];
      int64_t count = 0;
      for (int64_t i = tile_start[w.tile]; i < tile_start[w.tile + 1]; ++i) {
        if (seq_len_of[i] <= begin) continue;  // this row's keys end before the range
        active[count] = i;
        partial_of_row[count++] = partials + ((first_range[i] + w.range) * s.kv_heads + kv_head) * partial_size;
      }
      const int64_t* pages = page_table + request_of[active[0]] * s.page_table_stride;
      if (s.head_dim == 64)
        attend_tile_amx<64>(q, k_pool, v_pool, pages, kv_head, active, count, q_row_of, seq_len_of, begin, s, partial_of_row);
      else
        attend_tile_amx<128>(q, k_pool, v_pool, pages, kv_head, active, count, q_row_of, seq_len_of, begin, s, partial_of_row);
    }
    _tile_release();
  }
}
#endif

template <typename T, typename KV>
void attend_range_of_dim(const T* q, const KV* k_pool, const KV* v_pool, const int64_t* pages, int64_t kv_head,
                         int64_t key_begin, int64_t key_end, const Shape& s, typename Accumulator<T>::type* partial) {
#if defined(__AVX512BF16__)
  if constexpr (std::is_same_v<T, bf16_t> && std::is_same_v<KV, bf16_t>) {
    if (s.head_dim == 64) return attend_range_bf16_of_group<64>(q, k_pool, v_pool, pages, kv_head, key_begin, key_end, s, partial);
    if (s.head_dim == 128) return attend_range_bf16_of_group<128>(q, k_pool, v_pool, pages, kv_head, key_begin, key_end, s, partial);
  }
#endif
  switch (s.head_dim) {
    case 64: return attend_range<T, KV, 64>(q, k_pool, v_pool, pages, kv_head, key_begin, key_end, s, partial);
    case 128: return attend_range<T, KV, 128>(q, k_pool, v_pool, pages, kv_head, key_begin, key_end, s, partial);
    default: return attend_range<T, KV, 0>(q, k_pool, v_pool, pages, kv_head, key_begin, key_end, s, partial);
  }
}

// Every (query row, KV head, key range) in parallel, then each (row, KV head)'s ranges merged in
// position order. Row i's ranges are items first_item[i] .. first_item[i + 1] - 1 of each KV head.
template <typename T, typename KV>
void paged_attention(const T* q, const KV* k_pool, const KV* v_pool, const int64_t* page_table,
                  const int64_t* request_of, const int64_t* q_row_of, const int64_t* seq_len_of,
                  int64_t rows, int64_t threads, const Shape& s, T* out) {
  using A = typename Accumulator<T>::type;
  const int64_t group = s.heads / s.kv_heads, d = s.head_dim;
  std::vector<int64_t> first_range(rows + 1, 0);
  for (int64_t i = 0; i < rows; ++i) first_range[i + 1] = first_range[i] + (seq_len_of[i] + kSplitKeys - 1) / kSplitKeys;
  const int64_t ranges = first_range[rows];
  const int64_t partial_size = group * d + 2 * group;
  const int64_t items = ranges * s.kv_heads;
  std::vector<A> partials(items * partial_size);  // item (range, kv_head) at range * kv_heads + kv_head
  bool tiled = false;
#if PA_AMX
  if constexpr (std::is_same_v<T, bf16_t> && std::is_same_v<KV, bf16_t>) {
    tiled = tiles_attend(d, group);
    if (tiled) attend_tiles(q, k_pool, v_pool, page_table, request_of, q_row_of, seq_len_of, rows, threads, s, first_range, partial_size, partials.data());
  }
#endif
  if (!tiled) {
    std::vector<int64_t> row_of_range(ranges);
    for (int64_t i = 0; i < rows; ++i) std::fill(row_of_range.begin() + first_range[i], row_of_range.begin() + first_range[i + 1], i);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t range = item / s.kv_heads, kv_head = item % s.kv_heads, i = row_of_range[range];
      const int64_t begin = (range - first_range[i]) * kSplitKeys, end = std::min(seq_len_of[i], begin + kSplitKeys);
      attend_range_of_dim(q + q_row_of[i] * s.q_row_stride, k_pool, v_pool, page_table + request_of[i] * s.page_table_stride,
                          kv_head, begin, end, s, partials.data() + item * partial_size);
    }
  }
#pragma omp parallel for num_threads(threads)
  for (int64_t pair = 0; pair < rows * s.kv_heads; ++pair) {
    const int64_t kv_head = pair % s.kv_heads, i = pair / s.kv_heads;
    std::vector<A> merged(d);
    const auto partial_of = [&](int64_t range) { return partials.data() + (range * s.kv_heads + kv_head) * partial_size; };
    for (int64_t g = 0; g < group; ++g) {
      A best = -INFINITY;
      for (int64_t range = first_range[i]; range < first_range[i + 1]; ++range) best = std::max(best, partial_of(range)[group * d + g]);
      A total = 0;
      std::fill(merged.begin(), merged.end(), A(0));
      for (int64_t range = first_range[i]; range < first_range[i + 1]; ++range) {
        const A* partial = partial_of(range);
        const A weight = exp_nonpositive(partial[group * d + g] - best);
        total += weight * partial[group * d + group + g];
        for (int64_t x = 0; x < d; ++x) merged[x] += weight * partial[g * d + x];
      }
      T* row = out + i * s.heads * d + (kv_head * group + g) * d;
      for (int64_t x = 0; x < d; ++x) store(row + x, merged[x] / total);
    }
  }
}

}  // namespace

// One C entry point per (compute, pool) element type; `out` is a fresh contiguous [rows, heads, head_dim].
#define PAGED_ATTENTION_ENTRY(name, T, KV)                                                                        \
  extern "C" void name(const void* q, const void* k_pool, const void* v_pool, const int64_t* page_table,     \
                       const int64_t* request_of, const int64_t* q_row_of, const int64_t* seq_len_of,       \
                       int64_t rows, int64_t threads, int64_t heads,        int64_t kv_heads,    \
                       int64_t head_dim, int64_t page_size, int64_t q_row_stride, int64_t q_head_stride,     \
                       int64_t kv_head_stride, int64_t kv_slot_stride, int64_t page_table_stride,           \
                       double scale, void* out) {                                                           \
    const Shape shape{heads, kv_heads, head_dim, page_size, q_row_stride, q_head_stride,                     \
                      kv_head_stride, kv_slot_stride, page_table_stride, scale};                             \
    paged_attention<T, KV>(static_cast<const T*>(q), static_cast<const KV*>(k_pool), static_cast<const KV*>(v_pool), \
                    page_table, request_of, q_row_of, seq_len_of, rows, threads, shape,                   \
                    static_cast<T*>(out));                                                                   \
  }

// Whether bf16 rows of this head size and query heads per KV head take the tile walk here.
extern "C" int paged_attention_bf16_on_tiles(int64_t head_dim, int64_t group) {
#if PA_AMX
  return tiles_attend(head_dim, group) ? 1 : 0;
#else
  return 0;
#endif
}

PAGED_ATTENTION_ENTRY(paged_attention_bfloat16, bf16_t, bf16_t)
PAGED_ATTENTION_ENTRY(paged_attention_float16, _Float16, _Float16)
PAGED_ATTENTION_ENTRY(paged_attention_float32, float, float)
PAGED_ATTENTION_ENTRY(paged_attention_float64, double, double)
PAGED_ATTENTION_ENTRY(paged_attention_float32_bfloat16, float, bf16_t)

// The native attention ABI (native_attention.py): one forward's planned query rows, handed back by
// a native caller (the runner's whole-step forward) for every layer, with that layer's q and pools.
// It runs the very template the entries above run, so a native step and the op-by-op forward
// compute the same bits.
struct PagedPlan {
  const int64_t* page_table;
  const int64_t* request_of;
  const int64_t* q_row_of;
  const int64_t* seq_len_of;
  int64_t rows, page_size, page_table_stride;
};

#define PAGED_ATTENTION_NATIVE_ENTRY(name, T, KV)                                                                 \
  extern "C" void name(const void* plan, const void* q, int64_t q_row_stride, int64_t q_head_stride,          \
                       const void* k_pool, const void* v_pool, int64_t kv_head_stride, int64_t kv_slot_stride,  \
                       int64_t heads, int64_t kv_heads, int64_t head_dim, double scale, int64_t threads,        \
                       void* out) {                                                                            \
    const PagedPlan& p = *static_cast<const PagedPlan*>(plan);                                                 \
    const Shape shape{heads, kv_heads, head_dim, p.page_size, q_row_stride, q_head_stride,                    \
                      kv_head_stride, kv_slot_stride, p.page_table_stride, scale};                             \
    paged_attention<T, KV>(static_cast<const T*>(q), static_cast<const KV*>(k_pool), static_cast<const KV*>(v_pool), \
                       p.page_table, p.request_of, p.q_row_of, p.seq_len_of, p.rows, threads, shape,           \
                       static_cast<T*>(out));                                                                  \
  }

PAGED_ATTENTION_NATIVE_ENTRY(paged_attention_native_bfloat16, bf16_t, bf16_t)
PAGED_ATTENTION_NATIVE_ENTRY(paged_attention_native_float16, _Float16, _Float16)
PAGED_ATTENTION_NATIVE_ENTRY(paged_attention_native_float32, float, float)
PAGED_ATTENTION_NATIVE_ENTRY(paged_attention_native_float64, double, double)
PAGED_ATTENTION_NATIVE_ENTRY(paged_attention_native_float32_bfloat16, float, bf16_t)

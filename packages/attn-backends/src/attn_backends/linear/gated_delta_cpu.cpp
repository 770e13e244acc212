// Gated-DeltaNet's two recurrences on the CPU: the gated delta rule and the depthwise causal conv
// with SiLU, over a pool of per-request states (gated_delta_cpu.py, the cpu_fused linear-attention
// kernels).
//
// Gated delta rule, per (request, value head), state S [Dk, Dv] in fp32 whatever the pool holds:
//   S <- exp(g) S;  delta = beta (v - S^T k);  S <- S + k delta^T;  o = S^T q
// with q and k L2-normalised (x / sqrt(|x|^2 + 1e-6)) and q scaled by Dk^-0.5 first. A decode
// updates its slot in place, 32 columns at a time: one sweep down the block for S^T k, then one
// that decays, adds the rank-one write, sums o = S^T q from the new values and stores them in the
// pool's dtype; the second finds the block in L1, so the state crosses the memory bus once each
// way, where torch's version makes about ten passes with a temporary per op. A multi-token
// sequence (a prompt, or a verify's drafts) keeps S in an fp32 buffer between tokens, as torch
// does, and sweeps it once per token: the sweep that writes token t's state also sums the next
// token's S^T k from the values it writes.
//
// Causal conv: a decode shifts each channel's window of the last W-1 inputs in its slot in place;
// anything else runs its tokens in parallel (an output needs only its own and the W-1 previous
// inputs), each a pass along contiguous rows of every channel.
//
// The caller (gated_delta_cpu.py) has checked the operands' shapes; here every slot is checked
// against the pool before anything is read or written, since the pool is raw memory. Parallel
// with OpenMP (torch's own runtime, same soname).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <native_build/widen_narrow.h>
#include <vector>

namespace {

using native_build::bf16;
using native_build::narrow;
using native_build::widen;
inline float widen(double x) { return static_cast<float>(x); }  // torch_native reads a pool with .float()

// Element-type codes, as gated_delta_cpu.py numbers them.
enum Code : int64_t { kFloat32 = 0, kBFloat16 = 1, kFloat16 = 2, kFloat64 = 3 };

// fn(T{}) for the element type `code` names; activations take the first three, pools all four.
template <typename Fn>
bool with_type(int64_t code, bool allow_double, Fn&& fn) {
  switch (code) {
    case kFloat32: fn(float{}); return true;
    case kBFloat16: fn(bf16{}); return true;
    case kFloat16: fn(_Float16{}); return true;
    case kFloat64: if (allow_double) { fn(double{}); return true; } return false;
    default: return false;
  }
}

// exp(x) as 2^n e^r, |r| <= ln2 / 2, with e^r by its Taylor series to r^7 (relative error under
// 1e-8 before rounding): unlike glibc's expf it vectorizes inside the conv's channel loop.
inline float exp_of(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float n = std::nearbyint(x * 1.44269504088896341f);
  const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187045e-06f;  // ln2 in two parts
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return p * two_n;
}

constexpr float kL2Eps = 1e-6f;  // inside the root of the q/k L2 norm, as Qwen3-Next's reference has it

// The operands of one gated-delta call (mirrored by _GatedDeltaArgs in gated_delta_cpu.py).
// Strides are in elements. Rows of q, k, v, out and of the pool's states are contiguous.
struct GatedDeltaArgs {
  const void* q;
  const void* k;
  const void* v;
  const float* g;
  const float* beta;
  void* state;                // the pool [slots, H, Dk, Dv]
  const int64_t* slots;       // [B]
  const int64_t* cu_seqlens;  // [B + 1], or null: token b is request b (a decode)
  const uint8_t* has_initial; // [B] bools, or null: every request resumes from its slot
  void* out;                  // [T, H, Dv] contiguous, activation dtype
  void* states_out;           // [T, H, Dk, Dv] contiguous, pool dtype, or null: keep no per-token states
  int64_t write_pool;         // store each request's last state into its slot
  int64_t requests, heads, dk, dv, pool_slots;
  int64_t q_token, q_head, k_token, k_head, v_token, v_head, g_token, g_head, beta_token, beta_head;
  int64_t state_slot, state_head, state_row;
  int64_t activation_code, pool_code, threads;
};

// The operands of one causal-conv call (mirrored by _CausalConvArgs in gated_delta_cpu.py).
struct CausalConvArgs {
  const void* x;              // [T, C], rows x_token apart, channels contiguous
  const float* weight;        // [C, W] contiguous
  const float* bias;          // [C] or null
  void* conv_state;           // the pool [slots, C, W-1]
  const int64_t* slots;
  const int64_t* cu_seqlens;  // or null: a decode
  const uint8_t* has_initial; // or null: every request resumes
  void* y;                    // [T, C] contiguous, activation dtype
  void* windows_out;          // [T, C, W-1] contiguous, pool dtype, or null
  int64_t write_pool;
  int64_t requests, channels, width, pool_slots, x_token;
  int64_t state_slot, state_channel, state_column;
  int64_t activation_code, pool_code, threads;
};

// The first request whose slot lies outside the pool, or -1.
int64_t first_bad_slot(const int64_t* slots, int64_t requests, int64_t pool_slots) {
  for (int64_t b = 0; b < requests; ++b)
    if (slots[b] < 0 || slots[b] >= pool_slots) return b;
  return -1;
}

// One token of one head, widened: q and k L2-normalised (q also scaled by Dk^-0.5), v, exp(g), beta.
struct Token {
  std::vector<float> q, k, v;
  float decay = 1.0f, beta = 0.0f;
  Token(int64_t dk, int64_t dv) : q(dk), k(dk), v(dv) {}
};

template <typename A>
void load_token(const GatedDeltaArgs& a, int64_t t, int64_t h, Token& token) {
  const A* q = static_cast<const A*>(a.q) + t * a.q_token + h * a.q_head;
  const A* k = static_cast<const A*>(a.k) + t * a.k_token + h * a.k_head;
  const A* v = static_cast<const A*>(a.v) + t * a.v_token + h * a.v_head;
  float* qn = token.q.data();
  float* kn = token.k.data();
#pragma omp simd
  for (int64_t i = 0; i < a.dk; ++i) {
    qn[i] = widen(q[i]);
    kn[i] = widen(k[i]);
  }
  float qq = 0.0f, kk = 0.0f;
#pragma omp simd reduction(+ : qq, kk)
  for (int64_t i = 0; i < a.dk; ++i) {
    qq += qn[i] * qn[i];
    kk += kn[i] * kn[i];
  }
  const float q_scale = 1.0f / std::sqrt(qq + kL2Eps), k_scale = 1.0f / std::sqrt(kk + kL2Eps);
  const float head_scale = 1.0f / std::sqrt(static_cast<float>(a.dk));
#pragma omp simd
  for (int64_t i = 0; i < a.dk; ++i) {
    qn[i] = qn[i] * q_scale * head_scale;
    kn[i] = kn[i] * k_scale;
  }
#pragma omp simd
  for (int64_t j = 0; j < a.dv; ++j) token.v[j] = widen(v[j]);
  token.decay = std::exp(a.g[t * a.g_token + h * a.g_head]);
  token.beta = a.beta[t * a.beta_token + h * a.beta_head];
}

// Ask for token t's q, k and v rows of head h ahead of use: a sequence's tokens of one head lie
// H rows apart, too far apart for the hardware prefetcher, and each sweep is over in a microsecond.
template <typename A>
void prefetch_token(const GatedDeltaArgs& a, int64_t t, int64_t h) {
  const char* q = reinterpret_cast<const char*>(static_cast<const A*>(a.q) + t * a.q_token + h * a.q_head);
  const char* k = reinterpret_cast<const char*>(static_cast<const A*>(a.k) + t * a.k_token + h * a.k_head);
  const char* v = reinterpret_cast<const char*>(static_cast<const A*>(a.v) + t * a.v_token + h * a.v_head);
  for (int64_t byte = 0; byte < a.dk * static_cast<int64_t>(sizeof(A)); byte += 64) {
    __builtin_prefetch(q + byte);
    __builtin_prefetch(k + byte);
  }
  for (int64_t byte = 0; byte < a.dv * static_cast<int64_t>(sizeof(A)); byte += 64) __builtin_prefetch(v + byte);
}

// The state is walked in blocks of kColumnBlock columns, all Dk rows of a block before the next:
// the block's column sums then stay in registers (four AVX2 registers each).
constexpr int64_t kColumnBlock = 32;

// pred[j] = sum_i k[i] S[i][j] for columns [j0, j0 + n): S^T k, before the token's decay.
// kCols is n when known at compile time, 0 for the runtime `cols` (a last, narrower block).
template <int64_t kCols, typename In>
void predict_columns(const In* s, int64_t s_row, const float* k, int64_t dk, int64_t j0, int64_t cols, float* pred) {
  const int64_t n = kCols > 0 ? kCols : cols;
  float acc[kCols > 0 ? kCols : kColumnBlock] = {};
  for (int64_t i = 0; i < dk; ++i) {
    const In* row = s + i * s_row + j0;
    const float ki = k[i];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) acc[j] += ki * widen(row[j]);
  }
  for (int64_t j = 0; j < n; ++j) pred[j0 + j] = acc[j];
}

// The token's write into columns [j0, j0 + n): S' = decay S + k delta^T, from `in` to `out` (the
// same rows for an update in place: each element is read before it is written), with the sums
// o = S'^T q and, when kNext, next = S'^T k_next (the next token's prediction, so that a sequence
// sweeps its state once per token). When kKeep the new values are also stored to `keep` (a
// verify's state after this token, rows dv apart).
template <int64_t kCols, bool kNext, bool kKeep, typename In, typename Out, typename Keep>
void update_columns(const In* in, int64_t in_row, Out* out, int64_t out_row, Keep* keep, int64_t dv, const Token& token,
                    const float* delta, const float* k_next, int64_t dk, int64_t j0, int64_t cols, float* o,
                    float* next) {
  const int64_t n = kCols > 0 ? kCols : cols;
  float o_acc[kCols > 0 ? kCols : kColumnBlock] = {}, next_acc[kCols > 0 ? kCols : kColumnBlock] = {};
  const float decay = token.decay;
  for (int64_t i = 0; i < dk; ++i) {
    const In* src = in + i * in_row + j0;
    Out* dst = out + i * out_row + j0;
    const float ki = token.k[i], qi = token.q[i], ni = kNext ? k_next[i] : 0.0f;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      const float s = decay * widen(src[j]) + ki * delta[j0 + j];
      o_acc[j] += qi * s;
      if (kNext) next_acc[j] += ni * s;
      dst[j] = narrow<Out>(s);
      if (kKeep) keep[i * dv + j0 + j] = narrow<Keep>(s);
    }
  }
  for (int64_t j = 0; j < n; ++j) o[j0 + j] = o_acc[j];
  if (kNext)
    for (int64_t j = 0; j < n; ++j) next[j0 + j] = next_acc[j];
}

// delta = beta (v - decay pred) over columns [j0, j1): what the decayed state mispredicts of v.
inline void delta_of(const Token& token, const float* pred, int64_t j0, int64_t j1, float* delta) {
#pragma omp simd
  for (int64_t j = j0; j < j1; ++j) delta[j] = (token.v[j] - token.decay * pred[j]) * token.beta;
}

// A decode's token on its slot, in place, block by block: a block's second sweep finds its rows
// (Dk x 32 values) still in L1 from the first, so the state crosses the memory bus once each way.
template <typename P>
void decode_step(P* slot, int64_t row, const Token& token, int64_t dk, int64_t dv, float* pred, float* delta, float* o) {
  P* const none = nullptr;
  int64_t j0 = 0;
  for (; j0 + kColumnBlock <= dv; j0 += kColumnBlock) {
    predict_columns<kColumnBlock>(slot, row, token.k.data(), dk, j0, kColumnBlock, pred);
    delta_of(token, pred, j0, j0 + kColumnBlock, delta);
    update_columns<kColumnBlock, false, false>(slot, row, slot, row, none, dv, token, delta, nullptr, dk, j0, kColumnBlock, o, nullptr);
  }
  if (j0 < dv) {
    predict_columns<0>(slot, row, token.k.data(), dk, j0, dv - j0, pred);
    delta_of(token, pred, j0, dv, delta);
    update_columns<0, false, false>(slot, row, slot, row, none, dv, token, delta, nullptr, dk, j0, dv - j0, o, nullptr);
  }
}

// The first token of a sequence: its prediction from the starting state, one sweep.
inline void predict(const float* s, const float* k, int64_t dk, int64_t dv, float* pred) {
  int64_t j0 = 0;
  for (; j0 + kColumnBlock <= dv; j0 += kColumnBlock) predict_columns<kColumnBlock>(s, dv, k, dk, j0, kColumnBlock, pred);
  if (j0 < dv) predict_columns<0>(s, dv, k, dk, j0, dv - j0, pred);
}

// A token of a multi-token sequence on its fp32 state, in place, one sweep: the update, its
// output, the next token's prediction when kNext and the state kept for a verify when kKeep.
template <bool kNext, bool kKeep, typename Keep>
void sequence_step(float* s, Keep* keep, const Token& token, const float* delta, const float* k_next, int64_t dk,
                   int64_t dv, float* o, float* next) {
  int64_t j0 = 0;
  for (; j0 + kColumnBlock <= dv; j0 += kColumnBlock)
    update_columns<kColumnBlock, kNext, kKeep>(s, dv, s, dv, keep, dv, token, delta, k_next, dk, j0, kColumnBlock, o, next);
  if (j0 < dv) update_columns<0, kNext, kKeep>(s, dv, s, dv, keep, dv, token, delta, k_next, dk, j0, dv - j0, o, next);
}

template <typename From, typename To>
void copy_state(const From* from, int64_t from_row, To* to, int64_t to_row, int64_t dk, int64_t dv) {
  for (int64_t i = 0; i < dk; ++i)
#pragma omp simd
    for (int64_t j = 0; j < dv; ++j) to[i * to_row + j] = narrow<To>(widen(from[i * from_row + j]));
}

template <typename A, typename P>
void gated_delta(const GatedDeltaArgs& a) {
  const int64_t dk = a.dk, dv = a.dv, items = a.requests * a.heads;
  P* pool = static_cast<P*>(a.state);
  P* states_out = static_cast<P*>(a.states_out);
#pragma omp parallel num_threads(static_cast<int>(std::max<int64_t>(1, std::min(a.threads, items))))
  {
    Token token(dk, dv), next(dk, dv);
    std::vector<float> pred(dv), delta(dv), o(dv), s;  // s: a multi-token sequence's fp32 state
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t b = item / a.heads, h = item % a.heads;
      const int64_t begin = a.cu_seqlens ? a.cu_seqlens[b] : b, end = a.cu_seqlens ? a.cu_seqlens[b + 1] : b + 1;
      const bool resume = a.has_initial == nullptr || a.has_initial[b] != 0;
      P* slot = pool + a.slots[b] * a.state_slot + h * a.state_head;
      const auto emit = [&](int64_t t) {
        A* row = static_cast<A*>(a.out) + (t * a.heads + h) * dv;
        for (int64_t j = 0; j < dv; ++j) row[j] = narrow<A>(o[j]);
      };
      if (end - begin == 1 && resume && a.write_pool && states_out == nullptr) {
        // One token from the slot back into the slot (a decode): no fp32 copy of the state.
        load_token<A>(a, begin, h, token);
        decode_step(slot, a.state_row, token, dk, dv, pred.data(), delta.data(), o.data());
        emit(begin);
        continue;
      }
      s.assign(dk * dv, 0.0f);
      if (resume) copy_state(slot, a.state_row, s.data(), dv, dk, dv);
      if (begin < end) {
        load_token<A>(a, begin, h, token);
        predict(s.data(), token.k.data(), dk, dv, pred.data());
      }
      for (int64_t t = begin; t < end; ++t) {
        delta_of(token, pred.data(), 0, dv, delta.data());
        P* keep = states_out ? states_out + (t * a.heads + h) * dk * dv : nullptr;
        if (t + 1 < end) load_token<A>(a, t + 1, h, next);
        if (t + 2 < end) prefetch_token<A>(a, t + 2, h);
        if (t + 1 < end && keep) sequence_step<true, true>(s.data(), keep, token, delta.data(), next.k.data(), dk, dv, o.data(), pred.data());
        else if (t + 1 < end) sequence_step<true, false>(s.data(), keep, token, delta.data(), next.k.data(), dk, dv, o.data(), pred.data());
        else if (keep) sequence_step<false, true>(s.data(), keep, token, delta.data(), nullptr, dk, dv, o.data(), nullptr);
        else sequence_step<false, false>(s.data(), keep, token, delta.data(), nullptr, dk, dv, o.data(), nullptr);
        emit(t);
        std::swap(token, next);
      }
      // A fresh empty sequence stores zeros, as torch_native's chunked prefill does.
      if (a.write_pool) copy_state(s.data(), dv, slot, a.state_row, dk, dv);
    }
  }
}

constexpr int64_t kChannelBlock = 256;  // channels of one work item (1 KiB of an fp32 row)

// y = SiLU(sum + bias) over `n` channels.
template <typename A>
void bias_silu(float* sum, const float* bias, A* y, int64_t n) {
  if (bias != nullptr)
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) sum[c] += bias[c];
#pragma omp simd
  for (int64_t c = 0; c < n; ++c) y[c] = narrow<A>(sum[c] / (1.0f + exp_of(-sum[c])));
}

// A decode's token through `n` channels, in place in its slot: window [n, W-1] (each channel's
// last W-1 inputs, oldest first, as a contiguous pool holds them) is read and shifted by the
// token's input (stored in the pool's dtype, as torch stores it). kWidth is W when known at
// compile time (2..4: the loop across channels then vectorizes, its stride-W accesses as
// interleaved loads), 0 for any other W.
template <int64_t kWidth, typename P, typename A>
void conv_decode(P* window, const A* x, const float* weight, const float* bias, A* y, int64_t n, int64_t w) {
  const int64_t width = kWidth > 0 ? kWidth : w, history = width - 1;
  float sum[kChannelBlock];
#pragma omp simd
  for (int64_t c = 0; c < n; ++c) {
    P* past = window + c * history;
    const float* tap = weight + c * width;
    const float input = widen(x[c]);
    float dot = 0.0f;
    for (int64_t j = 0; j < history; ++j) dot += tap[j] * widen(past[j]);
    sum[c] = dot + tap[history] * input;
    for (int64_t j = 0; j + 1 < history; ++j) past[j] = past[j + 1];
    past[history - 1] = narrow<P>(input);
  }
  bias_silu(sum, bias, y, n);
}

// sum[c] += tap[c] * row[c] over `n` channels, the row in the activations' or in fp32.
template <typename Row>
void add_tap(float* sum, const float* tap, const Row* row, int64_t n) {
#pragma omp simd
  for (int64_t c = 0; c < n; ++c) sum[c] += tap[c] * widen(row[c]);
}

// Any other call: each output depends on its token and the W-1 inputs before it alone, so tokens
// run in parallel, each a pass along contiguous rows of every channel. Inputs before a sequence's
// first token come from `initial` [B, W-1, C] (its slot's windows or zeros, gathered before any
// slot is written); taps [W, C] is the weight transposed.
template <typename A, typename P>
void conv_sequences(const CausalConvArgs& a) {
  const int64_t channels = a.channels, width = a.width, history = width - 1, requests = a.requests;
  const int64_t tokens = a.cu_seqlens ? a.cu_seqlens[requests] : requests;
  const int64_t blocks = (channels + kChannelBlock - 1) / kChannelBlock;
  const A* x = static_cast<const A*>(a.x);
  P* pool = static_cast<P*>(a.conv_state);
  A* y = static_cast<A*>(a.y);
  P* windows_out = static_cast<P*>(a.windows_out);
  const auto begin_of = [&](int64_t b) { return a.cu_seqlens ? a.cu_seqlens[b] : b; };
  const auto slot_of = [&](int64_t b) { return pool + a.slots[b] * a.state_slot; };
  std::vector<float> initial(requests * history * channels), taps(width * channels);
  const int threads = static_cast<int>(std::max<int64_t>(1, a.threads));
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(static)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t j = 0; j < width; ++j) taps[j * channels + c] = a.weight[c * width + j];
#pragma omp for schedule(static)
    for (int64_t b = 0; b < requests; ++b) {
      const bool resume = a.has_initial == nullptr || a.has_initial[b] != 0;
      const P* slot = slot_of(b);
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t j = 0; j < history; ++j)
          initial[(b * history + j) * channels + c] = resume ? widen(slot[c * a.state_channel + j * a.state_column]) : 0.0f;
    }
    // Input `position` of sequence b, from row c0: a token's row or one of the sequence's initial windows.
    const auto input_at = [&](int64_t b, int64_t position, int64_t c0, auto&& use) {
      const int64_t begin = begin_of(b);
      if (position >= begin) use(x + position * a.x_token + c0);
      else use(initial.data() + (b * history + history - (begin - position)) * channels + c0);
    };
    float sum[kChannelBlock];
#pragma omp for schedule(static)
    for (int64_t item = 0; item < tokens * blocks; ++item) {
      const int64_t t = item / blocks, c0 = (item % blocks) * kChannelBlock, n = std::min(kChannelBlock, channels - c0);
      const int64_t b = a.cu_seqlens ? std::upper_bound(a.cu_seqlens, a.cu_seqlens + requests + 1, t) - a.cu_seqlens - 1 : t;
      std::fill(sum, sum + n, 0.0f);
      for (int64_t j = 0; j < width; ++j)
        input_at(b, t - history + j, c0, [&](const auto* row) { add_tap(sum, taps.data() + j * channels + c0, row, n); });
      bias_silu(sum, a.bias ? a.bias + c0 : nullptr, y + t * channels + c0, n);
      if (windows_out != nullptr) {
        P* after = windows_out + (t * channels + c0) * history;
        for (int64_t j = 0; j < history; ++j)
          input_at(b, t - history + 1 + j, c0, [&](const auto* row) {
            for (int64_t c = 0; c < n; ++c) after[c * history + j] = narrow<P>(widen(row[c]));
          });
      }
    }
    if (a.write_pool) {
      // Every initial window has been read (the loop above ends in a barrier): slots may now change.
#pragma omp for schedule(static)
      for (int64_t b = 0; b < requests; ++b) {
        P* slot = slot_of(b);
        const int64_t end = a.cu_seqlens ? a.cu_seqlens[b + 1] : b + 1;
        for (int64_t j = 0; j < history; ++j)
          input_at(b, end - history + j, 0, [&](const auto* row) {
            for (int64_t c = 0; c < channels; ++c) slot[c * a.state_channel + j * a.state_column] = narrow<P>(widen(row[c]));
          });
      }
    }
  }
}

template <int64_t kWidth, typename A, typename P>
void causal_conv(const CausalConvArgs& a) {
  const int64_t channels = a.channels, history = a.width - 1;
  // A decode whose slots are laid out as conv_decode reads windows updates them in place.
  if (a.cu_seqlens != nullptr || a.windows_out != nullptr || !a.write_pool || a.has_initial != nullptr ||
      a.state_column != 1 || a.state_channel != history)
    return conv_sequences<A, P>(a);
  const int64_t blocks = (channels + kChannelBlock - 1) / kChannelBlock, items = a.requests * blocks;
  const A* x = static_cast<const A*>(a.x);
  P* pool = static_cast<P*>(a.conv_state);
  A* y = static_cast<A*>(a.y);
#pragma omp parallel for schedule(static) num_threads(static_cast<int>(std::max<int64_t>(1, std::min(a.threads, items))))
  for (int64_t item = 0; item < items; ++item) {
    const int64_t b = item / blocks, c0 = (item % blocks) * kChannelBlock, n = std::min(kChannelBlock, channels - c0);
    conv_decode<kWidth>(pool + a.slots[b] * a.state_slot + c0 * a.state_channel, x + b * a.x_token + c0,
                        a.weight + c0 * a.width, a.bias ? a.bias + c0 : nullptr, y + b * channels + c0, n, a.width);
  }
}

template <typename A, typename P>
void causal_conv_of_width(const CausalConvArgs& a) {
  switch (a.width) {
    case 2: return causal_conv<2, A, P>(a);
    case 3: return causal_conv<3, A, P>(a);
    case 4: return causal_conv<4, A, P>(a);
    default: return causal_conv<0, A, P>(a);
  }
}

}  // namespace

// Each returns -1 when done, -2 for an element-type code it has no code for, or the first request
// whose slot lies outside the pool (then nothing was read or written).
extern "C" int64_t gated_delta_recurrence(const GatedDeltaArgs* a) {
  const int64_t bad = first_bad_slot(a->slots, a->requests, a->pool_slots);
  if (bad >= 0) return bad;
  bool known = false;
  with_type(a->activation_code, false, [&](auto activation) {
    known = with_type(a->pool_code, false, [&](auto pool) { gated_delta<decltype(activation), decltype(pool)>(*a); });
  });
  return known ? -1 : -2;
}

extern "C" int64_t causal_conv_recurrence(const CausalConvArgs* a) {
  const int64_t bad = first_bad_slot(a->slots, a->requests, a->pool_slots);
  if (bad >= 0) return bad;
  bool known = false;
  with_type(a->activation_code, false, [&](auto activation) {
    known = with_type(a->pool_code, true, [&](auto pool) { causal_conv_of_width<decltype(activation), decltype(pool)>(*a); });
  });
  return known ? -1 : -2;
}

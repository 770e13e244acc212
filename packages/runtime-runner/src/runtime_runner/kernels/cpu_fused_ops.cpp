// The decoder's elementwise ops on a CPU, one pass each: residual add + RMSNorm, SiLU-and-mul,
// rotary embedding. Each rounds where eager torch rounds in the same op order as transformers
// (so a bf16 model's outputs stay those of transformers), but reads its input once instead of the
// 3-9 passes and thread hand-offs of the eager op chain. Rows are spread over OpenMP threads only
// when they hold enough work to pay for the hand-off.
//
// Rows are addressed in two levels, row (i, j) at i * outer_stride + j * inner_stride elements,
// so one call covers a [tokens, hidden] matrix and a [tokens, heads, head_dim] view alike.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <native_build/widen_narrow.h>
#include <vector>

namespace {

using native_build::bf16;
using native_build::narrow;
using native_build::widen;

// x rounded to the element type and widened back: the value eager torch holds between two ops.
template <typename T> inline float held(float x) { return widen(narrow<T>(x)); }

constexpr int64_t kMinElementsPerThread = 32768;

inline int threads_for(int64_t elements, int64_t threads) {
    int64_t useful = elements / kMinElementsPerThread;
    return static_cast<int>(useful < 1 ? 1 : (useful < threads ? useful : threads));
}

// exp for the SiLU: Cephes' single-precision polynomial (within 2 ulp), written so that the loop
// around it vectorizes; glibc's expf is a scalar call per element.
inline float exp_of(float x) {
    x = x < -87.3f ? -87.3f : (x > 88.3f ? 88.3f : x);
    float n = std::nearbyint(x * 1.44269504088896341f);
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

// out = weight * held(s / rms(s)) with s = held(x + delta) (or x when delta is null), as
// transformers' LlamaRMSNorm computes it; s is also written to sum when delta is given.
template <typename T>
void add_rms_norm(const T* x, int64_t x_outer, int64_t x_inner, const T* delta, int64_t d_outer, int64_t d_inner,
                  const T* weight, T* sum, T* out, int64_t outer, int64_t inner, int64_t cols, float eps,
                  int64_t threads) {
    const int64_t rows = outer * inner;
#pragma omp parallel num_threads(threads_for(rows * cols, threads))
    {
        std::vector<float> row(cols);  // this thread's widened s
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t i = r / inner, j = r % inner;
            const T* xr = x + i * x_outer + j * x_inner;
            T* orow = out + r * cols;
            if (delta != nullptr) {
                const T* dr = delta + i * d_outer + j * d_inner;
                T* sr = sum + r * cols;
                for (int64_t c = 0; c < cols; ++c) {
                    T s = narrow<T>(widen(xr[c]) + widen(dr[c]));
                    sr[c] = s;
                    row[c] = widen(s);
                }
            } else {
                for (int64_t c = 0; c < cols; ++c) row[c] = widen(xr[c]);
            }
            float lanes[16] = {0};
            int64_t c = 0;
            for (; c + 16 <= cols; c += 16)
                for (int l = 0; l < 16; ++l) lanes[l] += row[c + l] * row[c + l];
            float total = 0;
            for (; c < cols; ++c) total += row[c] * row[c];
            for (int l = 0; l < 16; ++l) total += lanes[l];
            const float inv_rms = 1.0f / std::sqrt(total / static_cast<float>(cols) + eps);
            for (int64_t k = 0; k < cols; ++k) orow[k] = narrow<T>(widen(weight[k]) * held<T>(row[k] * inv_rms));
        }
    }
}

// out[r, :] = held(silu(gate)) * up over rows [gate | up] of width 2 * inter, as silu(gate) * up.
template <typename T>
void silu_mul(const T* gate_up, int64_t stride, T* out, int64_t rows, int64_t inter, int64_t threads) {
#pragma omp parallel for num_threads(threads_for(rows * inter * 2, threads)) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const T* g = gate_up + r * stride;
        const T* u = g + inter;
        T* o = out + r * inter;
        for (int64_t c = 0; c < inter; ++c) {
            float gv = widen(g[c]);
            o[c] = narrow<T>(held<T>(gv / (1.0f + exp_of(-gv))) * widen(u[c]));
        }
    }
}

// In place over rows (token i, head j) of head_dim d: x <- held(x * cos) + held(roll(x, d/2) * signed_sin),
// with cos and signed_sin the token's rows of the rotary tables.
template <typename T>
void rope(T* x, int64_t x_outer, int64_t x_inner, const T* cos, const T* sin, int64_t table_stride, int64_t outer,
          int64_t inner, int64_t d, int64_t threads) {
    const int64_t rows = outer * inner, half = d / 2;
#pragma omp parallel num_threads(threads_for(rows * d, threads))
    {
        std::vector<float> row(d);  // this thread's widened head, read while it is overwritten
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t i = r / inner, j = r % inner;
            T* xr = x + i * x_outer + j * x_inner;
            const T* cr = cos + i * table_stride;
            const T* sr = sin + i * table_stride;
            for (int64_t c = 0; c < d; ++c) row[c] = widen(xr[c]);
            for (int64_t c = 0; c < d; ++c) {
                const float rolled = row[c < half ? c + half : c - half];
                xr[c] = narrow<T>(held<T>(row[c] * widen(cr[c])) + held<T>(rolled * widen(sr[c])));
            }
        }
    }
}

}  // namespace

#define CPU_FUSED_OPS(SUFFIX, T)                                                                                   \
    extern "C" void add_rms_norm_##SUFFIX(const void* x, int64_t x_outer, int64_t x_inner, const void* delta,      \
                                          int64_t d_outer, int64_t d_inner, const void* weight, void* sum,         \
                                          void* out, int64_t outer, int64_t inner, int64_t cols, double eps,       \
                                          int64_t threads) {                                                       \
        add_rms_norm<T>(static_cast<const T*>(x), x_outer, x_inner, static_cast<const T*>(delta), d_outer, d_inner, \
                        static_cast<const T*>(weight), static_cast<T*>(sum), static_cast<T*>(out), outer, inner,   \
                        cols, static_cast<float>(eps), threads);                                                   \
    }                                                                                                              \
    extern "C" void silu_mul_##SUFFIX(const void* gate_up, int64_t stride, void* out, int64_t rows, int64_t inter, \
                                      int64_t threads) {                                                           \
        silu_mul<T>(static_cast<const T*>(gate_up), stride, static_cast<T*>(out), rows, inter, threads);           \
    }                                                                                                              \
    extern "C" void rope_##SUFFIX(void* x, int64_t x_outer, int64_t x_inner, const void* cos, const void* sin,     \
                                  int64_t table_stride, int64_t outer, int64_t inner, int64_t d, int64_t threads) { \
        rope<T>(static_cast<T*>(x), x_outer, x_inner, static_cast<const T*>(cos), static_cast<const T*>(sin),      \
                table_stride, outer, inner, d, threads);                                                           \
    }

CPU_FUSED_OPS(float32, float)
CPU_FUSED_OPS(bfloat16, bf16)
CPU_FUSED_OPS(float16, _Float16)

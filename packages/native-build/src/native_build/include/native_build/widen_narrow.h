// The element types the kernels read and store (fp32, fp16, bf16) widened to fp32 and narrowed back, as torch
// rounds; for every kernel that computes in fp32 over tensors of any of them (include <native_build/widen_narrow.h>).
// There is no widen(double): the kernels that take fp64 differ in what they compute it in, so each keeps its own.
#pragma once

#include <cstdint>
#include <cstring>
#include <native_build/bf16_bits.h>

namespace native_build {

// A bf16 element, its bits: a type of its own so that overloads and templates tell it from an integer.
struct bf16 {
    uint16_t bits;
};

inline float widen(float x) { return x; }
inline float widen(_Float16 x) { return static_cast<float>(x); }
inline float widen(bf16 x) {
    const uint32_t u = static_cast<uint32_t>(x.bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

template <typename T> T narrow(float x);
template <> inline float narrow<float>(float x) { return x; }
template <> inline double narrow<double>(float x) { return x; }
template <> inline _Float16 narrow<_Float16>(float x) { return static_cast<_Float16>(x); }
// Round to nearest even, as torch does; a NaN stays a (quiet) NaN. Branch-free, so that loops storing bf16 still
// vectorize.
template <> inline bf16 narrow<bf16>(float x) { return bf16{bf16_bits_of(x)}; }

}  // namespace native_build

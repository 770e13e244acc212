// bfloat16 as torch rounds to it, for every kernel that stores bf16 (include <native_build/bf16_bits.h>).
#pragma once

#include <cstdint>
#include <cstring>

namespace native_build {

// fp32 to bf16 bits, rounded to nearest even; a NaN stays a (quiet) NaN: what torch's
// .to(torch.bfloat16) does. Branch-free, so loops around it vectorize.
inline uint16_t bf16_bits_of(float x) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16, quiet = (u >> 16) | 0x40u;
    return static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? quiet : rounded);
}

}  // namespace native_build

// What both rules' kernels in quantized_linear.cpp share: where a block of rows' results goes
// (Target), the epilogue that stores it (finish), and how a call is split into tasks.

#pragma once

#include <cstdint>

#include "quantized_blocks.h"

#if QL_AVX2
#include <native_build/avx2_store_row.h>
#endif

namespace quantized {

// Rows r0.. of the output: store `acc` + bias, rounded, for MR rows and the first `cols` of NP panels.
template <typename T> struct Target {
    T* out;              // row r0, column 16 * p0
    int64_t ldo;         // N
    const float* bias;   // at column 16 * p0, or null
    int64_t cols;        // columns left from 16 * p0 (may exceed 16 * NP)
};

// Below this many multiply-adds per thread the OpenMP hand-off costs more than it saves.
constexpr int64_t kMinMacsPerThread = 1 << 16;
// Rows per task at most in the many-rows paths: a task's panels, de-quantized or unpacked into L2,
// are read from there once per micro-kernel's rows.
constexpr int64_t kMaxRowBlock = 96;

#if QL_AVX2

// The shared epilogue (native_build/avx2_store_row.h) stores one panel row of results at a time.
static_assert(kPanel == native_build::kRowColumns, "a panel row of results is stored by one store_row");

// The epilogue of every kernel: acc + bias (fp32), rounded once, for MR rows x NP panels.
template <int MR, int NP, typename T>
inline void finish(const __m256 (&acc)[MR][NP][2], const Target<T>& to) {
    native_build::store_rows(acc, to.out, to.ldo, to.bias, to.cols);
}

#endif

}  // namespace quantized

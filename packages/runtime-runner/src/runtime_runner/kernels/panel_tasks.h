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

// Where row i's results over panel p go, in an output [M][N].
template <typename T> inline Target<T> target_of(const Matrix& m, int64_t i, int64_t p, T* out) {
    return {out + i * m.n + p * kPanel, m.n, m.bias == nullptr ? nullptr : m.bias + p * kPanel, m.n - p * kPanel};
}

// Rows [i0, i1) in even blocks of at most `most` rows (with 4: 5 rows as 3 + 2, 9 as 3 + 3 + 3):
// each(i, rows, where row i's results over panel p go).
template <typename T, typename Each>
inline void in_row_blocks(const Matrix& m, int64_t i0, int64_t i1, int64_t p, int64_t most, T* out, Each each) {
    const int64_t count = i1 - i0, blocks = (count + most - 1) / most, first = (count + blocks - 1) / blocks;
    for (int64_t i = i0; i < i1; i += first)
        each(i, static_cast<int>(i1 - i < first ? i1 - i : first), target_of(m, i, p, out));
}

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

// The integer rule's many-rows products on AMX-INT8 tiles (the amx tier; integer_linear.h states
// the rule). A panel unpacked for the many-rows path (UnpackedRuns: per run its Scales, then its
// quads, rows 0..7 and 8..15 of four values each in 64 bytes) is already a tile of B for the tile
// dot product: row kk of B holds, for each of the 16 weight rows, its values 4 kk..4 kk + 3 in one
// dword. x's int8 rows are tiles of A as they lie (16 rows of a run's 32 or 16 bytes, k bytes
// apart). So one tdpbsud (signed x times unsigned q; tdpbssd for the signed kinds) gives a run's
// exact int32 sums for 16 rows x 16 columns, the integers vpdpbusd and maddubs give, and the
// epilogue is the avx512 tier's (integer_linear_vnni.h's `chained`) lane for lane: the same bits.
// Only whole tiles of 16 rows run here; a row block's last rows run integer_linear_vnni.h's kernel.

#pragma once

#include <cstdint>

#include "activation_blocks.h"
#include "integer_linear_vnni.h"
#include "panel_runs.h"
#include "panel_tasks.h"
#include "quantized_blocks.h"

#if QL_AMX

#include <native_build/amx_tiles.h>

namespace quantized {

constexpr int kTileRows = 16;

// Tile registers: 0-1 two runs' sums (16 rows x 16 int32), 2-3 their x (16 rows x the run's
// bytes), 4-5 their weights (a run's quads: run / 4 rows x 64 bytes). Set once per thread and kind.
template <int64_t KIND>
inline void configure_int8_tiles() {
    constexpr int kRun = static_cast<int>(format_of(KIND).run);
    native_build::TileConfig c;
    const int rows[6] = {kTileRows, kTileRows, kTileRows, kTileRows, kRun / 4, kRun / 4};
    const int colsb[6] = {64, 64, kRun, kRun, 64, 64};
    for (int t = 0; t < 6; ++t) {
        c.rows[t] = static_cast<uint8_t>(rows[t]);
        c.colsb[t] = static_cast<uint16_t>(colsb[t]);
    }
    native_build::load_tile_config(c);
}

// Rows i0..i0+15 of x x one unpacked panel (`scratch`, UnpackedRuns' layout), by the integer rule
// on tiles: the runs two at a time (two sums in flight), each run's sums stored and chained.
template <int64_t KIND, typename T>
void tile_int8(const Matrix& m, const ActivationBlocks& xa, int64_t i0, const uint8_t* scratch, const Target<T>& to) {
    constexpr int64_t kRun = format_of(KIND).run;
    constexpr int64_t kRunBytes = UnpackedRuns<KIND>::kRunBytes;
    const int64_t runs = m.k / kRun;
    __m512 acc[kTileRows];
    const float* dx_of[kTileRows];
    const int32_t* sums_of[kTileRows];
    const float* float_sums_of[kTileRows];
    for (int i = 0; i < kTileRows; ++i) {
        acc[i] = _mm512_setzero_ps();
        dx_of[i] = xa.d_of(i0 + i);
        sums_of[i] = xa.sums + xa.sums_at<kRun>(i0 + i);
        float_sums_of[i] = xa.float_sums + xa.sums_at<kRun>(i0 + i);
    }
    const int8_t* x = xa.q_of(i0);
    alignas(64) int32_t sums[2][kTileRows][kPanel];
    // Run g's sums into tile 0 (x in tile 2, weights in tile 4) or tile 1 (3, 5): GCC's tile
    // intrinsics name their registers in the instruction text, so each pair is written out.
    auto x_of = [&](int64_t g) { return x + g * kRun; };
    auto quads_of = [&](int64_t g) { return scratch + g * kRunBytes + sizeof(Scales); };
    auto product0 = [&](int64_t g) {
        _tile_zero(0);
        _tile_loadd(2, x_of(g), m.k);
        _tile_loadd(4, quads_of(g), 64);
        if constexpr (signed_quads(KIND)) {
            _tile_dpbssd(0, 2, 4);
        } else {
            _tile_dpbsud(0, 2, 4);
        }
    };
    auto product1 = [&](int64_t g) {
        _tile_zero(1);
        _tile_loadd(3, x_of(g), m.k);
        _tile_loadd(5, quads_of(g), 64);
        if constexpr (signed_quads(KIND)) {
            _tile_dpbssd(1, 3, 5);
        } else {
            _tile_dpbsud(1, 3, 5);
        }
    };
    auto chain = [&](int64_t g, const int32_t (&n)[kTileRows][kPanel]) {
        __m512 a, minimum;
        run_scales<KIND>(*reinterpret_cast<const Scales*>(scratch + g * kRunBytes), a, minimum);
        const int64_t k = g * kRun;
#pragma GCC unroll 16
        for (int i = 0; i < kTileRows; ++i)
            acc[i] = chained<KIND>(acc[i], _mm512_load_si512(n[i]), a, minimum, sums_of[i][g], float_sums_of[i][g],
                                   dx_of[i][k / kActivationBlock]);
    };
    int64_t g = 0;
    for (; g + 1 < runs; g += 2) {
        product0(g);
        product1(g + 1);
        _tile_stored(0, sums[0], 64);
        _tile_stored(1, sums[1], 64);
        chain(g, sums[0]);
        chain(g + 1, sums[1]);
    }
    if (g < runs) {  // an odd run count (q4_0 and the other 32-value kinds with an odd k / 32)
        product0(g);
        _tile_stored(0, sums[0], 64);
        chain(g, sums[0]);
    }
    finish_wide<kTileRows>(acc, to);
}

// Rows [i0, i1) over one unpacked panel p on the amx tier: whole tiles of 16 rows on AMX, the
// rest on the avx512 kernel (the same bits either way).
template <int64_t KIND, typename T>
void rows_tiles(const Matrix& m, const ActivationBlocks& xa, int64_t i0, int64_t i1, int64_t p, const uint8_t* scratch,
                T* out) {
    int64_t i = i0;
    for (; i + kTileRows <= i1; i += kTileRows) tile_int8<KIND>(m, xa, i, scratch, target_of(m, i, p, out));
    if (i < i1) rows_vnni<KIND>(m, xa, i, i1, p, UnpackedRuns<KIND>(scratch), out);
}

}  // namespace quantized

#endif

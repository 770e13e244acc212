// Where the integer rule's kernels (integer_linear.h and the tiers above it) read a panel's runs:
// each run's scales, as the Decoder gives them, and its integers as weight_quads.h's quads, either
// straight from the quantized blocks (BlockRuns, few rows) or from a scratch the panel was
// unpacked into once for every row of a task (UnpackedRuns, many rows).

#pragma once

#include <cstdint>
#include <cstring>

#include "quantized_blocks.h"
#include "weight_quads.h"
#include "wide_quads.h"

#if QL_AVX2

namespace quantized {

// Bytes of one run of a panel's block (the 16 rows' share of it; int8: the whole 32 k).
template <int64_t KIND> constexpr int64_t kRunBytes = kPanelBlock<KIND> * format_of(KIND).run / format_of(KIND).values;

// The integer kernel reads a panel's bytes in order, once per call, faster than a core's own
// prefetchers bring them: perf put most of a decode step's samples on the first use of each
// weight load. Asking for the bytes kPrefetchAhead further on as each run starts keeps them
// coming: the 1B-shaped Q4_K_M model decodes one stream at ~34 tok/s instead of ~24 (AVX2 EPYC,
// 2 cores; 2-16 KiB ahead measured alike; past the matrix's end it is harmless). The float32
// rule's kernels, bound by their arithmetic, measured slower with it, so they go without.
constexpr int64_t kPrefetchAhead = 16 * 1024;
inline void prefetch_ahead(const uint8_t* from, int64_t bytes) {
    for (int64_t at = 0; at < bytes; at += 64)
        _mm_prefetch(reinterpret_cast<const char*>(from + kPrefetchAhead + at), _MM_HINT_T0);
}

// Where the integer kernel reads a panel's runs (their scales, and their weights as quads):
// straight from the quantized blocks, de-quantizing the scales as it goes (few rows) ...
template <int64_t KIND> struct BlockRuns {
    const uint8_t* block;
    Decoder<KIND> dec;
    // A run's first chunk in quads begins where its first value-ordered unit would (both layouts
    // spend 2 b bytes per value of 16 rows, and a run holds whole chunks), so the Decoder's plane
    // pointers serve, but for q3_k's one-bit plane: its runs of 16 values start halfway through a
    // chunk of 32 on odd runs, at field 4.
    const uint8_t* high = nullptr;  // the chunk that holds the run's first value in the high plane
    int high_first = 0;             // that value's field in it
    explicit BlockRuns(const uint8_t* panel) : block(panel) {}
    void start(int64_t b) {  // block b, in order from 0
        if (b > 0) block += kPanelBlock<KIND>;
        dec.start(block, nullptr);
    }
    void run(int r) {
        dec.run(block, r);
        prefetch_ahead(block + r * kRunBytes<KIND>, kRunBytes<KIND>);
        high = dec.high;
        if constexpr (KIND == kQ3K) {
            high_first = 4 * (r % 2);
            high -= 32 * (r % 2);
        }
    }
    const Scales& scales() const { return dec.s; }
    void quads_at(int j, __m256i& rows0, __m256i& rows8) const {
        quads<KIND>(dec.low, high, high_first, j, rows0, rows8);
    }
#if QL_VNNI
    __m512i wide_quads_at(int j) const { return wide_quads<KIND>(dec.low, high, high_first, j); }
#endif
};

// ... or from a scratch the panel was unpacked into once, for every row of a task (many rows):
// per run in k order, its Scales, then its quads (rows 0..7, rows 8..15) in value order.
template <int64_t KIND> struct UnpackedRuns {
    static constexpr int64_t kRun = format_of(KIND).run;
    static constexpr int64_t kRunBytes = sizeof(Scales) + kRun / 4 * 2 * sizeof(__m256i);
    const uint8_t* base;
    const uint8_t* at = nullptr;
    int64_t runs_before = 0;  // runs of the blocks before the current one
    explicit UnpackedRuns(const uint8_t* scratch) : base(scratch) {}
    void start(int64_t b) { runs_before = b * (format_of(KIND).values / kRun); }
    void run(int r) { at = base + (runs_before + r) * kRunBytes; }
    const Scales& scales() const { return *reinterpret_cast<const Scales*>(at); }
    void quads_at(int j, __m256i& rows0, __m256i& rows8) const {
        const uint8_t* q = at + sizeof(Scales) + j / 4 * 2 * sizeof(__m256i);
        rows0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(q));
        rows8 = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + sizeof(__m256i)));
    }
#if QL_VNNI
    __m512i wide_quads_at(int j) const { return _mm512_loadu_si512(at + sizeof(Scales) + j / 4 * 2 * sizeof(__m256i)); }
#endif
};

// Panel p unpacked into `scratch` (UnpackedRuns' layout; 32-byte aligned).
template <int64_t KIND>
void unpack_panel(const Matrix& m, int64_t p, uint8_t* scratch) {
    constexpr Format f = format_of(KIND);
    BlockRuns<KIND> runs(m.data + p * panel_bytes(m));
    for (int64_t b = 0; b < m.k / f.values; ++b) {
        runs.start(b);
        for (int r = 0; r < f.values / f.run; ++r, scratch += UnpackedRuns<KIND>::kRunBytes) {
            runs.run(r);
            std::memcpy(scratch, &runs.scales(), sizeof(Scales));
            auto* q = reinterpret_cast<__m256i*>(scratch + sizeof(Scales));
#pragma GCC unroll 8
            for (int j = 0; j < f.run; j += 4) runs.quads_at(j, q[j / 2], q[j / 2 + 1]);
        }
    }
}

}  // namespace quantized

#endif

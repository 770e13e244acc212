// Projections of the same rows whose outputs stand side by side, run as ONE entry of the native
// projection ABI (native_projection.py): a fused group (q|k|v, gate|up) whose matrices differ in
// kind, as llama-quantize's mixes write them (a Q8_0 v beside Q5_0 q and k), or a dense matrix
// beside quantized ones. Each part runs its own kernel through its own entry into a scratch, and
// its rows are copied into its columns of the output: a copy changes no bit, so a row of the
// result is exactly the parts' rows side by side, and each part's batch invariance carries over.
//
// A copy rather than an output stride in every kernel: the copy is one pass over the group's
// output, small beside reading its weights, and every kind (the batch-invariant linear, each
// quantized kind) keeps the one entry it has.

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

using Projection = void (*)(const void* matrix, const void* x, int64_t ldx, int64_t rows, void* out, int64_t threads);

// One part: its entry, the descriptor it reads, and its output columns.
struct Part {
    Projection entry;
    const void* matrix;
    int64_t n;
};

struct Stack {
    int64_t count;         // parts
    int64_t n;             // output columns: the parts' n summed
    int64_t element_size;  // bytes of one output element (the activation dtype's)
    const Part* parts;
};

}  // namespace

extern "C" void projection_stack(const void* stack, const void* x, int64_t ldx, int64_t rows, void* out,
                                 int64_t threads) {
    const Stack& s = *static_cast<const Stack*>(stack);
    // Kept between calls (it only grows), so that a call maps no fresh pages.
    thread_local std::vector<char> scratch;
    char* to = static_cast<char*>(out);
    int64_t column = 0;
    for (int64_t i = 0; i < s.count; ++i) {
        const Part& part = s.parts[i];
        const int64_t row_bytes = part.n * s.element_size;
        if (static_cast<int64_t>(scratch.size()) < rows * row_bytes) scratch.resize(rows * row_bytes);
        part.entry(part.matrix, x, ldx, rows, scratch.data(), threads);
        for (int64_t r = 0; r < rows; ++r)
            std::memcpy(to + (r * s.n + column) * s.element_size, scratch.data() + r * row_bytes, row_bytes);
        column += part.n;
    }
}

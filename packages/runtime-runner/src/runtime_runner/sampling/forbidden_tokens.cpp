// The tokens a grammar forbids, set to -inf in place on a request's own row of the fp32 logits.
//
// The grammar engine writes a bitmask per row (bit t % 32 of word t // 32 set when token t may come
// next). Unpacking it into a bool tensor and filling through torch takes several passes over
// every row; here each word is read once and its 32 logits kept or replaced in one select, which
// GCC vectorizes. Elementwise on a row's own values: a request's mask never reads another row.
#include <algorithm>
#include <cstdint>
#include <limits>

extern "C" {

// For each k < n_rows: logits row rows[k] (row_stride floats apart) gets -inf wherever bitmask
// row k (words_per_row int32 words) has a 0 bit among the first vocab tokens. allowed[k] is set to
// 1 when at least one of those tokens is allowed, else 0.
void mask_forbidden_float32(float* logits, int64_t row_stride, const int32_t* bitmask, int64_t words_per_row,
                            const int64_t* rows, int64_t n_rows, int64_t vocab, uint8_t* allowed,
                            int64_t threads) {
    const float forbidden = -std::numeric_limits<float>::infinity();
    const int64_t full_words = vocab / 32;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t k = 0; k < n_rows; ++k) {
        float* row = logits + rows[k] * row_stride;
        const uint32_t* words = reinterpret_cast<const uint32_t*>(bitmask + k * words_per_row);
        uint32_t any = 0;
        for (int64_t w = 0; w < full_words; ++w) {
            const uint32_t word = words[w];
            any |= word;
            if (word == 0xFFFFFFFFu) continue;
            float* values = row + w * 32;
            for (int b = 0; b < 32; ++b) values[b] = (word >> b) & 1u ? values[b] : forbidden;
        }
        const int64_t tail = vocab - full_words * 32;  // tokens of a last, partial word
        if (tail > 0) {
            const uint32_t word = words[full_words] & ((1u << tail) - 1u);
            any |= word;
            float* values = row + full_words * 32;
            for (int64_t b = 0; b < tail; ++b) values[b] = (word >> b) & 1u ? values[b] : forbidden;
        }
        allowed[k] = any != 0;
    }
}
}

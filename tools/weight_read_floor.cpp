// The weight-read floor's measuring stick: how fast this machine reads a buffer too large to cache,
// split between threads in contiguous halves as a decode step's matrix-vector products split their
// weights. Each 128-byte chunk is loaded as four 256-bit vectors into four independent integer sum
// chains, so that nothing but the loads, and so the memory, limits the pass.

#include <immintrin.h>
#include <cstdint>

extern "C" int64_t read_all(const uint8_t* data, int64_t bytes, int64_t threads) {
    const int64_t chunks = bytes / 128;
    int64_t total = 0;
#pragma omp parallel for schedule(static) num_threads(threads) reduction(+ : total)
    for (int64_t part = 0; part < threads; ++part) {
        __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
        const int64_t begin = chunks * part / threads, end = chunks * (part + 1) / threads;
        for (int64_t i = begin; i < end; ++i) {
            const __m256i* p = reinterpret_cast<const __m256i*>(data + i * 128);
            a = _mm256_add_epi64(a, _mm256_loadu_si256(p));
            b = _mm256_add_epi64(b, _mm256_loadu_si256(p + 1));
            c = _mm256_add_epi64(c, _mm256_loadu_si256(p + 2));
            d = _mm256_add_epi64(d, _mm256_loadu_si256(p + 3));
        }
        const __m256i sum = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
        total += _mm256_extract_epi64(sum, 0) + _mm256_extract_epi64(sum, 1) + _mm256_extract_epi64(sum, 2) +
                 _mm256_extract_epi64(sum, 3);
    }
    return total;
}

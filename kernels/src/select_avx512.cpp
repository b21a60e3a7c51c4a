// AVX-512 mask selection (select.h): 16 compares to a mask, then a register compress and a whole-vector
// store (the memory form of vpcompressd is microcoded on Zen 4), the count advanced by the mask's popcount.
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC bug 105593, see dense_avx512.cpp
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "select_internal.h"

namespace sl::kernels::detail {
namespace {

inline int64_t emit(int32_t* out, int64_t k, __mmask16 m, __m512i values) {
    _mm512_storeu_si512(out + k, _mm512_maskz_compress_epi32(m, values));
    return k + __builtin_popcount(m);
}

int64_t at_least(const uint32_t* keys, int64_t n, uint32_t t, int32_t* out) {
    const __m512i tv = _mm512_set1_epi32(static_cast<int32_t>(t)), step = _mm512_set1_epi32(16);
    __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    int64_t i = 0, k = 0;
    for (; i + 16 <= n; i += 16, idx = _mm512_add_epi32(idx, step))
        k = emit(out, k, _mm512_cmpge_epu32_mask(_mm512_loadu_si512(keys + i), tv), idx);
    return at_least_tail(keys, i, n, t, out, k);
}

int64_t bucket(const uint32_t* keys, int64_t n, int shift, uint32_t b, uint32_t* out) {
    const __m512i bv = _mm512_set1_epi32(static_cast<int32_t>(b));
    const __m512i sh = _mm512_set1_epi32(shift);
    auto* o = reinterpret_cast<int32_t*>(out);
    int64_t i = 0, k = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i v = _mm512_loadu_si512(keys + i);
        k = emit(o, k, _mm512_cmpeq_epi32_mask(_mm512_srlv_epi32(v, sh), bv), v);
    }
    return bucket_tail(keys, i, n, shift, b, out, k);
}

int64_t abs_pass(const float* v, int64_t n, float t0, const float* tv, bool strict, int32_t* out) {
    const __m512i step = _mm512_set1_epi32(16);
    __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 t1 = _mm512_set1_ps(t0);
    int64_t i = 0, k = 0;
    for (; i + 16 <= n; i += 16, idx = _mm512_add_epi32(idx, step)) {
        const __m512 a = _mm512_abs_ps(_mm512_loadu_ps(v + i));
        const __m512 t = tv ? _mm512_loadu_ps(tv + i) : t1;
        // Ordered compares: false for NaN, as the scalar tail.
        const __mmask16 m = strict ? _mm512_cmp_ps_mask(a, t, _CMP_GT_OQ) : _mm512_cmp_ps_mask(a, t, _CMP_GE_OQ);
        k = emit(out, k, m, idx);
    }
    return abs_tail(v, i, n, t0, tv, strict, out, k);
}

}  // namespace

const select_table& select_avx512_table() {
    static const select_table t{at_least, bucket, abs_pass};
    return t;
}

}  // namespace sl::kernels::detail

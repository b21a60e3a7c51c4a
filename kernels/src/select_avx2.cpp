// AVX2 mask selection (select.h): 8 compares to a byte mask, whose set lanes a table turns into a lane
// permutation (vpermd) that packs them to the front of a whole-vector store; the count advances by the
// mask's popcount (from a table too: the AVX2 flags do not include POPCNT).
#include <immintrin.h>

#include "select_internal.h"

namespace sl::kernels::detail {
namespace {

struct pack_table {
    alignas(32) int32_t lanes[256][8] = {};
    uint8_t count[256] = {};
    constexpr pack_table() {
        for (int m = 0; m < 256; ++m)
            for (int j = 0; j < 8; ++j)
                if (m >> j & 1) lanes[m][count[m]++] = j;
    }
};
constexpr pack_table k_pack{};

inline int64_t emit(int32_t* out, int64_t k, int m, __m256i values) {
    const __m256i perm = _mm256_load_si256(reinterpret_cast<const __m256i*>(k_pack.lanes[m]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), _mm256_permutevar8x32_epi32(values, perm));
    return k + k_pack.count[m];
}

inline int mask_of(__m256i cmp) {
    return _mm256_movemask_ps(_mm256_castsi256_ps(cmp));
}

int64_t at_least(const uint32_t* keys, int64_t n, uint32_t t, int32_t* out) {
    // keys >= t as unsigned: not (t > keys) on sign-flipped values.
    const __m256i flip = _mm256_set1_epi32(static_cast<int32_t>(0x80000000u));
    const __m256i tv = _mm256_xor_si256(_mm256_set1_epi32(static_cast<int32_t>(t)), flip);
    const __m256i step = _mm256_set1_epi32(8);
    __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    int64_t i = 0, k = 0;
    for (; i + 8 <= n; i += 8, idx = _mm256_add_epi32(idx, step)) {
        const __m256i v = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + i)), flip);
        k = emit(out, k, ~mask_of(_mm256_cmpgt_epi32(tv, v)) & 0xff, idx);
    }
    return at_least_tail(keys, i, n, t, out, k);
}

int64_t bucket(const uint32_t* keys, int64_t n, int shift, uint32_t b, uint32_t* out) {
    const __m256i bv = _mm256_set1_epi32(static_cast<int32_t>(b));
    const __m128i sh = _mm_cvtsi32_si128(shift);
    auto* o = reinterpret_cast<int32_t*>(out);
    int64_t i = 0, k = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + i));
        k = emit(o, k, mask_of(_mm256_cmpeq_epi32(_mm256_srl_epi32(v, sh), bv)), v);
    }
    return bucket_tail(keys, i, n, shift, b, out, k);
}

int64_t abs_pass(const float* v, int64_t n, float t0, const float* tv, bool strict, int32_t* out) {
    const __m256 no_sign = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i step = _mm256_set1_epi32(8);
    __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 t1 = _mm256_set1_ps(t0);
    int64_t i = 0, k = 0;
    for (; i + 8 <= n; i += 8, idx = _mm256_add_epi32(idx, step)) {
        const __m256 a = _mm256_and_ps(_mm256_loadu_ps(v + i), no_sign);
        const __m256 t = tv ? _mm256_loadu_ps(tv + i) : t1;
        // Ordered compares: false for NaN, as the scalar tail.
        const __m256 c = strict ? _mm256_cmp_ps(a, t, _CMP_GT_OQ) : _mm256_cmp_ps(a, t, _CMP_GE_OQ);
        k = emit(out, k, _mm256_movemask_ps(c), idx);
    }
    return abs_tail(v, i, n, t0, tv, strict, out, k);
}

}  // namespace

const select_table& select_avx2_table() {
    static const select_table t{at_least, bucket, abs_pass};
    return t;
}

}  // namespace sl::kernels::detail

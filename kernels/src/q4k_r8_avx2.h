// AVX2 rows of Q4_Kx8r (types.h) against Q8_K activations, for quant_rows_avx2.cpp: the AVX2 tables (and
// AVX-512 CPUs without VNNI, which keep it under the AVX-512 rows). Anonymous namespace as row_dots_avx2.h.
//
// The VNNI kernel's lanes (q4k_r8_avx512.h) in two ymm per 8 rows: rows 0-3 and 4-7, each row in two dword
// lanes. Per 64-byte piece and half: the nibbles (and, shift, and), one maddubs against an 8-byte
// broadcast of x per nibble half, summed over a group's 4 pieces in int16 (8 products of at most
// 15 * 128: exact), then one madd by the group's scale words: the same exact integers as the row kernels'
// lanes, and the float steps of q4k_lanes.h, so the same bits.
#pragma once

#include "q4k_lanes.h"
#include "row_dots_avx2.h"

namespace sl::kernels::detail {
namespace {

struct q4k_x8_avx2 {
    static constexpr int64_t group_bytes = k_rows_x8 * 144;

    // Scale (or minimum) bytes of the 8 rows (dword r: groups 0-3 or 4-7 of row r) as dwords
    // (row 4h + i, lane e) = row's 4 bytes, for half h.
    static __m256i half_rows(__m256i v, int h) {
        return _mm256_permutevar8x32_epi32(v, h ? _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7)
                                                : _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
    }
    // Byte k of each dword as the two words of that dword (a group's scale for madd).
    template <int k>
    static __m256i scale_words(__m256i v) {
        const __m128i idx = _mm_setr_epi8(k, -128, k, -128, 4 + k, -128, 4 + k, -128, 8 + k, -128, 8 + k, -128,
                                          12 + k, -128, 12 + k, -128);
        return _mm256_shuffle_epi8(v, _mm256_set_m128i(idx, idx));
    }

    // Groups 2p (low nibbles) and 2p + 1 (high) of one half: pieces 4p..4p+3, into a scaled.
    template <int p>
    [[gnu::always_inline]] static __m256i groups(const uint8_t* g, int h, const int8_t* xq, __m256i sc, __m256i a) {
        const __m256i m4 = _mm256_set1_epi8(0x0f);
        __m256i tl = _mm256_setzero_si256(), th = _mm256_setzero_si256();
        SL_UNROLL
        for (int j = 0; j < 4; ++j) {
            const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 128 + 64 * (4 * p + j) + 32 * h));
            int64_t xl, xh;
            std::memcpy(&xl, xq + 64 * p + 8 * j, 8);
            std::memcpy(&xh, xq + 64 * p + 32 + 8 * j, 8);
            tl = _mm256_add_epi16(tl, _mm256_maddubs_epi16(_mm256_and_si256(v, m4), _mm256_set1_epi64x(xl)));
            th = _mm256_add_epi16(th, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
                                                           _mm256_set1_epi64x(xh)));
        }
        a = _mm256_add_epi32(a, _mm256_madd_epi16(tl, scale_words<(2 * p) % 4>(sc)));
        return _mm256_add_epi32(a, _mm256_madd_epi16(th, scale_words<(2 * p + 1) % 4>(sc)));
    }
};

// rows_fn over Q4_Kx8r: n_rows (a multiple of 8) from w, y[r] for each. Prefetches 8 KiB ahead into L2, as
// the VNNI kernel (q4k_r8_avx512.h: why).
void rows_x8_avx2(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    using K = q4k_x8_avx2;
    const auto* xa = static_cast<const q8_act*>(xv);
    const int16_t* sums = q4k_group_sums(xa->qs, cols);
    const int64_t nb = cols / 256;
    for (int64_t r0 = 0; r0 < n_rows; r0 += k_rows_x8) {
        const uint8_t* base = w + r0 * rb;
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* g = base + b * K::group_bytes;
            prefetch_span<K::group_bytes, pf_l2>(ahead<pf_l2>(g), 0);
            const int8_t* xq = xa->qs + 256 * b;
            __m256i v[4];
            q4k_x8_scale_bytes(g, v);
            const __m256i sc_lo = v[0], sc_hi = v[1], m_lo = v[2], m_hi = v[3];
            int64_t s03, s47;
            std::memcpy(&s03, sums + 8 * b, 8);
            std::memcpy(&s47, sums + 8 * b + 4, 8);
            // [d0..d7] dx and [dmin0..dmin7] dx, as q4k_scales forms each product.
            const __m256 dx = _mm256_set1_ps(xa->d[8 * b]);
            const __m256 d8 = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g))), dx);
            const __m256 dm8 =
                _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 16))), dx);
            SL_UNROLL
            for (int h = 0; h < 2; ++h) {
                const __m256i slo = K::half_rows(sc_lo, h), shi = K::half_rows(sc_hi, h);
                __m256i a = _mm256_setzero_si256();
                a = K::groups<0>(g, h, xq, slo, a);
                a = K::groups<1>(g, h, xq, slo, a);
                a = K::groups<2>(g, h, xq, shi, a);
                a = K::groups<3>(g, h, xq, shi, a);
                // Minima: the half's 4 rows' bytes widened to words (row r: dwords (m0, m1), (m2, m3)) against
                // (S0, S1), (S2, S3), then groups 4-7: lane (r, 0) groups 0, 1, 4, 5, lane (r, 1) 2, 3, 6, 7.
                const __m256i rows4 =
                    h ? _mm256_setr_epi32(4, 5, 6, 7, 0, 0, 0, 0) : _mm256_setr_epi32(0, 1, 2, 3, 0, 0, 0, 0);
                const auto widened = [&](__m256i m) {
                    return _mm256_cvtepu8_epi16(_mm256_castsi256_si128(_mm256_permutevar8x32_epi32(m, rows4)));
                };
                const __m256i bm = _mm256_add_epi32(_mm256_madd_epi16(widened(m_lo), _mm256_set1_epi64x(s03)),
                                                    _mm256_madd_epi16(widened(m_hi), _mm256_set1_epi64x(s47)));
                const __m256i pair =
                    h ? _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7) : _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
                acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a), _mm256_permutevar8x32_ps(d8, pair), acc[h]);
                acc[h] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(bm), _mm256_permutevar8x32_ps(dm8, pair), acc[h]);
            }
        }
        SL_UNROLL
        for (int h = 0; h < 2; ++h) {  // y[r] = lane (r, 0) + lane (r, 1)
            const __m256 odd = _mm256_castsi256_ps(_mm256_srli_epi64(_mm256_castps_si256(acc[h]), 32));
            const __m256 s = _mm256_add_ps(acc[h], odd);  // even lanes hold the sums
            const __m256 packed = _mm256_permutevar8x32_ps(s, _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0));
            _mm_storeu_ps(y + r0 + 4 * h, _mm256_castps256_ps128(packed));
        }
    }
}

}  // namespace
}  // namespace sl::kernels::detail

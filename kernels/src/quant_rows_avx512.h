// AVX-512 row kernels of the K-quant types in llama.cpp's common mixes (Q4_K, Q6_K: all of Q4_K_M) against
// Q8_K activations, shared by quant_rows_avx512.cpp (AVX-512BW: dense rows and sparse gathers) and
// dense_vnni_avx512.cpp (built with VNNI, installed after a CPUID check: dense rows). The including TU's
// flags pick the integer path (SL_KQUANT_VNNI); both produce the same exact int32 lanes, so the result
// bits do not depend on which one runs. Anonymous namespace as row_dots_avx512.h (one copy per TU).
#pragma once

#include "q4k_lanes.h"
#include "row_dots_avx512.h"

#if defined(__AVX512VNNI__)
#define SL_KQUANT_VNNI 1
#else
#define SL_KQUANT_VNNI 0
#endif

namespace sl::kernels::detail {
namespace {

// Why bit-identical to AVX2: a super-block's integer sum is exact, and one zmm step covers two AVX2
// steps of 32 elements with the same 4-element int32 lanes (zmm lane l and l + 8 are AVX2 lane l of
// the two steps). Folding the zmm halves therefore gives the AVX2 accumulator lane for lane, and the
// float arithmetic after it (convert, one FMA per super-block into two alternating accumulators, the
// minimum correction in the same order; Q4_K: q4k_step of q4k_lanes.h) is written exactly as there. So
// the sparse gathers of other ISA tables, the gemm rows and the tests' cross-ISA checks keep agreeing.

constexpr int64_t qk = 256;

// Words of v picked per 8-word quarter: quarter i of the result is word g[i] of v, repeated (scale of a
// 16-element group). Loops over blocks are unrolled, so the index vectors are constants.
inline __m512i quarter_words(__m512i v, int g0, int g1, int g2, int g3) {
    auto rep = [](int g) { return static_cast<long long>(g) * 0x0001000100010001LL; };
    return _mm512_permutexvar_epi16(_mm512_set_epi64(rep(g3), rep(g3), rep(g2), rep(g2), rep(g1), rep(g1), rep(g0), rep(g0)), v);
}

#if SL_KQUANT_VNNI
// Quarter i of the result: 4 dwords, each with word g[i] of v as its low word and word 16 of v (0 where
// the callers zero-extend) as its high word: a group scale as vpdpwssd multiplies a dword lane by it.
inline __m512i quarter_scale_dwords(__m512i v, int g0, int g1, int g2, int g3) {
    auto rep = [](int g) { return static_cast<long long>(g | 0x100000) * 0x0000000100000001LL; };
    return _mm512_permutexvar_epi16(_mm512_set_epi64(rep(g3), rep(g3), rep(g2), rep(g2), rep(g1), rep(g1), rep(g0), rep(g0)), v);
}
#endif

// Q4_K: d, dmin (fp16), 12 bytes of 6-bit scale/min pairs for 8 groups of 32, 128 bytes of nibbles
// (32 bytes per 64 elements: low nibbles the first 32, high nibbles the next 32).
struct q4k {
    static constexpr int64_t bytes = 144;
    static constexpr bool has_min = true;
    // x's quants arrive arranged (arranged_act): per 128 elements, groups [0 | 2] then [1 | 3] (32 bytes
    // each), so one 64-byte load of a super-block's nibbles serves two 64-element chunks (low nibbles
    // against the first zmm, high against the second) instead of two 32-byte broadcasts, each a shuffle.
    // Every lane still sums 4 products of one group: the same exact integers. L2-resident 4096-column
    // Q4_K gemv, one thread (Zen 4 VM, alternating runs in its fast phase): 22.4-22.5 -> 25.0-25.1 GB/s.
    static constexpr bool arranges_x = true;
    static constexpr bool two_lanes = true;  // q4k_lanes.h
    static void arrange_x(__m512i (&xq)[4]) {
        SL_UNROLL
        for (int h = 0; h < 4; h += 2) {
            const __m512i a = xq[h], b = xq[h + 1];
            xq[h] = _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(1, 0, 1, 0));
            xq[h + 1] = _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 2, 3, 2));
        }
    }

    // 16 int32 lanes whose sum over the two halves is the AVX2 kernel's accumulator; m gets the 8 minima.
    static __m512i isum(const uint8_t* blk, const int8_t* xq, uint8_t* m) {
        uint32_t u[3];
        std::memcpy(u, blk + 4, 12);
        const uint64_t sc = (u[0] & 0x3f3f3f3fu) |
                            static_cast<uint64_t>((u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4)) << 32;
        const uint64_t mn = (u[1] & 0x3f3f3f3fu) |
                            static_cast<uint64_t>(((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4))
                                << 32;
        std::memcpy(m, &mn, 8);
        const __m512i m4 = _mm512_set1_epi8(0x0f);
        // Bytes 64p..64p+63 hold chunks 2p (low half) and 2p + 1: the low nibbles are groups 4p and 4p + 2,
        // the high ones 4p + 1 and 4p + 3, as the arranged x pairs them.
        const auto nibbles = [&](int p, __m512i& lo, __m512i& hi) {
            const __m512i v = _mm512_loadu_si512(blk + 16 + 64 * p);
            lo = _mm512_and_si512(v, m4);
            hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        };
#if SL_KQUANT_VNNI
        // Nibbles are unsigned: vpdpbusd takes them as they are (4-element int32 lane sums, |t| <= 7680),
        // and vpdpwssd multiplies each lane by its group scale (low word; the high word of the scale dword
        // is 0, so the lane's sign bits do not enter) and accumulates: the same exact lanes as maddubs/madd.
        const __m512i sc16 = _mm512_zextsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc))));
        __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();  // two chains: dpwssd's latency
        SL_UNROLL
        for (int p = 0; p < 2; ++p) {
            __m512i lo, hi;
            nibbles(p, lo, hi);
            const __m512i tl = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_loadu_si512(xq + 128 * p));
            const __m512i th = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi, _mm512_loadu_si512(xq + 128 * p + 64));
            s0 = _mm512_dpwssd_epi32(s0, tl, quarter_scale_dwords(sc16, 4 * p, 4 * p, 4 * p + 2, 4 * p + 2));
            s1 = _mm512_dpwssd_epi32(s1, th, quarter_scale_dwords(sc16, 4 * p + 1, 4 * p + 1, 4 * p + 3, 4 * p + 3));
        }
        return _mm512_add_epi32(s0, s1);
#else
        const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc))));
        __m512i s = _mm512_setzero_si512();
        SL_UNROLL
        for (int p = 0; p < 2; ++p) {
            __m512i lo, hi;
            nibbles(p, lo, hi);
            const __m512i pl = _mm512_maddubs_epi16(lo, _mm512_loadu_si512(xq + 128 * p));
            const __m512i ph = _mm512_maddubs_epi16(hi, _mm512_loadu_si512(xq + 128 * p + 64));
            const int g = 4 * p;  // groups g, g + 2 in the low nibbles, g + 1, g + 3 in the high ones
            s = _mm512_add_epi32(s, _mm512_madd_epi16(pl, quarter_words(sc16, g, g, g + 2, g + 2)));
            s = _mm512_add_epi32(s, _mm512_madd_epi16(ph, quarter_words(sc16, g + 1, g + 1, g + 3, g + 3)));
        }
        return s;
#endif
    }
    static float d(const uint8_t* blk) { return half_at(blk); }
    static float dmin(const uint8_t* blk) { return half_at(blk + 2); }
};

// Q6_K: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 int8 scales (per 16 elements), fp16 d.
// Values are q - 32: signed, so maddubs takes |q| and x with q's sign (as the AVX2 sign_epi8 pair).
struct q6k {
    static constexpr int64_t bytes = 210;
    static constexpr bool has_min = false;
    static constexpr bool arranges_x = false;
    static constexpr bool two_lanes = false;

    static __m512i isum(const uint8_t* blk, const int8_t* xq, uint8_t*) {
        // Word 16 of sc16 is 0 (the VNNI path's zero high word of each scale dword).
        const __m512i sc16 = _mm512_zextsi256_si512(
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192))));
        const __m512i m4 = _mm512_set1_epi8(0x0f), m2 = _mm512_set1_epi8(3), off = _mm512_set1_epi8(32);
        // High-bit shifts per 256-bit half: 0|2 for the low nibbles, 4|6 for the high ones.
        const __m512i sh_lo = _mm512_set_epi64(0x0002000200020002LL, 0x0002000200020002LL, 0x0002000200020002LL,
                                               0x0002000200020002LL, 0, 0, 0, 0);
        const __m512i sh_hi = _mm512_add_epi16(sh_lo, _mm512_set1_epi16(4));
        __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
        SL_UNROLL
        for (int h = 0; h < 2; ++h) {
            const __m512i ql = _mm512_loadu_si512(blk + 64 * h);
            const __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h)));
            SL_UNROLL
            for (int half = 0; half < 2; ++half) {
                const __m512i lo = _mm512_and_si512(half ? _mm512_srli_epi16(ql, 4) : ql, m4);
                const __m512i hi = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(hb, half ? sh_hi : sh_lo), m2), 4);
                const __m512i x = _mm512_loadu_si512(xq + 128 * h + 64 * half);
                const int g = 8 * h + 4 * half;  // first scale group of these 64 elements
#if SL_KQUANT_VNNI
                // sum (q - 32) x per 4-element lane as sum q x - sum 32 x (unsigned q 0..63 as vpdpbusd takes
                // it; |t| <= 16384), then scaled by the group's signed scale word (high word 0) as above.
                const __m512i t = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_or_si512(lo, hi), x),
                                                   _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, x));
                (half ? s1 : s0) = _mm512_dpwssd_epi32(half ? s1 : s0, t, quarter_scale_dwords(sc16, g, g + 1, g + 2, g + 3));
#else
                const __m512i q = _mm512_sub_epi8(_mm512_or_si512(lo, hi), off);
                const __m512i sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(q), _mm512_setzero_si512(), x);
                const __m512i p16 = _mm512_maddubs_epi16(_mm512_abs_epi8(q), sx);
                s0 = _mm512_add_epi32(s0, _mm512_madd_epi16(p16, quarter_words(sc16, g, g + 1, g + 2, g + 3)));
#endif
            }
        }
        return _mm512_add_epi32(s0, s1);
    }
    static float d(const uint8_t* blk) { return half_at(blk + 208); }
    static float dmin(const uint8_t*) { return 0.0f; }
};

// One super-block into the row's accumulators: acc += float(int sum) * d * dx; B::has_min: corr -= dmin * m * s.
template <typename B, int Prefetch>
[[gnu::always_inline]] inline void block_step(const uint8_t* w, int64_t blk, const q8_act* xa, const uint8_t* pf,
                                              __m256& acc, __m256& corr) {
    if constexpr (Prefetch) prefetch_span<B::bytes, Prefetch>(pf, blk * B::bytes);
    const uint8_t* p = w + blk * B::bytes;
    uint8_t m[8];
    const __m512i s = B::isum(p, xa->qs + blk * qk, m);
    const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
    const int64_t ab = blk * (qk / 32);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s8), _mm256_set1_ps(B::d(p) * xa->d[ab]), acc);
    if constexpr (B::has_min) {  // as the AVX2 kernel: lane k collects -dmin * m_k * s_k
        const __m128i m8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(m));
        const __m256 mf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m8));
        corr = _mm256_fnmadd_ps(_mm256_set1_ps(B::dmin(p)), _mm256_mul_ps(mf, _mm256_loadu_ps(xa->s + ab)), corr);
    }
}

// One row (w, cols) against Q8_K activations (d constant over each 256), prefetching pf + the offset read.
// Even super-blocks go to acc0, odd ones to acc1 (as the AVX2 kernel); two named registers rather than an
// array indexed by blk & 1, which GCC kept on the stack (a store-to-load round trip on every FMA).
template <typename B, int Prefetch>
[[gnu::always_inline]] inline void row_dot(const uint8_t* w, int64_t, int64_t cols, const q8_act* xa, float* y, const uint8_t* pf) {
    if constexpr (B::two_lanes) {  // Q4_K: the two lanes of q4k_lanes.h (xa->sums set by kquant_act)
        __m128 acc = _mm_setzero_ps();
        for (int64_t blk = 0; blk < cols / qk; ++blk) {
            if constexpr (Prefetch) prefetch_span<B::bytes, Prefetch>(pf, blk * B::bytes);
            const uint8_t* p = w + blk * B::bytes;
            uint8_t m[8];
            const __m512i s = B::isum(p, xa->qs + blk * qk, m);
            const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
            acc = q4k_step(acc, q4k_fold(s8), _mm_loadl_epi64(reinterpret_cast<const __m128i*>(m)),
                           xa->sums + blk * (qk / 32), q4k_scales(p, xa->d[blk * (qk / 32)]));
        }
        *y = q4k_row_value(acc);
        return;
    }
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), corr = _mm256_setzero_ps();
    const int64_t nb = cols / qk;
    int64_t blk = 0;
    for (; blk + 2 <= nb; blk += 2) {
        block_step<B, Prefetch>(w, blk, xa, pf, acc0, corr);
        block_step<B, Prefetch>(w, blk + 1, xa, pf, acc1, corr);
    }
    if (blk < nb) block_step<B, Prefetch>(w, blk, xa, pf, acc0, corr);
    const __m256 sum = _mm256_add_ps(acc0, acc1);
    *y = B::has_min ? hsum256(_mm256_add_ps(sum, corr)) : hsum256(sum) + 0.0f;  // + 0.0f: as AVX2 (-0 -> +0)
}

// x as the row kernels of B take it: arranged once per call where B asks for it (cols is whole super-blocks).
template <typename B>
const q8_act* kquant_act(const void* xv, int64_t cols, q8_act& arranged) {
    const auto* xa = static_cast<const q8_act*>(xv);
    if constexpr (B::arranges_x) {
        arranged_act<B>(xa, cols, arranged);
        if constexpr (B::two_lanes) arranged.sums = q4k_group_sums(xa->qs, cols);
        return &arranged;
    }
    return xa;
}

template <typename B>
void rows(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    q8_act arranged;
    const q8_act* xa = kquant_act<B>(xv, cols, arranged);
    for (int64_t r = 0; r < n_rows; ++r) row_dot<B, pf_l2>(w + r * rb, rb, cols, xa, y + r, ahead<pf_l2>(w + r * rb));
}

// The sparse gathers' dots over row_dot (dots_fn of sparse_internal.h), x arranged once per call.
template <typename B>
void kquant_dots(const uint8_t* const* rows, const uint8_t* const* pf, int64_t n, int64_t cols, const void* x,
                 float* y) {
    q8_act arranged;
    gather_dots<q8_act, row_dot<B, pf_l2>, row_dot<B, pf_none>>(rows, pf, n, cols, kquant_act<B>(x, cols, arranged), y);
}

}  // namespace
}  // namespace sl::kernels::detail

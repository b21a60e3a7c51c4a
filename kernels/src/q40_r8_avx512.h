// AVX-512 VNNI rows of Q4_0x8r (Q4_0 interleaved 8 rows at a time, types.h) against Q8_0 activations, for
// dense_vnni_avx512.cpp (built with VNNI). Anonymous namespace as row_dots_avx512.h.
//
// The Q4_0 row kernel (q4_block::dot8) spends most of a block on work for that row alone: a byte permute
// gathering four blocks' quants side by side, a scale permute per four blocks. Here a 64-byte piece holds
// 8 bytes of each of 8 rows, and vpdpbusd dots it against one 8-byte broadcast of x (a load, no shuffle):
// lane 2r + e of piece 0 (bytes 0-7) against x bytes 0-7 / 16-23 (low / high nibbles) is row r's lane e
// of the row kernel (elements 4e..4e+3 and 16+4e..16+4e+3), piece 1 its lanes 2 + e. The float steps are
// the row kernel's lane for lane: per block one FMA of each lane's int sum by d_w d_x, chains per block
// index mod 8 and lane, the scale-times-activation-sum term in its 8 chains, then the same sums in the same
// order (q4_block, quant_rows, hsum512/hsum256), so each row's bits equal the row kernels' (test
// rows_x8.equal_rows_in_gemv_gemv_multi_and_gemm). 16 + 4 accumulators per group.
// L2-resident 512 x 4096, one thread (Xeon VM): 19.9 GB/s for the rows, 29.5-34.9 here.
#pragma once

#if !defined(__AVX512VNNI__)
#error "q40_r8_avx512.h is for the VNNI build (dense_vnni_avx512.cpp)"
#endif

#include "row_dots_avx512.h"
#include "rows_x8_groups.h"

namespace sl::kernels::detail {
namespace {

// One group of 8 rows: its accumulators and the three steps of its dot with x.
struct q40_x8 {
    static constexpr int64_t group_bytes = k_rows_x8 * 144;
    __m512 acc[8][2], corr[4];  // acc[k][p]: block 8g + k, lanes 2p + e; corr[h]: blocks 2h, 2h + 1

    [[gnu::always_inline]] void zero() {
        SL_UNROLL
        for (int k = 0; k < 8; ++k) acc[k][0] = acc[k][1] = _mm512_setzero_ps();
        SL_UNROLL
        for (int h = 0; h < 4; ++h) corr[h] = _mm512_setzero_ps();
    }

    // Super-block g (256 columns) of the group at `group`, prefetching the bytes 8 KiB further on into L2
    // as the row kernels do (dense_internal.h), an eighth per block (prefetch_part).
    [[gnu::always_inline]] void step(const uint8_t* group, const q8_act* xa, int64_t g) {
        const uint8_t* o = group + g * group_bytes;
        const uint8_t* pf = ahead<pf_l2>(o);
        const __m512i m4 = _mm512_set1_epi8(0x0f);
        // Lane 2r + e <- row r's d_w d_x of the first / second block of a pair (lanes r / 8 + r of dd).
        const __m512i pick0 = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
        const __m512i pick1 = _mm512_add_epi32(pick0, _mm512_set1_epi32(8));
        const int8_t* xq = xa->qs + 256 * g;
        const float* dx = xa->d + 8 * g;
        const float* sx = xa->s + 8 * g;
        SL_UNROLL
        for (int h = 0; h < 4; ++h) {  // blocks 2h, 2h + 1: lanes [block 2h: rows 0-7 | block 2h + 1]
            const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(o + 32 * h)));
            const __m512 dxz = _mm512_insertf32x8(_mm512_set1_ps(dx[2 * h]), _mm256_set1_ps(dx[2 * h + 1]), 1);
            const __m512 sxz = _mm512_insertf32x8(_mm512_set1_ps(sx[2 * h]), _mm256_set1_ps(sx[2 * h + 1]), 1);
            corr[h] = _mm512_fmadd_ps(dw, sxz, corr[h]);  // quant_rows' corr_v: fma(d_w, s_x) per block
            const __m512 dd = _mm512_mul_ps(dw, dxz);
            SL_UNROLL
            for (int e = 0; e < 2; ++e) {
                const int k = 2 * h + e;
                const __m512 sc = _mm512_permutexvar_ps(e ? pick1 : pick0, dd);
                const uint8_t* q = o + 128 + 128 * k;
                prefetch_part<group_bytes, 8, pf_l2>(pf, k);
                int64_t xw[4];  // x bytes 0-7, 8-15, 16-23, 24-31 of the block
                std::memcpy(xw, xq + 32 * k, 32);
                __m512i lanes[2];
                SL_UNROLL
                for (int p = 0; p < 2; ++p) {  // |lane| <= 8 * 15 * 127: exact
                    const __m512i v = _mm512_loadu_si512(q + 64 * p);
                    const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                    const __m512i l = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_set1_epi64(xw[p]));
                    lanes[p] = _mm512_dpbusd_epi32(l, hi, _mm512_set1_epi64(xw[2 + p]));
                }
                acc[k][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lanes[0]), sc, acc[k][0]);
                acc[k][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lanes[1]), sc, acc[k][1]);
            }
        }
    }

    // quant_rows' epilogue for the 8 rows at once. Its acc[0] + acc[1] pairs blocks k and k + 4, hsum512
    // then k with k + 2, hsum256 k with k + 1, then lanes j with j + 2 (here p = 0 with p = 1, lane e for
    // e), then j = 0 with j = 1 (the row's lane pair); + 0.0f for its tail (-0 -> +0).
    [[gnu::always_inline]] void finish(float* y) const {
        __m512 s[2];
        SL_UNROLL
        for (int p = 0; p < 2; ++p) {
            __m512 u[4];
            SL_UNROLL
            for (int k = 0; k < 4; ++k) u[k] = _mm512_add_ps(acc[k][p], acc[k + 4][p]);
            s[p] = _mm512_add_ps(_mm512_add_ps(u[0], u[2]), _mm512_add_ps(u[1], u[3]));
        }
        const __m512 t = _mm512_add_ps(s[0], s[1]);
        const __m512i even = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 14, 12, 10, 8, 6, 4, 2, 0);
        const __m512 pair = _mm512_add_ps(_mm512_permutexvar_ps(even, t),
                                          _mm512_permutexvar_ps(_mm512_add_epi32(even, _mm512_set1_epi32(1)), t));
        const __m256 zero = _mm256_setzero_ps();
        const __m256 dot = _mm256_add_ps(_mm512_castps512_ps256(pair), zero);
        // hsum256 of a row's 8 corr chains (c with c + 4, then with c + 2, then c + 1) + 0.0f (its corr).
        const __m512 ct = _mm512_add_ps(_mm512_add_ps(corr[0], corr[2]), _mm512_add_ps(corr[1], corr[3]));
        const __m256 cs = _mm256_add_ps(_mm256_add_ps(_mm512_castps512_ps256(ct), _mm512_extractf32x8_ps(ct, 1)), zero);
        _mm256_storeu_ps(y, _mm256_sub_ps(dot, _mm256_mul_ps(_mm256_set1_ps(8.0f), cs)));
    }
};

// rows_fn over Q4_0x8r: n_rows (a multiple of 8) from w, y[r] for each; cols a multiple of 256.
// The groups run k_rows_x8_streams at a time, a quarter of the call's groups apart, taking turns per
// super-block: several weight streams in flight read faster here than one (cpu_prefers_row_streams,
// dense_internal.h), as for the float rows. /tmp harness, 2 threads, 1 GB of copies on huge pages, in
// one process alternating: 2048 x 8192 one stream 18.3-21.2 GB/s, two 19.9-26.6, four 21.0-23.3 (ahead
// in 7 of 7 rounds); 8192 x 2048 20.4-26.2 against 19.8-30.2 (6 of 7). From L2 on one thread the
// accumulators of four groups live on the stack: 35 against 36-39 GB/s.
void rows_x8_q40(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    rows_x8_groups<q40_x8>(w, rb, n_rows, cols, static_cast<const q8_act*>(xv), y, cpu_prefers_row_streams());
}

}  // namespace
}  // namespace sl::kernels::detail

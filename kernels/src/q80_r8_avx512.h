// AVX-512 VNNI rows of Q8_0x8r (Q8_0 interleaved 8 rows at a time, types.h) against Q8_0 activations, for
// dense_vnni_avx512.cpp (built with VNNI). Anonymous namespace as row_dots_avx512.h.
//
// The Q8_0 row kernel (q8_block) moves each weight's sign onto x (abs, a sign mask, a masked negate) so
// that vpdpbusd can take the weights as its unsigned operand, and picks each block's scale with a permute.
// Here a 64-byte piece holds 8 bytes of each of 8 rows, offset by +128 (one xor), and vpdpbusd dots it
// against one 8-byte broadcast of x, starting from -128 times the sum of each lane's 4 activations
// (per call, q80_offsets): lane 2r + h of piece p is exactly row r's lane 2p + h of a block in the row
// kernel (elements 8p + 4h .. 8p + 4h + 3). The float steps are that kernel's lane for lane: per block one
// FMA of each lane's int sum by d_w d_x, into the chain of the block's pair parity and parity (acc[a][q]),
// then hsum512's sums in its order and + 0.0f for its tail, so each row's bits equal the row kernels'
// (test rows_x8.equal_rows_in_gemv_gemv_multi_and_gemm). 16 accumulators per group.
// /tmp harness, L2-resident 256 x 4096, one thread (Xeon VM): 25.6 GB/s for the rows, 45 here. From DRAM
// on 2 threads both are near the memory's rate: the rows 17.5-22.5 GB/s, this 18.5-23.4 (ahead in 21 of
// 24 rounds, by up to 14%).
#pragma once

#if !defined(__AVX512VNNI__)
#error "q80_r8_avx512.h is for the VNNI build (dense_vnni_avx512.cpp)"
#endif

#include <vector>

#include "row_dots_avx512.h"
#include "rows_x8_groups.h"

namespace sl::kernels::detail {
namespace {

// One group of 8 rows: its accumulators and the two steps of its dot with x.
struct q80_x8 {
    struct ctx {
        const q8_act* xa;
        const int64_t* off;  // q80_offsets of x
    };
    static constexpr int64_t group_bytes = k_rows_x8 * 272;
    __m512 acc[2][2][4];  // [(block / 2) % 2][block % 2][piece p]: lanes 2r + h

    [[gnu::always_inline]] void zero() {
        SL_UNROLL
        for (int a = 0; a < 2; ++a)
            SL_UNROLL
            for (int q = 0; q < 2; ++q)
                SL_UNROLL
                for (int p = 0; p < 4; ++p) acc[a][q][p] = _mm512_setzero_ps();
    }

    // Super-block g (256 columns) of the group at `group`. Prefetches the bytes 8 KiB further on into L2
    // as the row kernels do (dense_internal.h), an eighth per block (prefetch_part).
    [[gnu::always_inline]] void step(const uint8_t* group, const ctx& c, int64_t g) {
        const q8_act* xa = c.xa;
        const uint8_t* o = group + g * group_bytes;
        const uint8_t* pf = ahead<pf_l2>(o);
        const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
        // Lane 2r + h <- row r's d_w d_x of the first / second block of a pair (lanes r / 8 + r of dd).
        const __m512i pick0 = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
        const __m512i pick1 = _mm512_add_epi32(pick0, _mm512_set1_epi32(8));
        const int8_t* xq = xa->qs + 256 * g;
        const float* dx = xa->d + 8 * g;
        const int64_t* og = c.off + 32 * g;
        SL_UNROLL
        for (int h = 0; h < 4; ++h) {  // blocks 2h, 2h + 1: lanes [block 2h: rows 0-7 | block 2h + 1]
            const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(o + 32 * h)));
            const __m512 dxz = _mm512_insertf32x8(_mm512_set1_ps(dx[2 * h]), _mm256_set1_ps(dx[2 * h + 1]), 1);
            const __m512 dd = _mm512_mul_ps(dw, dxz);
            SL_UNROLL
            for (int e = 0; e < 2; ++e) {
                const int k = 2 * h + e, a = h & 1;
                const __m512 sc = _mm512_permutexvar_ps(e ? pick1 : pick0, dd);
                const uint8_t* w = o + 128 + 256 * k;
                prefetch_part<group_bytes, 8, pf_l2>(pf, k);
                SL_UNROLL
                for (int p = 0; p < 4; ++p) {  // exact: 4 products of |.| <= 255 * 128, minus the offset
                    int64_t xw;
                    std::memcpy(&xw, xq + 32 * k + 8 * p, 8);
                    const __m512i v = _mm512_xor_si512(_mm512_loadu_si512(w + 64 * p), flip);
                    const __m512i l = _mm512_dpbusd_epi32(_mm512_set1_epi64(og[4 * k + p]), v, _mm512_set1_epi64(xw));
                    acc[a][e][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(l), sc, acc[a][e][p]);
                }
            }
        }
    }

    // quant_rows' epilogue for the 8 rows at once: its acc[0] + acc[1] (a), hsum512's lanes j with j + 8
    // (block parity q), j with j + 4 (pieces p, p + 2), j with j + 2 (pieces 0, 1), then j with j + 1 (the
    // row's lane pair h); + 0.0f for its tail (-0 -> +0).
    [[gnu::always_inline]] void finish(float* y) const {
        __m512 t[4];
        SL_UNROLL
        for (int p = 0; p < 4; ++p)
            t[p] = _mm512_add_ps(_mm512_add_ps(acc[0][0][p], acc[1][0][p]), _mm512_add_ps(acc[0][1][p], acc[1][1][p]));
        const __m512 v = _mm512_add_ps(_mm512_add_ps(t[0], t[2]), _mm512_add_ps(t[1], t[3]));
        const __m512i even = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 14, 12, 10, 8, 6, 4, 2, 0);
        const __m512 pair = _mm512_add_ps(_mm512_permutexvar_ps(even, v),
                                          _mm512_permutexvar_ps(_mm512_add_epi32(even, _mm512_set1_epi32(1)), v));
        _mm256_storeu_ps(y, _mm256_add_ps(_mm512_castps512_ps256(pair), _mm256_setzero_ps()));
    }
};

// off[i] for x bytes 8i..8i+7: -128 times the sum of bytes 8i..8i+3 and of 8i+4..8i+7, as two int32 (the
// lanes' offset for weights stored + 128), in a grow-only thread_local buffer valid until the thread's next
// call. One vpdpbusd of 128s against 64 activation bytes gives 16 of them.
const int64_t* q80_offsets(const int8_t* qs, int64_t cols) {
    thread_local std::vector<int64_t> buf;
    const auto n = static_cast<size_t>(cols / 8);
    if (buf.size() < n) buf.resize(n);
    const __m512i m128 = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int64_t e = 0; e < cols; e += 64) {  // cols: whole 256-column groups
        const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), m128, _mm512_loadu_si512(qs + e));
        _mm512_storeu_si512(buf.data() + e / 8, _mm512_sub_epi32(_mm512_setzero_si512(), s));
    }
    return buf.data();
}

// rows_fn over Q8_0x8r: n_rows (a multiple of 8) from w, y[r] for each; cols a multiple of 256. One group
// at a time: unlike Q4_0x8r (q40_r8_avx512.h), four groups taking turns read no faster here (harness, 2
// threads from DRAM, l1b shapes: one stream ahead of four in 19 of 24 rounds, by up to 9%).
void rows_x8_q80(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    const auto* xa = static_cast<const q8_act*>(xv);
    rows_x8_groups<q80_x8>(w, rb, n_rows, cols, q80_x8::ctx{xa, q80_offsets(xa->qs, cols)}, y, false);
}

}  // namespace
}  // namespace sl::kernels::detail

// AVX-512 VNNI rows of Q4_Kx8r (Q4_K interleaved 8 rows at a time, types.h) against Q8_K activations, for
// dense_vnni_avx512.cpp (built with VNNI). Anonymous namespace as row_dots_avx512.h.
//
// A zmm of 16 dwords holds the 8 rows in two lanes each (lane 2r + e: row r, elements 4e..4e+3 of each 8):
// one 64-byte piece of the group is 8 bytes of every row, and vpdpbusd dots it against one 8-byte
// broadcast of x (a load, no shuffle). So the work the row kernels spend on a row alone, per super-block
// (four scale permutes and multiplies, the fold of 16 lanes, a convert, an FMA, the minimum term), is here
// one vector op for 8 rows: per super-block and 8 rows, 16 nibble loads and 32 vpdpbusd as before, then
// 8 scale permutes + 8 vpdpwssd, 2 vpdpwssd for the minima and 2 converts + 2 FMAs. L2-resident 4096
// columns, one thread (Zen 4 VM): 51 GB/s against 24 for the Q4_K rows. The lanes are those of q4k_lanes.h,
// so each row's bits equal the row kernels' (test rows_x8.equal_rows_in_gemv_gemv_multi_and_gemm).
#pragma once

#if !defined(__AVX512VNNI__)
#error "q4k_r8_avx512.h is for the VNNI build (dense_vnni_avx512.cpp)"
#endif

#include "q4k_lanes.h"
#include "row_dots_avx512.h"
#include "rows_x8_groups.h"

namespace sl::kernels::detail {
namespace {

struct q4k_x8 {
    static constexpr int64_t group_bytes = k_rows_x8 * 144;

    // Scale dwords of group k (< 4) of s (words 4r + k: row r's scale): lane 2r + e = scale of row r.
    template <int k>
    static __m512i scale_dwords(__m512i s) {
        const __m512i idx = _mm512_set_epi32(28 + k, 28 + k, 24 + k, 24 + k, 20 + k, 20 + k, 16 + k, 16 + k, 12 + k,
                                             12 + k, 8 + k, 8 + k, 4 + k, 4 + k, k, k);
        return _mm512_maskz_permutexvar_epi16(0x55555555u, idx, s);
    }

    // The 6-bit scales and minima of the 8 rows (scale words u0, u1, u2: dword r is row r's), as words
    // 4r + k: sc_lo / m_lo groups 0-3, sc_hi / m_hi groups 4-7 (the bit formula of k4_scale_bytes).
    static void scales(const uint8_t* g, __m512i& sc_lo, __m512i& sc_hi, __m512i& m_lo, __m512i& m_hi) {
        __m256i v[4];
        q4k_x8_scale_bytes(g, v);
        sc_lo = _mm512_cvtepu8_epi16(v[0]);
        sc_hi = _mm512_cvtepu8_epi16(v[1]);
        m_lo = _mm512_cvtepu8_epi16(v[2]);
        m_hi = _mm512_cvtepu8_epi16(v[3]);
    }

    // Groups 2p (low nibbles) and 2p + 1 (high) of the 8 rows: pieces 4p..4p+3, into A scaled.
    template <int p>
    [[gnu::always_inline]] static __m512i groups(const uint8_t* g, const int8_t* xq, __m512i sc, __m512i a) {
        const __m512i m4 = _mm512_set1_epi8(0x0f);
        __m512i tl = _mm512_setzero_si512(), th = _mm512_setzero_si512();
        SL_UNROLL
        for (int j = 0; j < 4; ++j) {  // |t| <= 16 elements * 15 * 128 < 2^15: a word for vpdpwssd
            const __m512i v = _mm512_loadu_si512(g + 128 + 64 * (4 * p + j));
            int64_t xl, xh;
            std::memcpy(&xl, xq + 64 * p + 8 * j, 8);
            std::memcpy(&xh, xq + 64 * p + 32 + 8 * j, 8);
            tl = _mm512_dpbusd_epi32(tl, _mm512_and_si512(v, m4), _mm512_set1_epi64(xl));
            th = _mm512_dpbusd_epi32(th, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4), _mm512_set1_epi64(xh));
        }
        a = _mm512_dpwssd_epi32(a, tl, scale_dwords<(2 * p) % 4>(sc));
        return _mm512_dpwssd_epi32(a, th, scale_dwords<(2 * p + 1) % 4>(sc));
    }
};

// rows_fn over Q4_Kx8r: n_rows (a multiple of 8) from w, y[r] for each. Each group prefetches the bytes
// 8 KiB further on into L2, as the row kernels do (dense_internal.h). Stop 36 shipped it without: in one
// fast phase of this VM's memory (roofline 34 GB/s) it read 29.3-30.0 GB/s with the prefetch against
// 31.5-34.6 without. In the slow phase (roofline 22.5-28.7) the hardware prefetcher alone fell behind:
// `bench kernels --types q4_k --kernels dense`, 2 threads, 3 rounds alternating builds, Q4_Kx8r against
// the Q4_K rows in the same run was 0.83-1.12x without and 1.11-1.25x with; prefetching every 2nd or 4th
// line instead gave 1.02-1.25x. Whole-model Q4_K_M decode, same alternation: 20.7-26.5 tok/s without,
// 26.3-33.7 with.
// One group of 8 rows for rows_x8_groups: lane 2r + e of row r (q4k_lanes.h) in one accumulator.
struct q4k_x8_group {
    struct ctx {
        const q8_act* xa;
        const int16_t* sums;  // q4k_group_sums of x
    };
    __m512 acc;

    [[gnu::always_inline]] void zero() { acc = _mm512_setzero_ps(); }

    // Super-block b of the group at `group`.
    [[gnu::always_inline]] void step(const uint8_t* group, const ctx& c, int64_t b) {
        const __m512i pair_d = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
        const __m512i pair_m = _mm512_add_epi32(pair_d, _mm512_set1_epi32(8));
        const uint8_t* g = group + b * q4k_x8::group_bytes;
        const uint8_t* pf = ahead<pf_l2>(g);  // a quarter of the prefetch per pair of groups (prefetch_part)
        const int8_t* xq = c.xa->qs + 256 * b;
        __m512i sc_lo, sc_hi, m_lo, m_hi;
        q4k_x8::scales(g, sc_lo, sc_hi, m_lo, m_hi);
        __m512i a = _mm512_setzero_si512();
        prefetch_part<q4k_x8::group_bytes, 4, pf_l2>(pf, 0);
        a = q4k_x8::groups<0>(g, xq, sc_lo, a);
        prefetch_part<q4k_x8::group_bytes, 4, pf_l2>(pf, 1);
        a = q4k_x8::groups<1>(g, xq, sc_lo, a);
        prefetch_part<q4k_x8::group_bytes, 4, pf_l2>(pf, 2);
        a = q4k_x8::groups<2>(g, xq, sc_hi, a);
        prefetch_part<q4k_x8::group_bytes, 4, pf_l2>(pf, 3);
        a = q4k_x8::groups<3>(g, xq, sc_hi, a);
        // Minima: lane 2r: m0 S0 + m1 S1 + m4 S4 + m5 S5, lane 2r + 1: groups 2, 3, 6, 7 (q4k_step's order
        // is irrelevant: exact integers).
        int64_t s03, s47;
        std::memcpy(&s03, c.sums + 8 * b, 8);
        std::memcpy(&s47, c.sums + 8 * b + 4, 8);
        const __m512i bm = _mm512_dpwssd_epi32(_mm512_madd_epi16(m_lo, _mm512_set1_epi64(s03)), m_hi,
                                               _mm512_set1_epi64(s47));
        // [d0..d7, dmin0..dmin7] dx, each row's pair of lanes given its d dx and dmin dx.
        const __m512 dd = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g))),
                                        _mm512_set1_ps(c.xa->d[8 * b]));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), _mm512_permutexvar_ps(pair_d, dd), acc);
        acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(bm), _mm512_permutexvar_ps(pair_m, dd), acc);
    }

    // y[r] = lane 2r + lane 2r + 1 (q4k_row_value's single add) for the group's 8 rows.
    [[gnu::always_inline]] void finish(float* y) const {
        const __m512i even = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 14, 12, 10, 8, 6, 4, 2, 0);
        const __m512 e = _mm512_permutexvar_ps(even, acc);
        const __m512 o = _mm512_permutexvar_ps(_mm512_add_epi32(even, _mm512_set1_epi32(1)), acc);
        _mm256_storeu_ps(y, _mm512_castps512_ps256(_mm512_add_ps(e, o)));
    }
};

// On CPUs that read several streams faster (cpu_prefers_row_streams), k_rows_x8_streams groups a
// quarter of the call's rows apart take turns per super-block, as Q4_0x8r's (q40_r8_avx512.h). Xeon VM,
// stop 40, builds alternating: l1b Q4_K_M decode 28.5-30.9 -> 30.9-34.4 tok/s (ahead in 4 of 4 rounds);
// `bench kernels --types q4_k --kernels dense`, Q4_Kx8r over the rows in the same run 1.16-1.29x ->
// 1.29-1.46x.
void rows_x8(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    const auto* xa = static_cast<const q8_act*>(xv);
    const q4k_x8_group::ctx c{xa, q4k_group_sums(xa->qs, cols)};
    rows_x8_groups<q4k_x8_group>(w, rb, n_rows, cols, c, y, cpu_prefers_row_streams());
}

}  // namespace
}  // namespace sl::kernels::detail

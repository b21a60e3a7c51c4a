// AVX-512 VNNI int8 GEMM panel kernel: 16 weight rows in the lanes of one zmm, up to 8 tokens'
// accumulators in registers, one vpdpbusd per 4 columns per token (u8 weights + 128 x s8 activations,
// the +128 removed exactly per group). Bit-identical to the scalar reference in gemm_internal.h.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "gemm_internal.h"

#define SL_UNROLL _Pragma("GCC unroll 16")

namespace sl::kernels::detail {
namespace {

inline int32_t load4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// T tokens from t0; G columns per scale group; M: the type has a minimum (b). With PF (the first tokens of a
// panel), each group also sends its share of the next panel's weight lines to L2, as the AVX2 kernel does,
// so that panel's fill does not wait on DRAM for its 16 row streams. gemm of 14336x4096 Q4_0 on 128 tokens,
// 2 threads, two builds alternating (Xeon VM): 114-116 GMAC/s without, 122-124 with.
template <int T, int G, bool M, bool PF = false>
void panel_tokens(const gemm_panel& p, const gemm_tokens& x, int64_t t0, float* y, int64_t ys, int nr) {
    const int64_t ng = p.cols / G;
    const int64_t lines = PF ? p.next_bytes / 64 : 0;
    const int8_t* xt[T];
    __m512 acc[T];
    SL_UNROLL
    for (int t = 0; t < T; ++t) {
        xt[t] = x.qs + (t0 + t) * x.cols;
        acc[t] = _mm512_setzero_ps();
    }
    for (int64_t g = 0; g < ng; ++g) {
        if constexpr (PF)
            for (int64_t l = g * lines / ng; l < (g + 1) * lines / ng; ++l)
                _mm_prefetch(reinterpret_cast<const char*>(p.next) + 64 * l, _MM_HINT_T1);
        __m512i ia[T];
        SL_UNROLL
        for (int t = 0; t < T; ++t) ia[t] = _mm512_setzero_si512();
        const uint8_t* wq = p.q + g * G * 16;
        SL_UNROLL
        for (int k4 = 0; k4 < G / 4; ++k4) {
            const __m512i w = _mm512_loadu_si512(wq + k4 * 64);
            SL_UNROLL
            for (int t = 0; t < T; ++t)
                ia[t] = _mm512_dpbusd_epi32(ia[t], w, _mm512_set1_epi32(load4(xt[t] + g * G + 4 * k4)));
        }
        const __m512 av = _mm512_loadu_ps(p.a + g * 16);
        SL_UNROLL
        for (int t = 0; t < T; ++t) {
            const int64_t gi = (t0 + t) * ng + g;
            const __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(ia[t], _mm512_set1_epi32(x.corr[gi])));
            acc[t] = _mm512_fmadd_ps(f, _mm512_mul_ps(av, _mm512_set1_ps(x.dx[gi])), acc[t]);
            if constexpr (M) acc[t] = _mm512_fmadd_ps(_mm512_loadu_ps(p.b + g * 16), _mm512_set1_ps(x.xm[gi]), acc[t]);
        }
    }
    const __mmask16 m = static_cast<__mmask16>((1u << nr) - 1u);
    SL_UNROLL
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * ys, m, acc[t]);
}

template <int G, bool M>
void panel(const gemm_panel& p, const gemm_tokens& x, float* y, int64_t ys, int nr) {
    int64_t t = 0;
    if (t + 8 <= x.n) {
        panel_tokens<8, G, M, true>(p, x, t, y, ys, nr);
        t += 8;
    }
    for (; t + 8 <= x.n; t += 8) panel_tokens<8, G, M>(p, x, t, y, ys, nr);
    if (t + 4 <= x.n) {
        panel_tokens<4, G, M>(p, x, t, y, ys, nr);
        t += 4;
    }
    if (t + 2 <= x.n) {
        panel_tokens<2, G, M>(p, x, t, y, ys, nr);
        t += 2;
    }
    if (t < x.n) panel_tokens<1, G, M>(p, x, t, y, ys, nr);
}

void panel_dispatch(const gemm_panel& p, const gemm_tokens& x, float* y, int64_t ys, int nr) {
    if (p.group == 32)
        p.b ? panel<32, true>(p, x, y, ys, nr) : panel<32, false>(p, x, y, ys, nr);
    else
        p.b ? panel<16, true>(p, x, y, ys, nr) : panel<16, false>(p, x, y, ys, nr);
}

// 8 rows x 16 * TV tokens of f32 accumulators; each weight is broadcast once per k for all tokens.
template <int TV>
void float_rows(const float* w, int64_t k, const float* xt, int64_t np, float* out) {
    __m512 acc[k_float_rows][TV];
    SL_UNROLL
    for (int r = 0; r < k_float_rows; ++r) {
        SL_UNROLL
        for (int v = 0; v < TV; ++v) acc[r][v] = _mm512_setzero_ps();
    }
    for (int64_t c = 0; c < k; ++c) {
        __m512 xv[TV];
        SL_UNROLL
        for (int v = 0; v < TV; ++v) xv[v] = _mm512_loadu_ps(xt + c * np + 16 * v);
        SL_UNROLL
        for (int r = 0; r < k_float_rows; ++r) {
            const __m512 wb = _mm512_set1_ps(w[r * k + c]);
            SL_UNROLL
            for (int v = 0; v < TV; ++v) acc[r][v] = _mm512_fmadd_ps(wb, xv[v], acc[r][v]);
        }
    }
    SL_UNROLL
    for (int r = 0; r < k_float_rows; ++r) {
        SL_UNROLL
        for (int v = 0; v < TV; ++v) _mm512_storeu_ps(out + r * 32 + 16 * v, acc[r][v]);
    }
}

void float_dispatch(const float* w, int64_t k, const float* xt, int64_t np, int tv, float* out) {
    tv == 2 ? float_rows<2>(w, k, xt, np, out) : float_rows<1>(w, k, xt, np, out);
}

}  // namespace

// Q8_0 rows [r0, r0 + nr) into a plus_128 panel: line c/4 of each block takes dword c/4 of its 16 rows'
// quants in one gather (the rows are row_bytes apart), flipped to q + 128; a = the rows' fp16 d. Rows
// past nr: q = 0 (bytes 0x80), a = 0. The generic path (unpack each row, then interleave) took a fifth of
// a Q8_0 prefill on the Xeon VM.
void gemm_fill_q8_0_avx512(const tensor_view& w, int64_t r0, int nr, uint8_t* q, float* a) {
    const __mmask16 live = static_cast<__mmask16>((1u << nr) - 1u);
    const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(static_cast<int32_t>(w.row_bytes())));
    const __m512i flip = _mm512_set1_epi32(static_cast<int32_t>(0x80808080u));
    const uint8_t* base = w.row(r0);
    for (int64_t blk = 0; blk < w.cols / 32; ++blk, base += 34) {
        const __m512i d = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, rows, base, 1);
        _mm512_storeu_ps(a + blk * 16, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d)));  // the low half of each: d
        SL_UNROLL
        for (int c4 = 0; c4 < 8; ++c4) {
            const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, rows, base + 2 + 4 * c4, 1);
            _mm512_storeu_si512(q + (blk * 8 + c4) * 64, _mm512_xor_si512(v, flip));
        }
    }
}

gemm_float_fn gemm_float_avx512() { return float_dispatch; }

gemm_panel_fn gemm_panel_avx512() {
    __builtin_cpu_init();
    static const bool vnni = __builtin_cpu_supports("avx512vnni");
    return vnni ? panel_dispatch : nullptr;
}

}  // namespace sl::kernels::detail

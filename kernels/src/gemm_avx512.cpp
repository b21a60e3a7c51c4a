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

// 16 * H rows (H zmm: the 16-row panels at wt + h * kc * 16) x T tokens of f32 FMA chains over kc
// columns: per column H weight loads and T broadcasts feed H * T FMAs, against one load per FMA pair
// of the AVX2 kernel's ymm. x is the tile's packed activations, x[c * T + t]: one pointer and one
// sequential stream, where T token rows k floats apart kept GCC reloading three of their pointers from
// the stack every column (and share an L1 set for power-of-two k); ~2% in the 1-thread gemm below.
template <int T>
__attribute__((noinline)) void float_tile(const float* wt, int64_t kc, const float* x, float* y, int64_t ys,
                                          bool first) {
    constexpr int H = k_float_halves;
    __m512 acc[H][T];
    SL_UNROLL
    for (int t = 0; t < T; ++t) {
        SL_UNROLL
        for (int h = 0; h < H; ++h) acc[h][t] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(y + t * ys + 16 * h);
    }
    for (int64_t c = 0; c < kc; ++c) {
        __m512 w[H];
        SL_UNROLL
        for (int h = 0; h < H; ++h) w[h] = _mm512_loadu_ps(wt + (h * kc + c) * 16);
        SL_UNROLL
        for (int t = 0; t < T; ++t) {
            const __m512 xb = _mm512_set1_ps(x[c * T + t]);
            SL_UNROLL
            for (int h = 0; h < H; ++h) acc[h][t] = _mm512_fmadd_ps(w[h], xb, acc[h][t]);
        }
    }
    SL_UNROLL
    for (int t = 0; t < T; ++t) {
        SL_UNROLL
        for (int h = 0; h < H; ++h) _mm512_storeu_ps(y + t * ys + 16 * h, acc[h][t]);
    }
}

template <int T>
void float_tile_n(int size, const float* wt, int64_t kc, const float* x, float* y, int64_t ys, bool first) {
    if constexpr (T > 1) {
        if (size < T) return float_tile_n<T - 1>(size, wt, kc, x, y, ys, first);
    }
    float_tile<T>(wt, kc, x, y, ys, first);
}

// Tokens per tile: 24 accumulators + 2 weights + 1 broadcast of the 32 zmm. F16 gemm 5632x2048 on 128
// tokens, 1 thread (Xeon VM, alternating builds): 32 rows x 12 or 14 tokens 120-125 GFLOP/s, 48 x 8
// 117-119, 64 x 6 109, 16 x 24 67; the core's FMA peak measured 168.
constexpr int k_float_tile = 12;

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

void gemm_float_pack_avx512(const float* x, int64_t xs, int64_t n, int64_t kc, float* xp) {
    const token_tiles tiles(n, k_float_tile);
    int64_t t = 0;
    for (int64_t i = 0; i < tiles.count; ++i) {
        const int size = tiles.size(i);
        float* dst = xp + t * kc;
        for (int j = 0; j < size; ++j) {
            const float* src = x + (t + j) * xs;
            for (int64_t c = 0; c < kc; ++c) dst[c * size + j] = src[c];
        }
        t += size;
    }
}

void gemm_float_panel_avx512(const float* wt, int64_t kc, const float* xp, int64_t n, float* y, int64_t ys, bool first,
                             const gemm_prefetch_rows& next) {
    const token_tiles tiles(n, k_float_tile);
    int64_t t = 0;
    for (int64_t i = 0; i < tiles.count; ++i) {
        next.prefetch_part(i, tiles.count);
        const int size = tiles.size(i);
        float_tile_n<k_float_tile>(size, wt, kc, xp + t * kc, y + t * ys, ys, first);
        t += size;
    }
}

gemm_panel_fn gemm_panel_avx512() {
    __builtin_cpu_init();
    static const bool vnni = __builtin_cpu_supports("avx512vnni");
    return vnni ? panel_dispatch : nullptr;
}

}  // namespace sl::kernels::detail

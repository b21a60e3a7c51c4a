// AVX2 + FMA + F16C dense kernels (compiled with those flags; only called after a CPUID check).
#include <vector>

#include "row_dots_avx2.h"

namespace sl::kernels::detail {
namespace {

template <int R, typename L, int Prefetch = (R == 1 ? pf_l1 : pf_none)>
void rows_float(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    const auto* x = static_cast<const float*>(xv);
    int64_t r = 0;
    for (; r + R <= n_rows; r += R) dot_rows<R, L, Prefetch>(w + r * rb, rb, cols, x, y + r, ahead(w + r * rb));
    for (; r < n_rows; ++r) dot_rows<1, L, pf_l1>(w + r * rb, rb, cols, x, y + r, ahead(w + r * rb));
}

// Streaming float rows. While x (f32) fits in L1 beside the weight stream (float_x_fits_l1) one row at
// a time streams best; a longer x (the MLP down projection's 8192 columns: 32 KiB) is evicted by the
// weight stream and re-read from L2 for every row, so there 4 rows share each x load (F16 2048x8192 on
// 2 threads, Zen 4: 20 -> 32 GB/s; 2 rows: 25; with 2048 columns 4 rows measured 15-25% slower than
// one), each prefetched ahead in its own row (dense_internal.h). dot_rows' per-row arithmetic does not
// depend on R or on prefetching: same bits either way, and as the sparse gathers' single rows.
// Where the CPU reads several streams faster (cpu_prefers_row_streams), 8 rows side by side instead.
template <typename L>
void rows_stream(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    if (cpu_prefers_row_streams()) {
        rows_float<8, L>(w, rb, n_rows, cols, xv, y);
    } else if (float_x_fits_l1(cols)) {
        rows_float<1, L>(w, rb, n_rows, cols, xv, y);
    } else {
        rows_float<4, L, pf_l1>(w, rb, n_rows, cols, xv, y);
    }
}

// Quantized rows: the streaming form (R = 1) prefetches into L2 (dense_internal.h), the cached tiles'
// leftover rows into L1.
template <int R, typename B>
void rows_quant(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    const auto* xa = static_cast<const q8_act*>(xv);
    constexpr int mode = R == 1 ? pf_l2 : pf_none;
    int64_t r = 0;
    for (; r + R <= n_rows; r += R) quant_rows<R, B, mode>(w + r * rb, rb, cols, xa, y + r, ahead<mode>(w + r * rb));
    for (; r < n_rows; ++r) quant_rows<1, B, pf_l1>(w + r * rb, rb, cols, xa, y + r, ahead(w + r * rb));
}

// Q4_0 rows; with enough rows to amortise it, the activations are rearranged once (q4_pair_acts) and
// every row reads them as they are. Same values either way, so the same bits as the gathers' rows.
void rows_q4(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    const auto* xa = static_cast<const q8_act*>(xv);
    if (n_rows < 8) {
        for (int64_t r = 0; r < n_rows; ++r)
            q4_row<q4_x_direct, pf_l2>(w + r * rb, cols, xa, xa, y + r, ahead<pf_l2>(w + r * rb));
        return;
    }
    const q8_act* xg = q4_pair_acts(xa, cols);
    for (int64_t r = 0; r < n_rows; ++r)
        q4_row<q4_x_paired, pf_l2>(w + r * rb, cols, xg, xa, y + r, ahead<pf_l2>(w + r * rb));
}

template <typename L>
void dequant_float(const void* src, float* dst, int64_t n) {
    const auto* s = static_cast<const typename L::elem*>(src);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, L::load(s + i));
    for (; i < n; ++i) dst[i] = L::one(s + i);
}

// Same arithmetic as the scalar quantize_act_q8 (max, 127/amax, multiply, round to nearest even),
// so activations quantize identically on every ISA.
void quantize_act(const float* x, int64_t n, int8_t* qs, float* d, float* s) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < n / 32; ++b) {
        __m256 v[4];
        SL_UNROLL
        for (int u = 0; u < 4; ++u) v[u] = _mm256_loadu_ps(x + b * 32 + 8 * u);
        const __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                                       _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        const float amax = _mm_cvtss_f32(h);
        const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        __m256i q[4];
        SL_UNROLL
        for (int u = 0; u < 4; ++u)
            q[u] = _mm256_cvtps_epi32(
                _mm256_round_ps(_mm256_mul_ps(v[u], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m256i sum4 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        __m128i t = _mm_add_epi32(_mm256_castsi256_si128(sum4), _mm256_extracti128_si256(sum4, 1));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
        // packs work per 128-bit lane; the final permute restores element order.
        const __m256i p16 = _mm256_packs_epi32(q[0], q[1]);
        const __m256i p16b = _mm256_packs_epi32(q[2], q[3]);
        const __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16, p16b), order);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + b * 32), p8);
        d[b] = amax / 127.0f;
        s[b] = d[b] * static_cast<float>(_mm_cvtsi128_si32(t));
    }
}

inline int32_t hsum_epi32(__m256i v) {
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
    return _mm_cvtsi128_si32(t);
}

// The scalar quantize_act_q8k (ggml's quantize_row_q8_K) in SIMD, same bits for finite x: per 256 the
// first element of largest magnitude sets iscale = -127/max; q = min(127, round-half-even(iscale*x)),
// clamped to int8 as the scalar to_int8 does. The scalar one pays two libm calls per element (nearbyint
// keeps the FP environment, fmin handles NaN): about a third of the Q4_K row time of a 2048-column gemv.
void quantize_act_q8k(const float* x, int64_t n, int8_t* qs, float* d, float* s) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < n / 256; ++b) {
        const float* xb = x + b * 256;
        __m256 m0 = _mm256_setzero_ps(), m1 = m0;
        SL_UNROLL
        for (int j = 0; j < 256; j += 16) {
            m0 = _mm256_max_ps(m0, _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + j)));
            m1 = _mm256_max_ps(m1, _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + j + 8)));
        }
        const __m256 m = _mm256_max_ps(m0, m1);
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        const float amax = _mm_cvtss_f32(h);
        float max = 0.0f;
        for (int j = 0; j < 256; j += 8) {  // the first |x| == amax is the scalar loop's strict-> winner
            const int hit = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb + j)), _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (hit) {
                max = xb[j + __builtin_ctz(static_cast<unsigned>(hit))];
                break;
            }
        }
        const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
        const float db = amax != 0.0f ? 1.0f / iscale : 0.0f;
        const __m256 vs = _mm256_set1_ps(iscale), hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-128.0f);
        for (int k = 0; k < 8; ++k) {
            __m256i q[4];
            SL_UNROLL
            for (int u = 0; u < 4; ++u) {
                const __m256 r = _mm256_round_ps(_mm256_mul_ps(vs, _mm256_loadu_ps(xb + 32 * k + 8 * u)),
                                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                q[u] = _mm256_cvtps_epi32(_mm256_max_ps(_mm256_min_ps(r, hi), lo));
            }
            const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
            const __m256i p8 = _mm256_permutevar8x32_epi32(
                _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3])), order);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + b * 256 + 32 * k), p8);
            d[b * 8 + k] = db;
            s[b * 8 + k] = db * static_cast<float>(hsum_epi32(sum));
        }
    }
}

template <bool Prefetch>
float stream_sum(const float* p, int64_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < n; i += 32) {
        if constexpr (Prefetch) {
            SL_UNROLL
            for (int l = 0; l < 128; l += 64)
                _mm_prefetch(reinterpret_cast<const char*>(p + i) + k_l1_ahead + l, _MM_HINT_T0);
        }
        a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
    }
    return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

// kernel_table::group_sum: two 256-bit loads per line.
uint64_t group_sum(const uint8_t* const* rows, int n, int64_t lines, const uint8_t* const* next, int n_next) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0;
    for (int64_t o = 0; o < lines * 64; o += 64) {
        for (int i = 0; i < n; ++i) {
            a0 = _mm256_add_epi64(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[i] + o)));
            a1 = _mm256_add_epi64(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[i] + o + 32)));
        }
        for (int i = 0; i < n_next; ++i) _mm_prefetch(reinterpret_cast<const char*>(next[i] + o), _MM_HINT_T1);
    }
    alignas(32) uint64_t w[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(w), _mm256_add_epi64(a0, a1));
    return w[0] + w[1] + w[2] + w[3];
}

}  // namespace

const kernel_table& avx2_table() {
    static const kernel_table t = [] {
        kernel_table k = scalar_table();
        k.rows[0] = rows_stream<load_f32>;
        k.rows[1] = rows_stream<load_f16>;
        k.rows[2] = rows_stream<load_bf16>;
        k.rows[3] = rows_quant<1, q8_block>;
        k.rows[4] = rows_q4;
        k.rows_cached[0] = rows_float<2, load_f32>;
        k.rows_cached[1] = rows_float<2, load_f16>;
        k.rows_cached[2] = rows_float<2, load_bf16>;
        k.rows_cached[3] = rows_quant<2, q8_block>;
        k.rows_cached[4] = rows_q4;
        k.dequant[1] = dequant_float<load_f16>;
        k.dequant[2] = dequant_float<load_bf16>;
        k.quantize_act = quantize_act;
        k.quantize_act_q8k = quantize_act_q8k;
        k.stream_sum[0] = stream_sum<false>;
        k.stream_sum[1] = stream_sum<true>;
        k.group_sum = group_sum;
        add_unpacked_rows_avx2(k);
        return k;
    }();
    return t;
}

}  // namespace sl::kernels::detail

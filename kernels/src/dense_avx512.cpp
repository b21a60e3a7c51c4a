// AVX-512 (F/BW/VL/DQ) dense kernels (compiled with those flags; only called after a CPUID check).
// GCC 12's avx512fintrin.h builds "undefined" vectors from themselves (GCC bug 105593), which
// -Wuninitialized reports at every inlined use; the kernels below initialise everything they read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "row_dots_avx512.h"

namespace sl::kernels::detail {
namespace {

// Same arithmetic as the scalar quantize_act_q8, so activations quantize identically on every ISA.
void quantize_act(const float* x, int64_t n, int8_t* qs, float* d, float* s) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const __m512 v0 = _mm512_loadu_ps(x + b * 32);
        const __m512 v1 = _mm512_loadu_ps(x + b * 32 + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        const int rnd = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
        const __m512i q0 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v0, id), rnd));
        const __m512i q1 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v1, id), rnd));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + b * 32), _mm512_cvtsepi32_epi8(q0));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + b * 32 + 16), _mm512_cvtsepi32_epi8(q1));
        d[b] = amax / 127.0f;
        s[b] = d[b] * static_cast<float>(_mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1)));
    }
}

// The scalar quantize_act_q8k (ggml's quantize_row_q8_K) in SIMD, same bits for finite x: per 256 the
// first element of largest magnitude sets iscale = -127/max; q = min(127, round-half-even(iscale*x)).
// The scalar one pays a libm call per element (nearbyint keeps the FP environment, fmin handles NaN):
// ~20 us per 2048 activations, a tenth of a Q4_K_M decode step before this.
void quantize_act_q8k(const float* x, int64_t n, int8_t* qs, float* d, float* s) {
    for (int64_t b = 0; b < n / 256; ++b) {
        const float* xb = x + b * 256;
        __m512 vmax = _mm512_setzero_ps();
        SL_UNROLL
        for (int j = 0; j < 256; j += 16) vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(xb + j)));
        const float amax = _mm512_reduce_max_ps(vmax);
        float max = 0.0f;
        for (int j = 0; j < 256; j += 16) {  // the first |x| == amax is the scalar loop's strict-> winner
            const __mmask16 hit = _mm512_cmpeq_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(xb + j)), _mm512_set1_ps(amax));
            if (hit) {
                max = xb[j + __builtin_ctz(hit)];
                break;
            }
        }
        const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
        const float db = amax != 0.0f ? 1.0f / iscale : 0.0f;
        const __m512 vs = _mm512_set1_ps(iscale), cap = _mm512_set1_ps(127.0f);
        for (int k = 0; k < 8; ++k) {
            __m512i sum = _mm512_setzero_si512();
            SL_UNROLL
            for (int h = 0; h < 2; ++h) {
                const int j = 32 * k + 16 * h;
                const __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(vs, _mm512_loadu_ps(xb + j)),
                                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                const __m512i q = _mm512_cvtps_epi32(_mm512_min_ps(r, cap));
                _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + b * 256 + j), _mm512_cvtsepi32_epi8(q));
                sum = _mm512_add_epi32(sum, q);
            }
            d[b * 8 + k] = db;
            s[b * 8 + k] = db * static_cast<float>(_mm512_reduce_add_epi32(sum));
        }
    }
}

template <typename L>
void dequant_float(const void* src, float* dst, int64_t n) {
    const auto* s = static_cast<const typename L::elem*>(src);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, L::load(s + i));
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(dst + i, m, L::load(s + i, m));
    }
}

template <bool Prefetch>
float stream_sum(const float* p, int64_t n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < n; i += 64) {
        if constexpr (Prefetch) {
            SL_UNROLL
            for (int l = 0; l < 256; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p + i) + k_l1_ahead + l, _MM_HINT_T0);
        }
        a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
    }
    return hsum512(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

// kernel_table::group_sum: one 512-bit load per line.
uint64_t group_sum(const uint8_t* const* rows, int n, int64_t lines, const uint8_t* const* next, int n_next) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0;
    for (int64_t o = 0; o < lines * 64; o += 64) {
        int i = 0;
        for (; i + 2 <= n; i += 2) {
            a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(rows[i] + o));
            a1 = _mm512_add_epi64(a1, _mm512_loadu_si512(rows[i + 1] + o));
        }
        if (i < n) a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(rows[i] + o));
        for (int j = 0; j < n_next; ++j) _mm_prefetch(reinterpret_cast<const char*>(next[j] + o), _MM_HINT_T1);
    }
    // Not _mm512_reduce_add_epi64: GCC's header sums signed lanes in C, which wrap here (UBSan).
    alignas(64) uint64_t w[8];
    _mm512_store_si512(w, _mm512_add_epi64(a0, a1));
    uint64_t sum = 0;
    for (uint64_t v : w) sum += v;
    return sum;
}

}  // namespace

const kernel_table& avx512_table() {
    static const kernel_table t = [] {
        kernel_table k = scalar_table();
        k.rows[0] = rows_float_stream<load_f32>;
        // F16 rows are the AVX2 kernels' (dense_avx2.cpp rows_stream: 256-bit converts, 4 rows sharing
        // each x load when x outgrows L1), and so are its gathers (sparse_avx512.cpp), so sparse and
        // dense F16 keep equal bits. On a Zen 4 with AVX-512 the 512-bit row kernel decoded the F16
        // llama-1b at 13.1-16.0 tok/s where the AVX2 one ran 15.4-20.3 (2 threads, 3 alternating rounds;
        // llama.cpp 15.3), with or without software prefetch (10.2-11.0 with it).
        k.rows[1] = avx2_table().rows[1];
        k.rows[2] = rows_float_stream<load_bf16>;
        k.rows[3] = rows_quant<1, q8_block, pf_l2>;
        k.rows[4] = rows_quant<1, q4_block, pf_l2>;
        k.rows_cached[0] = rows_float<4, load_f32, false>;
        k.rows_cached[1] = avx2_table().rows_cached[1];
        k.rows_cached[2] = rows_float<4, load_bf16, false>;
        k.rows_cached[3] = rows_quant<4, q8_block, false>;
        k.rows_cached[4] = rows_quant<4, q4_block, false>;
        k.quantize_act = quantize_act;
        k.quantize_act_q8k = quantize_act_q8k;
        k.dequant[1] = dequant_float<load_f16>;
        k.dequant[2] = dequant_float<load_bf16>;
        k.stream_sum[0] = stream_sum<false>;
        k.stream_sum[1] = stream_sum<true>;
        k.group_sum = group_sum;
        add_unpacked_rows_avx2(k);
        add_kquant_rows_avx512(k);
        add_vnni_rows_avx512(k);
        return k;
    }();
    return t;
}

}  // namespace sl::kernels::detail

// AVX2 + FMA + F16C sparse kernels: multi-row axpy over f32/f16/bf16/Q8_0/Q4_0 rows.
#include "row_dots_avx2.h"
#include "sparse_internal.h"

namespace sl::kernels::detail {
namespace {

template <int G>
[[gnu::always_inline]] inline void prefetch_rows(const uint8_t* const* pf, int64_t off) {
    SL_UNROLL
    for (int g = 0; g < G; ++g) _mm_prefetch(reinterpret_cast<const char*>(pf[g] + off), _MM_HINT_T1);
}

// Float rows, 32 elements per step, then 8 at a time; the last n % 8 use scalar FMAs (same rounding).
template <typename L>
struct float_op {
    template <int G, bool Init, bool PF>
    static void run(float* acc, const uint8_t* const* rows, const float* s, int64_t n, const uint8_t* const* pf) {
        using E = typename L::elem;
        const E* r[G];
        __m256 sv[G];
        SL_UNROLL
        for (int g = 0; g < G; ++g) {
            r[g] = reinterpret_cast<const E*>(rows[g]);
            sv[g] = _mm256_set1_ps(s[g]);
        }
        int64_t i = 0;
        for (; i + 32 <= n; i += 32) {
            if constexpr (PF) {
                SL_UNROLL
                for (int l = 0; l < 32 * static_cast<int>(sizeof(E)); l += 64) prefetch_rows<G>(pf, i * sizeof(E) + l);
            }
            __m256 a[4];
            SL_UNROLL
            for (int u = 0; u < 4; ++u) a[u] = Init ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + i + 8 * u);
            SL_UNROLL
            for (int g = 0; g < G; ++g) SL_UNROLL
            for (int u = 0; u < 4; ++u) a[u] = _mm256_fmadd_ps(sv[g], L::load(r[g] + i + 8 * u), a[u]);
            SL_UNROLL
            for (int u = 0; u < 4; ++u) _mm256_storeu_ps(acc + i + 8 * u, a[u]);
        }
        for (; i + 8 <= n; i += 8) {
            __m256 a = Init ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + i);
            SL_UNROLL
            for (int g = 0; g < G; ++g) a = _mm256_fmadd_ps(sv[g], L::load(r[g] + i), a);
            _mm256_storeu_ps(acc + i, a);
        }
        for (; i < n; ++i) {
            __m128 a = _mm_set_ss(Init ? 0.0f : acc[i]);
            SL_UNROLL
            for (int g = 0; g < G; ++g) a = _mm_fmadd_ss(_mm_set_ss(s[g]), _mm_set_ss(L::one(r[g] + i)), a);
            acc[i] = _mm_cvtss_f32(a);
        }
    }
};

// Quantized rows: per block, coefficient s[g] * d once, then 32 widened integers through FMAs.
// Q8_0: 32 signed bytes; Q4_0: element j < 16 is the low nibble of byte j, j + 16 the high one.
struct q8_values {
    static constexpr int64_t bytes = sizeof(block_q8_0);
    static void get(const uint8_t* p, __m256* w) {
        SL_UNROLL
        for (int u = 0; u < 4; ++u)
            w[u] = _mm256_cvtepi32_ps(
                _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 2 + 8 * u))));
    }
};
struct q4_values {
    static constexpr int64_t bytes = sizeof(block_q4_0);
    static void get(const uint8_t* p, __m256* w) {
        const __m256i lo8 = _mm256_set1_epi32(0x0f), eight = _mm256_set1_epi32(8);
        SL_UNROLL
        for (int h = 0; h < 2; ++h) {  // bytes 0-7, then 8-15
            const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 2 + 8 * h)));
            w[h] = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(v, lo8), eight));
            w[h + 2] = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(v, 4), eight));
        }
    }
};

template <typename V>
struct quant_op {
    template <int G, bool Init, bool PF>
    static void run(float* acc, const uint8_t* const* rows, const float* s, int64_t n, const uint8_t* const* pf) {
        for (int64_t b = 0; b < n / 32; ++b) {
            const int64_t off = b * V::bytes;
            if constexpr (PF) prefetch_rows<G>(pf, off);
            float* ab = acc + b * 32;
            __m256 a[4];
            SL_UNROLL
            for (int u = 0; u < 4; ++u) a[u] = Init ? _mm256_setzero_ps() : _mm256_loadu_ps(ab + 8 * u);
            SL_UNROLL
            for (int g = 0; g < G; ++g) {
                const uint8_t* p = rows[g] + off;
                const __m256 c = _mm256_set1_ps(s[g] * half_at(p));
                __m256 w[4];
                V::get(p, w);
                SL_UNROLL
                for (int u = 0; u < 4; ++u) a[u] = _mm256_fmadd_ps(c, w[u], a[u]);
            }
            SL_UNROLL
            for (int u = 0; u < 4; ++u) _mm256_storeu_ps(ab + 8 * u, a[u]);
        }
    }
};

// Q4_0 gathers: from 8 listed rows on, the activations are rearranged once per call (q4_pair_acts) as in
// the dense rows_q4, so no row repeats the per-pair permutes of q4_x_direct. The same values either way:
// results equal gemv's bit for bit.
void gather_q4(const uint8_t* const* rows, const uint8_t* const* pf, int64_t n, int64_t cols, const void* x, float* y) {
    const auto* xa = static_cast<const q8_act*>(x);
    if (n < 8) {
        gather_dots<q8_act, quant_rows<1, q4_block, pf_l2>, quant_rows<1, q4_block, pf_none>>(rows, pf, n, cols, x, y);
        return;
    }
    const q8_act* xg = q4_pair_acts(xa, cols);
    for (int64_t k = 0; k < n; ++k) {
        if (pf && pf[k])
            q4_row<q4_x_paired, pf_l2>(rows[k], cols, xg, xa, y + k, pf[k]);
        else
            q4_row<q4_x_paired, pf_none>(rows[k], cols, xg, xa, y + k, nullptr);
    }
}

}  // namespace

const sparse_table& sparse_avx2_table() {
    static const sparse_table t = [] {
        sparse_table k;
        k.axpy[0] = axpy_dispatch<float_op<load_f32>>;
        k.axpy[1] = axpy_dispatch<float_op<load_f16>>;
        k.axpy[2] = axpy_dispatch<float_op<load_bf16>>;
        k.axpy[3] = axpy_dispatch<quant_op<q8_values>>;
        k.axpy[4] = axpy_dispatch<quant_op<q4_values>>;
        // The gathers run each listed row through the dense row kernels: results equal gemv's bit for bit.
        k.dots[0] = gather_dots<float, dot_rows<1, load_f32, pf_l2>, dot_rows<1, load_f32, pf_none>>;
        k.dots[1] = gather_dots<float, dot_rows<1, load_f16, pf_l2>, dot_rows<1, load_f16, pf_none>>;
        k.dots[2] = gather_dots<float, dot_rows<1, load_bf16, pf_l2>, dot_rows<1, load_bf16, pf_none>>;
        k.dots[3] = gather_dots<q8_act, quant_rows<1, q8_block, pf_l2>, quant_rows<1, q8_block, pf_none>>;
        k.dots[4] = gather_q4;
        add_unpacked_dots_avx2(k);
        add_int8_chunks_avx2(k);
        return k;
    }();
    return t;
}

}  // namespace sl::kernels::detail

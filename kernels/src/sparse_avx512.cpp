// AVX-512 (F/BW/VL/DQ) sparse kernels: multi-row axpy over f32/f16/bf16/Q8_0/Q4_0 rows.
// GCC 12's avx512fintrin.h builds "undefined" vectors from themselves (GCC bug 105593), which
// -Wuninitialized reports at every inlined use; the kernels below initialise everything they read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "row_dots_avx512.h"
#include "sparse_internal.h"

namespace sl::kernels::detail {
namespace {

// The next group's rows go to L2, as in the AVX2 file (026cd0f) and the int8 chunks: listed rows are
// scattered, and prefetcht0 filled the L1 miss buffers. This file kept T0 when it was added (stop 26)
// until stop 32 measured it: F32 input-sparse, 2 threads, in-process A/B over 1 GB of copies, T0 -> T1
// GB/s: 4096x14336 (16 KiB rows) d = 0.1 20.9 -> 28.6, 0.5 17.6 -> 22.0, 1 20.7 -> 30.5 (dense 28.7);
// 8192x2048 d = 1 25.7 -> 34.8; 2048x8192 (8 KiB rows) d = 1 16.2 -> 20.6.
template <int G>
[[gnu::always_inline]] inline void prefetch_rows(const uint8_t* const* pf, int64_t off) {
    SL_UNROLL
    for (int g = 0; g < G; ++g) _mm_prefetch(reinterpret_cast<const char*>(pf[g] + off), _MM_HINT_T1);
}

// Float rows, 32 elements per step; the tail uses masked loads in the same arithmetic.
template <typename L>
struct float_op {
    template <int G, bool Init, bool PF>
    static void run(float* acc, const uint8_t* const* rows, const float* s, int64_t n, const uint8_t* const* pf) {
        using E = typename L::elem;
        const E* r[G];
        __m512 sv[G];
        SL_UNROLL
        for (int g = 0; g < G; ++g) {
            r[g] = reinterpret_cast<const E*>(rows[g]);
            sv[g] = _mm512_set1_ps(s[g]);
        }
        int64_t i = 0;
        for (; i + 32 <= n; i += 32) {
            if constexpr (PF) {
                SL_UNROLL
                for (int l = 0; l < 32 * static_cast<int>(sizeof(E)); l += 64) prefetch_rows<G>(pf, i * sizeof(E) + l);
            }
            __m512 a0 = Init ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + i);
            __m512 a1 = Init ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + i + 16);
            SL_UNROLL
            for (int g = 0; g < G; ++g) {
                a0 = _mm512_fmadd_ps(sv[g], L::load(r[g] + i), a0);
                a1 = _mm512_fmadd_ps(sv[g], L::load(r[g] + i + 16), a1);
            }
            _mm512_storeu_ps(acc + i, a0);
            _mm512_storeu_ps(acc + i + 16, a1);
        }
        for (; i < n; i += 16) {
            const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1u);
            __m512 a = Init ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, acc + i);
            SL_UNROLL
            for (int g = 0; g < G; ++g) a = _mm512_fmadd_ps(sv[g], L::load(r[g] + i, m), a);
            _mm512_mask_storeu_ps(acc + i, m, a);
        }
    }
};

// Quantized rows. Per group of 8 blocks the fp16 scales of each row are extracted with two word
// permutes (the blocks' scales8, not 8 scalar loads and conversions) and multiplied by s[g]; each
// block then widens its 32 integers and adds c * q with FMAs. Q4_0 adds unsigned nibbles and removes
// 8 * c per block once for all rows. Q8_0: 32 signed bytes; Q4_0: element j < 16 is the low nibble of
// byte j, j + 16 the high.
struct q8_values : q8_block {
    static void get(const uint8_t* p, __m512& w0, __m512& w1) {
        w0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2))));
        w1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 18))));
    }
};
struct q4_values : q4_block {
    static void get(const uint8_t* p, __m512& w0, __m512& w1) {  // unsigned nibbles
        const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2)));
        w0 = _mm512_cvtepi32_ps(_mm512_and_si512(v, _mm512_set1_epi32(0x0f)));
        w1 = _mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4));
    }
};

template <typename V>
struct quant_op {
    template <int G, bool Init>
    static void block(float* a_out, const uint8_t* const (&r)[G], const float* c, float bias, int64_t off) {
        __m512 a0 = Init ? _mm512_setzero_ps() : _mm512_loadu_ps(a_out);
        __m512 a1 = Init ? _mm512_setzero_ps() : _mm512_loadu_ps(a_out + 16);
        SL_UNROLL
        for (int g = 0; g < G; ++g) {
            const __m512 cv = _mm512_set1_ps(c[g]);
            __m512 w0, w1;
            V::get(r[g] + off, w0, w1);
            a0 = _mm512_fmadd_ps(cv, w0, a0);
            a1 = _mm512_fmadd_ps(cv, w1, a1);
        }
        if constexpr (V::offset) {
            const __m512 b8 = _mm512_set1_ps(8.0f * bias);
            a0 = _mm512_sub_ps(a0, b8);
            a1 = _mm512_sub_ps(a1, b8);
        }
        _mm512_storeu_ps(a_out, a0);
        _mm512_storeu_ps(a_out + 16, a1);
    }

    template <int G, bool Init, bool PF>
    static void run(float* acc, const uint8_t* const* rows, const float* s, int64_t n, const uint8_t* const* pf) {
        // Local copies: the stores to acc could alias the caller's pointer arrays otherwise.
        const uint8_t* r[G];
        const uint8_t* p[G];
        float sg[G];
        SL_UNROLL
        for (int g = 0; g < G; ++g) {
            r[g] = rows[g];
            p[g] = PF ? pf[g] : nullptr;
            sg[g] = s[g];
        }
        const int64_t nb = n / 32;
        int64_t b = 0;
        for (; b + 8 <= nb; b += 8) {
            const int64_t off = b * V::bytes;
            // The 8 blocks' lines of each next row, once per group, into L2 (prefetch_rows). These run only
            // without VNNI (plain Q8_0/Q4_0 layouts); measured with the VNNI chunks switched off in an
            // experiment build, 4096x14336, 2 threads, T0 -> T1 GB/s: d = 0.5 Q4_0 14.2 -> 16.6, Q8_0
            // 17.8 -> 26.0; d = 1 Q4_0 15.7 -> 17.1, Q8_0 10.2 -> 15.7.
            if constexpr (PF) {
                SL_UNROLL
                for (int g = 0; g < G; ++g) {
                    prefetch_span<8 * V::bytes, pf_l2>(p[g], off);
                    _mm_prefetch(reinterpret_cast<const char*>(p[g] + off + 8 * V::bytes - 1), _MM_HINT_T1);
                }
            }
            alignas(32) float c[8][G];  // c[j][g]: coefficient of row g in block b + j
            alignas(32) float bias[8];
            __m256 sum = _mm256_setzero_ps();
            SL_UNROLL
            for (int g = 0; g < G; ++g) {
                const __m256 cg = _mm256_mul_ps(V::scales8(r[g] + off), _mm256_set1_ps(sg[g]));
                sum = _mm256_add_ps(sum, cg);
                alignas(32) float t[8];
                _mm256_store_ps(t, cg);
                SL_UNROLL
                for (int j = 0; j < 8; ++j) c[j][g] = t[j];
            }
            _mm256_store_ps(bias, sum);
            SL_UNROLL
            for (int j = 0; j < 8; ++j) block<G, Init>(acc + (b + j) * 32, r, c[j], bias[j], off + j * V::bytes);
        }
        for (; b < nb; ++b) {
            const int64_t off = b * V::bytes;
            if constexpr (PF) prefetch_rows<G>(p, off);
            float c[G];
            float bias = 0.0f;
            SL_UNROLL
            for (int g = 0; g < G; ++g) {
                c[g] = sg[g] * half_at(r[g] + off);
                bias += c[g];
            }
            block<G, Init>(acc + b * 32, r, c, bias, off);
        }
    }
};

}  // namespace

const sparse_table& sparse_avx512_table() {
    static const sparse_table t = [] {
        sparse_table k;
        k.axpy[0] = axpy_dispatch<float_op<load_f32>>;
        // F16 axpy: the AVX2 kernel's (the same left-to-right FMAs per element, so the same bits). The
        // 512-bit one ran F16 4096x14336 input-sparse 15-20% slower on a Zen 4 (d = 0.1/0.5/1, 2 threads:
        // 0.51/2.47-2.61/4.90 ms against 0.43/2.08-2.12/4.04-4.16), like its F16 rows (dense_avx512.cpp).
        k.axpy[1] = sparse_avx2_table().axpy[1];
        k.axpy[2] = axpy_dispatch<float_op<load_bf16>>;
        k.axpy[3] = axpy_dispatch<quant_op<q8_values>>;
        k.axpy[4] = axpy_dispatch<quant_op<q4_values>>;
        // The gathers run each listed row through the dense row kernels: results equal gemv's bit for bit.
        k.dots[0] = gather_dots<float, dot_rows<1, load_f32, pf_l2>, dot_rows<1, load_f32, pf_none>>;
        k.dots[1] = sparse_avx2_table().dots[1];  // the AVX2 F16 rows are the dense ones too (dense_avx512.cpp)
        k.dots[2] = gather_dots<float, dot_rows<1, load_bf16, pf_l2>, dot_rows<1, load_bf16, pf_none>>;
        k.dots[3] = gather_dots<q8_act, quant_rows<1, q8_block, pf_l2>, quant_rows<1, q8_block, pf_none>>;
        k.dots[4] = quant_gather_dots<q4_block>;
        add_unpacked_dots_avx2(k);
        add_kquant_dots_avx512(k);
        add_vnni_dots_avx512(k);  // over the four above where VNNI and VBMI exist
        add_int8_x8_chunks_avx2(k);  // AVX-512 CPUs have AVX2; replaced below where VNNI and VBMI exist
        const chunk_fn q4_0x8_avx2 = k.chunk[static_cast<int>(dtype::q4_0x8)];
        add_vnni_chunks(k);
        // The AVX2 chunk stays beside it for CPUs that read memory faster through it (chunk_of,
        // cpu_prefers_avx2_q4_0x8_chunk); the VNNI one is faster from cache (Q4_0x8 in L2, one thread:
        // 28.9 against 24.7 GB/s).
        if (k.chunk[static_cast<int>(dtype::q4_0x8)] != q4_0x8_avx2) k.q4_0x8_avx2 = q4_0x8_avx2;
        return k;
    }();
    return t;
}

}  // namespace sl::kernels::detail

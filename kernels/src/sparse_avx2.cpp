// AVX2 + FMA + F16C sparse kernels: multi-row axpy over f32/f16/bf16/Q8_0/Q4_0 rows.
#include <immintrin.h>

#include <cstring>

#include "sparse_internal.h"

// Fixed-trip loops over rows must be unrolled so the per-row values stay in registers.
#define SL_UNROLL _Pragma("GCC unroll 16")

namespace sl::kernels::detail {
namespace {

inline float half_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

template <int G>
inline void prefetch_rows(const uint8_t* const* pf, int64_t off) {
    SL_UNROLL
    for (int g = 0; g < G; ++g) _mm_prefetch(reinterpret_cast<const char*>(pf[g] + off), _MM_HINT_T0);
}

// Widening loaders: 8 consecutive weights as f32, and one weight for the tail.
struct load_f32 {
    using elem = float;
    static __m256 load(const elem* p) { return _mm256_loadu_ps(p); }
    static float one(const elem* p) { return *p; }
};
struct load_f16 {
    using elem = uint16_t;
    static __m256 load(const elem* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
    static float one(const elem* p) { return _cvtsh_ss(*p); }
};
struct load_bf16 {
    using elem = uint16_t;
    static __m256 load(const elem* p) {
        const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    }
    static float one(const elem* p) {
        const uint32_t u = static_cast<uint32_t>(*p) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
};

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

// Row count, init and prefetch become template arguments, so each inner loop is branch-free.
template <typename Op>
void axpy(float* acc, bool init, int n_rows, const uint8_t* const* rows, const float* s, int64_t n,
          const uint8_t* const* pf) {
    auto go = [&]<int G>() {
        if (init) {
            pf ? Op::template run<G, true, true>(acc, rows, s, n, pf)
               : Op::template run<G, true, false>(acc, rows, s, n, pf);
        } else {
            pf ? Op::template run<G, false, true>(acc, rows, s, n, pf)
               : Op::template run<G, false, false>(acc, rows, s, n, pf);
        }
    };
    static_assert(k_axpy_rows == 4);
    switch (n_rows) {
        case 1:
            go.template operator()<1>();
            break;
        case 2:
            go.template operator()<2>();
            break;
        case 3:
            go.template operator()<3>();
            break;
        default:
            go.template operator()<4>();
            break;
    }
}

inline float hsum(__m256 v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

// Same arithmetic as the dense AVX2 rows kernel (4 accumulators of 8 lanes, 32 elements per step,
// then 8, then a zero-padded tail into accumulator 1, same final sum): identical results. Only the
// prefetch target differs: the next listed row, at the offset being read.
template <typename L>
void dots_float(const uint8_t* const* rows, const uint8_t* const* pfs, int64_t n, int64_t cols, const void* xv,
                float* y) {
    using E = typename L::elem;
    const auto* x = static_cast<const float*>(xv);
    for (int64_t k = 0; k < n; ++k) {
        const E* row = reinterpret_cast<const E*>(rows[k]);
        const char* pf = pfs ? reinterpret_cast<const char*>(pfs[k]) : nullptr;
        __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        int64_t c = 0;
        for (; c + 32 <= cols; c += 32) {
            if (pf) {
                SL_UNROLL
                for (int l = 0; l < 32 * static_cast<int>(sizeof(E)); l += 64)
                    _mm_prefetch(pf + c * static_cast<int64_t>(sizeof(E)) + l, _MM_HINT_T0);
            }
            SL_UNROLL
            for (int u = 0; u < 4; ++u)
                a[u] = _mm256_fmadd_ps(L::load(row + c + 8 * u), _mm256_loadu_ps(x + c + 8 * u), a[u]);
        }
        for (; c + 8 <= cols; c += 8) a[0] = _mm256_fmadd_ps(L::load(row + c), _mm256_loadu_ps(x + c), a[0]);
        if (c < cols) {
            const int64_t m = cols - c;
            alignas(32) float xt[8] = {};
            alignas(32) E wt[8] = {};
            std::memcpy(xt, x + c, static_cast<size_t>(m) * sizeof(float));
            std::memcpy(wt, row + c, static_cast<size_t>(m) * sizeof(E));
            a[1] = _mm256_fmadd_ps(L::load(wt), _mm256_load_ps(xt), a[1]);
        }
        y[k] = hsum(_mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3])));
    }
}

// Integer block dots as the dense AVX2 kernel does them (same operations in the same order):
// Q8_0 block by block with 4 accumulators; Q4_0 in 8-block steps with gathered scales first.
struct q8_dot {
    static constexpr int64_t bytes = sizeof(block_q8_0);
    static constexpr bool offset = false;
    static constexpr bool grouped = false;
    static __m256i dot(const uint8_t* blk, __m256i xq) {
        const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
        const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(xq, wq));
        return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
    }
};
struct q4_dot {
    static constexpr int64_t bytes = sizeof(block_q4_0);
    static constexpr bool offset = true;
    static constexpr bool grouped = true;
    static __m256i dot(const uint8_t* blk, __m256i xq) {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
        const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0f));
        return _mm256_madd_epi16(_mm256_maddubs_epi16(nib, xq), _mm256_set1_epi16(1));
    }
};

template <typename B>
inline __m256 scales8(const uint8_t* p) {
    const __m256i offs = _mm256_setr_epi32(0, B::bytes, 2 * B::bytes, 3 * B::bytes, 4 * B::bytes, 5 * B::bytes,
                                           6 * B::bytes, 7 * B::bytes);
    const __m256i g = _mm256_i32gather_epi32(reinterpret_cast<const int*>(p), offs, 1);
    const __m256i lo = _mm256_and_si256(g, _mm256_set1_epi32(0xffff));
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, lo), 0x08);
    return _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
}

template <typename B>
inline __m256 block_scaled(const uint8_t* p, __m256i xq, float dx, float sx, float& corr) {
    const float dw = half_at(p);
    if constexpr (B::offset) corr += dw * sx;
    return _mm256_mul_ps(_mm256_cvtepi32_ps(B::dot(p, xq)), _mm256_set1_ps(dw * dx));
}

template <typename B>
float dot_quant(const uint8_t* w, int64_t nb, const q8_act* xa, const char* pf) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    __m256 corr_v = _mm256_setzero_ps();
    float corr = 0.0f;
    int64_t b = 0;
    for (; B::grouped && b + 8 <= nb; b += 8) {
        if (pf) {
            SL_UNROLL
            for (int l = 0; l < 8 * static_cast<int>(B::bytes); l += 64)
                _mm_prefetch(pf + b * B::bytes + l, _MM_HINT_T0);
        }
        const uint8_t* p = w + b * B::bytes;
        const __m256 dx = _mm256_loadu_ps(xa->d + b);
        const __m256 dw = scales8<B>(p);
        if constexpr (B::offset) corr_v = _mm256_fmadd_ps(dw, _mm256_loadu_ps(xa->s + b), corr_v);
        alignas(32) float dd[8];
        _mm256_store_ps(dd, _mm256_mul_ps(dw, dx));
        SL_UNROLL
        for (int k = 0; k < 8; ++k) {
            const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa->qs + (b + k) * 32));
            const __m256 prod = _mm256_cvtepi32_ps(B::dot(p + k * B::bytes, xq));
            acc[k % 4] = _mm256_fmadd_ps(prod, _mm256_broadcast_ss(dd + k), acc[k % 4]);
        }
    }
    for (; b + 4 <= nb; b += 4) {
        if (pf) {
            SL_UNROLL
            for (int l = 0; l < 4 * static_cast<int>(B::bytes); l += 64)
                _mm_prefetch(pf + b * B::bytes + l, _MM_HINT_T0);
        }
        SL_UNROLL
        for (int u = 0; u < 4; ++u) {
            const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa->qs + (b + u) * 32));
            acc[u] =
                _mm256_add_ps(acc[u], block_scaled<B>(w + (b + u) * B::bytes, xq, xa->d[b + u], xa->s[b + u], corr));
        }
    }
    for (; b < nb; ++b) {
        const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa->qs + b * 32));
        acc[0] = _mm256_add_ps(acc[0], block_scaled<B>(w + b * B::bytes, xq, xa->d[b], xa->s[b], corr));
    }
    const __m256 s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    return B::offset ? hsum(s) - 8.0f * (hsum(corr_v) + corr) : hsum(s);
}

template <typename B>
void dots_quant(const uint8_t* const* rows, const uint8_t* const* pfs, int64_t n, int64_t cols, const void* xv,
                float* y) {
    const auto* xa = static_cast<const q8_act*>(xv);
    for (int64_t k = 0; k < n; ++k)
        y[k] = dot_quant<B>(rows[k], cols / 32, xa, pfs ? reinterpret_cast<const char*>(pfs[k]) : nullptr);
}

}  // namespace

const sparse_table& sparse_avx2_table() {
    static const sparse_table t = [] {
        sparse_table k;
        k.axpy[0] = axpy<float_op<load_f32>>;
        k.axpy[1] = axpy<float_op<load_f16>>;
        k.axpy[2] = axpy<float_op<load_bf16>>;
        k.axpy[3] = axpy<quant_op<q8_values>>;
        k.axpy[4] = axpy<quant_op<q4_values>>;
        k.dots[0] = dots_float<load_f32>;
        k.dots[1] = dots_float<load_f16>;
        k.dots[2] = dots_float<load_bf16>;
        k.dots[3] = dots_quant<q8_dot>;
        k.dots[4] = dots_quant<q4_dot>;
        return k;
    }();
    return t;
}

}  // namespace sl::kernels::detail

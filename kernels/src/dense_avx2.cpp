// AVX2 + FMA + F16C dense kernels (compiled with those flags; only called after a CPUID check).
#include <immintrin.h>

#include <cstring>

#include "dense_internal.h"

// Fixed-trip loops over rows/accumulators must be unrolled so the accumulators live in registers
// (at -O2 GCC keeps them in a stack array otherwise, which halves throughput).
#define SL_UNROLL _Pragma("GCC unroll 16")

namespace sl::kernels::detail {
namespace {

// Software prefetch distance for the single-row streaming kernels (see dense_avx512.cpp).
constexpr int k_prefetch = 4096;

inline float hsum(__m256 v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

// Widening loaders: 8 consecutive weights of one row as f32 (all conversions are exact).
struct load_f32 {
    using elem = float;
    static __m256 load(const elem* p) { return _mm256_loadu_ps(p); }
};
struct load_f16 {
    using elem = uint16_t;
    static __m256 load(const elem* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
};
struct load_bf16 {
    using elem = uint16_t;
    static __m256 load(const elem* p) {
        const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    }
};

// U independent accumulators per row hide the FMA latency even with a single row; R rows share
// each x load. A row's arithmetic depends only on U and cols, never on R or on the loader, so
// any row partition (and gemm's widened f32 tiles) gives bit-identical results.
constexpr int k_float_acc = 4;
constexpr int k_quant_acc = 4;

template <int R, typename L>
inline void dot_rows(const uint8_t* w, int64_t rb, int64_t cols, const float* x, float* y) {
    constexpr int U = k_float_acc;
    using E = typename L::elem;
    const E* row[R];
    __m256 a[R][U];
    SL_UNROLL
    for (int i = 0; i < R; ++i) {
        row[i] = reinterpret_cast<const E*>(w + i * rb);
        SL_UNROLL
        for (int u = 0; u < U; ++u) a[i][u] = _mm256_setzero_ps();
    }
    int64_t c = 0;
    for (; c + 8 * U <= cols; c += 8 * U) {
        if constexpr (R == 1) {
            SL_UNROLL
            for (int l = 0; l < 8 * U * static_cast<int>(sizeof(E)); l += 64)
                _mm_prefetch(reinterpret_cast<const char*>(row[0] + c) + k_prefetch + l, _MM_HINT_T0);
        }
        __m256 xv[U];
        SL_UNROLL
        for (int u = 0; u < U; ++u) xv[u] = _mm256_loadu_ps(x + c + 8 * u);
        SL_UNROLL
        for (int i = 0; i < R; ++i)
            SL_UNROLL
            for (int u = 0; u < U; ++u) a[i][u] = _mm256_fmadd_ps(L::load(row[i] + c + 8 * u), xv[u], a[i][u]);
    }
    for (; c + 8 <= cols; c += 8) {
        const __m256 x0 = _mm256_loadu_ps(x + c);
        SL_UNROLL
        for (int i = 0; i < R; ++i) a[i][0] = _mm256_fmadd_ps(L::load(row[i] + c), x0, a[i][0]);
    }
    if (c < cols) {  // zero-padded copies keep the tail in the same vector arithmetic
        const int64_t m = cols - c;
        alignas(32) float xt[8] = {};
        std::memcpy(xt, x + c, static_cast<size_t>(m) * sizeof(float));
        const __m256 x0 = _mm256_load_ps(xt);
        SL_UNROLL
        for (int i = 0; i < R; ++i) {
            alignas(32) E wt[8] = {};
            std::memcpy(wt, row[i] + c, static_cast<size_t>(m) * sizeof(E));
            a[i][1] = _mm256_fmadd_ps(L::load(wt), x0, a[i][1]);
        }
    }
    SL_UNROLL
    for (int i = 0; i < R; ++i)
        y[i] = hsum(_mm256_add_ps(_mm256_add_ps(a[i][0], a[i][1]), _mm256_add_ps(a[i][2], a[i][3])));
}

template <int R, typename L>
void rows_float(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    const auto* x = static_cast<const float*>(xv);
    int64_t r = 0;
    for (; r + R <= n_rows; r += R) dot_rows<R, L>(w + r * rb, rb, cols, x, y + r);
    for (; r < n_rows; ++r) dot_rows<1, L>(w + r * rb, rb, cols, x, y + r);
}

// Q8_0 weights: maddubs needs an unsigned operand, so |w| times x carrying w's sign.
struct q8_block {
    static constexpr int64_t bytes = sizeof(block_q8_0);
    static constexpr bool offset = false;
    static constexpr bool grouped = false;  // gathering 34-byte-strided scales measured slower
    static __m256i dot(const uint8_t* blk, __m256i xq) {
        const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
        const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(xq, wq));
        return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
    }
};

// Q4_0 weights: nibbles are already unsigned; sum((n-8)*q) = sum(n*q) - 8*sum(q), and the
// second term is d*sum(q) = s[] precomputed per activation block.
struct q4_block {
    static constexpr int64_t bytes = sizeof(block_q4_0);
    static constexpr bool offset = true;
    static constexpr bool grouped = true;  // 8-block steps with gathered scales: ~15% faster
    static __m256i dot(const uint8_t* blk, __m256i xq) {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
        const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0f));
        return _mm256_madd_epi16(_mm256_maddubs_epi16(nib, xq), _mm256_set1_epi16(1));
    }
};

// fp16 scales of the 8 blocks at p as f32: one gather of the dwords at each block start (the
// scale is the low half), packed and widened, instead of 8 scalar loads and conversions.
template <typename B>
inline __m256 scales8(const uint8_t* p) {
    const __m256i offs = _mm256_setr_epi32(0, B::bytes, 2 * B::bytes, 3 * B::bytes, 4 * B::bytes, 5 * B::bytes,
                                           6 * B::bytes, 7 * B::bytes);
    const __m256i g = _mm256_i32gather_epi32(reinterpret_cast<const int*>(p), offs, 1);
    const __m256i lo = _mm256_and_si256(g, _mm256_set1_epi32(0xffff));
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, lo), 0x08);  // words 0-3 | 4-7
    return _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
}

// The per-block path (leftover blocks): scalar scale conversion.
template <typename B>
inline __m256 block_scaled(const uint8_t* p, __m256i xq, float dx, float sx, float& corr) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    const float dw = _cvtsh_ss(h);
    if constexpr (B::offset) corr += dw * sx;
    return _mm256_mul_ps(_mm256_cvtepi32_ps(B::dot(p, xq)), _mm256_set1_ps(dw * dx));
}

// Integer-dot rows with U accumulators per row in flight. Grouped types go 8 blocks per step: the
// 8 weight scales are gathered and combined with the activation scales in one multiply, and each
// block broadcasts its scale from a small array. Other types and leftovers go block by block.
template <int R, typename B>
inline void quant_rows(const uint8_t* w, int64_t rb, int64_t cols, const q8_act* xa, float* y) {
    constexpr int U = k_quant_acc;
    __m256 acc[R][U];
    __m256 corr_v[R];
    float corr[R];
    SL_UNROLL
    for (int i = 0; i < R; ++i) {
        SL_UNROLL
        for (int u = 0; u < U; ++u) acc[i][u] = _mm256_setzero_ps();
        corr_v[i] = _mm256_setzero_ps();
        corr[i] = 0.0f;
    }
    const int64_t nb = cols / 32;
    int64_t b = 0;
    for (; B::grouped && b + 8 <= nb; b += 8) {
        if constexpr (R == 1) {
            SL_UNROLL
            for (int l = 0; l < 8 * static_cast<int>(B::bytes); l += 64)
                _mm_prefetch(reinterpret_cast<const char*>(w + b * B::bytes) + k_prefetch + l, _MM_HINT_T0);
        }
        const __m256 dx = _mm256_loadu_ps(xa->d + b);
        SL_UNROLL
        for (int i = 0; i < R; ++i) {
            const uint8_t* p = w + i * rb + b * B::bytes;
            const __m256 dw = scales8<B>(p);
            if constexpr (B::offset) corr_v[i] = _mm256_fmadd_ps(dw, _mm256_loadu_ps(xa->s + b), corr_v[i]);
            alignas(32) float dd[8];
            _mm256_store_ps(dd, _mm256_mul_ps(dw, dx));
            SL_UNROLL
            for (int k = 0; k < 8; ++k) {
                const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa->qs + (b + k) * 32));
                const __m256 prod = _mm256_cvtepi32_ps(B::dot(p + k * B::bytes, xq));
                acc[i][k % U] = _mm256_fmadd_ps(prod, _mm256_broadcast_ss(dd + k), acc[i][k % U]);
            }
        }
    }
    for (; b + U <= nb; b += U) {
        if constexpr (R == 1) {
            SL_UNROLL
            for (int l = 0; l < U * static_cast<int>(B::bytes); l += 64)
                _mm_prefetch(reinterpret_cast<const char*>(w + b * B::bytes) + k_prefetch + l, _MM_HINT_T0);
        }
        SL_UNROLL
        for (int u = 0; u < U; ++u) {
            const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa->qs + (b + u) * 32));
            SL_UNROLL
            for (int i = 0; i < R; ++i)
                acc[i][u] = _mm256_add_ps(acc[i][u], block_scaled<B>(w + i * rb + (b + u) * B::bytes, xq, xa->d[b + u],
                                                                     xa->s[b + u], corr[i]));
        }
    }
    for (; b < nb; ++b) {
        const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa->qs + b * 32));
        SL_UNROLL
        for (int i = 0; i < R; ++i)
            acc[i][0] = _mm256_add_ps(acc[i][0], block_scaled<B>(w + i * rb + b * B::bytes, xq, xa->d[b], xa->s[b], corr[i]));
    }
    SL_UNROLL
    for (int i = 0; i < R; ++i) {
        const __m256 s = _mm256_add_ps(_mm256_add_ps(acc[i][0], acc[i][1]), _mm256_add_ps(acc[i][2], acc[i][3]));
        y[i] = B::offset ? hsum(s) - 8.0f * (hsum(corr_v[i]) + corr[i]) : hsum(s);
    }
}

template <int R, typename B>
void rows_quant(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    const auto* xa = static_cast<const q8_act*>(xv);
    int64_t r = 0;
    for (; r + R <= n_rows; r += R) quant_rows<R, B>(w + r * rb, rb, cols, xa, y + r);
    for (; r < n_rows; ++r) quant_rows<1, B>(w + r * rb, rb, cols, xa, y + r);
}

template <typename L>
void dequant_float(const void* src, float* dst, int64_t n) {
    const auto* s = static_cast<const typename L::elem*>(src);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, L::load(s + i));
    for (; i < n; ++i) {
        alignas(32) typename L::elem t[8] = {};
        t[0] = s[i];
        alignas(32) float o[8];
        _mm256_store_ps(o, L::load(t));
        dst[i] = o[0];
    }
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
            q[u] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[u], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
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

template <bool Prefetch>
float stream_sum(const float* p, int64_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < n; i += 32) {
        if constexpr (Prefetch) {
            SL_UNROLL
            for (int l = 0; l < 128; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p + i) + k_prefetch + l, _MM_HINT_T0);
        }
        a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
    }
    return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

}  // namespace

const kernel_table& avx2_table() {
    static const kernel_table t = [] {
        kernel_table k = scalar_table();
        k.rows[0] = rows_float<1, load_f32>;
        k.rows[1] = rows_float<1, load_f16>;
        k.rows[2] = rows_float<1, load_bf16>;
        k.rows[3] = rows_quant<1, q8_block>;
        k.rows[4] = rows_quant<1, q4_block>;
        k.rows_cached[0] = rows_float<2, load_f32>;
        k.rows_cached[1] = rows_float<2, load_f16>;
        k.rows_cached[2] = rows_float<2, load_bf16>;
        k.rows_cached[3] = rows_quant<2, q8_block>;
        k.rows_cached[4] = rows_quant<2, q4_block>;
        k.dequant[1] = dequant_float<load_f16>;
        k.dequant[2] = dequant_float<load_bf16>;
        k.quantize_act = quantize_act;
        k.stream_sum[0] = stream_sum<false>;
        k.stream_sum[1] = stream_sum<true>;
        return k;
    }();
    return t;
}

}  // namespace sl::kernels::detail

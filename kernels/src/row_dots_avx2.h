// AVX2 row dot products shared by the dense rows kernels (dense_avx2.cpp) and the sparse gathers (sparse_avx2.cpp).
// Include only from *_avx2.cpp files: everything is in an anonymous namespace, so each including TU, built with
// the AVX2 flags, gets its own copy and no AVX2 instruction can leak into code another ISA's TU links to.
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "row_dots_avx2.h is only for the *_avx2.cpp kernel files (built with -mavx2 -mfma -mf16c)"
#endif

#include <immintrin.h>

#include <cstring>
#include <vector>

#include "dense_internal.h"

// Fixed-trip loops over rows/accumulators must be unrolled so the accumulators live in registers
// (at -O2 GCC keeps them in a stack array otherwise, which halves throughput).
#define SL_UNROLL _Pragma("GCC unroll 16")

namespace sl::kernels::detail {
namespace {

inline float hsum(__m256 v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

inline float half_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

// Widening loaders: 8 consecutive weights of one row as f32, and one weight for scalar tails
// (all conversions are exact).
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

// U independent accumulators per row hide the FMA latency even with a single row; R rows share
// each x load. A row's arithmetic depends only on U and cols, never on R, on the loader or on the
// prefetching, so any row partition (gemm's widened f32 tiles, the sparse gathers) gives
// bit-identical results.
constexpr int k_float_acc = 4;
constexpr int k_quant_acc = 4;

// y[i] = dot(row i, x) for the R rows at w, rb bytes apart. With Prefetch, each step also prefetches
// pf + the byte offset it reads in the row: the streaming gemv passes its own row 4 KiB ahead, the
// sparse gathers the next listed row (prefetching ahead in a short row would fetch an unused one).
// A compile-time choice, so the streaming loops carry no null test.
// Always inlined (so are quant_rows and q4_row): the row loops and gathers call it once per row, and
// out of line (GCC's constprop clone, a 32-byte aligned 224-byte frame per call) F16 llama-1b decode
// matmuls ran 2-14% slower (harness alternating both builds: 56.5 vs 53.0 ms per token's matrices).
template <int R, typename L, int Prefetch>
[[gnu::always_inline]] inline void dot_rows(const uint8_t* w, int64_t rb, int64_t cols, const float* x, float* y, const uint8_t* pf) {
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
        if constexpr (Prefetch) {
            SL_UNROLL
            for (int i = 0; i < R; ++i)
                prefetch_span<8 * U * sizeof(E), Prefetch>(pf + i * rb, c * static_cast<int64_t>(sizeof(E)));
        }
        __m256 xv[U];
        SL_UNROLL
        for (int u = 0; u < U; ++u) xv[u] = _mm256_loadu_ps(x + c + 8 * u);
        SL_UNROLL
        for (int i = 0; i < R; ++i) {
            SL_UNROLL
            for (int u = 0; u < U; ++u) a[i][u] = _mm256_fmadd_ps(L::load(row[i] + c + 8 * u), xv[u], a[i][u]);
        }
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

// Q8_0 weights: maddubs needs an unsigned operand, so |w| times x carrying w's sign.
struct q8_block {
    static constexpr int64_t bytes = sizeof(block_q8_0);
    static constexpr bool offset = false;
    static constexpr bool grouped = false;  // gathering 34-byte-strided scales measured slower
    static constexpr bool paired = false;
    static __m256i dot(const uint8_t* blk, __m256i xq) {
        const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
        const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(xq, wq));
        return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
    }
};

// Q4_0 weights: nibbles are already unsigned; sum((n-8)*q) = sum(n*q) - 8*sum(q), and the
// second term is d*sum(q) = s[] precomputed per activation block. Full groups of 8 blocks go through
// q4_row (two blocks per 256-bit step); dot() is the single-block path of the leftovers.
struct q4_block {
    static constexpr int64_t bytes = sizeof(block_q4_0);
    static constexpr bool offset = true;
    static constexpr bool grouped = true;
    static constexpr bool paired = true;
    static __m256i dot(const uint8_t* blk, __m256i xq) {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
        const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0f));
        return _mm256_madd_epi16(_mm256_maddubs_epi16(nib, xq), _mm256_set1_epi16(1));
    }
};

// fp16 scales of the 8 blocks at p as f32, block order[i] in lane i: one gather of the dwords at each
// block start (the scale is the low half), packed and widened, instead of 8 scalar loads and conversions.
template <typename B, int... Order>
inline __m256 scales8_in(const uint8_t* p) {
    const __m256i offs = _mm256_setr_epi32(static_cast<int>(Order * B::bytes)...);
    const __m256i g = _mm256_i32gather_epi32(reinterpret_cast<const int*>(p), offs, 1);
    const __m256i lo = _mm256_and_si256(g, _mm256_set1_epi32(0xffff));
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, lo), 0x08);  // words 0-3 | 4-7
    return _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
}

// The same from scalar loads, 4 fp16 scales per 64-bit integer: vpgatherdd costs ~20 cycles on this
// Zen 4 VM (a third of a Q4_0 row in perf). The empty asm keeps each scale in a general register: GCC
// otherwise vectorizes the shifts into a dozen vector shuffles, and the vector pipes are the bottleneck
// of the row kernels while the integer ALUs idle.
template <typename B, int... Order>
inline __m256 scales8_scalar(const uint8_t* p) {
    constexpr int o[8] = {Order...};
    auto h = [&](int i) {
        uint16_t v;
        std::memcpy(&v, p + o[i] * B::bytes, 2);
        uint64_t u = v;
        __asm__("" : "+r"(u));
        return u;
    };
    const uint64_t lo = h(0) | h(1) << 16 | h(2) << 32 | h(3) << 48;
    const uint64_t hi = h(4) | h(5) << 16 | h(6) << 32 | h(7) << 48;
    return _mm256_cvtph_ps(_mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo)));
}

template <typename B>
inline __m256 scales8(const uint8_t* p) {
    return scales8_in<B, 0, 1, 2, 3, 4, 5, 6, 7>(p);
}

// Lane i of each 128-bit half of v in all four lanes of that half (i is a constant once the loops are
// unrolled; the switch folds away).
inline __m256 lane_ps(__m256 v, int i) {
    switch (i) {
        case 0:
            return _mm256_shuffle_ps(v, v, 0x00);
        case 1:
            return _mm256_shuffle_ps(v, v, 0x55);
        case 2:
            return _mm256_shuffle_ps(v, v, 0xaa);
        default:
            return _mm256_shuffle_ps(v, v, 0xff);
    }
}

// Activations of a group of 8 Q4_0 blocks in the order q4_row consumes them: for blocks b, b + 1 a
// vector of elements 0-15 of both (lo) and one of elements 16-31 (hi), and d[] / s[] of the 8 blocks in
// the lane order 0, 2, 4, 6 | 1, 3, 5, 7 (block 2j in lane j of the low half, 2j + 1 in the high half).
// q4_x_direct rearranges a q8_act as quantized, in registers, per row; q4_x_paired reads one rearranged
// once per call (dense_avx2.cpp, q4_pair_acts). Both give the same values, so the same bits.
struct q4_x_direct {
    static void pair(const q8_act* xa, int64_t b, __m256i& lo, __m256i& hi) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa->qs + 32 * b));
        const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa->qs + 32 * b + 32));
        lo = _mm256_permute2x128_si256(a, c, 0x20);
        hi = _mm256_permute2x128_si256(a, c, 0x31);
    }
    static __m256 group(const float* v) {
        return _mm256_permutevar8x32_ps(_mm256_loadu_ps(v), _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
    }
};
struct q4_x_paired {
    static void pair(const q8_act* xa, int64_t b, __m256i& lo, __m256i& hi) {
        lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa->qs + 32 * b));
        hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa->qs + 32 * b + 32));
    }
    static __m256 group(const float* v) { return _mm256_loadu_ps(v); }
};

// The per-block path (leftover blocks): scalar scale conversion.
template <typename B>
inline __m256 block_scaled(const uint8_t* p, __m256i xq, float dx, float sx, float& corr) {
    const float dw = half_at(p);
    if constexpr (B::offset) corr += dw * sx;
    return _mm256_mul_ps(_mm256_cvtepi32_ps(B::dot(p, xq)), _mm256_set1_ps(dw * dx));
}

// One Q4_0 row. Per group of 8 blocks: the 8 weight scales (scalar loads, in q4_x lane order) times the
// activation scales; per pair of blocks one 32-byte load of both blocks' nibbles, masked into elements
// 0-15 (low nibbles) and 16-31 (high nibbles) of both, and two maddubs whose int16 pair sums are added
// exactly (4 elements per lane, |sum| <= 4 * 15 * 127). Two rounds of vphaddw fold the 4 pairs into 16
// elements per int16 lane (<= 30480, exact), one madd into one int32 lane per block, in the lane order
// of the scales: one convert and one FMA per 8 blocks. The offset term (-8 * sum d_w * s) is one FMA per
// group. Leftover blocks (< 8) go block by block. xg: the activations for the groups in X's layout; xa:
// as quantized (leftovers). Activations are at most 127 in magnitude (quantize_act), which the int16
// bounds rely on.
template <typename X, int Prefetch>
[[gnu::always_inline]] inline void q4_row(const uint8_t* w, int64_t cols, const q8_act* xg, const q8_act* xa, float* y, const uint8_t* pf) {
    using B = q4_block;
    __m256 acc = _mm256_setzero_ps(), corr_v = _mm256_setzero_ps();
    float corr = 0.0f;
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    const int64_t nb = cols / 32;
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        if constexpr (Prefetch) prefetch_span<8 * B::bytes, Prefetch>(pf, b * B::bytes);
        const uint8_t* p = w + b * B::bytes;
        const __m256 dw = scales8_scalar<B, 0, 2, 4, 6, 1, 3, 5, 7>(p);
        corr_v = _mm256_fmadd_ps(dw, X::group(xg->s + b), corr_v);
        const __m256 dd = _mm256_mul_ps(dw, X::group(xg->d + b));
        __m256i s16[4];
        SL_UNROLL
        for (int j = 0; j < 4; ++j) {
            const uint8_t* q = p + 2 * j * B::bytes;
            const __m256i v = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(q + B::bytes + 2),
                                                  reinterpret_cast<const __m128i*>(q + 2));
            __m256i xl, xh;
            X::pair(xg, b + 2 * j, xl, xh);
            s16[j] = _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_and_si256(v, m4), xl),
                                      _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), xh));
        }
        // Low 128 bits: blocks 0, 2 | 4, 6 of the group after the first / second vphaddw; high: 1, 3 | 5, 7.
        const __m256i t = _mm256_hadd_epi16(_mm256_hadd_epi16(s16[0], s16[1]), _mm256_hadd_epi16(s16[2], s16[3]));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(t, ones)), dd, acc);
    }
    for (; b < nb; ++b) {
        const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa->qs + b * 32));
        acc = _mm256_add_ps(acc, block_scaled<B>(w + b * B::bytes, xq, xa->d[b], xa->s[b], corr));
    }
    *y = hsum(acc) - 8.0f * (hsum(corr_v) + corr);
}

// The activations of the 8-block groups rearranged for q4_row (q4_x_paired), once per call instead of
// per row; thread-local (per including TU), grows only. Used by the dense Q4_0 rows and the Q4_0 gathers.
inline const q8_act* q4_pair_acts(const q8_act* xa, int64_t cols) {
    thread_local std::vector<int8_t> qs;
    thread_local std::vector<float> d, s;
    thread_local q8_act view;
    const int64_t n = cols / 256 * 256;
    if (qs.size() < static_cast<size_t>(n)) {
        qs.resize(static_cast<size_t>(n));
        d.resize(static_cast<size_t>(n / 32));
        s.resize(static_cast<size_t>(n / 32));
    }
    for (int64_t b = 0; b < n / 32; b += 8) {
        SL_UNROLL
        for (int j = 0; j < 4; ++j) {
            __m256i lo, hi;
            q4_x_direct::pair(xa, b + 2 * j, lo, hi);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs.data() + 32 * (b + 2 * j)), lo);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs.data() + 32 * (b + 2 * j) + 32), hi);
        }
        _mm256_storeu_ps(d.data() + b, q4_x_direct::group(xa->d + b));
        _mm256_storeu_ps(s.data() + b, q4_x_direct::group(xa->s + b));
    }
    view = {qs.data(), d.data(), s.data()};
    return &view;
}

// Integer-dot rows with U accumulators per row in flight. Grouped types go 8 blocks per step: the
// 8 weight scales are gathered and combined with the activation scales in one multiply, and each
// block broadcasts its scale from a small array. Other types and leftovers go block by block.
// R, Prefetch and pf as for dot_rows.
template <int R, typename B, int Prefetch>
[[gnu::always_inline]] inline void quant_rows(const uint8_t* w, int64_t rb, int64_t cols, const q8_act* xa, float* y, const uint8_t* pf) {
    if constexpr (B::paired) {
        SL_UNROLL
        for (int i = 0; i < R; ++i) q4_row<q4_x_direct, Prefetch>(w + i * rb, cols, xa, xa, y + i, pf + i * rb);
        return;
    }
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
        if constexpr (Prefetch) prefetch_span<8 * B::bytes, Prefetch>(pf, b * B::bytes);
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
        if constexpr (Prefetch) prefetch_span<U * B::bytes, Prefetch>(pf, b * B::bytes);
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
            acc[i][0] =
                _mm256_add_ps(acc[i][0], block_scaled<B>(w + i * rb + b * B::bytes, xq, xa->d[b], xa->s[b], corr[i]));
    }
    SL_UNROLL
    for (int i = 0; i < R; ++i) {
        const __m256 s = _mm256_add_ps(_mm256_add_ps(acc[i][0], acc[i][1]), _mm256_add_ps(acc[i][2], acc[i][3]));
        y[i] = B::offset ? hsum(s) - 8.0f * (hsum(corr_v[i]) + corr[i]) : hsum(s);
    }
}

}  // namespace
}  // namespace sl::kernels::detail

// AVX-512 row dot products shared by the dense rows kernels (dense_avx512.cpp) and the sparse gathers
// (sparse_avx512.cpp). Include only from *_avx512.cpp files: everything is in an anonymous namespace, so each
// including TU, built with the AVX-512 flags, gets its own copy and no AVX-512 instruction can leak into code
// another ISA's TU links to.
#pragma once

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || !defined(__AVX512DQ__) || \
    !defined(__FMA__) || !defined(__F16C__)
#error "row_dots_avx512.h is only for the *_avx512.cpp kernel files (built with the AVX-512 flags)"
#endif

#include <immintrin.h>

#include <array>
#include <cstring>
#include <vector>

#include "dense_internal.h"
#include "sparse_internal.h"

// Fixed-trip loops over rows/accumulators must be unrolled so the accumulators live in registers
// (at -O2 GCC keeps them in a stack array otherwise, which halves throughput).
#define SL_UNROLL _Pragma("GCC unroll 16")

namespace sl::kernels::detail {
namespace {

inline float hsum256(__m256 v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

inline float hsum512(__m512 v) {
    return hsum256(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

inline float half_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

// Row kernels prefetch with prefetch_span (dense_internal.h): gathered rows and streaming quantized rows
// (and float rows with a long x) into L2, short streaming float rows into L1. On a Zen 4 with AVX-512
// the gathers' L1 prefetches held a Q4_0 8192x2048 output-sparse gather at 50% to ~15 GB/s (2 threads)
// where a plain read of the same rows ran at ~26 (stop 26).

// Widening loaders: 16 consecutive weights as f32, or the first popcount(m) with zeros after.
struct load_f32 {
    using elem = float;
    static __m512 load(const elem* p) { return _mm512_loadu_ps(p); }
    static __m512 load(const elem* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct load_f16 {
    using elem = uint16_t;
    static __m512 load(const elem* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static __m512 load(const elem* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
struct load_bf16 {
    using elem = uint16_t;
    static __m512 widen(__m256i v) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16)); }
    static __m512 load(const elem* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
    static __m512 load(const elem* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};

// U independent accumulators per row hide the FMA latency even with a single row; R rows share
// each x load. A row's arithmetic depends only on U and cols, never on R, on the loader or on the
// prefetching, so any row partition (gemm's widened f32 tiles, the sparse gathers) gives
// bit-identical results.
constexpr int k_float_acc = 4;

// y[i] = dot(row i, x) for the R rows at w, rb bytes apart. With Prefetch (a pf_mode), each step also
// prefetches pf + i * rb + the byte offset it reads in row i: the streaming gemv passes its own row
// further on (ahead<Mode>, dense_internal.h), the sparse gathers the next listed row (prefetching ahead
// in a short row would fetch an unused one).
// A compile-time choice, so the streaming loops carry no null test.
// Always inlined, as in row_dots_avx2.h (measured there: the per-row call cost F16 decode 2-14%).
template <int R, typename L, int Prefetch>
[[gnu::always_inline]] inline void dot_rows(const uint8_t* w, int64_t rb, int64_t cols, const float* x, float* y, const uint8_t* pf) {
    constexpr int U = k_float_acc;
    using E = typename L::elem;
    const E* row[R];
    __m512 a[R][U];
    SL_UNROLL
    for (int i = 0; i < R; ++i) {
        row[i] = reinterpret_cast<const E*>(w + i * rb);
        SL_UNROLL
        for (int u = 0; u < U; ++u) a[i][u] = _mm512_setzero_ps();
    }
    int64_t c = 0;
    for (; c + 16 * U <= cols; c += 16 * U) {
        if constexpr (Prefetch) {
            SL_UNROLL
            for (int i = 0; i < R; ++i) prefetch_span<16 * U * sizeof(E), Prefetch>(pf + i * rb, c * static_cast<int64_t>(sizeof(E)));
        }
        __m512 xv[U];
        SL_UNROLL
        for (int u = 0; u < U; ++u) xv[u] = _mm512_loadu_ps(x + c + 16 * u);
        SL_UNROLL
        for (int i = 0; i < R; ++i) {
            SL_UNROLL
            for (int u = 0; u < U; ++u) a[i][u] = _mm512_fmadd_ps(L::load(row[i] + c + 16 * u), xv[u], a[i][u]);
        }
    }
    for (; c + 16 <= cols; c += 16) {
        const __m512 x0 = _mm512_loadu_ps(x + c);
        SL_UNROLL
        for (int i = 0; i < R; ++i) a[i][0] = _mm512_fmadd_ps(L::load(row[i] + c), x0, a[i][0]);
    }
    if (c < cols) {
        const __mmask16 m = static_cast<__mmask16>((1u << (cols - c)) - 1u);
        const __m512 x0 = _mm512_maskz_loadu_ps(m, x + c);
        SL_UNROLL
        for (int i = 0; i < R; ++i) a[i][1] = _mm512_fmadd_ps(L::load(row[i] + c, m), x0, a[i][1]);
    }
    SL_UNROLL
    for (int i = 0; i < R; ++i)
        y[i] = hsum512(_mm512_add_ps(_mm512_add_ps(a[i][0], a[i][1]), _mm512_add_ps(a[i][2], a[i][3])));
}

// [a x8 | b x8]: per-lane scales for two blocks processed in one zmm.
inline __m512 pair_scale(float a, float b) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(a)), _mm256_set1_ps(b), 1);
}

// Q8_0 weights, two blocks per zmm. maddubs needs an unsigned operand: |w| times x with w's sign.
struct q8_block {
    static constexpr int64_t bytes = sizeof(block_q8_0);
    static constexpr bool offset = false;
    static constexpr bool arranges_x = false;  // arrange_x is the identity
    // fp16 scales of the 8 blocks at p (272 bytes) as f32: two word permutes instead of 8 loads
    // (words 0, 17, 34, 51 of [p, p + 128) and of [p + 136, p + 264)).
    static __m256 scales8(const uint8_t* p) {
        const __m512i idx = _mm512_setr_epi32(0x00110000, 0x00330022, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
        const __m512i a = _mm512_permutex2var_epi16(_mm512_loadu_si512(p), idx, _mm512_loadu_si512(p + 64));
        const __m512i b = _mm512_permutex2var_epi16(_mm512_loadu_si512(p + 136), idx, _mm512_loadu_si512(p + 200));
        return _mm256_cvtph_ps(_mm_unpacklo_epi64(_mm512_castsi512_si128(a), _mm512_castsi512_si128(b)));
    }
    // 2 blocks of int dots (16 int32: 8 lanes per block) against 64 activation bytes.
    static __m512i pair_dot(const uint8_t* p, __m512i xq) {
        const auto* b = reinterpret_cast<const block_q8_0*>(p);
        const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[0].qs));
        const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[1].qs));
        const __m512i wq = _mm512_inserti64x4(_mm512_castsi256_si512(w0), w1, 1);
        const __m512i sx = _mm512_mask_sub_epi8(xq, _mm512_movepi8_mask(wq), _mm512_setzero_si512(), xq);
#if defined(__AVX512VNNI__)  // same lanes: no pair sum can saturate int16 (|w| <= 128, |x| <= 127)
        return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(wq), sx);
#else
        return _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(wq), sx), _mm512_set1_epi16(1));
#endif
    }
    static void arrange_x(__m512i (&)[4]) {}
    // 8 blocks at p against xq (2 blocks per zmm) with dd = their 8 combined scales.
    static void dot8(const uint8_t* p, const __m512i (&xq)[4], __m256 dd, __m512 (&acc)[2]) {
        const __m512i pidx[4] = {
            _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
            _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3),
            _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5),
            _mm512_setr_epi32(6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7),
        };
        const __m512 d = _mm512_castps256_ps512(dd);
        SL_UNROLL
        for (int k = 0; k < 4; ++k) {
            const __m512 prod = _mm512_cvtepi32_ps(pair_dot(p + 2 * k * bytes, xq[k]));
            acc[k & 1] = _mm512_fmadd_ps(prod, _mm512_permutexvar_ps(pidx[k], d), acc[k & 1]);
        }
    }
    static __m256i one_dot(const uint8_t* p, __m256i xq) {
        const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
        const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(xq, wq));
        return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
    }
};

// Byte i of four consecutive Q4_0 blocks' quants: lane k of gather4 takes block k's 16 bytes (after its scale).
constexpr std::array<uint8_t, 64> k_q4_gather_idx = [] {
    std::array<uint8_t, 64> a{};
    for (int i = 0; i < 64; ++i) a[i] = static_cast<uint8_t>(2 + static_cast<int>(sizeof(block_q4_0)) * (i / 16) + i % 16);
    return a;
}();

// Q4_0 weights: unsigned nibbles straight into maddubs; the -8 offset returns via s[] = d*sum(q).
struct q4_block {
    static constexpr int64_t bytes = sizeof(block_q4_0);
    static constexpr bool offset = true;  // stored nibble n means n - 8
    static constexpr bool arranges_x = true;
    // fp16 scales of the 8 blocks at p (144 bytes; all 8 lie in the first 128: words 0, 9, ..., 63) as f32.
    static __m256 scales8(const uint8_t* p) {
        const __m512i idx =
            _mm512_setr_epi32(0x00090000, 0x001b0012, 0x002d0024, 0x003f0036, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
        const __m512i v = _mm512_permutex2var_epi16(_mm512_loadu_si512(p), idx, _mm512_loadu_si512(p + 64));
        return _mm256_cvtph_ps(_mm512_castsi512_si128(v));
    }
    static __m512i pair_dot(const uint8_t* p, __m512i xq) {
        const auto* b = reinterpret_cast<const block_q4_0*>(p);
        // 128-bit lanes [q0 q0 q1 q1]; lanes 1 and 3 shift right by 4 to expose the high nibbles.
        const __m512i shifts = _mm512_set_epi64(0x0004000400040004LL, 0x0004000400040004LL, 0, 0, 0x0004000400040004LL,
                                                0x0004000400040004LL, 0, 0);
        const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[0].qs));
        const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[1].qs));
        const __m512i raw = _mm512_castsi256_si512(_mm256_set_m128i(q1, q0));
        const __m512i dup = _mm512_shuffle_i64x2(raw, raw, _MM_SHUFFLE(1, 1, 0, 0));
        const __m512i nib = _mm512_and_si512(_mm512_srlv_epi16(dup, shifts), _mm512_set1_epi8(0x0f));
        return _mm512_madd_epi16(_mm512_maddubs_epi16(nib, xq), _mm512_set1_epi16(1));
    }
    // Four blocks' 16 quant bytes side by side (block b + k in 128-bit lane k); reads only [p, p + 72).
    static __m512i gather4(const uint8_t* p) {
#if defined(__AVX512VBMI__)
        const __m512i idx = _mm512_loadu_si512(k_q4_gather_idx.data());
        const __m512i tail = _mm512_zextsi128_si512(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 64)));
        return _mm512_permutex2var_epi8(_mm512_loadu_si512(p), idx, tail);
#else
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2)));
        v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 + bytes)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 + 2 * bytes)), 2);
        return _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 + 3 * bytes)), 3);
#endif
    }
    // Activations of 8 blocks regrouped to match gather4: xq[2h] holds elements 0-15 (the low nibbles)
    // of blocks 4h..4h+3, xq[2h+1] their elements 16-31 (the high nibbles). One shuffle per zmm,
    // shared by all rows of a step.
    static void arrange_x(__m512i (&xq)[4]) {
        const __m512i lo = _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13), hi = _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15);
        SL_UNROLL
        for (int h = 0; h < 4; h += 2) {
            const __m512i a = xq[h], b = xq[h + 1];
            xq[h] = _mm512_permutex2var_epi64(a, lo, b);
            xq[h + 1] = _mm512_permutex2var_epi64(a, hi, b);
        }
    }
    // 8 blocks, four per zmm: lane 4k + j of a half sums elements 4j..4j+3 and 16+4j..16+4j+3 of its
    // block k (exact: |sum| < 2^15 even before the int32 widening), then one f32 scale per block.
    // Half the shuffles and converts of the pair-wise path; VNNI and VBMI, where compiled in, give
    // the same integer lanes, so every variant of this kernel returns the same bits.
    static void dot8(const uint8_t* p, const __m512i (&xq)[4], __m256 dd, __m512 (&acc)[2]) {
        const __m512i m = _mm512_set1_epi8(0x0f);
        const __m512 d = _mm512_castps256_ps512(dd);
        SL_UNROLL
        for (int h = 0; h < 2; ++h) {
            const __m512i v = gather4(p + 4 * h * bytes);
            const __m512i lo = _mm512_and_si512(v, m), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m);
#if defined(__AVX512VNNI__)
            const __m512i dot =
                _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, xq[2 * h]), hi, xq[2 * h + 1]);
#else
            const __m512i dot = _mm512_madd_epi16(
                _mm512_add_epi16(_mm512_maddubs_epi16(lo, xq[2 * h]), _mm512_maddubs_epi16(hi, xq[2 * h + 1])),
                _mm512_set1_epi16(1));
#endif
            const __m512i sidx = _mm512_setr_epi32(4 * h, 4 * h, 4 * h, 4 * h, 4 * h + 1, 4 * h + 1, 4 * h + 1, 4 * h + 1,
                                                   4 * h + 2, 4 * h + 2, 4 * h + 2, 4 * h + 2, 4 * h + 3, 4 * h + 3,
                                                   4 * h + 3, 4 * h + 3);
            acc[h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(sidx, d), acc[h]);
        }
    }
    static __m256i one_dot(const uint8_t* p, __m256i xq) {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
        const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0f));
        return _mm256_madd_epi16(_mm256_maddubs_epi16(nib, xq), _mm256_set1_epi16(1));
    }
};

// Leftover block pair (blocks b, b+1 at p) with scalar scale conversion.
template <typename B>
inline __m512 pair_scaled(const uint8_t* p, __m512i xq, const q8_act* xa, int64_t b, float& corr) {
    const float dw0 = half_at(p), dw1 = half_at(p + B::bytes);
    if constexpr (B::offset) corr += dw0 * xa->s[b] + dw1 * xa->s[b + 1];
    return _mm512_mul_ps(_mm512_cvtepi32_ps(B::pair_dot(p, xq)), pair_scale(dw0 * xa->d[b], dw1 * xa->d[b + 1]));
}

// Leftover single block b at p, in 256-bit arithmetic.
template <typename B>
inline float one_scaled(const uint8_t* p, __m256i xq, const q8_act* xa, int64_t b, float& corr) {
    const float dw = half_at(p);
    if constexpr (B::offset) corr += dw * xa->s[b];
    return hsum256(_mm256_cvtepi32_ps(B::one_dot(p, xq))) * (dw * xa->d[b]);
}

// Integer-dot rows, 8 blocks per step: the 8 weight scales come from one permute, are combined
// with the activation scales in one multiply, and each block pair takes its lanes by a permute.
// Leftover pairs and an odd last block use the per-block path. Two accumulators per row.
// R, Prefetch and pf as for dot_rows.
// Arranged: xa->qs is already in arrange_x's order per whole step of 8 blocks (arranged_act below).
template <int R, typename B, int Prefetch, bool Arranged = false>
[[gnu::always_inline]] inline void quant_rows(const uint8_t* w, int64_t rb, int64_t cols, const q8_act* xa, float* y, const uint8_t* pf) {
    __m512 acc[R][2];
    __m256 corr_v[R];
    float corr[R], tail[R];
    SL_UNROLL
    for (int i = 0; i < R; ++i) {
        acc[i][0] = acc[i][1] = _mm512_setzero_ps();
        corr_v[i] = _mm256_setzero_ps();
        corr[i] = tail[i] = 0.0f;
    }
    const int64_t nb = cols / 32;
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        if constexpr (Prefetch) {
            SL_UNROLL
            for (int i = 0; i < R; ++i) prefetch_span<8 * B::bytes, Prefetch>(pf + i * rb, b * B::bytes);
        }
        __m512i xq[4];
        SL_UNROLL
        for (int k = 0; k < 4; ++k) xq[k] = _mm512_loadu_si512(xa->qs + (b + 2 * k) * 32);
        if constexpr (!Arranged) B::arrange_x(xq);
        const __m256 dx = _mm256_loadu_ps(xa->d + b);
        SL_UNROLL
        for (int i = 0; i < R; ++i) {
            const uint8_t* p = w + i * rb + b * B::bytes;
            const __m256 dw = B::scales8(p);
            if constexpr (B::offset) corr_v[i] = _mm256_fmadd_ps(dw, _mm256_loadu_ps(xa->s + b), corr_v[i]);
            B::dot8(p, xq, _mm256_mul_ps(dw, dx), acc[i]);
        }
    }
    for (; b + 2 <= nb; b += 2) {
        const __m512i xq = _mm512_loadu_si512(xa->qs + b * 32);
        SL_UNROLL
        for (int i = 0; i < R; ++i)
            acc[i][0] = _mm512_add_ps(acc[i][0], pair_scaled<B>(w + i * rb + b * B::bytes, xq, xa, b, corr[i]));
    }
    if (b < nb) {  // odd block count: the last block in 256-bit arithmetic
        const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa->qs + b * 32));
        SL_UNROLL
        for (int i = 0; i < R; ++i) tail[i] = one_scaled<B>(w + i * rb + b * B::bytes, xq, xa, b, corr[i]);
    }
    SL_UNROLL
    for (int i = 0; i < R; ++i) {
        const float dot = hsum512(_mm512_add_ps(acc[i][0], acc[i][1])) + tail[i];
        y[i] = B::offset ? dot - 8.0f * (hsum256(corr_v[i]) + corr[i]) : dot;
    }
}

// x's quants with B::arrange_x applied to every whole 256 elements (the rest copied as they are), in a
// grow-only thread_local buffer (valid until the thread's next call): `out` (d and s unchanged) serves the
// kernels that expect that order, quant_rows<..., true> for Q4_0 (its leftover blocks read the same
// offsets as before) and the Q4_K super-block dots (quant_rows_avx512.h). Q4_0's arrange_x is two
// cross-lane permutes per 256 activation bytes; per row and 8-block step it was a third of the row
// kernel's shuffles, once per call it is noise (a 4096-element x: 32 permutes, against 32 per row before).
// Same integer lanes, so the bits do not change.
template <typename B>
const q8_act* arranged_act(const q8_act* xa, int64_t cols, q8_act& out) {
    thread_local std::vector<int8_t> buf;
    if (buf.size() < static_cast<size_t>(cols)) buf.resize(static_cast<size_t>(cols));
    const int64_t whole = cols / 256 * 256;
    for (int64_t e = 0; e < whole; e += 256) {
        __m512i xq[4];
        SL_UNROLL
        for (int k = 0; k < 4; ++k) xq[k] = _mm512_loadu_si512(xa->qs + e + 64 * k);
        B::arrange_x(xq);
        SL_UNROLL
        for (int k = 0; k < 4; ++k) _mm512_storeu_si512(buf.data() + e + 64 * k, xq[k]);
    }
    std::memcpy(buf.data() + whole, xa->qs + whole, static_cast<size_t>(cols - whole));
    out = {buf.data(), xa->d, xa->s};
    return &out;
}

// The streaming gemv drivers over the row kernels above (rows_fn of dense_internal.h).
// Software prefetch of the single-row streaming kernels: the hardware prefetcher alone left F16/BF16
// rows at ~70% of the F32 byte rate (one thread); into L1 4 KiB ahead measured best of 1-8 KiB there.
// Into L2 8 KiB ahead is faster once the activations are not small (dense_internal.h, pf_mode).

// R rows per pass share each activation load; the streaming (Prefetch) form prefetches each of its
// rows ahead, the cached (multi-row) tiles do not, their leftover single rows into L1. Streaming gemv
// uses R = 1: the weights then form one sequential stream, which decoded ~30% faster from DRAM than
// 2- or 4-row passes although those are faster from L2.
template <int R, typename X, auto RowsR, auto Rows1, int Prefetch>
void rows_driver(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    const auto* x = static_cast<const X*>(xv);
    int64_t r = 0;
    for (; r + R <= n_rows; r += R) RowsR(w + r * rb, rb, cols, x, y + r, ahead<Prefetch>(w + r * rb));
    for (; r < n_rows; ++r) Rows1(w + r * rb, rb, cols, x, y + r, ahead<pf_l1>(w + r * rb));
}
template <int R, typename L, int Prefetch>
constexpr rows_fn rows_float = rows_driver<R, float, dot_rows<R, L, Prefetch>, dot_rows<1, L, pf_l1>, Prefetch>;
template <int R, typename B, int Prefetch>
void rows_quant_driver(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    if constexpr (B::arranges_x) {
        if (cols >= 256) {  // whole steps to arrange
            q8_act arranged;
            rows_driver<R, q8_act, quant_rows<R, B, Prefetch, true>, quant_rows<1, B, pf_l1, true>, Prefetch>(
                w, rb, n_rows, cols, arranged_act<B>(static_cast<const q8_act*>(xv), cols, arranged), y);
            return;
        }
    }
    rows_driver<R, q8_act, quant_rows<R, B, Prefetch>, quant_rows<1, B, pf_l1>, Prefetch>(w, rb, n_rows, cols, xv, y);
}
template <int R, typename B, int Prefetch>
constexpr rows_fn rows_quant = rows_quant_driver<R, B, Prefetch>;

// The sparse gathers' dots (dots_fn of sparse_internal.h) over quant_rows: x arranged once per call when
// the call's rows amortise it (4 and more; a single row would pay for the arrangement it saves).
template <typename B>
void quant_gather_dots(const uint8_t* const* rows, const uint8_t* const* pf, int64_t n, int64_t cols, const void* x,
                       float* y) {
    const auto* xa = static_cast<const q8_act*>(x);
    if constexpr (B::arranges_x) {
        if (n >= 4 && cols >= 256) {
            q8_act arranged;
            gather_dots<q8_act, quant_rows<1, B, pf_l2, true>, quant_rows<1, B, pf_none, true>>(
                rows, pf, n, cols, arranged_act<B>(xa, cols, arranged), y);
            return;
        }
    }
    gather_dots<q8_act, quant_rows<1, B, pf_l2>, quant_rows<1, B, pf_none>>(rows, pf, n, cols, xa, y);
}

// Streaming float rows: one row prefetched into L1 while x (f32) fits there beside the weight stream,
// else 4 rows sharing each x load, each prefetched into L1 (float_x_fits_l1, dense_internal.h); 8 rows
// side by side without prefetching where the CPU reads several streams faster (cpu_prefers_row_streams).
template <typename L>
void rows_float_stream(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* x, float* y) {
    if (cpu_prefers_row_streams()) {
        rows_float<8, L, pf_none>(w, rb, n_rows, cols, x, y);
    } else if (float_x_fits_l1(cols)) {
        rows_float<1, L, pf_l1>(w, rb, n_rows, cols, x, y);
    } else {
        rows_float<4, L, pf_l1>(w, rb, n_rows, cols, x, y);
    }
}

}  // namespace
}  // namespace sl::kernels::detail

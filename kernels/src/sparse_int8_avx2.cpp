// AVX2 input-sparse chunk kernels for Q8_0/Q4_0 input-major rows: the integer-dot arithmetic of
// sparse_vnni_avx512.cpp without VNNI, so the two ISAs give identical bits.
//
// Why: the f32 axpy (sparse_avx2.cpp) widens every weight to f32 and FMAs it, ~7 vector uops per 8
// weights, so on AVX2-only CPUs the input-sparse GEMV was compute-bound at 0.6-0.8x the dense
// quantized gemv. Same arithmetic as the VNNI chunk: per block b of 32 outputs and chunk of up to 32
// active channels i, c_ib = d_ib * x_i, S_b = max_i |c_ib| / 127, k_ib = round-to-even(c_ib * 127 /
// max_i |c_ib|) as int8, y_o = S_b * float(sum_i k_ib * q_io) (first chunk) or fma(S_b, float(sum), y_o).
// The sum is exact in int32, so how it is formed does not matter; here vpdpbusd is emulated with
// vpmaddubsw (u8 x s8 -> pairs summed into int16) and vpmaddwd (pairs -> int32): 4 channels' bytes of
// one output are interleaved into a dword by in-lane unpacks, so one coefficient dword serves 8 outputs.
//   Q4_0: nibbles n are unsigned; sum k (n - 8) = sum k n - 8 sum k. A pair is at most 2*15*127, so the
//         int16 lanes hold the whole chunk (8 groups: 30480) and are widened once per block.
//   Q8_0: signed weights: |w| times k with w's sign (pairs <= 2*128*127, no saturation), widened per group.
// Coefficients are formed 8 blocks at a time, vertically over the rows (no horizontal reductions): the
// fp16 scales are read with scalar loads, converted 8 per row — or, from rows in the x8 forms (Q8_0x8,
// Q4_0x8: a group's 8 scales side by side), with one 16-byte load per row: the Q4_0 chunk ran 12-14%
// faster than with the gathered scales (2048x8192, 1 and 2 threads, stop 21).
// Finite inputs only are guaranteed to match the VNNI kernel (NaN/inf coefficients may round apart).
#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "int8_coefs.h"
#include "sparse_internal.h"
#include "x8_layout.h"

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "sparse_int8_avx2.cpp needs -mavx2 -mfma -mf16c (kernels/CMakeLists.txt)"
#endif

#define SL_I8_UNROLL _Pragma("GCC unroll 8")

namespace sl::kernels::detail {
namespace {

constexpr int k_groups = k_chunk_rows / 4;              // channels go 4 to a dword
constexpr int k_step = 8;                               // blocks per coefficient step
static_assert(k_step == k_x8_blocks, "a coefficient step is one x8 group");

// Coefficients of k_step blocks: kq[g][b] = int8 coefficients of channels 4g..4g+3 (byte j = channel
// 4g + j) in block b, scale[b] = S_b, start[b] = the integer sum's offset term (Q4_0: -8 sum_i k_ib).
struct coef_step {
    alignas(32) uint32_t kq[k_groups][k_step];
    alignas(32) float scale[k_step];
    alignas(32) int32_t start[k_step];
};

// The fp16 scales of blocks [0, 8) at p (V::bytes apart) as f32: packed four to a 64-bit integer
// register with scalar loads, shifts and ors (integer pipes, which the dots leave idle), then
// converted. A vpgatherdd per row measured ~1.5x slower for the whole chunk on Zen 4, element
// inserts ~1.1x.
template <typename V>
inline __m256 scales8(const uint8_t* p) {
    if constexpr (V::x8) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const auto u16 = [&](int j) {
        uint16_t v;
        std::memcpy(&v, p + j * V::bytes, 2);
        return static_cast<uint64_t>(v);
    };
    uint64_t lo = u16(0) | u16(1) << 16 | u16(2) << 32 | u16(3) << 48;
    uint64_t hi = u16(4) | u16(5) << 16 | u16(6) << 32 | u16(7) << 48;
    // Keep the packing in integer registers: GCC otherwise rebuilds it from vector inserts and unpacks.
    __asm__("" : "+r"(lo), "+r"(hi));
    return _mm256_cvtph_ps(_mm_insert_epi64(_mm_cvtsi64_si128(static_cast<int64_t>(lo)), static_cast<int64_t>(hi), 1));
}

// Blocks [0, 8) at byte offset off of each row: c = d * x per row, 8 blocks per vector. Scales by
// scalar loads (a vpgatherdd per row measured ~1.5x slower for the whole chunk on Zen 4); four rows
// per step with their own running maxima in registers (max is exact in any order).
template <typename V>
void coefs8(coef_step& t, const uint8_t* const* r, const float* s, int nr, int64_t off) {
    alignas(32) float c[k_chunk_rows][k_step];
    __m256 mx[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256 sign = _mm256_set1_ps(-0.0f);
    int i = 0;
    for (; i + 4 <= nr; i += 4) {
        SL_I8_UNROLL
        for (int j = 0; j < 4; ++j) {
            const __m256 ci = _mm256_mul_ps(scales8<V>(r[i + j] + off), _mm256_set1_ps(s[i + j]));
            _mm256_store_ps(c[i + j], ci);
            mx[j] = _mm256_max_ps(mx[j], _mm256_andnot_ps(sign, ci));
        }
    }
    for (; i < nr; ++i) {
        const __m256 ci = _mm256_mul_ps(scales8<V>(r[i] + off), _mm256_set1_ps(s[i]));
        _mm256_store_ps(c[i], ci);
        mx[0] = _mm256_max_ps(mx[0], _mm256_andnot_ps(sign, ci));
    }
    const __m256 m = _mm256_max_ps(_mm256_max_ps(mx[0], mx[1]), _mm256_max_ps(mx[2], mx[3]));
    const __m256 nz = _mm256_cmp_ps(m, _mm256_setzero_ps(), _CMP_GT_OQ);
    const __m256 inv = _mm256_and_ps(nz, _mm256_div_ps(_mm256_set1_ps(127.0f), m));
    _mm256_store_ps(t.scale, _mm256_div_ps(m, _mm256_set1_ps(127.0f)));
    __m256i sum = _mm256_setzero_si256();
    // packs leave lane-wise [k0 b0-3, k1 b0-3, k2 b0-3, k3 b0-3 | b4-7]; gather each block's 4 bytes.
    const __m256i to_blocks = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5,
                                               9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    for (int g = 0; g * 4 < nr; ++g) {
        __m256i k[4];
        SL_I8_UNROLL
        for (int j = 0; j < 4; ++j) {
            const int row = 4 * g + j;
            k[j] = row < nr ? _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_load_ps(c[row]), inv)) : _mm256_setzero_si256();
            sum = _mm256_add_epi32(sum, k[j]);
        }
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(k[0], k[1]), _mm256_packs_epi32(k[2], k[3]));
        _mm256_store_si256(reinterpret_cast<__m256i*>(t.kq[g]), _mm256_shuffle_epi8(p, to_blocks));
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(t.start),
                       _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_mullo_epi32(sum, _mm256_set1_epi32(V::zero))));
}

// The 4 rows' 16 bytes at p[j] + off as dwords (byte j of a dword from row j): w0 holds bytes
// [0-3 | 8-11] of the rows, w1 bytes [4-7 | 12-15] (in-lane unpacks of broadcast loads).
inline void interleave16(const uint8_t* const* p, int64_t off, __m256i& w0, __m256i& w1) {
    const auto ld = [&](int j) {
        return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p[j] + off)));
    };
    const __m256i a = ld(0), b = ld(1), c = ld(2), d = ld(3);
    const __m256i ab = _mm256_blend_epi32(_mm256_unpacklo_epi8(a, b), _mm256_unpackhi_epi8(a, b), 0xf0);
    const __m256i cd = _mm256_blend_epi32(_mm256_unpacklo_epi8(c, d), _mm256_unpackhi_epi8(c, d), 0xf0);
    w0 = _mm256_unpacklo_epi16(ab, cd);
    w1 = _mm256_unpackhi_epi16(ab, cd);
}

// The low-nibble part shared by Q4_0 and Q6_0x8: one block's sums of k * nibble over the chunk's groups,
// int16 pairs in a0 (outputs 0-3 | 8-11), a1 (4-7 | 12-15), a2 (16-19 | 24-27), a3 (20-23 | 28-31);
// nibbles at byte off of each row. At most 16 channels per int16 lane (15 * 127 * 16 = 30480).
struct nibble_acc {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    inline void add(const uint8_t* const* r4, int64_t off, __m256i kv) {
        const __m256i m = _mm256_set1_epi8(0x0f);
        __m256i w0, w1;
        interleave16(r4, off, w0, w1);
        a0 = _mm256_add_epi16(a0, _mm256_maddubs_epi16(_mm256_and_si256(w0, m), kv));
        a1 = _mm256_add_epi16(a1, _mm256_maddubs_epi16(_mm256_and_si256(w1, m), kv));
        a2 = _mm256_add_epi16(a2, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(w0, 4), m), kv));
        a3 = _mm256_add_epi16(a3, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(w1, 4), m), kv));
    }
    // o[j] = outputs 8j..8j+7 as int32, plus start.
    inline void finish(int32_t start, __m256i* o) const {
        const __m256i one = _mm256_set1_epi16(1), st = _mm256_set1_epi32(start);
        const __m256i s0 = _mm256_add_epi32(_mm256_madd_epi16(a0, one), st);
        const __m256i s1 = _mm256_add_epi32(_mm256_madd_epi16(a1, one), st);
        const __m256i s2 = _mm256_add_epi32(_mm256_madd_epi16(a2, one), st);
        const __m256i s3 = _mm256_add_epi32(_mm256_madd_epi16(a3, one), st);
        o[0] = _mm256_permute2x128_si256(s0, s1, 0x20);
        o[1] = _mm256_permute2x128_si256(s0, s1, 0x31);
        o[2] = _mm256_permute2x128_si256(s2, s3, 0x20);
        o[3] = _mm256_permute2x128_si256(s2, s3, 0x31);
    }
};

// Q4_0: one block's integer sums for outputs [0-7], [8-15], [16-23], [24-31] of the chunk.
template <bool X8>
struct q4_ints : block_addressing<X8 ? dtype::q4_0x8 : dtype::q4_0> {
    static constexpr int32_t zero = 8;
    static constexpr bool pairs = X8;  // sums2 below
    static void sums(const uint8_t* const* r, int ng, int64_t b, const uint32_t* kq, int stride, int32_t start,
                     __m256i* o) {
        const int64_t off = q4_ints::qs_off(b);
        nibble_acc n;
        for (int g = 0; g < ng; ++g) n.add(r + 4 * g, off, _mm256_set1_epi32(static_cast<int32_t>(kq[g * stride])));
        n.finish(start, o);
    }

    // Q4_0x8 only: blocks b and b + 1 (b even, one x8 group: their 32 quant bytes are adjacent) at once,
    // o[0..3] block b's outputs and o[4..7] block b + 1's. 256-bit loads hold block b in the low lane and
    // b + 1 in the high one, so interleaving 4 rows into dwords takes 8 in-lane unpacks per 2 blocks,
    // where sums() spends 4 broadcast loads, 4 unpacks, 2 blends and 2 unpacks per block — all on the
    // two shuffle pipes, which bound it (llvm-mca, znver3: 8.2 cycles per group and block -> 5.4).
    // t: the coefficient step holding both blocks (t.kq[g][te], t.start[te]), te = b % k_step.
    static void sums2(const uint8_t* const* r, int ng, int64_t b, const coef_step& t, int te, __m256i* o) {
        static_assert(X8);
        const int64_t off = q4_ints::qs_off(b);
        const __m256i m = _mm256_set1_epi8(0x0f);
        const __m256i pick = _mm256_setr_epi32(te, te, te, te, te + 1, te + 1, te + 1, te + 1);
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
        for (int g = 0; g < ng; ++g) {
            const uint8_t* const* p = r + 4 * g;
            const auto ld = [&](int j) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[j] + off)); };
            const __m256i A = ld(0), B = ld(1), C = ld(2), D = ld(3);
            const __m256i abl = _mm256_unpacklo_epi8(A, B), abh = _mm256_unpackhi_epi8(A, B);
            const __m256i cdl = _mm256_unpacklo_epi8(C, D), cdh = _mm256_unpackhi_epi8(C, D);
            // Block b's coefficient dword in the low lane, b + 1's in the high one.
            const __m256i kv =
                _mm256_permutevar8x32_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(t.kq[g])), pick);
            // w: 4 rows' bytes at positions 4i..4i+3 as dwords; low nibbles are outputs 4i.., high 16 + 4i..
            const auto step = [&](__m256i w, __m256i& lo, __m256i& hi) {
                lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(_mm256_and_si256(w, m), kv));
                hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(w, 4), m), kv));
            };
            step(_mm256_unpacklo_epi16(abl, cdl), a0, a4);
            step(_mm256_unpackhi_epi16(abl, cdl), a1, a5);
            step(_mm256_unpacklo_epi16(abh, cdh), a2, a6);
            step(_mm256_unpackhi_epi16(abh, cdh), a3, a7);
        }
        const __m256i one = _mm256_set1_epi16(1);
        const __m256i st = _mm256_permutevar8x32_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(t.start)), pick);
        const auto fin = [&](__m256i a) { return _mm256_add_epi32(_mm256_madd_epi16(a, one), st); };
        const __m256i s0 = fin(a0), s1 = fin(a1), s2 = fin(a2), s3 = fin(a3);
        const __m256i s4 = fin(a4), s5 = fin(a5), s6 = fin(a6), s7 = fin(a7);
        o[0] = _mm256_permute2x128_si256(s0, s1, 0x20);
        o[1] = _mm256_permute2x128_si256(s2, s3, 0x20);
        o[2] = _mm256_permute2x128_si256(s4, s5, 0x20);
        o[3] = _mm256_permute2x128_si256(s6, s7, 0x20);
        o[4] = _mm256_permute2x128_si256(s0, s1, 0x31);
        o[5] = _mm256_permute2x128_si256(s2, s3, 0x31);
        o[6] = _mm256_permute2x128_si256(s4, s5, 0x31);
        o[7] = _mm256_permute2x128_si256(s6, s7, 0x31);
    }
};

// Q6_0x8 (types.h): q = nibble | hi << 4, so sum k q = sum k nibble + 16 sum k hi. The nibbles as Q4_0's;
// the high bits (8 bytes per row and block, byte k holding element k + 8i's in bits 2i..2i+1) are
// interleaved 4 rows to a dword with in-lane unpacks, and bit pair i is the block's outputs 8i..8i+7.
// A pair of 2-bit products is at most 2 * 3 * 127: int16 lanes hold the chunk.
struct q6_ints : block_addressing<dtype::q6_0x8> {
    static constexpr int32_t zero = 32;
    static constexpr bool pairs = false;
    static void sums(const uint8_t* const* r, int ng, int64_t b, const uint32_t* kq, int stride, int32_t start,
                     __m256i* o) {
        const x8_place pl = x8_block_place(dtype::q6_0x8, b);
        const int64_t off = pl.quants, hoff = pl.high;
        const __m256i m3 = _mm256_set1_epi8(3);
        nibble_acc n;
        __m256i h0 = _mm256_setzero_si256(), h1 = h0, h2 = h0, h3 = h0;
        for (int g = 0; g < ng; ++g) {
            const uint8_t* const* p = r + 4 * g;
            const __m256i kv = _mm256_set1_epi32(static_cast<int32_t>(kq[g * stride]));
            n.add(p, off, kv);
            const auto ld = [&](int i) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p[i] + hoff)); };
            const __m128i ab = _mm_unpacklo_epi8(ld(0), ld(1)), cd = _mm_unpacklo_epi8(ld(2), ld(3));
            const __m256i hv = _mm256_set_m128i(_mm_unpackhi_epi16(ab, cd), _mm_unpacklo_epi16(ab, cd));  // dword k: byte k
            h0 = _mm256_add_epi16(h0, _mm256_maddubs_epi16(_mm256_and_si256(hv, m3), kv));  // outputs 0-7
            h1 = _mm256_add_epi16(h1, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 2), m3), kv));
            h2 = _mm256_add_epi16(h2, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 4), m3), kv));
            h3 = _mm256_add_epi16(h3, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 6), m3), kv));
        }
        n.finish(start, o);
        const __m256i sixteen = _mm256_set1_epi16(16);
        o[0] = _mm256_add_epi32(o[0], _mm256_madd_epi16(h0, sixteen));
        o[1] = _mm256_add_epi32(o[1], _mm256_madd_epi16(h1, sixteen));
        o[2] = _mm256_add_epi32(o[2], _mm256_madd_epi16(h2, sixteen));
        o[3] = _mm256_add_epi32(o[3], _mm256_madd_epi16(h3, sixteen));
    }
};

// Q8_0: 32 signed bytes per row and block.
template <bool X8>
struct q8_ints : block_addressing<X8 ? dtype::q8_0x8 : dtype::q8_0> {
    static constexpr int32_t zero = 0;
    static constexpr bool pairs = false;
    static __m256i dot(__m256i w, __m256i kv) {
        return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(kv, w)),
                                 _mm256_set1_epi16(1));
    }
    static void sums(const uint8_t* const* r, int ng, int64_t block, const uint32_t* kq, int stride, int32_t,
                     __m256i* o) {
        const int64_t off = q8_ints::qs_off(block);
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
        for (int g = 0; g < ng; ++g) {
            const uint8_t* const* p = r + 4 * g;
            const auto ld = [&](int j) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[j] + off)); };
            const __m256i a = ld(0), b = ld(1), c = ld(2), d = ld(3);
            const __m256i t0 = _mm256_unpacklo_epi8(a, b),
                          t1 = _mm256_unpackhi_epi8(a, b);  // [0-7|16-23], [8-15|24-31]
            const __m256i t2 = _mm256_unpacklo_epi8(c, d), t3 = _mm256_unpackhi_epi8(c, d);
            const __m256i kv = _mm256_set1_epi32(static_cast<int32_t>(kq[g * stride]));
            a0 = _mm256_add_epi32(a0, dot(_mm256_unpacklo_epi16(t0, t2), kv));  // outputs 0-3 | 16-19
            a1 = _mm256_add_epi32(a1, dot(_mm256_unpackhi_epi16(t0, t2), kv));  // 4-7 | 20-23
            a2 = _mm256_add_epi32(a2, dot(_mm256_unpacklo_epi16(t1, t3), kv));  // 8-11 | 24-27
            a3 = _mm256_add_epi32(a3, dot(_mm256_unpackhi_epi16(t1, t3), kv));  // 12-15 | 28-31
        }
        o[0] = _mm256_permute2x128_si256(a0, a1, 0x20);
        o[1] = _mm256_permute2x128_si256(a2, a3, 0x20);
        o[2] = _mm256_permute2x128_si256(a0, a1, 0x31);
        o[3] = _mm256_permute2x128_si256(a2, a3, 0x31);
    }
};

template <bool Init>
inline void store_block(float* out, const __m256i* o, float scale) {
    const __m256 sv = _mm256_set1_ps(scale);
    SL_I8_UNROLL
    for (int j = 0; j < 4; ++j) {
        const __m256 f = _mm256_cvtepi32_ps(o[j]);
        if constexpr (Init) {
            _mm256_storeu_ps(out + 8 * j, _mm256_mul_ps(sv, f));
        } else {
            _mm256_storeu_ps(out + 8 * j, _mm256_fmadd_ps(sv, f, _mm256_loadu_ps(out + 8 * j)));
        }
    }
}

template <typename V, bool Init>
void chunk_run(float* acc, int n_rows, const uint8_t* const* rows, const float* s, int64_t n, const uint8_t* const* pf,
               int n_pf) {
    const uint8_t* r[k_chunk_rows];
    const int ng = (n_rows + 3) / 4;
    for (int i = 0; i < 4 * ng; ++i) r[i] = rows[i < n_rows ? i : 0];  // padding rows get k = 0
    const int64_t nb = n / 32;
    // The next chunk's rows go to L2 while this one is consumed (paced_prefetch), over nb blocks: whole
    // rows, or on Intel their heads, with row_ahead taking each row on in row (as the VNNI chunks).
    auto [prefetch, ahead] = chunk_prefetchers_for(pf, n_pf, nb * V::bytes, nb);
    coef_step t;
    if constexpr (V::pairs) {
        assert(nb % k_step == 0);  // the x8 forms' segments are whole groups (sparse_internal.h)
        for (int64_t b = 0; b < nb; b += 2) {
            const int te = static_cast<int>(b % k_step);
            ahead.upto(r, n_rows, (b + 2) * V::bytes);
            if (te == 0) coefs8<V>(t, r, s, n_rows, V::scale_off(b));
            prefetch.step();
            prefetch.step();
            __m256i o[8];
            V::sums2(r, ng, b, t, te, o);
            store_block<Init>(acc + b * 32, o, t.scale[te]);
            store_block<Init>(acc + b * 32 + 32, o + 4, t.scale[te + 1]);
        }
        return;
    }
    for (int64_t b = 0; b < nb; ++b) {
        const bool whole = nb - b / k_step * k_step >= k_step;  // b is in a whole step of 8 blocks
        if (!whole) {  // the last nb % 8 blocks (never in the x8 forms), each as entry 0
            coefs_one_block<V::zero>(t, 0, r, s, n_rows, V::scale_off(b));
        } else if (b % k_step == 0) {
            coefs8<V>(t, r, s, n_rows, V::scale_off(b));
        }
        const int te = whole ? static_cast<int>(b % k_step) : 0;
        ahead.upto(r, n_rows, (b + 1) * V::bytes);
        prefetch.step();
        __m256i o[4];
        V::sums(r, ng, b, &t.kq[0][te], k_step, t.start[te], o);
        store_block<Init>(acc + b * 32, o, t.scale[te]);
    }
}

template <typename V>
void chunk(float* acc, bool init, int n_rows, const uint8_t* const* rows, const float* s, int64_t n,
           const uint8_t* const* pf, int n_pf) {
    init ? chunk_run<V, true>(acc, n_rows, rows, s, n, pf, n_pf)
         : chunk_run<V, false>(acc, n_rows, rows, s, n, pf, n_pf);
}

}  // namespace

void add_int8_chunks_avx2(sparse_table& k) {
    k.chunk[static_cast<int>(dtype::q8_0)] = chunk<q8_ints<false>>;
    k.chunk[static_cast<int>(dtype::q4_0)] = chunk<q4_ints<false>>;
    add_int8_x8_chunks_avx2(k);
}

void add_int8_x8_chunks_avx2(sparse_table& k) {
    k.chunk[static_cast<int>(dtype::q8_0x8)] = chunk<q8_ints<true>>;
    k.chunk[static_cast<int>(dtype::q4_0x8)] = chunk<q4_ints<true>>;
    k.chunk[static_cast<int>(dtype::q6_0x8)] = chunk<q6_ints>;
}

}  // namespace sl::kernels::detail

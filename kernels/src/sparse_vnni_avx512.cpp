// AVX-512 VNNI + VBMI input-sparse kernels for Q8_0/Q4_0 input-major rows and their x8 forms
// (Q8_0x8, Q4_0x8, and Q6_0x8, the layout of Q6_K down matrices): integer dots (vpdpbusd) instead of
// widening every weight to f32, with the bits of the AVX2 chunks (sparse_int8_avx2.cpp) — the integer
// sums are exact and the coefficient and output arithmetic is the same.
//
// Why: the f32 axpy (sparse_avx512.cpp) spends ~7 vector uops per 32 weights (widen, mask/shift, two
// converts, two FMAs), so at density 1 the input-sparse GEMV ran at 0.44-0.56x the row-major Q4_0 gemv,
// which uses integer dots. Here, per output block b (32 outputs) and chunk of up to 32 active channels i,
// the coefficients c_ib = x_i * d_ib are quantized to int8 k_ib with one scale S_b = max_i |c_ib| / 127
// per (chunk, block) — the same kind of rounding as ggml's Q8 activation blocks, with the weight scale
// folded in — and y_o += S_b * sum_i k_ib * q_io runs as vpdpbusd: 4 channels' bytes interleaved into
// each dword by one byte permute, 64 multiply-adds per instruction, int32 sums kept in registers
// across the chunk. About 11 uops per 128 weights.
// The x8 forms ran on the AVX2 chunks until a machine with AVX-512 was here (stop 26). In L2, one
// thread, 256 x 2048 (/tmp harness over gemv_input_sparse): Q8_0x8 33 -> 44 GB/s, Q4_0x8 25 -> 29,
// Q6_0x8 20 -> 24; end to end at 50% DIP and TEAL gained 2-8 points of their ideal in 10 of 12 A/B
// pairs (docs/results.md, stop 26).
// Every quantity is a function of the chunk and the block only, so any split of the outputs gives
// identical bits (the scalar tail below rounds exactly like the vector path).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "row_dots_avx512.h"
#include "int8_coefs.h"
#include "sparse_internal.h"
#include "x8_layout.h"

#if !defined(__AVX512VNNI__) || !defined(__AVX512VBMI__)
#error "sparse_vnni_avx512.cpp needs -mavx512vnni -mavx512vbmi (kernels/CMakeLists.txt)"
#endif

namespace sl::kernels::detail {
namespace {

constexpr int k_groups = k_chunk_rows / 4;  // channels go 4 to a dword
constexpr int k_step = 8;                   // blocks per coefficient step

// Byte-permute tables built at compile time.
struct perm64 {
    alignas(64) uint8_t v[64];
};
// Q4_0: lane j holds row j's 16 bytes; dword o gathers byte o of each lane.
constexpr perm64 q4_perm() {
    perm64 p{};
    for (int o = 0; o < 16; ++o)
        for (int j = 0; j < 4; ++j) p.v[4 * o + j] = static_cast<uint8_t>(16 * j + o);
    return p;
}
// Q8_0: a = [row 0 | row 1], b = [row 2 | row 3] (32 bytes each); dword o gathers byte o + half of each row.
constexpr perm64 q8_perm(int half) {
    perm64 p{};
    for (int o = 0; o < 16; ++o)
        for (int j = 0; j < 4; ++j) p.v[4 * o + j] = static_cast<uint8_t>(32 * j + 16 * half + o);
    return p;
}
// 4 rows x 8 blocks of int8 coefficients -> dword b = the 4 rows' coefficients of block b.
constexpr perm64 coef_perm() {
    perm64 p{};
    for (int b = 0; b < 8; ++b)
        for (int j = 0; j < 4; ++j) p.v[4 * b + j] = static_cast<uint8_t>(8 * j + b);
    return p;
}
constexpr perm64 k_q4_perm = q4_perm(), k_q8_lo = q8_perm(0), k_q8_hi = q8_perm(1), k_coef_perm = coef_perm();

inline __m512i load_perm(const perm64& p) {
    return _mm512_load_si512(p.v);
}

// Stored weights as unsigned bytes, 4 rows' values of one output per dword: get() gives outputs 0-15
// of block b in lo and 16-31 in hi. Q4_0 nibbles n mean n - 8; Q8_0 bytes q are flipped to q + 128;
// Q6_0x8 values q = nibble | high bit pair << 4 mean q - 32.
// The fp16 scales of blocks [b, b + 8) of a row: from the x8 forms' group head with one 16-byte load,
// from Q8_0/Q4_0 blocks with two word permutes (q8_block/q4_block).
template <dtype T, typename Block>
struct vnni_rows : block_addressing<T> {
    static __m256 scales8(const uint8_t* row, int64_t b) {
        if constexpr (vnni_rows::x8) {
            return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + vnni_rows::scale_off(b))));
        } else {
            return Block::scales8(row + vnni_rows::scale_off(b));
        }
    }
};

template <dtype T>
struct q4_ints : vnni_rows<T, q4_block> {
    static constexpr int32_t zero = 8;
    static constexpr bool quads = T == dtype::q4_0x8;  // chunk_quads below
    static void get(const uint8_t* const* r, int64_t b, __m512i perm, __m512i, __m512i& lo, __m512i& hi) {
        const int64_t off = q4_ints::qs_off(b);
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[0] + off)));
        v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[1] + off)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[2] + off)), 2);
        v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[3] + off)), 3);
        const __m512i t = _mm512_permutexvar_epi8(perm, v);
        const __m512i m = _mm512_set1_epi8(0x0f);
        lo = _mm512_and_si512(t, m);
        hi = _mm512_and_si512(_mm512_srli_epi16(t, 4), m);
    }
};

template <dtype T>
struct q8_ints : vnni_rows<T, q8_block> {
    static constexpr int32_t zero = 128;
    static constexpr bool quads = false;
    static void get(const uint8_t* const* r, int64_t b, __m512i perm_lo, __m512i perm_hi, __m512i& lo, __m512i& hi) {
        const int64_t off = q8_ints::qs_off(b);
        const auto ld = [&](int j) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r[j] + off)); };
        const __m512i a = _mm512_inserti64x4(_mm512_castsi256_si512(ld(0)), ld(1), 1);
        const __m512i c = _mm512_inserti64x4(_mm512_castsi256_si512(ld(2)), ld(3), 1);
        const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
        lo = _mm512_xor_si512(_mm512_permutex2var_epi8(a, perm_lo, c), flip);
        hi = _mm512_xor_si512(_mm512_permutex2var_epi8(a, perm_hi, c), flip);
    }
};

// Q6_0x8's high bit pairs (x8_layout.h: byte k of a block's 8 holds element k + 8i's in bits 2i..2i+1):
// row j's 8 bytes at bytes 8j..8j+7, and dword o byte j <- byte o % 8 of row j.
constexpr perm64 q6_high_perm() {
    perm64 p{};
    for (int o = 0; o < 16; ++o)
        for (int j = 0; j < 4; ++j) p.v[4 * o + j] = static_cast<uint8_t>(8 * j + o % 8);
    return p;
}
constexpr perm64 k_q6_high_perm = q6_high_perm();

struct q6_ints : vnni_rows<dtype::q6_0x8, void> {
    static constexpr int32_t zero = 32;
    static constexpr bool quads = false;
    static void get(const uint8_t* const* r, int64_t b, __m512i perm, __m512i, __m512i& lo, __m512i& hi) {
        q4_ints<dtype::q6_0x8>::get(r, b, perm, perm, lo, hi);  // the low nibbles, laid out as Q4_0's
        const int64_t hoff = x8_block_place(dtype::q6_0x8, b).high;
        const auto ld = [&](int j) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(r[j] + hoff)); };
        const __m256i h4 = _mm256_set_m128i(_mm_unpacklo_epi64(ld(2), ld(3)), _mm_unpacklo_epi64(ld(0), ld(1)));
        const __m512i h = _mm512_permutexvar_epi8(load_perm(k_q6_high_perm), _mm512_castsi256_si512(h4));
        // Outputs 8i..8i+7 take bit pair i: lo holds outputs 0-15 (pairs 0, 1), hi 16-31 (pairs 2, 3).
        const __m512i sh_lo = _mm512_setr_epi64(0, 0, 0, 0, 0x0002000200020002LL, 0x0002000200020002LL,
                                                0x0002000200020002LL, 0x0002000200020002LL);
        const __m512i sh_hi = _mm512_add_epi16(sh_lo, _mm512_set1_epi16(4));
        const __m512i m3 = _mm512_set1_epi8(3);
        lo = _mm512_or_si512(lo, _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(h, sh_lo), m3), 4));
        hi = _mm512_or_si512(hi, _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(h, sh_hi), m3), 4));
    }
};

// Coefficients of one step of K blocks: kq[g][e] = the int8 coefficients of channels 4g..4g+3 in
// block e of the step, scale[e] = S, start[e] = -zero * sum_i k_ie (the unsigned weights' offset, exact).
template <int K>
struct coef_step {
    alignas(64) uint32_t kq[k_groups][K];
    alignas(64) float scale[K];
    alignas(64) int32_t start[K];
    alignas(64) float c[k_chunk_rows][K];
};
using coef_tables = coef_step<k_step>;

// Blocks [b, b + 8) from the fp16 scales of each row.
template <typename V>
void coefs8(coef_tables& t, const uint8_t* const* r, const float* s, int nr, int64_t b) {
    // Four running maxima (max is exact in any order): one chain through 32 rows' maxps bound the loop
    // (12% of the Q4_0x8 chunk's samples sat at its end).
    __m256 mxs[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const auto one = [&](int row, __m256& m) {
        const __m256 c = _mm256_mul_ps(V::scales8(r[row], b), _mm256_set1_ps(s[row]));
        _mm256_store_ps(t.c[row], c);
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, c));
    };
    int row0 = 0;
    for (; row0 + 4 <= nr; row0 += 4) {
        one(row0, mxs[0]);
        one(row0 + 1, mxs[1]);
        one(row0 + 2, mxs[2]);
        one(row0 + 3, mxs[3]);
    }
    for (; row0 < nr; ++row0) one(row0, mxs[0]);
    const __m256 mx = _mm256_max_ps(_mm256_max_ps(mxs[0], mxs[1]), _mm256_max_ps(mxs[2], mxs[3]));
    const __mmask8 nz = _mm256_cmp_ps_mask(mx, _mm256_setzero_ps(), _CMP_GT_OQ);
    const __m256 inv = _mm256_maskz_div_ps(nz, _mm256_set1_ps(127.0f), mx);
    _mm256_store_ps(t.scale, _mm256_div_ps(mx, _mm256_set1_ps(127.0f)));
    __m256i sum = _mm256_setzero_si256();
    const __m256i perm = _mm512_castsi512_si256(load_perm(k_coef_perm));
    for (int g = 0; g * 4 < nr; ++g) {
        __m128i q[4];
        for (int j = 0; j < 4; ++j) {
            const int i = 4 * g + j;
            const __m256i k = i < nr ? _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_load_ps(t.c[i]), inv))
                                     : _mm256_setzero_si256();
            sum = _mm256_add_epi32(sum, k);
            q[j] = _mm256_cvtsepi32_epi8(k);  // 8 bytes
        }
        const __m256i rows = _mm256_set_m128i(_mm_unpacklo_epi64(q[2], q[3]), _mm_unpacklo_epi64(q[0], q[1]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(t.kq[g]), _mm256_permutexvar_epi8(perm, rows));
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(t.start), _mm256_sub_epi32(_mm256_setzero_si256(),
                                                                                  _mm256_mullo_epi32(sum, _mm256_set1_epi32(V::zero))));
}

// 16 byte coefficients of 4 rows (128-bit lane j = row j) -> dword e = the 4 rows' coefficients of block e.
constexpr perm64 coef16_perm() {
    perm64 p{};
    for (int e = 0; e < 16; ++e)
        for (int j = 0; j < 4; ++j) p.v[4 * e + j] = static_cast<uint8_t>(16 * j + e);
    return p;
}
constexpr perm64 k_coef16_perm = coef16_perm();

// coefs8 for the 16 blocks [b, b + 16) of x8 rows (two groups' scale heads) in zmm: per lane the same
// operations, so the same coefficients, in about two thirds of the instructions of two coefs8 calls.
// (Its row loop repeats coefs8's: a shared always-inline helper for the four maxima measured slower
// in 3 of 4 alternating runs of the input-sparse kernel, for 2 instructions' difference.)
template <typename V>
void coefs16(coef_step<16>& t, const uint8_t* const* r, const float* s, int nr, int64_t b) {
    static_assert(V::x8, "two scale heads of 8 blocks");
    __m512 mxs[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    const int64_t o0 = V::scale_off(b), o1 = V::scale_off(b + 8);
    const auto one = [&](int row, __m512& m) {
        const __m128i h0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[row] + o0));
        const __m128i h1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[row] + o1));
        const __m512 c = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_set_m128i(h1, h0)), _mm512_set1_ps(s[row]));
        _mm512_store_ps(t.c[row], c);
        m = _mm512_max_ps(m, _mm512_abs_ps(c));
    };
    int row0 = 0;
    for (; row0 + 4 <= nr; row0 += 4) {
        one(row0, mxs[0]);
        one(row0 + 1, mxs[1]);
        one(row0 + 2, mxs[2]);
        one(row0 + 3, mxs[3]);
    }
    for (; row0 < nr; ++row0) one(row0, mxs[0]);
    const __m512 mx = _mm512_max_ps(_mm512_max_ps(mxs[0], mxs[1]), _mm512_max_ps(mxs[2], mxs[3]));
    const __mmask16 nz = _mm512_cmp_ps_mask(mx, _mm512_setzero_ps(), _CMP_GT_OQ);
    const __m512 inv = _mm512_maskz_div_ps(nz, _mm512_set1_ps(127.0f), mx);
    _mm512_store_ps(t.scale, _mm512_div_ps(mx, _mm512_set1_ps(127.0f)));
    __m512i sum = _mm512_setzero_si512();
    const __m512i perm = load_perm(k_coef16_perm);
    for (int g = 0; g * 4 < nr; ++g) {
        __m128i q[4];
        for (int j = 0; j < 4; ++j) {
            const int i = 4 * g + j;
            const __m512i k = i < nr ? _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(t.c[i]), inv))
                                     : _mm512_setzero_si512();
            sum = _mm512_add_epi32(sum, k);
            q[j] = _mm512_cvtsepi32_epi8(k);  // 16 bytes
        }
        const __m512i rows = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_set_m128i(q[1], q[0])), _mm256_set_m128i(q[3], q[2]), 1);
        _mm512_store_si512(t.kq[g], _mm512_permutexvar_epi8(perm, rows));
    }
    const __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_mullo_epi32(sum, _mm512_set1_epi32(V::zero)));
    _mm512_store_si512(t.start, start);
}

// The coefficients of the K blocks from b (K = 16: x8 forms only).
template <typename V, int K>
void coefs_step(coef_step<K>& t, const uint8_t* const* r, const float* s, int nr, int64_t b) {
    if constexpr (K == 16) {
        coefs16<V>(t, r, s, nr, b);
    } else {
        coefs8<V>(t, r, s, nr, b);
    }
}

// Block j's 32 results of a step, as get()'s lo/hi, stored or added into out.
inline void store_block(float* out, bool init, float scale, __m512i lo, __m512i hi) {
    const __m512 sv = _mm512_set1_ps(scale);
    if (init) {
        _mm512_storeu_ps(out, _mm512_mul_ps(sv, _mm512_cvtepi32_ps(lo)));
        _mm512_storeu_ps(out + 16, _mm512_mul_ps(sv, _mm512_cvtepi32_ps(hi)));
    } else {
        _mm512_storeu_ps(out, _mm512_fmadd_ps(sv, _mm512_cvtepi32_ps(lo), _mm512_loadu_ps(out)));
        _mm512_storeu_ps(out + 16, _mm512_fmadd_ps(sv, _mm512_cvtepi32_ps(hi), _mm512_loadu_ps(out + 16)));
    }
}

// Q4_0x8, four blocks per step: a row's 4 consecutive blocks are 64 contiguous quant bytes (block j in
// 128-bit lane j), and in-lane byte/word unpacks of 4 rows put each byte position's 4 channels in a
// dword for all 4 blocks at once — 8 unpacks and one coefficient permute per 4 rows and 4 blocks, where
// get() spends 3 inserts and a byte permute per block (the shuffle ports bound both). Accumulator w
// holds bytes 4w..4w+3 of each block (outputs 4w.. from the low nibbles, 16 + 4w.. from the high);
// a 4x4 transpose of 128-bit lanes gives each block's outputs in order. Q4_0x8 in L2, one thread
// (256 x 2048): 25.8 -> 28.9 GB/s, 30.8 with the high nibbles dotted in place (AVX2: 24.7).
// K: blocks per coefficient step (16 where nb allows: coefs16).
template <typename V, int K>
void chunk_quads(float* acc, bool init, int ng, const uint8_t* const* r, const float* s, int n_rows, int64_t b0,
                 int64_t nb, paced_prefetch& prefetch, row_ahead& ahead) {
    coef_step<K> t;
    const __m512i lane_of = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m512i m = _mm512_set1_epi8(0x0f);
    for (int64_t b = b0; b < nb; b += 4) {
        const int te = static_cast<int>((b - b0) % K);
        ahead.upto(r, n_rows, (b + 4) * V::bytes);
        if (te == 0) coefs_step<V, K>(t, r, s, n_rows, b);
        for (int j = 0; j < 4; ++j) prefetch.step();
        const __m512i st = _mm512_permutexvar_epi32(
            lane_of, _mm512_castsi128_si512(_mm_load_si128(reinterpret_cast<const __m128i*>(t.start + te))));
        // The high nibbles stay in place (weights 16n): their sums are 16x the value, started at 16x the
        // offset term and shifted back exactly at the end (all terms are multiples of 16; |16 sum| <
        // 2^21), one shift per 4 blocks instead of one per 4 rows and 4 blocks. Nor are the low nibbles
        // masked: lo[] dots the whole bytes (low + 16 high, unsigned), so it holds the low sum plus the
        // high one's 16x (started at st + 16 st), and one subtraction per 4 blocks takes that out exactly
        // (|lo| < 2^21): an AND fewer per 4 rows and 4 blocks, the same integers. L2, one thread, 2048
        // outputs x 256 channels, builds alternating x8: 19.7-21.0 -> 20.5-21.7 GB/s; DIP's gate/up stage
        // on l1b Q4_0 over dense's 0.69-0.74 -> 0.67-0.69 (x3).
        const __m512i st16 = _mm512_slli_epi32(st, 4), st17 = _mm512_add_epi32(st, st16);
        __m512i lo[4] = {st17, st17, st17, st17}, hi[4] = {st16, st16, st16, st16};
        const int64_t off = V::qs_off(b);
        for (int g = 0; g < ng; ++g) {
            const uint8_t* const* p = r + 4 * g;
            const __m512i A = _mm512_loadu_si512(p[0] + off), B = _mm512_loadu_si512(p[1] + off);
            const __m512i C = _mm512_loadu_si512(p[2] + off), D = _mm512_loadu_si512(p[3] + off);
            const __m512i abl = _mm512_unpacklo_epi8(A, B), abh = _mm512_unpackhi_epi8(A, B);
            const __m512i cdl = _mm512_unpacklo_epi8(C, D), cdh = _mm512_unpackhi_epi8(C, D);
            const __m512i w[4] = {_mm512_unpacklo_epi16(abl, cdl), _mm512_unpackhi_epi16(abl, cdl),
                                  _mm512_unpacklo_epi16(abh, cdh), _mm512_unpackhi_epi16(abh, cdh)};
            const __m512i kv = _mm512_permutexvar_epi32(
                lane_of, _mm512_castsi128_si512(_mm_load_si128(reinterpret_cast<const __m128i*>(t.kq[g] + te))));
            for (int k = 0; k < 4; ++k) {
                lo[k] = _mm512_dpbusd_epi32(lo[k], w[k], kv);
                hi[k] = _mm512_dpbusd_epi32(hi[k], _mm512_andnot_si512(m, w[k]), kv);
            }
        }
        // Lane j of a[0..3] -> block j's 16 outputs in order.
        const auto transpose = [](const __m512i (&a)[4], __m512i (&o)[4]) {
            const __m512i t0 = _mm512_shuffle_i32x4(a[0], a[1], _MM_SHUFFLE(1, 0, 1, 0));
            const __m512i t1 = _mm512_shuffle_i32x4(a[2], a[3], _MM_SHUFFLE(1, 0, 1, 0));
            const __m512i t2 = _mm512_shuffle_i32x4(a[0], a[1], _MM_SHUFFLE(3, 2, 3, 2));
            const __m512i t3 = _mm512_shuffle_i32x4(a[2], a[3], _MM_SHUFFLE(3, 2, 3, 2));
            o[0] = _mm512_shuffle_i32x4(t0, t1, _MM_SHUFFLE(2, 0, 2, 0));
            o[1] = _mm512_shuffle_i32x4(t0, t1, _MM_SHUFFLE(3, 1, 3, 1));
            o[2] = _mm512_shuffle_i32x4(t2, t3, _MM_SHUFFLE(2, 0, 2, 0));
            o[3] = _mm512_shuffle_i32x4(t2, t3, _MM_SHUFFLE(3, 1, 3, 1));
        };
        for (int k = 0; k < 4; ++k) {
            lo[k] = _mm512_sub_epi32(lo[k], hi[k]);
            hi[k] = _mm512_srai_epi32(hi[k], 4);
        }
        __m512i ol[4], oh[4];
        transpose(lo, ol);
        transpose(hi, oh);
        for (int j = 0; j < 4; ++j) store_block(acc + (b + j) * 32, init, t.scale[te + j], ol[j], oh[j]);
    }
}

// One block of 32 outputs per step (get()), coefficients K blocks at a time.
template <typename V, int K>
void chunk_blocks(float* acc, bool init, int ng, const uint8_t* const* r, const float* s, int n_rows, int64_t b0,
                  int64_t nb, paced_prefetch& prefetch, row_ahead& ahead) {
    constexpr bool q8 = V::zero == 128;
    const __m512i perm_a = load_perm(q8 ? k_q8_lo : k_q4_perm);
    const __m512i perm_b = load_perm(k_q8_hi);
    coef_step<K> t;
    for (int64_t b = b0; b < nb; ++b) {
        // Coefficients K blocks at a time, just before their blocks, so the scales' cache misses overlap
        // the dots (a pass over 128 blocks' scales first ran DIP and TEAL end to end ~10 points of
        // their ideal slower on the x8 forms, whose scales sit in every group's head line).
        const int64_t e = b - b0;
        const bool whole = nb - b0 - e / K * K >= K;  // b is in a whole step of K blocks
        if (!whole) {  // the last nb % 8 blocks (never in the x8 forms), each as entry 0
            coefs_one_block<V::zero>(t, 0, r, s, n_rows, V::scale_off(b));
        } else if (e % K == 0) {
            coefs_step<V, K>(t, r, s, n_rows, b);
        }
        const int te = whole ? static_cast<int>(e % K) : 0;
        ahead.upto(r, n_rows, (b + 1) * V::bytes);
        prefetch.step();
        __m512i a0 = _mm512_set1_epi32(t.start[te]), a1 = a0;
        for (int g = 0; g < ng; ++g) {
            __m512i lo, hi;
            V::get(r + 4 * g, b, perm_a, perm_b, lo, hi);
            const __m512i kv = _mm512_set1_epi32(static_cast<int32_t>(t.kq[g][te]));
            a0 = _mm512_dpbusd_epi32(a0, lo, kv);
            a1 = _mm512_dpbusd_epi32(a1, hi, kv);
        }
        store_block(acc + b * 32, init, t.scale[te], a0, a1);
    }
}

template <typename V>
void chunk(float* acc, bool init, int n_rows, const uint8_t* const* rows, const float* s, int64_t n,
           const uint8_t* const* pf, int n_pf) {
    const uint8_t* r[k_chunk_rows];
    const int ng = (n_rows + 3) / 4;
    for (int i = 0; i < 4 * ng; ++i) r[i] = rows[i < n_rows ? i : 0];  // padding rows get k = 0
    const int64_t nb = n / 32;
    // The next chunk's rows: their first row_ahead::k_row_ahead bytes go to L2 while this one is consumed
    // (paced_prefetch; whole rows until stop 48), and row_ahead takes each row on from there into L1 as it
    // is read. For the whole rows into L2, T1 had beaten T0/T2/none (d = 1, 4096x14336 Q4_0, one thread:
    // 2.3 / ~3.5 / 3.1 / ~4 ms, stop 26's Zen 4). Heads + rows ahead, in-process A/B against whole rows
    // (Xeon, 2 threads, `bench kernels`, medians of 5, 1152 / 3168 / 2304-byte rows at d = 0.3, 0.5, 1,
    // GB/s): Q4_0x8 14.1 -> 16.7, 16.0 -> 18.1, 20.8 -> 22.9; 17.3 -> 21.8, 18.4 -> 22.4, 19.4 -> 24.4;
    // 17.8 -> 23.7, 18.5 -> 23.5, 20.8 -> 25.9. Q8_0x8 and Q6_0x8 (Q4_K's down) gained 0-34%, the fused
    // MLP and the pairs 8-24%; DIP and TEAL end to end 11-15 points of their ideal (docs/results.md).
    // Elsewhere (AMD) whole rows into L2, as measured there (chunk_prefetchers_for).
    auto [prefetch, ahead] = chunk_prefetchers_for(pf, n_pf, nb * V::bytes, nb);
    // Coefficients of 16 blocks per pass over the x8 rows' whole pairs of groups (coefs16), 8 for an odd
    // last group. Q4_0x8 input-sparse, 4096x14336, 2 threads, builds alternating x3: 12.9-14.8 -> 14.9-18.2
    // GB/s. Panels of an odd number of groups (a 5632-output row is two of 11, llama-1b's gate and up
    // under DIP) ran all of theirs 8 at a time until stop 43: 16 for all but the last lifted the Q4_0x8
    // chunk from cache 22.6 -> 27.3 GB/s (one thread, 16 rows x 2816 outputs, /tmp harness).
    const int64_t nb16 = V::x8 ? nb / 16 * 16 : 0;
    if constexpr (V::quads) {  // nb: whole groups of 8 (x8 form)
        if (nb16 > 0) chunk_quads<V, 16>(acc, init, ng, r, s, n_rows, 0, nb16, prefetch, ahead);
        if (nb16 < nb) chunk_quads<V, k_step>(acc, init, ng, r, s, n_rows, nb16, nb, prefetch, ahead);
        return;
    }
    if constexpr (V::x8) {
        if (nb16 > 0) chunk_blocks<V, 16>(acc, init, ng, r, s, n_rows, 0, nb16, prefetch, ahead);
        if (nb16 < nb) chunk_blocks<V, k_step>(acc, init, ng, r, s, n_rows, nb16, nb, prefetch, ahead);
        return;
    }
    chunk_blocks<V, k_step>(acc, init, ng, r, s, n_rows, 0, nb, prefetch, ahead);
}

}  // namespace

void add_vnni_chunks(sparse_table& k) {
    if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512vbmi")) return;
    k.chunk[static_cast<int>(dtype::q8_0)] = chunk<q8_ints<dtype::q8_0>>;
    k.chunk[static_cast<int>(dtype::q4_0)] = chunk<q4_ints<dtype::q4_0>>;
    k.chunk[static_cast<int>(dtype::q8_0x8)] = chunk<q8_ints<dtype::q8_0x8>>;
    k.chunk[static_cast<int>(dtype::q4_0x8)] = chunk<q4_ints<dtype::q4_0x8>>;
    k.chunk[static_cast<int>(dtype::q6_0x8)] = chunk<q6_ints>;
}

}  // namespace sl::kernels::detail

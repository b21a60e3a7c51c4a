// AVX2 build of the layout encoders: a tile of 32 decoded rows transposed in 8x8 register blocks and
// each column written as one Q8_0 / Q4_0 / F16 / F32 block of the input-major copy, and whole Q8_0 / Q4_0
// rows (neuron bundles). Bit for bit the scalar reference encoders' arithmetic (convert.cpp: ggml's
// rounding), which tst_kernels_convert holds them to, NaN, Inf, signed zeros and ties included.
//
// Why: to_input_major runs when a method is attached (the GUI's method switch, every CLI run with a
// method) and went through a scalar gather of each column and the scalar encoder: 5 ns per weight for
// Q4_0 and 8 for Q8_0 on 2 threads, ~4 s for llama-1b's MLP and half a minute for an 8B model.
#include <immintrin.h>

#include <cstring>

#include "layout_internal.h"
#include "x8_layout.h"
#include "sparselens/kernels/kernels.h"

namespace sl::kernels::detail {
namespace {

// NaN lanes become 0, as to_int8 makes them, before any clamp or conversion.
inline __m256 nan_to_zero(__m256 v) { return _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q)); }

// to_int8 on lanes already free of NaN: clamp to [-128, 127], then truncate.
inline __m256i to_int8_lanes(__m256 v) {
    v = _mm256_min_ps(_mm256_set1_ps(127.0f), _mm256_max_ps(_mm256_set1_ps(-128.0f), v));
    return _mm256_cvttps_epi32(v);
}

// max over the lanes of |v[0..3]|, skipping NaN (the scalar loops never let a NaN win a comparison):
// max_ps returns its second operand when either is NaN, so the running maximum always goes second.
inline float abs_max(const __m256 v[4]) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int u = 0; u < 4; ++u) m = _mm256_max_ps(_mm256_andnot_ps(sign, v[u]), m);
    __m128 h = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    h = _mm_max_ps(_mm_movehl_ps(h, h), h);
    h = _mm_max_ss(_mm_movehdup_ps(h), h);
    return _mm_cvtss_f32(h);
}

// 32 int32 lanes (elements 0-7, 8-15, 16-23, 24-31) to 32 int8 in element order (values in range).
inline __m256i pack_bytes(const __m256i q[4]) {
    const __m256i p01 = _mm256_packs_epi32(q[0], q[1]);  // per 128-bit lane: 0-3 8-11 | 4-7 12-15
    const __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i b = _mm256_packs_epi16(p01, p23);      // lane-interleaved groups of 4
    return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// convert.cpp quantize_q8_0: d = amax / 127, q = round-half-away(x / d).
void block_q8_0_from(const __m256 v[4], block_q8_0* y) {
    const float amax = abs_max(v);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = fp32_to_fp16(d);
    const __m256 idv = _mm256_set1_ps(id), half = _mm256_set1_ps(0.5f), sign = _mm256_set1_ps(-0.0f);
    __m256i q[4];
    for (int u = 0; u < 4; ++u) {
        const __m256 s = _mm256_mul_ps(v[u], idv);
        // round() = trunc, plus one away from zero when the dropped part is at least a half (exact).
        const __m256 t = _mm256_round_ps(s, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(s, t));
        const __m256 away = _mm256_or_ps(_mm256_and_ps(s, sign), _mm256_set1_ps(1.0f));
        const __m256 r = _mm256_add_ps(t, _mm256_and_ps(away, _mm256_cmp_ps(frac, half, _CMP_GE_OQ)));
        q[u] = to_int8_lanes(nan_to_zero(r));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y->qs), pack_bytes(q));
}

// The first value of largest magnitude among v (0 when all |x| are 0 or NaN), as the scalar loops find it.
float signed_max(const __m256 v[4]) {
    const float amax = abs_max(v);
    float max = 0.0f;  // all |x| = 0 (or NaN): the scalar loop never updates its +0
    if (amax > 0.0f) {
        const __m256 sign = _mm256_set1_ps(-0.0f), a = _mm256_set1_ps(amax);
        for (int u = 0; u < 4; ++u) {
            const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, v[u]), a, _CMP_EQ_OQ));
            if (hit) {
                alignas(32) float lanes[8];
                _mm256_store_ps(lanes, v[u]);
                max = lanes[__builtin_ctz(static_cast<unsigned>(hit))];
                break;
            }
        }
    }
    return max;
}

// q = min(Top, max(0, int8(x * id + Off))) per lane, as convert.cpp's Q4_0 / Q6_0x8 encoders.
inline void biased_ints(const __m256 v[4], float id, float off, int32_t top, __m256i q[4]) {
    const __m256 idv = _mm256_set1_ps(id), offv = _mm256_set1_ps(off);
    for (int u = 0; u < 4; ++u) {
        const __m256i t = to_int8_lanes(nan_to_zero(_mm256_add_ps(_mm256_mul_ps(v[u], idv), offv)));
        q[u] = _mm256_min_epi32(_mm256_set1_epi32(top), _mm256_max_epi32(_mm256_setzero_si256(), t));
    }
}

// 16 bytes: byte j = (q_j & 15) | (q_{j+16} & 15) << 4 (Q4_0's nibble order).
inline void store_nibbles(const __m256i q[4], uint8_t* dst) {
    const __m256i m = _mm256_set1_epi32(15);
    const __m256i c0 = _mm256_or_si256(_mm256_and_si256(q[0], m), _mm256_slli_epi32(_mm256_and_si256(q[2], m), 4));
    const __m256i c1 = _mm256_or_si256(_mm256_and_si256(q[1], m), _mm256_slli_epi32(_mm256_and_si256(q[3], m), 4));
    const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(c0, c1), 0xd8);  // 16 words in order
    const __m256i b = _mm256_permute4x64_epi64(_mm256_packus_epi16(p, p), 0xd8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm256_castsi256_si128(b));
}

// convert.cpp quantize_q4_0: the first value of largest magnitude maps to -8; q = min(15, int8(x/d + 8.5)).
void block_q4_0_from(const __m256 v[4], block_q4_0* y) {
    const float max = signed_max(v);
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = fp32_to_fp16(d);
    __m256i q[4];
    biased_ints(v, id, 8.5f, 15, q);
    store_nibbles(q, y->qs);
}

// convert.cpp quantize_q6_0x8, block `slot` of the group at g: the first value of largest magnitude
// maps to -32; q = min(63, int8(x/d + 32.5)); nibbles as Q4_0's, high bit pairs byte k = q_{k+8i} >> 4
// in bits 2i..2i+1.
void block_q6_0x8_from(const __m256 v[4], uint8_t* g, int slot) {
    const x8_place p = x8_block_place(dtype::q6_0x8, slot);  // slot < 8: offsets within the group
    const float max = signed_max(v);
    const float d = max / -32.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = fp32_to_fp16(d);
    std::memcpy(g + p.scale, &h, 2);
    __m256i q[4];
    biased_ints(v, id, 32.5f, 63, q);
    store_nibbles(q, g + p.quants);
    __m256i hi = _mm256_srli_epi32(q[0], 4);
    for (int i = 1; i < 4; ++i) hi = _mm256_or_si256(hi, _mm256_slli_epi32(_mm256_srli_epi32(q[i], 4), 2 * i));
    const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1));  // 8 words
    _mm_storel_epi64(reinterpret_cast<__m128i*>(g + p.high), _mm_packus_epi16(w, w));
}

// One 32-element block of `type` at dst (Q6_0x8: dst is the group, slot the block's place in it).
void block_from(dtype type, const __m256 v[4], uint8_t* dst, int slot) {
    switch (type) {
        case dtype::q6_0x8: block_q6_0x8_from(v, dst, slot); break;
        case dtype::q8_0: block_q8_0_from(v, reinterpret_cast<block_q8_0*>(dst)); break;
        case dtype::q4_0: block_q4_0_from(v, reinterpret_cast<block_q4_0*>(dst)); break;
        case dtype::f16:
            for (int u = 0; u < 4; ++u)
                _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16 * u),
                                 _mm256_cvtps_ph(v[u], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            break;
        default:  // f32
            for (int u = 0; u < 4; ++u) _mm256_storeu_ps(reinterpret_cast<float*>(dst) + 8 * u, v[u]);
            break;
    }
}

// In-register transpose of an 8x8 float block: r[i] = row i in, column i out.
inline void transpose8(__m256 r[8]) {
    __m256 t[8];
    for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    __m256 s[8];
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
            const __m256 a = t[4 * i + j], b = t[4 * i + j + 2];
            s[4 * i + 2 * j] = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0));
            s[4 * i + 2 * j + 1] = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2));
        }
    // s: rows 0-3 combined in s[0..3], rows 4-7 in s[4..7]; columns (k, k+4) share a register.
    for (int k = 0; k < 4; ++k) {
        r[k] = _mm256_permute2f128_ps(s[k], s[k + 4], 0x20);
        r[k + 4] = _mm256_permute2f128_ps(s[k], s[k + 4], 0x31);
    }
}

}  // namespace

void encode_tile_columns_avx2(const float* tile, int64_t ld, int64_t ncols, dtype type, uint8_t* dst,
                              int64_t dst_stride, int slot) {
    int64_t c = 0;
    for (; c + 8 <= ncols; c += 8) {
        __m256 col[8][4];  // [column][8-row group]
        for (int g = 0; g < 4; ++g) {
            __m256 r[8];
            for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(tile + (8 * g + i) * ld + c);
            transpose8(r);
            for (int k = 0; k < 8; ++k) col[k][g] = r[k];
        }
        for (int k = 0; k < 8; ++k) block_from(type, col[k], dst + (c + k) * dst_stride, slot);
    }
    for (; c < ncols; ++c) {
        alignas(32) float x[32];
        for (int r = 0; r < 32; ++r) x[r] = tile[r * ld + c];
        const __m256 v[4] = {_mm256_load_ps(x), _mm256_load_ps(x + 8), _mm256_load_ps(x + 16), _mm256_load_ps(x + 24)};
        block_from(type, v, dst + c * dst_stride, slot);
    }
}

void encode_row_avx2(dtype type, const float* src, uint8_t* dst, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* x = src + 32 * b;
        const __m256 v[4] = {_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8), _mm256_loadu_ps(x + 16), _mm256_loadu_ps(x + 24)};
        int slot = 0;
        block_from(type, v, dst + block_offset(type, b, slot), slot);
    }
}

int64_t block_offset(dtype type, int64_t b, int& slot) {
    if (dtype_block_elems(type) == 32 * k_x8_blocks) {  // Q6_0x8: the group, and the place in it
        slot = static_cast<int>(b % k_x8_blocks);
        return b / k_x8_blocks * dtype_block_bytes(type);
    }
    slot = 0;
    return dtype_row_bytes(type, 32 * b);
}

}  // namespace sl::kernels::detail

// Scalar decoders of ggml's block layouts into the common (q, a, b) form of quant_unpack.h.
#include "quant_unpack.h"

#include <cstring>

#include "sparselens/kernels/kernels.h"

namespace sl::kernels::detail {
namespace {

float half(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return fp16_to_fp32(h);
}

// The 16 values of a 32-granular scale (and minimum) as two entries each.
void fill32(float* a, int sub, float v) { a[2 * sub] = a[2 * sub + 1] = v; }

// Low nibbles are elements 0-15, high nibbles 16-31 of each 32-block (Q4_0/Q4_1/Q5_x/IQ4_NL).
void split_nibbles(const uint8_t* qs, int8_t* q, int add_hi_lo, int add_hi_hi) {
    for (int j = 0; j < 16; ++j) {
        q[j] = static_cast<int8_t>((qs[j] & 0x0f) + add_hi_lo);
        q[j + 16] = static_cast<int8_t>((qs[j] >> 4) + add_hi_hi);
    }
}

void unpack_q8_0(const uint8_t* blk, int8_t* q, float* a, float* b) {
    std::memcpy(q, blk + 2, 32);
    fill32(a, 0, half(blk));
    fill32(b, 0, 0.0f);
}

void unpack_q4_0(const uint8_t* blk, int8_t* q, float* a, float* b) {
    split_nibbles(blk + 2, q, -8, -8);
    fill32(a, 0, half(blk));
    fill32(b, 0, 0.0f);
}

void unpack_q4_1(const uint8_t* blk, int8_t* q, float* a, float* b) {
    split_nibbles(blk + 4, q, 0, 0);
    fill32(a, 0, half(blk));
    fill32(b, 0, half(blk + 2));
}

// Q5: the fifth bit of element j is bit j of the little-endian 32-bit qh.
void q5_values(const uint8_t* qh_bytes, const uint8_t* qs, int8_t* q, int offset) {
    uint32_t qh;
    std::memcpy(&qh, qh_bytes, 4);
    for (int j = 0; j < 16; ++j) {
        q[j] = static_cast<int8_t>(((qs[j] & 0x0f) | (((qh >> j) << 4) & 0x10)) - offset);
        q[j + 16] = static_cast<int8_t>(((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)) - offset);
    }
}

void unpack_q5_0(const uint8_t* blk, int8_t* q, float* a, float* b) {
    q5_values(blk + 2, blk + 6, q, 16);
    fill32(a, 0, half(blk));
    fill32(b, 0, 0.0f);
}

void unpack_q5_1(const uint8_t* blk, int8_t* q, float* a, float* b) {
    q5_values(blk + 4, blk + 8, q, 0);
    fill32(a, 0, half(blk));
    fill32(b, 0, half(blk + 2));
}

constexpr int8_t k_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

void iq4_values(const uint8_t* qs, int8_t* q) {
    for (int j = 0; j < 16; ++j) {
        q[j] = k_iq4nl_values[qs[j] & 0x0f];
        q[j + 16] = k_iq4nl_values[qs[j] >> 4];
    }
}

void unpack_iq4_nl(const uint8_t* blk, int8_t* q, float* a, float* b) {
    iq4_values(blk + 2, q);
    fill32(a, 0, half(blk));
    fill32(b, 0, 0.0f);
}

// IQ4_XS: 6-bit sub-block scales, low 4 bits in scales_l nibbles, high 2 bits in scales_h pairs.
void unpack_iq4_xs(const uint8_t* blk, int8_t* q, float* a, float* b) {
    const float d = half(blk);
    uint16_t sh;
    std::memcpy(&sh, blk + 2, 2);
    for (int ib = 0; ib < 8; ++ib) {
        const int ls = ((blk[4 + ib / 2] >> (4 * (ib % 2))) & 0x0f) | (((sh >> (2 * ib)) & 3) << 4);
        fill32(a, ib, d * static_cast<float>(ls - 32));
        fill32(b, ib, 0.0f);
        iq4_values(blk + 8 + 16 * ib, q + 32 * ib);
    }
}

// Q2_K: 2-bit values; in each 128-element half, bit pair s of byte l is element 32 s + l (l < 32).
void unpack_q2_k(const uint8_t* blk, int8_t* q, float* a, float* b) {
    const uint8_t* scales = blk;
    const uint8_t* qs = blk + 16;
    const float d = half(blk + 80), dmin = half(blk + 82);
    for (int j = 0; j < 16; ++j) {
        a[j] = d * static_cast<float>(scales[j] & 0x0f);
        b[j] = -(dmin * static_cast<float>(scales[j] >> 4));
    }
    for (int h = 0; h < 2; ++h)
        for (int s = 0; s < 4; ++s)
            for (int l = 0; l < 32; ++l) q[128 * h + 32 * s + l] = static_cast<int8_t>((qs[32 * h + l] >> (2 * s)) & 3);
}

// Q3_K: 2 low bits as Q2_K, a high bit in hmask (bit 4h+s of byte l, set means no -4), and 16 6-bit
// scales packed in 12 bytes (low nibbles in bytes 0-7, high bit pairs in bytes 8-11), offset by 32.
void unpack_q3_k(const uint8_t* blk, int8_t* q, float* a, float* b) {
    const uint8_t* hmask = blk;
    const uint8_t* qs = blk + 32;
    const uint8_t* sc = blk + 96;
    const float d = half(blk + 108);
    for (int j = 0; j < 16; ++j) {
        const int lo = j < 8 ? sc[j] & 0x0f : sc[j - 8] >> 4;
        const int hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
        a[j] = d * static_cast<float>(static_cast<int8_t>(lo | (hi << 4)) - 32);
        b[j] = 0.0f;
    }
    for (int h = 0; h < 2; ++h)
        for (int s = 0; s < 4; ++s)
            for (int l = 0; l < 32; ++l) {
                const int low = (qs[32 * h + l] >> (2 * s)) & 3;
                const bool high = hmask[l] & (1u << (4 * h + s));
                q[128 * h + 32 * s + l] = static_cast<int8_t>(low - (high ? 0 : 4));
            }
}

// Q4_K / Q5_K: 8 pairs of 6-bit (scale, min) packed in 12 bytes.
void scale_min_k4(int j, const uint8_t* s, int& sc, int& m) {
    if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

void k4_scales(const uint8_t* blk, float* a, float* b) {
    const float d = half(blk), dmin = half(blk + 2);
    for (int j = 0; j < 8; ++j) {
        int sc, m;
        scale_min_k4(j, blk + 4, sc, m);
        fill32(a, j, d * static_cast<float>(sc));
        fill32(b, j, -(dmin * static_cast<float>(m)));
    }
}

// Q4_K: each 32 bytes of qs hold two sub-blocks, low nibbles first.
void unpack_q4_k(const uint8_t* blk, int8_t* q, float* a, float* b) {
    k4_scales(blk, a, b);
    const uint8_t* qs = blk + 16;
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
            q[64 * c + l] = static_cast<int8_t>(qs[32 * c + l] & 0x0f);
            q[64 * c + 32 + l] = static_cast<int8_t>(qs[32 * c + l] >> 4);
        }
}

// Q5_K: as Q4_K plus a fifth bit, bit k of qh[l] for element 32 k + l.
void unpack_q5_k(const uint8_t* blk, int8_t* q, float* a, float* b) {
    k4_scales(blk, a, b);
    const uint8_t* qh = blk + 16;
    const uint8_t* qs = blk + 48;
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
            q[64 * c + l] = static_cast<int8_t>((qs[32 * c + l] & 0x0f) | (((qh[l] >> (2 * c)) & 1) << 4));
            q[64 * c + 32 + l] = static_cast<int8_t>((qs[32 * c + l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4));
        }
}

// Q6_K: per 128-element half, 64 bytes of nibbles and 32 of bit pairs; int8 scales per 16.
void unpack_q6_k(const uint8_t* blk, int8_t* q, float* a, float* b) {
    const float d = half(blk + 208);
    const auto* sc = reinterpret_cast<const int8_t*>(blk + 192);
    for (int j = 0; j < 16; ++j) {
        a[j] = d * static_cast<float>(sc[j]);
        b[j] = 0.0f;
    }
    for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = blk + 64 * h;
        const uint8_t* qh = blk + 128 + 32 * h;
        int8_t* o = q + 128 * h;
        for (int l = 0; l < 32; ++l) {
            o[l] = static_cast<int8_t>(((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32);
            o[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32);
            o[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            o[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

constexpr quant_traits k_none{};

}  // namespace

const quant_traits& quant_info(dtype t) {
    static const quant_traits table[n_dtypes] = {
        k_none,                            // f32
        k_none,                            // f16
        k_none,                            // bf16
        {unpack_q8_0, act_kind::q8_0, false, false},
        {unpack_q4_0, act_kind::q8_0, false, false},
        {unpack_q4_1, act_kind::q8_1, true, false},
        {unpack_q5_0, act_kind::q8_0, false, false},
        {unpack_q5_1, act_kind::q8_1, true, false},
        {unpack_q2_k, act_kind::q8_k, true, true},
        {unpack_q3_k, act_kind::q8_k, false, false},
        {unpack_q4_k, act_kind::q8_k, true, false},
        {unpack_q5_k, act_kind::q8_k, true, false},
        {unpack_q6_k, act_kind::q8_k, false, false},
        {unpack_iq4_nl, act_kind::q8_0, false, false},
        {unpack_iq4_xs, act_kind::q8_k, false, false},
        k_none,  // q8_0x8, q4_0x8, q6_0x8: input-major layouts, read by the chunk kernels only
        k_none,
        k_none,
        // q4_k_r8: Q4_K interleaved for the dense kernels, which take Q8_K activations; it has no block
        // decoder (gemm reads its rows back as Q4_K blocks, rows_x8_to_rows)
        {nullptr, act_kind::q8_k, true, false},
        {nullptr, act_kind::q8_0, false, false},  // q4_0_r8: Q4_0 interleaved, the same way
        {nullptr, act_kind::q8_0, false, false},  // q8_0_r8: Q8_0 interleaved, the same way
    };
    return table[static_cast<int>(t)];
}

float unpacked_dot(int64_t n, const int8_t* q, const float* a, const float* b, bool has_min, const int8_t* xq,
                   const float* xd) {
    float acc = 0.0f;
    for (int64_t j = 0; j < n / 16; ++j) {
        int32_t dot = 0, sum = 0;
        for (int i = 0; i < 16; ++i) {
            dot += int32_t{q[16 * j + i]} * xq[16 * j + i];
            sum += xq[16 * j + i];
        }
        const float dx = xd[j / 2];
        acc += a[j] * dx * static_cast<float>(dot);
        if (has_min) acc += b[j] * dx * static_cast<float>(sum);
    }
    return acc;
}

}  // namespace sl::kernels::detail

// Test-only double-precision decoders of ggml's block layouts, written in ggml's own loop order
// (independent of the library's (q, a, b) decoders), and random valid blocks of every type.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernel_test_util.h"

namespace sl::kernel_test {

// The block types beyond Q8_0/Q4_0 (issue 11).
inline const dtype k_new_types[] = {dtype::q4_1, dtype::q5_0, dtype::q5_1, dtype::q2_k, dtype::q3_k,
                                    dtype::q4_k, dtype::q5_k, dtype::q6_k, dtype::iq4_nl, dtype::iq4_xs};

inline double f16_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return half_value(h);
}

// Byte offsets of each type's fp16 fields (scales and minimums).
inline std::vector<int> half_fields(dtype t) {
    switch (t) {
        case dtype::q4_1: case dtype::q5_1: case dtype::q4_k: case dtype::q5_k: return {0, 2};
        case dtype::q2_k: return {80, 82};
        case dtype::q3_k: return {108};
        case dtype::q6_k: return {208};
        default: return {0};
    }
}

// Decodes one block of type t into out[0, block_elems).
inline void ref_decode_block(dtype t, const uint8_t* x, double* y) {
    static const int kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    switch (t) {
        case dtype::q4_1: case dtype::q5_0: case dtype::q5_1: {
            const bool five = t != dtype::q4_1, min = t != dtype::q5_0;
            const double d = f16_at(x), m = min ? f16_at(x + 2) : 0.0;
            const uint8_t* qs = x + (t == dtype::q4_1 ? 4 : t == dtype::q5_0 ? 6 : 8);
            uint32_t qh = 0;
            if (five) std::memcpy(&qh, x + (min ? 4 : 2), 4);
            for (int j = 0; j < 16; ++j) {
                int lo = qs[j] & 15, hi = qs[j] >> 4;
                if (five) {
                    lo += ((qh >> j) & 1) * 16;
                    hi += ((qh >> (j + 16)) & 1) * 16;
                }
                const int off = t == dtype::q5_0 ? 16 : 0;
                y[j] = d * (lo - off) + m;
                y[j + 16] = d * (hi - off) + m;
            }
            return;
        }
        case dtype::iq4_nl:
            for (int j = 0; j < 16; ++j) {
                y[j] = f16_at(x) * kv[x[2 + j] & 15];
                y[j + 16] = f16_at(x) * kv[x[2 + j] >> 4];
            }
            return;
        case dtype::iq4_xs: {
            uint16_t sh;
            std::memcpy(&sh, x + 2, 2);
            for (int ib = 0; ib < 8; ++ib) {
                const int ls = ((x[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (((sh >> (2 * ib)) & 3) << 4);
                const uint8_t* qs = x + 8 + 16 * ib;
                for (int j = 0; j < 16; ++j) {
                    y[32 * ib + j] = f16_at(x) * (ls - 32) * kv[qs[j] & 15];
                    y[32 * ib + j + 16] = f16_at(x) * (ls - 32) * kv[qs[j] >> 4];
                }
            }
            return;
        }
        case dtype::q2_k: {
            const uint8_t* q = x + 16;
            int is = 0;
            for (int n = 0; n < 256; n += 128, q += 32)
                for (int shift = 0; shift < 8; shift += 2)
                    for (int half = 0; half < 2; ++half, ++is)
                        for (int l = 0; l < 16; ++l)
                            *y++ = f16_at(x + 80) * (x[is] & 15) * ((q[l + 16 * half] >> shift) & 3) -
                                   f16_at(x + 82) * (x[is] >> 4);
            return;
        }
        case dtype::q3_k: {
            uint32_t aux[4];
            std::memcpy(aux, x + 96, 12);
            const uint32_t tmp = aux[2];
            aux[2] = ((aux[0] >> 4) & 0x0f0f0f0f) | (((tmp >> 4) & 0x03030303) << 4);
            aux[3] = ((aux[1] >> 4) & 0x0f0f0f0f) | (((tmp >> 6) & 0x03030303) << 4);
            aux[0] = (aux[0] & 0x0f0f0f0f) | (((tmp >> 0) & 0x03030303) << 4);
            aux[1] = (aux[1] & 0x0f0f0f0f) | (((tmp >> 2) & 0x03030303) << 4);
            int8_t sc[16];
            std::memcpy(sc, aux, 16);
            const uint8_t* q = x + 32;
            int is = 0, m = 1;
            for (int n = 0; n < 256; n += 128, q += 32)
                for (int shift = 0; shift < 8; shift += 2, m <<= 1)
                    for (int half = 0; half < 2; ++half, ++is)
                        for (int l = 16 * half; l < 16 * half + 16; ++l)
                            *y++ = f16_at(x + 108) * (sc[is] - 32) * (((q[l] >> shift) & 3) - ((x[l] & m) ? 0 : 4));
            return;
        }
        case dtype::q4_k: case dtype::q5_k: {
            const uint8_t* s = x + 4;
            const uint8_t* qh = x + 16;
            const uint8_t* ql = x + (t == dtype::q4_k ? 16 : 48);
            for (int j = 0; j < 8; ++j) {
                const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
                const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
                for (int l = 0; l < 32; ++l) {
                    int v = (j % 2 ? ql[32 * (j / 2) + l] >> 4 : ql[32 * (j / 2) + l] & 15);
                    if (t == dtype::q5_k) v += ((qh[l] >> j) & 1) * 16;
                    y[32 * j + l] = f16_at(x) * sc * v - f16_at(x + 2) * m;
                }
            }
            return;
        }
        case dtype::q6_k:
            for (int i = 0; i < 256; ++i) {
                const int h = i / 128, k = (i % 128) / 32, l = i % 32;
                const uint8_t* ql = x + 64 * h;
                const uint8_t lo = k % 2 ? ql[l + 32] : ql[l];
                const int v = ((k < 2 ? lo & 15 : lo >> 4) | (((x[128 + 32 * h + l] >> (2 * k)) & 3) << 4)) - 32;
                y[i] = f16_at(x + 208) * static_cast<int8_t>(x[192 + i / 16]) * v;
            }
            return;
        default: break;
    }
}

// A row-major [rows, cols] matrix of random bytes with sane fp16 scales (|d| in [1e-3, 2e-2]):
// any bit pattern is a valid block of these types, so every code path gets exercised.
inline matrix random_blocks(dtype t, int64_t rows, int64_t cols, uint64_t seed) {
    matrix m = matrix::zeroed(t, rows, cols, seed);
    for (auto& b : m.bytes) b = static_cast<uint8_t>(next_u64());
    const int64_t nb = rows * cols / dtype_block_elems(t);
    for (int64_t i = 0; i < nb; ++i)
        for (int off : half_fields(t)) {
            const float v = (0.001f + 0.019f * (uniform() * 0.5f + 0.5f)) * (uniform() < 0 ? -1.0f : 1.0f);
            const uint16_t h = kernels::fp32_to_fp16(v);
            std::memcpy(m.bytes.data() + i * dtype_block_bytes(t) + off, &h, 2);
        }
    return m;
}

// All weights of a matrix of a new type, decoded by the reference.
inline std::vector<double> ref_decode(const tensor_view& v) {
    const int64_t qk = dtype_block_elems(v.type);
    std::vector<double> out(static_cast<size_t>(v.rows * v.cols));
    for (int64_t r = 0; r < v.rows; ++r)
        for (int64_t b = 0; b < v.cols / qk; ++b)
            ref_decode_block(v.type, v.row(r) + b * dtype_block_bytes(v.type), out.data() + r * v.cols + b * qk);
    return out;
}

// ggml's activation partner of each type: Q8_K (per 256) for the K-quants and IQ4_XS, Q8_1 for
// Q4_1/Q5_1, Q8_0 (fp16 scale) for Q8_0/Q4_0/Q5_0/IQ4_NL.
inline bool act_per_256(dtype t) { return dtype_block_elems(t) == 256; }
inline bool act_q8_1(dtype t) { return t == dtype::q4_1 || t == dtype::q5_1; }

// The activations the kernels multiply with for weights of type t, written from ggml's definitions:
// Q8_K: iscale = -127/max by the signed max, q = round(iscale x) capped at 127, d = 1/iscale;
// Q8_0/Q8_1: d = amax/127 rounded to fp16, q = round(x * 127/amax). (Q8_1's fp16 s = d*sum is not
// representable as values: tests widen their bound for those types.)
inline std::vector<double> quantized_x_for(dtype t, const std::vector<float>& x) {
    if (!act_per_256(t)) {
        std::vector<double> out = quantized_x(x);
        for (size_t b = 0; b < x.size() / 32; ++b) {
            float amax = 0.0f;
            for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
            const float d = amax / 127.0f;
            const double d16 = half_value(kernels::fp32_to_fp16(d));
            for (int j = 0; j < 32; ++j) out[b * 32 + j] = d == 0.0f ? 0.0 : out[b * 32 + j] / static_cast<double>(d) * d16;
        }
        return out;
    }
    std::vector<double> out(x.size());
    for (size_t b = 0; b < x.size() / 256; ++b) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 256; ++j)
            if (std::fabs(x[b * 256 + j]) > amax) {
                amax = std::fabs(x[b * 256 + j]);
                max = x[b * 256 + j];
            }
        const float iscale = amax == 0.0f ? 0.0f : -127.0f / max;
        for (int j = 0; j < 256; ++j) {
            const float q = std::min(127.0f, std::nearbyint(iscale * x[b * 256 + j]));
            out[b * 256 + j] = amax == 0.0f ? 0.0 : static_cast<double>(1.0f / iscale) * q;
        }
    }
    return out;
}

}  // namespace sl::kernel_test

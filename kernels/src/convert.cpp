// fp16/bf16 conversions and the reference row encoders/decoders (ggml block layouts and rounding).
#include <cassert>
#include <cmath>
#include <cstring>

#include "dense_internal.h"
#include "quant_unpack.h"
#include "x8_layout.h"

namespace sl::kernels {
namespace {

uint32_t float_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

float bits_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// Float to int8 for values already scaled into [-128, 127]; NaN (from Inf/NaN inputs) becomes 0
// instead of undefined behaviour.
int8_t to_int8(float v) {
    if (!(v == v)) return 0;
    v = std::fmin(127.0f, std::fmax(-128.0f, v));
    return static_cast<int8_t>(v);
}

void quantize_q8_0(const float* x, block_q8_0* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b, x += qk8_0) {
        float amax = 0.0f;
        for (int j = 0; j < qk8_0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = fp32_to_fp16(d);
        for (int j = 0; j < qk8_0; ++j) y[b].qs[j] = to_int8(std::round(x[j] * id));  // half away from 0
    }
}

void quantize_q4_0(const float* x, block_q4_0* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b, x += qk4_0) {
        // The signed value of largest magnitude maps to -8, so the full 16 levels are used.
        float amax = 0.0f;
        float max = 0.0f;
        for (int j = 0; j < qk4_0; ++j) {
            if (amax < std::fabs(x[j])) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = fp32_to_fp16(d);
        for (int j = 0; j < qk4_0 / 2; ++j) {
            // ggml: min(15, (int8_t)(x*id + 8.5f)), i.e. truncation after adding 8.5.
            const int8_t lo = to_int8(x[j] * id + 8.5f);
            const int8_t hi = to_int8(x[j + qk4_0 / 2] * id + 8.5f);
            const uint8_t l = static_cast<uint8_t>(lo < 0 ? 0 : (lo > 15 ? 15 : lo));
            const uint8_t h = static_cast<uint8_t>(hi < 0 ? 0 : (hi > 15 ? 15 : hi));
            y[b].qs[j] = static_cast<uint8_t>(l | (h << 4));
        }
    }
}

// Q6_0x8 (types.h), in Q4_0's manner: per block of 32 the signed value of largest magnitude maps to
// q = 0 (d = max / -32), q = min(63, trunc(x / d + 32.5)).
void quantize_q6_0x8(const float* x, uint8_t* y, int64_t n_blocks) {
    for (int64_t b = 0; b < n_blocks; ++b, x += 32) {
        const detail::x8_place p = detail::x8_block_place(dtype::q6_0x8, b);
        float amax = 0.0f, max = 0.0f;
        for (int i = 0; i < 32; ++i) {
            if (amax < std::fabs(x[i])) {
                amax = std::fabs(x[i]);
                max = x[i];
            }
        }
        const float d = max / -32.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t h = fp32_to_fp16(d);
        std::memcpy(y + p.scale, &h, 2);
        uint8_t q[32];
        for (int i = 0; i < 32; ++i) {
            const int8_t v = to_int8(x[i] * id + 32.5f);
            q[i] = static_cast<uint8_t>(v < 0 ? 0 : (v > 63 ? 63 : v));
        }
        uint8_t* qs = y + p.quants;
        uint8_t* qh = y + p.high;
        for (int i = 0; i < 16; ++i) qs[i] = static_cast<uint8_t>((q[i] & 15) | (q[i + 16] & 15) << 4);
        for (int k = 0; k < 8; ++k)
            qh[k] = static_cast<uint8_t>(q[k] >> 4 | (q[k + 8] >> 4) << 2 | (q[k + 16] >> 4) << 4 | (q[k + 24] >> 4) << 6);
    }
}

}  // namespace

float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) {  // Inf; NaN keeps its payload and is made quiet, exactly like F16C's vcvtph2ps
        return bits_float(sign | 0x7f800000u | (mant << 13) | (mant != 0 ? 0x400000u : 0u));
    }
    if (exp != 0) return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
    if (mant == 0) return bits_float(sign);
    // Subnormal half: normalise (every half subnormal is a normal float).
    uint32_t e = 113;
    while (!(mant & 0x400u)) {
        mant <<= 1;
        --e;
    }
    return bits_float(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

uint16_t fp32_to_fp16(float f) {
    const uint32_t u = float_bits(f);
    const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // quiet NaN
    if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to Inf
    if (a >= 0x38800000u) {                                               // normal half
        uint32_t h = (a - 0x38000000u) >> 13;
        const uint32_t rem = a & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry into the exponent is correct
        return static_cast<uint16_t>(sign | h);
    }
    // Subnormal half (or zero): units of 2^-24, q = mant * 2^(exp - 126).
    const uint32_t exp = a >> 23;
    if (exp < 102) return sign;  // below 2^-25: rounds to zero (2^-25 itself is a tie to even 0)
    const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14..24
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
}

float bf16_to_fp32(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
    const uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
    return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

void dequantize_row(dtype t, const void* src, float* dst, int64_t n) {
    assert(n % dtype_block_elems(t) == 0);
    detail::active_table().dequant[static_cast<int>(t)](src, dst, n);
}

void regroup_x8(dtype from, const void* src, void* dst, int64_t n) {
    const dtype base = dtype_x8_base(from);
    assert(base != dtype_x8_form(base) && n % (32 * k_x8_blocks) == 0);
    const int64_t bb = dtype_block_bytes(base), qb = bb - 2;
    const auto* s = static_cast<const uint8_t*>(src);
    auto* d = static_cast<uint8_t*>(dst);
    const bool to_x8 = from == base;
    for (int64_t b = 0; b < n / 32; ++b) {
        // Block b: scale at b * bb, quants at b * bb + 2 in the base type; x8_block_place in the x8 form.
        const detail::x8_place p = detail::x8_block_place(dtype_x8_form(base), b);
        const int64_t scale_from = to_x8 ? b * bb : p.scale, quants_from = to_x8 ? b * bb + 2 : p.quants;
        const int64_t scale_to = to_x8 ? p.scale : b * bb, quants_to = to_x8 ? p.quants : b * bb + 2;
        std::memcpy(d + scale_to, s + scale_from, 2);
        std::memcpy(d + quants_to, s + quants_from, static_cast<size_t>(qb));
    }
}

void quantize_row(dtype t, const float* src, void* dst, int64_t n) {
    assert(n % dtype_block_elems(t) == 0);
    switch (t) {
        case dtype::q6_0x8: quantize_q6_0x8(src, static_cast<uint8_t*>(dst), n / 32); break;
        case dtype::q8_0x8:
        case dtype::q4_0x8: {  // group by group through the base type, no allocation
            alignas(64) uint8_t tmp[k_x8_blocks * sizeof(block_q8_0)];
            const int64_t ge = 32 * k_x8_blocks, gb = dtype_block_bytes(t);
            for (int64_t g = 0; g < n / ge; ++g) {
                quantize_row(dtype_x8_base(t), src + g * ge, tmp, ge);
                regroup_x8(dtype_x8_base(t), tmp, static_cast<uint8_t*>(dst) + g * gb, ge);
            }
            break;
        }
        case dtype::f32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); break;
        case dtype::f16: {
            auto* d = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
            break;
        }
        case dtype::bf16: {
            auto* d = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
            break;
        }
        case dtype::q8_0: quantize_q8_0(src, static_cast<block_q8_0*>(dst), n / qk8_0); break;
        case dtype::q4_0: quantize_q4_0(src, static_cast<block_q4_0*>(dst), n / qk4_0); break;
        default:  // not dtype_info(t).encodable: callers convert to dtype_layout_type(t) instead
            assert(false && "quantize_row: type has no encoder");
            std::memset(dst, 0, static_cast<size_t>(dtype_row_bytes(t, n)));
            break;
    }
}

namespace detail {

void quantize_act_q8(const float* x, int64_t n, int8_t* qs, float* d, float* s) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* xb = x + b * 32;
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < 32; ++j) {
            const int8_t q = to_int8(std::nearbyint(xb[j] * id));
            qs[b * 32 + j] = q;
            sum += q;
        }
        d[b] = amax / 127.0f;
        s[b] = d[b] * static_cast<float>(sum);
    }
}

namespace {

// ggml's quantize_row_q8_K: per 256, the signed value of largest magnitude (first one) sets
// iscale = -127/max; q = round-half-even(iscale*x) capped at 127; d = 1/iscale.
void quantize_act_q8k(const float* x, int64_t n, int8_t* qs, float* d, float* s) {
    for (int64_t b = 0; b < n / qk_k; ++b) {
        const float* xb = x + b * qk_k;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < qk_k; ++j)
            if (std::fabs(xb[j]) > amax) {
                amax = std::fabs(xb[j]);
                max = xb[j];
            }
        const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
        const float db = amax != 0.0f ? 1.0f / iscale : 0.0f;
        for (int k = 0; k < qk_k / 32; ++k) {
            int32_t sum = 0;
            for (int j = 32 * k; j < 32 * k + 32; ++j) {
                const int8_t q = to_int8(std::fmin(127.0f, std::nearbyint(iscale * xb[j])));
                qs[b * qk_k + j] = q;
                sum += q;
            }
            d[b * 8 + k] = db;
            s[b * 8 + k] = db * static_cast<float>(sum);
        }
    }
}

float round_fp16(float v) { return fp16_to_fp32(fp32_to_fp16(v)); }

}  // namespace

void quantize_act_for(dtype t, const kernel_table& kt, const float* x, int64_t n, int8_t* qs, float* d, float* s) {
    const act_kind kind = quant_info(t).act;
    if (kind == act_kind::q8_k) {
        (kt.quantize_act_q8k ? kt.quantize_act_q8k : quantize_act_q8k)(x, n, qs, d, s);
        return;
    }
    kt.quantize_act(x, n, qs, d, s);
    if (kind == act_kind::q8_f32) return;
    for (int64_t b = 0; b < n / 32; ++b) {
        if (kind == act_kind::q8_1) s[b] = round_fp16(s[b]);  // d * sum with the unrounded d, as ggml
        d[b] = round_fp16(d[b]);
        if (kind == act_kind::q8_0) {  // keeps s = d * sum with the d used (Q4_0's nibble offset term)
            int32_t sum = 0;
            for (int j = 0; j < 32; ++j) sum += qs[b * 32 + j];
            s[b] = d[b] * static_cast<float>(sum);
        }
    }
}

}  // namespace detail
}  // namespace sl::kernels

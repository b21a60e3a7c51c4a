// Portable scalar kernels: the fallback for any x86-64 CPU and the reference the SIMD paths match.
#include <cstring>

#include "dense_internal.h"
#include "quant_unpack.h"
#include "x8_layout.h"

namespace sl::kernels::detail {
namespace {

// Four independent partial sums per row: lets the compiler pipeline and keeps the order fixed.
template <typename Load>
float dot_generic(int64_t cols, const float* x, Load load) {
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int64_t c = 0;
    for (; c + 4 <= cols; c += 4)
        for (int k = 0; k < 4; ++k) acc[k] += load(c + k) * x[c + k];
    for (; c < cols; ++c) acc[0] += load(c) * x[c];
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

void rows_f32(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    const auto* x = static_cast<const float*>(xv);
    for (int64_t r = 0; r < n_rows; ++r) {
        const auto* wr = reinterpret_cast<const float*>(w + r * rb);
        y[r] = dot_generic(cols, x, [wr](int64_t c) { return wr[c]; });
    }
}

void rows_f16(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    const auto* x = static_cast<const float*>(xv);
    for (int64_t r = 0; r < n_rows; ++r) {
        const auto* wr = reinterpret_cast<const uint16_t*>(w + r * rb);
        y[r] = dot_generic(cols, x, [wr](int64_t c) { return fp16_to_fp32(wr[c]); });
    }
}

void rows_bf16(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    const auto* x = static_cast<const float*>(xv);
    for (int64_t r = 0; r < n_rows; ++r) {
        const auto* wr = reinterpret_cast<const uint16_t*>(w + r * rb);
        y[r] = dot_generic(cols, x, [wr](int64_t c) { return bf16_to_fp32(wr[c]); });
    }
}

// Per block: the exact integer dot of the weights and the quantized activations, scaled by both block
// scales; block_dot(block, xq) gives the integer dot of one block.
template <typename Block, typename BlockDot>
void rows_quant(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y,
                BlockDot block_dot) {
    const auto* xa = static_cast<const q8_act*>(xv);
    for (int64_t r = 0; r < n_rows; ++r) {
        const auto* wb = reinterpret_cast<const Block*>(w + r * rb);
        float acc = 0.0f;
        for (int64_t b = 0; b < cols / 32; ++b)
            acc += fp16_to_fp32(wb[b].d) * xa->d[b] * static_cast<float>(block_dot(wb[b], xa->qs + b * 32));
        y[r] = acc;
    }
}

void rows_q8_0(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    rows_quant<block_q8_0>(w, rb, n_rows, cols, xv, y, [](const block_q8_0& b, const int8_t* xq) {
        int32_t sum = 0;
        for (int j = 0; j < qk8_0; ++j) sum += int32_t{b.qs[j]} * xq[j];
        return sum;
    });
}

void rows_q4_0(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    rows_quant<block_q4_0>(w, rb, n_rows, cols, xv, y, [](const block_q4_0& b, const int8_t* xq) {
        int32_t sum = 0;
        for (int j = 0; j < qk4_0 / 2; ++j) {
            sum += ((b.qs[j] & 0x0f) - 8) * xq[j];
            sum += ((b.qs[j] >> 4) - 8) * xq[j + qk4_0 / 2];
        }
        return sum;
    });
}

void dequant_f32(const void* src, float* dst, int64_t n) { std::memcpy(dst, src, static_cast<size_t>(n) * 4); }

void dequant_f16(const void* src, float* dst, int64_t n) {
    const auto* s = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
}

void dequant_bf16(const void* src, float* dst, int64_t n) {
    const auto* s = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
}

void dequant_q8_0(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const block_q8_0*>(src);
    for (int64_t i = 0; i < n / qk8_0; ++i) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < qk8_0; ++j) dst[i * qk8_0 + j] = d * static_cast<float>(b[i].qs[j]);
    }
}

void dequant_q4_0(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const block_q4_0*>(src);
    for (int64_t i = 0; i < n / qk4_0; ++i) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < qk4_0 / 2; ++j) {
            dst[i * qk4_0 + j] = d * static_cast<float>((b[i].qs[j] & 0x0f) - 8);
            dst[i * qk4_0 + j + qk4_0 / 2] = d * static_cast<float>((b[i].qs[j] >> 4) - 8);
        }
    }
}

// The x8 forms: each group of 8 blocks put back in order, then the base type's decoder.
template <dtype Base>
void dequant_x8(const void* src, float* dst, int64_t n) {
    alignas(64) uint8_t tmp[k_x8_blocks * sizeof(block_q8_0)];
    const int64_t ge = 32 * k_x8_blocks, gb = dtype_block_bytes(dtype_x8_form(Base));
    for (int64_t g = 0; g < n / ge; ++g) {
        regroup_x8(dtype_x8_form(Base), static_cast<const uint8_t*>(src) + g * gb, tmp, ge);
        Base == dtype::q8_0 ? dequant_q8_0(tmp, dst + g * ge, ge) : dequant_q4_0(tmp, dst + g * ge, ge);
    }
}

// Q6_0x8 (types.h): x = d * (lo | hi << 4 - 32) per block of 32 in each group of 8.
void dequant_q6_0x8(const void* src, float* dst, int64_t n) {
    const auto* row = static_cast<const uint8_t*>(src);
    for (int64_t b = 0; b < n / 32; ++b, dst += 32) {
        const x8_place p = x8_block_place(dtype::q6_0x8, b);
        uint16_t h;
        std::memcpy(&h, row + p.scale, 2);
        const float d = fp16_to_fp32(h);
        for (int i = 0; i < 32; ++i) dst[i] = d * static_cast<float>(q6_0x8_int(row + p.quants, row + p.high, i));
    }
}

// Every other block type: decode each block into the common (q, a, b) form, then the reference
// integer dot. Slow but exact, and the definition the SIMD kernels are tested against.
template <dtype T>
void rows_unpacked(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    const auto* xa = static_cast<const q8_act*>(xv);
    const quant_traits& qt = quant_info(T);
    constexpr int64_t qk = dtype_block_elems(T), bytes = dtype_block_bytes(T);
    int8_t q[qk_k];
    float a[qk_k / 16], b[qk_k / 16];
    for (int64_t r = 0; r < n_rows; ++r) {
        const uint8_t* row = w + r * rb;
        float acc = 0.0f;
        for (int64_t blk = 0; blk < cols / qk; ++blk) {
            qt.unpack(row + blk * bytes, q, a, b);
            acc += unpacked_dot(qk, q, a, b, qt.has_min, xa->qs + blk * qk, xa->d + blk * qk / 32);
        }
        y[r] = acc;
    }
}

// x = a*q (+ b): the same float operations as ggml's dequantizers, hence the same bits.
template <dtype T>
void dequant_unpacked(const void* src, float* dst, int64_t n) {
    const quant_traits& qt = quant_info(T);
    constexpr int64_t qk = dtype_block_elems(T), bytes = dtype_block_bytes(T);
    int8_t q[qk_k];
    float a[qk_k / 16], b[qk_k / 16];
    for (int64_t blk = 0; blk < n / qk; ++blk) {
        qt.unpack(static_cast<const uint8_t*>(src) + blk * bytes, q, a, b);
        float* out = dst + blk * qk;
        if (qt.has_min) {
            for (int64_t i = 0; i < qk; ++i) out[i] = a[i / 16] * static_cast<float>(q[i]) + b[i / 16];
        } else {
            for (int64_t i = 0; i < qk; ++i) out[i] = a[i / 16] * static_cast<float>(q[i]);
        }
    }
}

template <dtype... Ts>
void add_unpacked(kernel_table& k) {
    ((k.rows[static_cast<int>(Ts)] = rows_unpacked<Ts>, k.dequant[static_cast<int>(Ts)] = dequant_unpacked<Ts>), ...);
}

float stream_sum(const float* p, int64_t n) {
    float acc[8] = {};
    for (int64_t i = 0; i < n; i += 8)
        for (int k = 0; k < 8; ++k) acc[k] += p[i + k];
    float s = 0.0f;
    for (float a : acc) s += a;
    return s;
}

// kernel_table::group_sum, portable: each line as eight 8-byte words.
uint64_t group_sum(const uint8_t* const* rows, int n, int64_t lines, const uint8_t* const* next, int n_next) {
    uint64_t acc[8] = {};
    for (int64_t o = 0; o < lines * 64; o += 64) {
        for (int i = 0; i < n; ++i) {
            uint64_t w[8];
            std::memcpy(w, rows[i] + o, 64);
            for (int k = 0; k < 8; ++k) acc[k] += w[k];
        }
        for (int i = 0; i < n_next; ++i) __builtin_prefetch(next[i] + o, 0, 2);  // 2: into L2
    }
    uint64_t s = 0;
    for (uint64_t a : acc) s += a;
    return s;
}

}  // namespace

// Dequantizers shared by every table: exact conversions, so all ISAs agree bit for bit.
const kernel_table& scalar_table() {
    static const kernel_table t = [] {
        kernel_table k;
        k.rows[0] = rows_f32;
        k.rows[1] = rows_f16;
        k.rows[2] = rows_bf16;
        k.rows[3] = rows_q8_0;
        k.rows[4] = rows_q4_0;
        add_unpacked<dtype::q4_1, dtype::q5_0, dtype::q5_1, dtype::q2_k, dtype::q3_k, dtype::q4_k, dtype::q5_k,
                     dtype::q6_k, dtype::iq4_nl, dtype::iq4_xs>(k);
        for (int i = 0; i < n_dtypes; ++i) k.rows_cached[i] = k.rows[i];
        k.dequant[0] = dequant_f32;
        k.dequant[1] = dequant_f16;
        k.dequant[2] = dequant_bf16;
        k.dequant[3] = dequant_q8_0;
        k.dequant[4] = dequant_q4_0;
        k.dequant[static_cast<int>(dtype::q8_0x8)] = dequant_x8<dtype::q8_0>;
        k.dequant[static_cast<int>(dtype::q4_0x8)] = dequant_x8<dtype::q4_0>;
        k.dequant[static_cast<int>(dtype::q6_0x8)] = dequant_q6_0x8;
        k.quantize_act = quantize_act_q8;
        k.stream_sum[0] = k.stream_sum[1] = stream_sum;
        k.group_sum = group_sum;
        return k;
    }();
    return t;
}

}  // namespace sl::kernels::detail

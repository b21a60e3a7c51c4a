// Portable scalar kernels: the fallback for any x86-64 CPU and the reference the SIMD paths match.
#include <cstring>

#include "dense_internal.h"

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

float stream_sum(const float* p, int64_t n) {
    float acc[8] = {};
    for (int64_t i = 0; i < n; i += 8)
        for (int k = 0; k < 8; ++k) acc[k] += p[i + k];
    float s = 0.0f;
    for (float a : acc) s += a;
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
        for (int i = 0; i < 5; ++i) k.rows_cached[i] = k.rows[i];
        k.dequant[0] = dequant_f32;
        k.dequant[1] = dequant_f16;
        k.dequant[2] = dequant_bf16;
        k.dequant[3] = dequant_q8_0;
        k.dequant[4] = dequant_q4_0;
        k.quantize_act = quantize_act_q8;
        k.stream_sum[0] = k.stream_sum[1] = stream_sum;
        return k;
    }();
    return t;
}

}  // namespace sl::kernels::detail

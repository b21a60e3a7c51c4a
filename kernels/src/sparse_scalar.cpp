// Portable scalar sparse kernels (multi-row axpy): the fallback for any x86-64 CPU.
#include <cstring>

#include "sparse_internal.h"
#include "x8_layout.h"

namespace sl::kernels::detail {
namespace {

// Per element: a = acc (or 0), then a = s[g] * w_g + a for g in order, like the SIMD FMA chains
// (here with a separate multiply and add: kernels are built with -ffp-contract=off).
template <typename Load>
void axpy_elems(float* acc, bool init, int n_rows, const uint8_t* const* rows, const float* s, int64_t n, Load load) {
    for (int64_t i = 0; i < n; ++i) {
        float a = init ? 0.0f : acc[i];
        for (int g = 0; g < n_rows; ++g) a = s[g] * load(rows[g], i) + a;
        acc[i] = a;
    }
}

void axpy_f32(float* acc, bool init, int n_rows, const uint8_t* const* rows, const float* s, int64_t n,
              const uint8_t* const*) {
    axpy_elems(acc, init, n_rows, rows, s, n, [](const uint8_t* r, int64_t i) {
        float v;
        std::memcpy(&v, r + 4 * i, 4);
        return v;
    });
}

void axpy_f16(float* acc, bool init, int n_rows, const uint8_t* const* rows, const float* s, int64_t n,
              const uint8_t* const*) {
    axpy_elems(acc, init, n_rows, rows, s, n, [](const uint8_t* r, int64_t i) {
        uint16_t h;
        std::memcpy(&h, r + 2 * i, 2);
        return fp16_to_fp32(h);
    });
}

void axpy_bf16(float* acc, bool init, int n_rows, const uint8_t* const* rows, const float* s, int64_t n,
               const uint8_t* const*) {
    axpy_elems(acc, init, n_rows, rows, s, n, [](const uint8_t* r, int64_t i) {
        uint16_t h;
        std::memcpy(&h, r + 2 * i, 2);
        return bf16_to_fp32(h);
    });
}

// Block b of a row: in place, or (X8, the regrouped forms) its scale and quants gathered from the group.
template <typename Block, bool X8>
Block block_at(const uint8_t* row, int64_t b) {
    Block blk;
    if constexpr (X8) {
        const x8_place p = x8_block_place(sizeof(Block) == sizeof(block_q8_0) ? dtype::q8_0x8 : dtype::q4_0x8, b);
        std::memcpy(&blk.d, row + p.scale, 2);
        std::memcpy(blk.qs, row + p.quants, sizeof(Block) - 2);
    } else {
        std::memcpy(&blk, row + b * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
    }
    return blk;
}

// Quantized rows: per block the coefficient s[g] * d is formed once, then multiplies each integer.
template <typename Block, bool X8, typename Value>
void axpy_quant(float* acc, bool init, int n_rows, const uint8_t* const* rows, const float* s, int64_t n, Value value) {
    for (int64_t b = 0; b < n / 32; ++b) {
        float c[k_axpy_rows];
        Block blk[k_axpy_rows];
        for (int g = 0; g < n_rows; ++g) {
            blk[g] = block_at<Block, X8>(rows[g], b);
            c[g] = s[g] * fp16_to_fp32(blk[g].d);
        }
        float* a_out = acc + b * 32;
        for (int j = 0; j < 32; ++j) {
            float a = init ? 0.0f : a_out[j];
            for (int g = 0; g < n_rows; ++g) a = c[g] * static_cast<float>(value(blk[g], j)) + a;
            a_out[j] = a;
        }
    }
}

template <bool X8>
void axpy_q8_0(float* acc, bool init, int n_rows, const uint8_t* const* rows, const float* s, int64_t n,
               const uint8_t* const*) {
    axpy_quant<block_q8_0, X8>(acc, init, n_rows, rows, s, n, [](const block_q8_0& b, int j) { return int{b.qs[j]}; });
}

template <bool X8>
void axpy_q4_0(float* acc, bool init, int n_rows, const uint8_t* const* rows, const float* s, int64_t n,
               const uint8_t* const*) {
    axpy_quant<block_q4_0, X8>(acc, init, n_rows, rows, s, n, [](const block_q4_0& b, int j) {
        return (j < 16 ? (b.qs[j] & 0x0f) : (b.qs[j - 16] >> 4)) - 8;
    });
}

// Q6_0x8 rows (types.h): per block the coefficient s[g] * d, then the 6-bit integers q - 32.
void axpy_q6_0x8(float* acc, bool init, int n_rows, const uint8_t* const* rows, const float* s, int64_t n,
                 const uint8_t* const*) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const x8_place p = x8_block_place(dtype::q6_0x8, b);
        float c[k_axpy_rows];
        int q[k_axpy_rows][32];
        for (int g = 0; g < n_rows; ++g) {
            uint16_t h;
            std::memcpy(&h, rows[g] + p.scale, 2);
            c[g] = s[g] * fp16_to_fp32(h);
            for (int i = 0; i < 32; ++i) q[g][i] = q6_0x8_int(rows[g] + p.quants, rows[g] + p.high, i);
        }
        float* a_out = acc + b * 32;
        for (int i = 0; i < 32; ++i) {
            float a = init ? 0.0f : a_out[i];
            for (int g = 0; g < n_rows; ++g) a = c[g] * static_cast<float>(q[g][i]) + a;
            a_out[i] = a;
        }
    }
}

}  // namespace

const sparse_table& sparse_scalar_table() {
    static const sparse_table t = [] {
        sparse_table k;
        k.axpy[0] = axpy_f32;
        k.axpy[1] = axpy_f16;
        k.axpy[2] = axpy_bf16;
        k.axpy[3] = axpy_q8_0<false>;
        k.axpy[4] = axpy_q4_0<false>;
        k.axpy[static_cast<int>(dtype::q8_0x8)] = axpy_q8_0<true>;
        k.axpy[static_cast<int>(dtype::q4_0x8)] = axpy_q4_0<true>;
        k.axpy[static_cast<int>(dtype::q6_0x8)] = axpy_q6_0x8;
        return k;
    }();
    return t;
}

}  // namespace sl::kernels::detail

// Weight element types, block layouts and the tensor view every kernel consumes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sl {

// Weight storage types. Block layouts are bit-identical to ggml's so GGUF tensors are used in place.
enum class dtype : uint8_t { f32 = 0, f16 = 1, bf16 = 2, q8_0 = 3, q4_0 = 4 };

inline constexpr int32_t qk8_0 = 32;  // elements per Q8_0 block
inline constexpr int32_t qk4_0 = 32;  // elements per Q4_0 block

// ggml block_q8_0: fp16 scale then 32 signed bytes; x = d * q.
struct block_q8_0 {
    uint16_t d;
    int8_t qs[qk8_0];
};
static_assert(sizeof(block_q8_0) == 34);

// ggml block_q4_0: fp16 scale then 16 bytes of nibbles; element j (j < 16) is the low nibble of
// qs[j], element j + 16 the high nibble; x = d * (nibble - 8).
struct block_q4_0 {
    uint16_t d;
    uint8_t qs[qk4_0 / 2];
};
static_assert(sizeof(block_q4_0) == 18);

// Elements per storage block (1 for plain floating-point types).
constexpr int64_t dtype_block_elems(dtype t) {
    switch (t) {
        case dtype::q8_0: return qk8_0;
        case dtype::q4_0: return qk4_0;
        default: return 1;
    }
}

// Bytes per storage block.
constexpr int64_t dtype_block_bytes(dtype t) {
    switch (t) {
        case dtype::f32: return 4;
        case dtype::f16: return 2;
        case dtype::bf16: return 2;
        case dtype::q8_0: return sizeof(block_q8_0);
        case dtype::q4_0: return sizeof(block_q4_0);
    }
    return 0;
}

// Bytes of one row of `cols` elements; cols must be a multiple of dtype_block_elems(t).
constexpr int64_t dtype_row_bytes(dtype t, int64_t cols) {
    return cols / dtype_block_elems(t) * dtype_block_bytes(t);
}

constexpr std::string_view dtype_name(dtype t) {
    switch (t) {
        case dtype::f32: return "F32";
        case dtype::f16: return "F16";
        case dtype::bf16: return "BF16";
        case dtype::q8_0: return "Q8_0";
        case dtype::q4_0: return "Q4_0";
    }
    return "?";
}

// A read-only 2-D weight matrix, row-major [rows = outputs, cols = inputs] (ggml: ne1 = rows,
// ne0 = cols). Rows are contiguous and `row_bytes` apart.
struct tensor_view {
    dtype type = dtype::f32;
    int64_t rows = 0;
    int64_t cols = 0;
    const void* data = nullptr;

    int64_t row_bytes() const { return dtype_row_bytes(type, cols); }
    int64_t bytes() const { return rows * row_bytes(); }
    const uint8_t* row(int64_t r) const { return static_cast<const uint8_t*>(data) + r * row_bytes(); }
};

}  // namespace sl

// Private: where each 32-element block of the x8-grouped layout-only types (types.h: Q8_0x8, Q4_0x8,
// Q6_0x8) keeps its parts — one definition for their encoders, decoders and kernels.
#pragma once

#include <cstdint>

#include "sparselens/kernels/types.h"

namespace sl::kernels::detail {

// Byte offsets from the row start of block b's fp16 scale, its quants (Q6_0x8: its low nibbles, as
// Q4_0's) and, for Q6_0x8 only, its 8 bytes of high bit pairs.
struct x8_place {
    int64_t scale, quants, high;
};

// Block b of a row of type t (Q8_0x8, Q4_0x8 or Q6_0x8): per group of 8 blocks the 8 scales, then the 8
// blocks' quants, then (Q6_0x8) their high bits.
constexpr x8_place x8_block_place(dtype t, int64_t b) {
    const int64_t g = b / k_x8_blocks * dtype_block_bytes(t), j = b % k_x8_blocks;
    const int64_t qb = t == dtype::q8_0x8 ? 32 : 16;
    return {g + 2 * j, g + 2 * k_x8_blocks + qb * j, g + 18 * k_x8_blocks + 8 * j};
}

// Where block b of a row of input-major type T keeps its fp16 scale and its quants, for the chunk
// kernels (sparse_int8_avx2.cpp, sparse_vnni_avx512.cpp): in the block (Q8_0, Q4_0: scale first), or
// where x8_block_place says (Q8_0x8, Q4_0x8, Q6_0x8). `bytes` is the bytes per 32 elements, so
// [b0 * bytes, b1 * bytes) spans blocks [b0, b1) when b0 and b1 are multiples of 8.
namespace {  // internal linkage: a copy per ISA file, as the kernels that use it

template <dtype T>
struct block_addressing {
    static constexpr bool x8 = dtype_block_elems(T) == 32 * k_x8_blocks;
    static constexpr int64_t bytes = dtype_row_bytes(T, 32 * k_x8_blocks) / k_x8_blocks;
    static constexpr int64_t scale_off(int64_t b) {
        if constexpr (x8) return x8_block_place(T, b).scale;
        return b * bytes;
    }
    static constexpr int64_t qs_off(int64_t b) {
        if constexpr (x8) return x8_block_place(T, b).quants;
        return b * bytes + 2;
    }
};

}  // namespace

// Element i (< 32) of a Q6_0x8 block as the signed integer q - 32 (q = low nibble | high bit pair << 4).
inline int q6_0x8_int(const uint8_t* quants, const uint8_t* high, int i) {
    const int lo = i < 16 ? quants[i] & 15 : quants[i - 16] >> 4;
    return (lo | (high[i % 8] >> (2 * (i / 8)) & 3) << 4) - 32;
}

}  // namespace sl::kernels::detail

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

// Element i (< 32) of a Q6_0x8 block as the signed integer q - 32 (q = low nibble | high bit pair << 4).
inline int q6_0x8_int(const uint8_t* quants, const uint8_t* high, int i) {
    const int lo = i < 16 ? quants[i] & 15 : quants[i - 16] >> 4;
    return (lo | (high[i % 8] >> (2 * (i / 8)) & 3) << 4) - 32;
}

}  // namespace sl::kernels::detail

// Private interface of the layout conversions (layout.cpp) to their per-ISA encoders (layout_avx2.cpp).
#pragma once

#include <cstdint>

#include "sparselens/kernels/types.h"

namespace sl::kernels::detail {

// For c < ncols: column c of a tile of 32 rows (row r at tile + r * ld) encoded as one 32-element
// block of `type` (Q8_0, Q4_0, F16, F32, or Q6_0x8's block `slot` of the group at dst) at
// dst + c * dst_stride; bit-identical to quantize_row on the gathered column. AVX2 (call only after a
// CPUID check).
void encode_tile_columns_avx2(const float* tile, int64_t ld, int64_t ncols, dtype type, uint8_t* dst,
                              int64_t dst_stride, int slot);
// quantize_row(type, src, dst, n) for Q8_0 / Q4_0 / F16 / F32 / Q6_0x8 (n a multiple of 32, of 256 for
// Q6_0x8), bit for bit. AVX2.
void encode_row_avx2(dtype type, const float* src, uint8_t* dst, int64_t n);
// Where 32-element block b of a row of `type` starts (for Q6_0x8: its group; slot = its place there).
int64_t block_offset(dtype type, int64_t b, int& slot);

}  // namespace sl::kernels::detail

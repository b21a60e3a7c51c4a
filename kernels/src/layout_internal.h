// Private interface of the layout conversions (layout.cpp) to their per-ISA encoders (layout_avx2.cpp).
#pragma once

#include <cstdint>

#include "sparselens/kernels/types.h"

namespace sl::kernels::detail {

// For c < ncols: column c of a tile of 32 rows (row r at tile + r * ld) encoded as one 32-element
// block of `type` (Q8_0, Q4_0, F16 or F32) at dst + c * dst_stride; bit-identical to quantize_row on the
// gathered column. AVX2 (call only after a CPUID check).
void encode_tile_columns_avx2(const float* tile, int64_t ld, int64_t ncols, dtype type, uint8_t* dst,
                              int64_t dst_stride);
// quantize_row(type, src, dst, n) for Q8_0 / Q4_0 / F16 / F32 (n a multiple of 32), bit for bit. AVX2.
void encode_row_avx2(dtype type, const float* src, uint8_t* dst, int64_t n);

}  // namespace sl::kernels::detail

// Private interface between the sparse drivers (sparse.cpp, layout.cpp) and the per-ISA sparse kernels.
#pragma once

#include <cstdint>

#include "dense_internal.h"

namespace sl::kernels::detail {

// Most weight rows one axpy call combines. Four rows per pass over the accumulator cut its
// load/store traffic by 4x while keeping few enough streams in flight for the prefetchers.
inline constexpr int k_axpy_rows = 4;

// acc[0, n) = (init ? 0 : acc[0, n)) + sum_{g < n_rows} s[g] * row_g[0, n), where row_g = rows[g] points
// at the first stored element of the segment (a block start for Q8_0/Q4_0, where n is a multiple of
// 32). The sum is formed left to right with f32 FMAs, so every element's arithmetic is independent
// of n and of the segment's position: any split of the outputs gives identical bits.
// pf (nullable) holds n_rows addresses read next; the kernel prefetches pf[g] + the byte offset it is
// at in rows[g], so the next rows arrive while these are being consumed.
using axpy_fn = void (*)(float* acc, bool init, int n_rows, const uint8_t* const* rows, const float* s, int64_t n,
                         const uint8_t* const* pf);

// y[k] = dot(rows[k], x) for k < n, each row `cols` stored elements; x as for rows_fn (f32, or q8_act for
// Q8_0/Q4_0). Unlike the dense streaming kernels, which prefetch 4 KiB ahead in the same row (right
// for consecutive rows, a wasted read of an unused row for short sparse rows), these prefetch
// pf[k] (if pf and pf[k] are non-null) at the offset they are reading in rows[k]: the caller passes
// the rows it will read next. Otherwise the arithmetic is the dense rows kernel's of the same ISA,
// operation for operation, so results are bit-identical to gemv (tests hold both to it).
using dots_fn = void (*)(const uint8_t* const* rows, const uint8_t* const* pf, int64_t n, int64_t cols, const void* x,
                         float* y);

struct sparse_table {
    axpy_fn axpy[5] = {};  // indexed by dtype; 1 <= n_rows <= k_axpy_rows
    dots_fn dots[5] = {};  // indexed by dtype; null (scalar ISA): the dense rows kernel is used
};

const sparse_table& sparse_scalar_table();
const sparse_table& sparse_avx2_table();
const sparse_table& sparse_avx512_table();
// The table for active_isa(), like active_table() for the dense kernels.
const sparse_table& active_sparse_table();

}  // namespace sl::kernels::detail

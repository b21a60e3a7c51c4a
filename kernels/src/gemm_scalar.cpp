// Portable int8 GEMM panel kernel: the reference every SIMD panel kernel matches bit for bit.
#include "gemm_internal.h"

namespace sl::kernels::detail {

gemm_panel_fn gemm_panel_scalar() { return panel_generic; }
gemm_float_fn gemm_float_scalar() { return float_generic; }

}  // namespace sl::kernels::detail

// AVX2 build of the portable int8 GEMM panel kernel (the lane loops vectorize to 8-wide int32/f32).
// maddubs cannot take the panel's unsigned q + 128 against signed activations without int16
// saturation, so this path widens to int32 instead; the arithmetic is the scalar reference's.
#include "gemm_internal.h"

namespace sl::kernels::detail {

gemm_panel_fn gemm_panel_avx2() { return panel_generic; }
gemm_float_fn gemm_float_avx2() { return float_generic; }

}  // namespace sl::kernels::detail

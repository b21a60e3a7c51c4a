// AVX2 build of one (token, head) of attention (attention_impl.h), only called after a CPUID check
// (active_isa() == avx2); bit-identical to the portable (SSE2) build.
#include "attention_impl.h"

namespace sl::kernels::detail {

attend_fn attend_avx2() {
    return attend_group;
}

glu_fn swiglu_avx2() {
    return swiglu_lanes;
}

glu_fn geglu_avx2() {
    return geglu_lanes;
}

softcap_fn softcap_avx2() {
    return softcap_lanes;
}

}  // namespace sl::kernels::detail

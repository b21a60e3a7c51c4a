// AVX-512 build of one (token, head) of attention (attention_impl.h), only called after a CPUID check
// (active_isa() == avx512): 2x the portable build on this CPU (prefill-128 layer 10.0 -> 6.4 ms).
#include "attention_impl.h"

namespace sl::kernels::detail {

attend_fn attend_avx512() { return attend_group; }
glu_fn swiglu_avx512() { return swiglu_lanes; }
glu_fn geglu_avx512() { return geglu_lanes; }
softcap_fn softcap_avx512() { return softcap_lanes; }

}  // namespace sl::kernels::detail

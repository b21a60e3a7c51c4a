// AVX2 build of attention_impl.h (attention per KV head, the GLUs, soft-capping), only called after a
// CPUID check (active_isa() == avx2); bit-identical to the portable (SSE2) build.
#include "attention_impl.h"

namespace sl::kernels::detail {

attention_fns attention_fns_avx2() {
    return this_build_fns();
}

}  // namespace sl::kernels::detail

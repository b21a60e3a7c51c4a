// AVX-512 build of attention_impl.h (attention per KV head, the GLUs, soft-capping), only called after a
// CPUID check (active_isa() == avx512): 2x the portable build on this CPU (prefill-128 layer 10.0 -> 6.4 ms).
// GCC 12's AVX-512 shuffle and unpack intrinsics pass _mm512_undefined_ps() as their mask source, which
// -Wuninitialized reports once they are inlined (dot16); the same as the other AVX-512 kernels' files.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "attention_impl.h"

namespace sl::kernels::detail {

attention_fns attention_fns_avx512() {
    return this_build_fns();
}

}  // namespace sl::kernels::detail

// AVX2 build of one (token, head) of attention (attention_impl.h), only called after a CPUID check
// (active_isa() == avx2): the 16-float vectors become two ymm ops instead of four SSE ops, same bits.
#include "attention_impl.h"

namespace sl::kernels::detail {

attend_fn attend_avx2() {
    return attend_one;
}

}  // namespace sl::kernels::detail

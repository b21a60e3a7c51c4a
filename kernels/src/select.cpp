// Mask-selection dispatch (select.h): the AVX-512 or AVX2 compress kernels, or the scalar loops.
#include "sparselens/kernels/select.h"

#include "sparselens/kernels/kernels.h"
#include "select_internal.h"

namespace sl::kernels {
namespace {

const detail::select_table& scalar_select() {
    static const detail::select_table t = [] {
        detail::select_table s;
        s.at_least = [](const uint32_t* keys, int64_t n, uint32_t th, int32_t* out) {
            return detail::at_least_tail(keys, 0, n, th, out, 0);
        };
        s.bucket = [](const uint32_t* keys, int64_t n, int shift, uint32_t b, uint32_t* out) {
            return detail::bucket_tail(keys, 0, n, shift, b, out, 0);
        };
        s.abs = [](const float* v, int64_t n, float t0, const float* tv, bool strict, int32_t* out) {
            return detail::abs_tail(v, 0, n, t0, tv, strict, out, 0);
        };
        return s;
    }();
    return t;
}

const detail::select_table& active_select() {
    switch (active_isa()) {
        case isa::avx512: return detail::select_avx512_table();
        case isa::avx2: return detail::select_avx2_table();
        case isa::scalar: break;
    }
    return scalar_select();
}

}  // namespace

int64_t select_at_least(const uint32_t* keys, int64_t n, uint32_t t, int32_t* out) {
    return n > 0 ? active_select().at_least(keys, n, t, out) : 0;
}

int64_t select_bucket(const uint32_t* keys, int64_t n, int shift, uint32_t b, uint32_t* out) {
    return n > 0 ? active_select().bucket(keys, n, shift, b, out) : 0;
}

int64_t select_abs(const float* v, int64_t n, float t0, const float* tv, bool strict, int32_t* out) {
    return n > 0 ? active_select().abs(v, n, t0, tv, strict, out) : 0;
}

}  // namespace sl::kernels

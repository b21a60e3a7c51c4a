// Private: the per-ISA mask-selection kernels (select.h) and the scalar loops every one of them ends with.
#pragma once

#include <cmath>
#include <cstdint>

namespace sl::kernels::detail {

struct select_table {
    int64_t (*at_least)(const uint32_t* keys, int64_t n, uint32_t t, int32_t* out) = nullptr;
    int64_t (*bucket)(const uint32_t* keys, int64_t n, int shift, uint32_t b, uint32_t* out) = nullptr;
    int64_t (*abs)(const float* v, int64_t n, float t0, const float* tv, bool strict, int32_t* out) = nullptr;
};

const select_table& select_avx2_table();    // select_avx2.cpp
const select_table& select_avx512_table();  // select_avx512.cpp

namespace {  // internal linkage: each ISA file keeps its own copy

// Elements [i, n) of each kernel, one at a time: every entry written, the count advanced by the test.
inline int64_t at_least_tail(const uint32_t* keys, int64_t i, int64_t n, uint32_t t, int32_t* out, int64_t k) {
    for (; i < n; ++i) {
        out[k] = static_cast<int32_t>(i);
        k += keys[i] >= t ? 1 : 0;
    }
    return k;
}
inline int64_t bucket_tail(const uint32_t* keys, int64_t i, int64_t n, int shift, uint32_t b, uint32_t* out,
                           int64_t k) {
    for (; i < n; ++i) {
        out[k] = keys[i];
        k += keys[i] >> shift == b ? 1 : 0;
    }
    return k;
}
inline int64_t abs_tail(const float* v, int64_t i, int64_t n, float t0, const float* tv, bool strict, int32_t* out,
                        int64_t k) {
    for (; i < n; ++i) {
        const float a = std::fabs(v[i]), t = tv ? tv[i] : t0;
        out[k] = static_cast<int32_t>(i);
        k += (strict ? a > t : a >= t) ? 1 : 0;  // false for NaN
    }
    return k;
}

}  // namespace
}  // namespace sl::kernels::detail

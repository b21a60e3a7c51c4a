// The driver the regrouped rows kernels share (Q4_Kx8r, Q4_0x8r, Q8_0x8r: q4k_r8_avx512.h,
// q40_r8_avx512.h, q80_r8_avx512.h). Anonymous namespace as row_dots_avx512.h: each including TU keeps
// its own copy.
#pragma once

#include "dense_internal.h"

namespace sl::kernels::detail {
namespace {

// y[r] for n_rows (a multiple of 8) regrouped rows at w (rb bytes per row, cols a multiple of 256). Group:
// one group of 8 rows' accumulators, with zero(), step(group, ctx, g) for 256-column group g, finish(y).
// With `streams`, k_rows_x8_streams groups a quarter of the call's rows apart take turns per 256 columns
// (several weight streams in flight, cpu_prefers_row_streams); the rest one group at a time. Each group's
// steps run in the same order either way, so a row's bits do not depend on it.
template <typename Group, typename Ctx>
[[gnu::always_inline]] inline void rows_x8_groups(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols,
                                                  const Ctx& ctx, float* y, bool streams) {
    constexpr int S = k_rows_x8_streams;
    const int64_t ng = cols / qk_k, groups = n_rows / k_rows_x8, gb = k_rows_x8 * rb;
    const int64_t per = streams ? groups / S : 0;  // groups per stream
    for (int64_t j = 0; j < per; ++j) {
        Group st[S];
        for (Group& s : st) s.zero();
        for (int64_t g = 0; g < ng; ++g)
            for (int i = 0; i < S; ++i) st[i].step(w + (i * per + j) * gb, ctx, g);
        for (int i = 0; i < S; ++i) st[i].finish(y + (i * per + j) * k_rows_x8);
    }
    for (int64_t r0 = S * per * k_rows_x8; r0 < n_rows; r0 += k_rows_x8) {
        Group st;
        st.zero();
        for (int64_t g = 0; g < ng; ++g) st.step(w + r0 * rb, ctx, g);
        st.finish(y + r0);
    }
}

}  // namespace
}  // namespace sl::kernels::detail

// The int8 coefficient rule of the input-sparse chunks (sparse_vnni_avx512.cpp, sparse_int8_avx2.cpp)
// for one block b, element by element, as their vector paths compute it for 8 or 16 blocks at a time:
// c_i = d_ib * x_i, scale = max|c| / 127, k_i = round-to-even(c_i * 127 / max|c|) saturated to int8,
// four channels per dword (byte j = channel 4g + j), start = -zero * sum k (Q4_0's offset term).
// cvtps rounds to nearest even as nearbyint does in the default rounding mode; the packs saturate
// like the clamp. Finite inputs only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "sparse_internal.h"
#include "sparselens/kernels/kernels.h"

namespace sl::kernels::detail {
namespace {  // internal linkage: each ISA's file keeps the copy compiled with its own flags

// Tables: kq[group][block], scale[block], start[block] (coef_step / coef_tables).
template <int32_t Zero, typename Tables>
void coefs_one_block(Tables& t, int64_t b, const uint8_t* const* r, const float* s, int nr, int64_t off) {
    float c[k_chunk_rows];
    float mx = 0.0f;
    for (int i = 0; i < nr; ++i) {
        uint16_t h;
        std::memcpy(&h, r[i] + off, 2);
        c[i] = fp16_to_fp32(h) * s[i];
        mx = std::max(mx, std::fabs(c[i]));
    }
    const float inv = mx > 0.0f ? 127.0f / mx : 0.0f;
    t.scale[b] = mx / 127.0f;
    int32_t sum = 0;
    for (int g = 0; g * 4 < nr; ++g) {
        uint32_t word = 0;
        for (int j = 0; j < 4; ++j) {
            const int i = 4 * g + j;
            const int32_t k = i < nr ? static_cast<int32_t>(std::nearbyint(c[i] * inv)) : 0;
            sum += k;
            word |= static_cast<uint32_t>(static_cast<uint8_t>(std::clamp(k, -128, 127))) << (8 * j);
        }
        t.kq[g][b] = word;
    }
    t.start[b] = -Zero * sum;
}

}  // namespace
}  // namespace sl::kernels::detail

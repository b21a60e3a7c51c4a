// AVX-512 integer-dot rows for the K-quant types of llama.cpp's common mixes (Q4_K, Q6_K: all of Q4_K_M),
// dense and gathered (kernels in quant_rows_avx512.h; the VNNI build of the dense rows is installed over
// these by dense_vnni_avx512.cpp). Bit-identical to the AVX2 kernels in quant_rows_avx2.cpp, which stay in
// place for the other unpacked types.
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC bug 105593, see dense_avx512.cpp
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "quant_rows_avx512.h"
#include "sparse_internal.h"

namespace sl::kernels::detail {
namespace {

// rows_x8_to_rows (layout.cpp) with the nibbles moved 64 bytes at a time: pieces k = 0..7 (and 8..15) of a
// super-block, one qword per row each, are an 8 x 8 qword transpose away from 64 bytes of each row (24
// shuffles instead of 64 qword copies). gemm runs every Q4_Kx8r panel through it: with the copies alone,
// prefill-128 on l1b Q4_K_M took ~10% longer than on the rows.
void x8_to_rows(const uint8_t* group, int64_t cols, uint8_t* rows, int64_t rb) {
    constexpr int64_t bytes = 144, gbytes = k_rows_x8 * bytes;
    for (int64_t b = 0; b < cols / qk_k; ++b) {
        const uint8_t* o = group + b * gbytes;
        for (int r = 0; r < k_rows_x8; ++r) {  // d, dmin, the three scale words
            uint8_t* p = rows + r * rb + b * bytes;
            std::memcpy(p, o + 2 * r, 2);
            std::memcpy(p + 2, o + 16 + 2 * r, 2);
            for (int w = 0; w < 3; ++w) std::memcpy(p + 4 + 4 * w, o + 32 + 32 * w + 4 * r, 4);
        }
        SL_UNROLL
        for (int h = 0; h < 2; ++h) {
            __m512i v[8], t[8], u[8];
            SL_UNROLL
            for (int k = 0; k < 8; ++k) v[k] = _mm512_loadu_si512(o + 128 + 64 * (8 * h + k));
            SL_UNROLL
            for (int i = 0; i < 4; ++i) {  // per 128-bit lane l: t[2i] = (v[2i].q2l, v[2i+1].q2l), t[2i+1] the odd ones
                t[2 * i] = _mm512_unpacklo_epi64(v[2 * i], v[2 * i + 1]);
                t[2 * i + 1] = _mm512_unpackhi_epi64(v[2 * i], v[2 * i + 1]);
            }
            SL_UNROLL
            for (int i = 0; i < 2; ++i) {
                SL_UNROLL
                for (int e = 0; e < 2; ++e) {
                    u[4 * i + e] = _mm512_shuffle_i64x2(t[4 * i + e], t[4 * i + 2 + e], _MM_SHUFFLE(2, 0, 2, 0));
                    u[4 * i + 2 + e] = _mm512_shuffle_i64x2(t[4 * i + e], t[4 * i + 2 + e], _MM_SHUFFLE(3, 1, 3, 1));
                }
            }
            SL_UNROLL
            for (int e = 0; e < 4; ++e) {  // row e and row e + 4: qword e (e + 4) of all eight pieces
                _mm512_storeu_si512(rows + e * rb + b * bytes + 16 + 64 * h,
                                    _mm512_shuffle_i64x2(u[e], u[4 + e], _MM_SHUFFLE(2, 0, 2, 0)));
                _mm512_storeu_si512(rows + (e + 4) * rb + b * bytes + 16 + 64 * h,
                                    _mm512_shuffle_i64x2(u[e], u[4 + e], _MM_SHUFFLE(3, 1, 3, 1)));
            }
        }
    }
}

}  // namespace

void add_kquant_rows_avx512(kernel_table& k) {
    k.rows[static_cast<int>(dtype::q4_k)] = k.rows_cached[static_cast<int>(dtype::q4_k)] = rows<q4k>;
    k.rows[static_cast<int>(dtype::q6_k)] = k.rows_cached[static_cast<int>(dtype::q6_k)] = rows<q6k>;
    k.x8_to_rows = x8_to_rows;
}

void add_kquant_dots_avx512(sparse_table& k) {
    k.dots[static_cast<int>(dtype::q4_k)] = kquant_dots<q4k>;
    k.dots[static_cast<int>(dtype::q6_k)] = kquant_dots<q6k>;
}

}  // namespace sl::kernels::detail

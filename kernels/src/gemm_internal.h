// Private interface of the blocked int8 GEMM (prefill of block-quantized weights): panel layout, the
// per-token side arrays, and the portable panel kernel the scalar and AVX2 files instantiate.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "sparselens/kernels/types.h"

namespace sl::kernels::detail {

// Rows per weight panel: one zmm of int32/f32 lanes, lane i = panel row i.
constexpr int k_panel_rows = 16;

// A panel of k_panel_rows weight rows decoded once (quant_unpack.h's q, a, b form) and laid out so
// one 64-byte load holds 4 consecutive columns of all 16 rows: q[(c / 4) * 64 + row * 4 + c % 4] =
// q + 128 (unsigned, the u8 operand of vpdpbusd). a and b hold one value per `group` columns per row,
// a[(c / group) * 16 + row]; b is null for types without a minimum. Rows past the matrix are zeros.
struct gemm_panel {
    const uint8_t* q = nullptr;
    const float* a = nullptr;
    const float* b = nullptr;
    int64_t cols = 0;
    int group = 32;  // 16 or 32: the granularity of a (and b)
};

// Every token's quantized activations and, per group g of `group` columns: corr = 128 * sum(qs)
// (removes the +128 of the panel's q exactly), dx = the activation scale, xm = dx * float(sum(qs))
// (the minimum's partner; only for types with one).
struct gemm_tokens {
    const int8_t* qs = nullptr;  // [n][cols]
    const int32_t* corr = nullptr;  // [n][cols / group]
    const float* dx = nullptr;  // [n][cols / group]
    const float* xm = nullptr;  // [n][cols / group] or null
    int64_t n = 0;
    int64_t cols = 0;
};

// y[t * y_stride + i] for t < x.n, i < n_rows (<= 16): the panel's rows dotted with every token.
// Arithmetic (the same bits on every ISA): per row and token, acc = 0 and for each group g in order
//   isum = sum over the group of q * qs             (exact int32)
//   acc  = fma(float(isum), a[g] * dx[g], acc)      (a * dx rounded to f32 first)
//   acc  = fma(b[g], xm[g], acc)                    (types with a minimum)
using gemm_panel_fn = void (*)(const gemm_panel& p, const gemm_tokens& x, float* y, int64_t y_stride, int n_rows);

// Float GEMM (F16/BF16 weights widened to f32 once per gemm): k_float_rows weight rows (f32, K apart)
// against 16 * TV tokens of the transposed activations xt (xt[k * np + t]), into out[r * 32 + t].
// Per row and token: acc = 0, then acc = fma(w[k], x[k], acc) for k = 0, 1, ... in order.
constexpr int k_float_rows = 8;
using gemm_float_fn = void (*)(const float* w, int64_t k, const float* xt, int64_t np, int tv, float* out);

gemm_float_fn gemm_float_scalar();
gemm_float_fn gemm_float_avx2();
gemm_float_fn gemm_float_avx512();

gemm_panel_fn gemm_panel_scalar();
gemm_panel_fn gemm_panel_avx2();
// Null when the CPU lacks AVX-512 VNNI.
gemm_panel_fn gemm_panel_avx512();

namespace {  // each including TU (built with its own ISA flags) gets its own copy

// T tokens starting at t0 against the panel, in plain C++ over the 16 lanes (the compiler vectorizes
// the lane loops with whatever ISA the including file is built for).
template <int T>
void panel_tokens_generic(const gemm_panel& p, const gemm_tokens& x, int64_t t0, float* y, int64_t ys, int nr) {
    const int G = p.group;
    const int64_t ng = p.cols / G;
    float acc[T][k_panel_rows] = {};
    for (int64_t g = 0; g < ng; ++g) {
        int32_t ia[T][k_panel_rows] = {};
        for (int k4 = 0; k4 < G / 4; ++k4) {
            const uint8_t* w = p.q + (g * G / 4 + k4) * 64;
            for (int t = 0; t < T; ++t) {
                const int8_t* xt = x.qs + (t0 + t) * x.cols + g * G + 4 * k4;
                for (int r = 0; r < k_panel_rows; ++r)
                    ia[t][r] += w[4 * r] * xt[0] + w[4 * r + 1] * xt[1] + w[4 * r + 2] * xt[2] + w[4 * r + 3] * xt[3];
            }
        }
        for (int t = 0; t < T; ++t) {
            const int64_t gi = (t0 + t) * ng + g;
            const float dx = x.dx[gi];
            const int32_t corr = x.corr[gi];
            for (int r = 0; r < k_panel_rows; ++r) {
                const float sc = p.a[g * k_panel_rows + r] * dx;
                acc[t][r] = std::fma(static_cast<float>(ia[t][r] - corr), sc, acc[t][r]);
            }
            if (p.b) {
                const float xm = x.xm[gi];
                for (int r = 0; r < k_panel_rows; ++r) acc[t][r] = std::fma(p.b[g * k_panel_rows + r], xm, acc[t][r]);
            }
        }
    }
    for (int t = 0; t < T; ++t) std::memcpy(y + (t0 + t) * ys, acc[t], static_cast<size_t>(nr) * sizeof(float));
}

// Tokens in blocks of 4 (the weights of a group are reused from L1 across them), then one at a time.
[[maybe_unused]] void panel_generic(const gemm_panel& p, const gemm_tokens& x, float* y, int64_t ys, int nr) {
    int64_t t = 0;
    for (; t + 4 <= x.n; t += 4) panel_tokens_generic<4>(p, x, t, y, ys, nr);
    for (; t < x.n; ++t) panel_tokens_generic<1>(p, x, t, y, ys, nr);
}

[[maybe_unused]] void float_generic(const float* w, int64_t k, const float* xt, int64_t np, int tv, float* out) {
    const int nt = 16 * tv;
    float acc[k_float_rows][32] = {};
    for (int64_t c = 0; c < k; ++c)
        for (int r = 0; r < k_float_rows; ++r) {
            const float wv = w[r * k + c];
            for (int t = 0; t < nt; ++t) acc[r][t] = std::fma(wv, xt[c * np + t], acc[r][t]);
        }
    for (int r = 0; r < k_float_rows; ++r) std::memcpy(out + r * 32, acc[r], static_cast<size_t>(nt) * sizeof(float));
}

}  // namespace
}  // namespace sl::kernels::detail

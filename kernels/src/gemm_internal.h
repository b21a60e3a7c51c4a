// Private interface of the blocked int8 GEMM (prefill of block-quantized weights): panel layout, the
// per-token side arrays, and the portable panel kernel the scalar and AVX2 files instantiate.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "sparselens/kernels/types.h"

namespace sl::kernels::detail {

// Rows per weight panel: one zmm of int32/f32 lanes (AVX-512), two ymm (AVX2); lane i = panel row i.
constexpr int k_panel_rows = 16;

// How a panel stores the decoded q (every format keeps the row-lane layout below):
//   plus_128: q + 128, the u8 operand of vpdpbusd (AVX-512 VNNI and the portable kernel); the
//             tokens' corr = 128 * sum(qs) removes the offset.
//   offset:   q + offset (AVX2 vpmaddubsw, types whose q range is small): offset = -(smallest q of
//             the type), so the u8 operand is the type's raw bits (Q4_0 nibbles, Q6_K 6-bit values);
//             the offset is removed with offset * sum(qs). Pair sums of maddubs stay below 2^15, and
//             `steps16` consecutive 4-column steps may be summed in int16 before widening.
//   wide:     q as int16 (AVX2 vpmaddwd, types with |q| up to 128: Q8_0, IQ4), against int16
//             activations; exact for every int8 pair.
// Layout: plus_128 / offset: one 64-byte line holds 4 consecutive columns of all 16 rows,
// q[(c / 4) * 64 + row * 4 + c % 4] (rows 0-7 in the line's first 32 bytes); wide: one line holds 2
// columns, int16 element (c / 2) * 32 + row * 2 + c % 2.
enum class panel_format : uint8_t { plus_128, offset, wide };

// A panel of k_panel_rows weight rows decoded once (quant_unpack.h's q, a, b form), q encoded per
// `format`. a and b hold one value per `group` columns per row, a[(c / group) * 16 + row]; b is null
// for types without a minimum. Rows past the matrix are zeros.
struct gemm_panel {
    const uint8_t* q = nullptr;  // wide: int16 elements
    const float* a = nullptr;
    const float* b = nullptr;
    int64_t cols = 0;
    int group = 32;  // 16 or 32: the granularity of a (and b)
    panel_format format = panel_format::plus_128;
    int offset = 128;  // added to q (plus_128: 128; wide: 0)
    int steps16 = 1;   // offset: 4-column steps whose int16 pair sums cannot overflow
    // The next panel's weight bytes, which a kernel may prefetch while it runs (its fill then reads
    // them from cache instead of waiting on DRAM for 16 interleaved row streams).
    const uint8_t* next = nullptr;
    int64_t next_bytes = 0;
};

// The bits of 1.5 * 2^23 as f32: for |v| < 2^22, the f32 with bits k_f32_magic + v is exactly
// 1.5 * 2^23 + v, so subtracting 1.5 * 2^23 gives float(v) exactly with an integer add and an f32
// subtract (off the two pipes the multiplies share on the AVX2 target). Every group sum is far
// below 2^22 (at most 32 * 128 * 128 in magnitude).
constexpr int32_t k_f32_magic = 0x4B400000;

// One token's per-group side values for the AVX2 kernels, next to each other for the broadcasts.
struct gemm_group_side {
    int32_t bias;  // k_f32_magic - offset * sum(qs of the group)
    float dx;      // the activation scale of the group
    float xm;      // dx * float(sum(qs)) (the minimum's partner)
};

// Every token's quantized activations and, per group g of `group` columns: corr = 128 * sum(qs)
// (removes the +128 of plus_128 panels exactly), dx = the activation scale, xm = dx * float(sum(qs))
// (only for types with a minimum). plus_128 kernels read the token-major arrays; the AVX2 kernels
// read a group-major copy (for group g, the n tokens' `group` values one after another, int8 for
// offset panels and int16 for wide ones, so a panel walks every token of a group as one
// sequential stream) and the side records.
struct gemm_tokens {
    const int8_t* qs = nullptr;             // [n][cols]
    const int32_t* corr = nullptr;          // [n][cols / group]
    const float* dx = nullptr;              // [n][cols / group]
    const float* xm = nullptr;              // [n][cols / group] or null
    const void* qg = nullptr;               // AVX2: [cols / group][n][group], int8 or int16
    const gemm_group_side* side = nullptr;  // AVX2: [cols / group][n]
    int64_t n = 0;
    int64_t cols = 0;
    // AMX: the qs of each whole 16 tokens by group, [n / 16][cols / group][16][group]: one tile load of
    // 16 contiguous rows (from the token-major qs, each row a different line and the load waited on L2).
    const int8_t* qa = nullptr;
};

// y[t * y_stride + i] for t < x.n, i < n_rows (<= 16): the panel's rows dotted with every token.
// Arithmetic (the same bits on every ISA and panel format): per row and token, acc = 0 and for each
// group g in order
//   isum = sum over the group of q * qs             (exact int32)
//   acc  = fma(float(isum), a[g] * dx[g], acc)      (a * dx rounded to f32 first)
//   acc  = fma(b[g], xm[g], acc)                    (types with a minimum)
using gemm_panel_fn = void (*)(const gemm_panel& p, const gemm_tokens& x, float* y, int64_t y_stride, int n_rows);

// Portable float GEMM (F16/BF16 weights widened to f32 once per gemm): k_float_rows weight rows (f32,
// K apart) against 16 * TV tokens of the transposed activations xt (xt[k * np + t]), into
// out[r * 32 + t]. Per row and token: acc = 0, then acc = fma(w[k], x[k], acc) for k = 0, 1, ... in
// order; the AVX2 and AVX-512 panel kernels below keep that chain.
constexpr int k_float_rows = 8;
using gemm_float_fn = void (*)(const float* w, int64_t k, const float* xt, int64_t np, int tv, float* out);

gemm_float_fn gemm_float_scalar();

gemm_panel_fn gemm_panel_scalar();
// Reads offset / wide panels and the group-major token arrays.
gemm_panel_fn gemm_panel_avx2();
// Null when the CPU lacks AVX-512 VNNI.
gemm_panel_fn gemm_panel_avx512();
// AMX-INT8 tiles (plus_128 panels, bits of gemm_panel_avx512): null without AMX-INT8 and VNNI, or when
// the OS does not grant the tile state.
gemm_panel_fn gemm_panel_amx();
// AVX-512 (after the CPUID check): Q8_0 rows [r0, r0 + nr) of w (nr <= 16) into a plus_128 panel q, and a
// (group 32); rows past nr are zeros.
void gemm_fill_q8_0_avx512(const tensor_view& w, int64_t r0, int nr, uint8_t* q, float* a);

// AVX2 helpers (gemm_avx2.cpp), called only after the CPUID check: rows [16][cols] of decoded q
// (cols a multiple of 32) into the panel layout of `format` (offset or wide; q holds 2 * 16 * cols
// bytes for wide).
void gemm_pack_panel_avx2(const int8_t* rows, int64_t cols, panel_format format, int offset, uint8_t* q);
// The same panel decoded straight from the blocks of rows [r0, r0 + nr) of w, with the encoding
// encoding_for gives (Q4_0, Q4_K, Q6_K offset with their own offsets; Q8_0 wide), a and b as the
// unpackers make them; false (nothing written) for the other types. b is written when the type has
// a minimum. `add` is added to every byte of an offset panel (128 - offset makes it plus_128: q + 128).
bool gemm_fill_panel_avx2(const tensor_view& w, int64_t r0, int nr, int group, uint8_t* q, float* a, float* b,
                          uint8_t add = 0);
// Token t of n (its qs, per-32 scales d) into the group-major arrays (int16 values when wide).
void gemm_pack_token_avx2(const int8_t* qs, const float* d, int64_t cols, int group, int offset, bool wide, int64_t t,
                          int64_t n, void* qg, gemm_group_side* side);

// AVX2 float GEMM over panels of 16 rows: wt = columns [c0, c1) of a panel's rows widened and
// transposed, wt[(c - c0) * 16 + r] (rows past the matrix zero); then for every token t < n
//   y[t * ys + r] = (first ? 0 : y[t * ys + r]) then fma(wt[c][r], x[t * xs + c], .) for c in order,
// so walking the column chunks in order keeps the per-row chain of gemm_float_fn.
// The kernel also prefetches `next` (the weight bytes the following widen reads: `rows` runs of
// `bytes`, `stride` apart) a part per token tile, so that widen does not wait on DRAM.
struct gemm_prefetch_rows {
    const uint8_t* p = nullptr;
    int64_t stride = 0, bytes = 0;
    int rows = 0;
    // Part i of `parts` of the lines into L2. Always inlined, as prefetch_span (dense_internal.h): an
    // out-of-line copy would look free of side effects to GCC and its calls be deleted.
    [[gnu::always_inline]] void prefetch_part(int64_t i, int64_t parts) const {
        const int64_t lines_per_row = (bytes + 63) / 64, lines = lines_per_row * rows;
        for (int64_t l = i * lines / parts; l < (i + 1) * lines / parts; ++l)
            __builtin_prefetch(p + (l / lines_per_row) * stride + 64 * (l % lines_per_row), 0, 2);
    }
};

// n tokens as ceil(n / TM) tiles of near-equal size (128 = 18 x 6 + 4 x 5): a short last tile
// reuses each weight load for only a few tokens.
struct token_tiles {
    int64_t count, base, extra;
    token_tiles(int64_t n, int tm) : count((n + tm - 1) / tm), base(n / count), extra(n % count) {}
    int size(int64_t i) const { return static_cast<int>(base + (i < extra ? 1 : 0)); }
};

void gemm_widen_panel_avx2(const tensor_view& w, int64_t r0, int nr, int64_t c0, int64_t c1, float* wt);
void gemm_float_panel_avx2(const float* wt, int64_t kc, const float* x, int64_t xs, int64_t n, float* y, int64_t ys,
                           bool first, const gemm_prefetch_rows& next);
// The same over 16 * k_float_halves rows (AVX-512F): wt holds that many 16-row panels, rows 16 h to
// 16 h + 15 at wt + h * kc * 16, and xp the chunk's activations as gemm_float_pack_avx512 packs them
// (n * kc floats): in the kernel's token tiles, each tile column-major (the tile of tokens [t, t + s)
// at xp + t * kc, x[t + j][c] at c * s + j).
constexpr int k_float_halves = 2;  // 16-row panels per AVX-512 float panel
void gemm_float_pack_avx512(const float* x, int64_t xs, int64_t n, int64_t kc, float* xp);
void gemm_float_panel_avx512(const float* wt, int64_t kc, const float* xp, int64_t n, float* y, int64_t ys, bool first,
                             const gemm_prefetch_rows& next);

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

// One (token, head) of causal attention, included by attention.cpp (portable build), attention_avx2.cpp
// (AVX2 build) and attention_avx512.cpp (AVX-512 build). Everything is in an anonymous namespace so each
// including TU, built with its own ISA flags, gets its own copy.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "sparselens/kernels/attention.h"

namespace sl::kernels::detail {

// The functions of one build of this file (attend_group, swiglu_lanes, geglu_lanes, softcap_lanes below):
// the portable one (attention.cpp), AVX2 and AVX-512 (attention_avx2.cpp, attention_avx512.cpp),
// bit-identical to each other. Each build's table is only fetched after a CPUID check allows its ISA.
using attend_fn = void (*)(const float* q, int32_t group, const float* k_cache, const float* v_cache, int32_t n_pos,
                           int64_t kv_stride, const attention_shape& shape, float* out, float* att);
using glu_fn = void (*)(float* y, const float* gate, const float* up, int64_t n);
using softcap_fn = void (*)(float* y, const float* x, int64_t n, float cap);
struct attention_fns {
    attend_fn attend;
    glu_fn swiglu, geglu;
    softcap_fn softcap;
};
attention_fns attention_fns_avx512();
attention_fns attention_fns_avx2();

namespace {

// The arithmetic works on 16 lanes: q . k sums element i into lane i % 16, then folds the lanes in a fixed
// tree; the weighted sum of V is element-wise. Each build holds the 16 lanes in vectors of its native
// width (k_w floats: 4 SSE, 8 AVX2, 16 AVX-512) with the same per-lane operations and no FMA contraction
// (-ffp-contract=off), so every build gives identical bits. (One 64-byte generic vector on SSE2 or AVX2
// was lowered through the stack: scalar stores and reloads that stall store forwarding, which made the
// AVX2 build slower than SSE2.) The scalar loops before were bound by the latency of one float add per
// element (~178 us per decode layer at position 127, 32 heads x 64).
#if defined(__AVX512F__)
constexpr int k_w = 16;
#elif defined(__AVX2__)
constexpr int k_w = 8;
#else
constexpr int k_w = 4;
#endif
using vnat = float __attribute__((vector_size(4 * k_w)));
using v4 = float __attribute__((vector_size(16)));
using v8 = float __attribute__((vector_size(32)));
constexpr int32_t k_lanes = 16;
constexpr int k_parts = k_lanes / k_w;
// Heads whose value sums run together (weighted_sum): 4 x 64 floats in registers with AVX-512, one head
// on the narrower builds (16 ymm or 32 xmm registers would spill).
constexpr int k_value_heads = k_parts == 1 ? 4 : 1;

struct lanes16 {
    vnat p[k_parts];
};

// Unaligned loads, one native vector at a time (a memcpy of the whole struct was expanded into 16-byte
// moves through the stack, which a 32-byte load cannot forward from). One vector's memcpy compiles to one
// unaligned load; dereferencing an under-aligned vector typedef did too with GCC, but clang keeps the
// vector's natural alignment for it (UBSan: misaligned load, found by the fuzz build once swiglu used it).
inline vnat loadn(const float* p) {
    vnat v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline void load16(lanes16& v, const float* p) {
    for (int j = 0; j < k_parts; ++j) v.p[j] = loadn(p + k_w * j);
}

// acc = q[0, 16) * k[0, 16), then acc += q[i, i + 16) * k[i, i + 16) for the following full 16s (n >= 16).
inline void lane_products(const float* q, const float* k, int32_t n, lanes16& acc) {
    lanes16 a, b;
    load16(a, q);
    load16(b, k);
    for (int j = 0; j < k_parts; ++j) acc.p[j] = a.p[j] * b.p[j];
    for (int32_t i = k_lanes; i + k_lanes <= n; i += k_lanes) {
        load16(a, q + i);
        load16(b, k + i);
        for (int j = 0; j < k_parts; ++j) acc.p[j] += a.p[j] * b.p[j];
    }
}

// The first two steps of the fold, lane[j] += lane[j + w] for w = 8, 4: lanes 0-3 after them.
inline v4 fold_to4(const lanes16& a) {
#if defined(__AVX512F__)
    const v8 b = __builtin_shufflevector(a.p[0], a.p[0], 0, 1, 2, 3, 4, 5, 6, 7) +
                 __builtin_shufflevector(a.p[0], a.p[0], 8, 9, 10, 11, 12, 13, 14, 15);
    return __builtin_shufflevector(b, b, 0, 1, 2, 3) + __builtin_shufflevector(b, b, 4, 5, 6, 7);
#elif defined(__AVX2__)
    const v8 b = a.p[0] + a.p[1];
    return __builtin_shufflevector(b, b, 0, 1, 2, 3) + __builtin_shufflevector(b, b, 4, 5, 6, 7);
#else
    return (a.p[0] + a.p[2]) + (a.p[1] + a.p[3]);
#endif
}

// q . k over n elements: 16 lane sums, folded lane[j] += lane[j + w] for w = 8, 4, 2, 1, then the scalar
// tail.
inline float dot(const float* q, const float* k, int32_t n) {
    int32_t i = 0;
    float s = 0.0f;
    if (n >= k_lanes) {
        lanes16 acc;
        lane_products(q, k, n, acc);
        const v4 c = fold_to4(acc);
        s = (c[0] + c[2]) + (c[1] + c[3]);
        i = n / k_lanes * k_lanes;
    }
    for (; i < n; ++i) s += q[i] * k[i];
    return s;
}

// dot() of q with the 4 rows at k (stride floats apart), n a multiple of 16: the same operations per row;
// the last two fold steps run on the four rows at once.
inline void dot4(const float* q, const float* k, int64_t stride, int32_t n, float* s) {
    lanes16 a0, a1, a2, a3;
    lane_products(q, k, n, a0);
    lane_products(q, k + stride, n, a1);
    lane_products(q, k + 2 * stride, n, a2);
    lane_products(q, k + 3 * stride, n, a3);
    const v4 c0 = fold_to4(a0), c1 = fold_to4(a1), c2 = fold_to4(a2), c3 = fold_to4(a3);
    const v4 e01 = __builtin_shufflevector(c0, c1, 0, 1, 4, 5) + __builtin_shufflevector(c0, c1, 2, 3, 6, 7);
    const v4 e23 = __builtin_shufflevector(c2, c3, 0, 1, 4, 5) + __builtin_shufflevector(c2, c3, 2, 3, 6, 7);
    const v4 r = __builtin_shufflevector(e01, e23, 0, 2, 4, 6) + __builtin_shufflevector(e01, e23, 1, 3, 5, 7);
    std::memcpy(s, &r, sizeof r);
}

#if defined(__AVX512F__)
// dot() of 4 query heads (q_stride floats apart) with 4 keys (k, stride floats apart), n a multiple of 16,
// times scale, stored to att + h * att_stride + j for head h and key j. The 16 lane sums are dot()'s (one
// zmm each: element i into lane i % 16, in element order), and the fold is dot()'s tree: lane[j] +=
// lane[j + 8], then + 4, then (l0 + l2) + (l1 + l3); here it runs on all 16 dots at once through 128-bit
// block shuffles and an in-block 4x4 transpose (47 operations for 16 dots, against dot4's ~6 per dot), and
// each key's 4 vectors are loaded once for the 4 heads. The same operations per dot, so the same bits.
inline void dot16(const float* q, int64_t q_stride, const float* k, int64_t stride, int32_t n, float scale, float* att,
                  int64_t att_stride) {
    __m512 a[4][4];  // [head][key]
    for (int32_t i = 0; i < n; i += 16) {
        __m512 kv[4];
        for (int j = 0; j < 4; ++j) kv[j] = _mm512_loadu_ps(k + j * stride + i);
        for (int h = 0; h < 4; ++h) {
            const __m512 qv = _mm512_loadu_ps(q + h * q_stride + i);
            for (int j = 0; j < 4; ++j)
                a[h][j] = i == 0 ? _mm512_mul_ps(qv, kv[j]) : _mm512_add_ps(a[h][j], _mm512_mul_ps(qv, kv[j]));
        }
    }
    // lane[j] + lane[j + 8] of x and y: [x's 8 | y's 8] (blocks 0 + 2, 1 + 3).
    const auto fold8 = [](__m512 x, __m512 y) {
        return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x44), _mm512_shuffle_f32x4(x, y, 0xee));
    };
    // Of [x | y] and [z | w] (8 lanes each), lane[j] + lane[j + 4]: blocks [x, y, z, w], 4 lanes each.
    const auto fold4 = [](__m512 xy, __m512 zw) {
        return _mm512_add_ps(_mm512_shuffle_f32x4(xy, zw, 0x88), _mm512_shuffle_f32x4(xy, zw, 0xdd));
    };
    __m512 c[4];  // key j: block h = head h's 4 lanes
    for (int j = 0; j < 4; ++j) c[j] = fold4(fold8(a[0][j], a[1][j]), fold8(a[2][j], a[3][j]));
    // In every block, lanes m of c[0..3] side by side (a 4x4 transpose): r[m] lane j = key j's lane m.
    const __m512 t0 = _mm512_unpacklo_ps(c[0], c[1]), t1 = _mm512_unpackhi_ps(c[0], c[1]);
    const __m512 t2 = _mm512_unpacklo_ps(c[2], c[3]), t3 = _mm512_unpackhi_ps(c[2], c[3]);
    const auto lo = [](__m512 x, __m512 y) {
        return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(x), _mm512_castps_pd(y)));
    };
    const auto hi = [](__m512 x, __m512 y) {
        return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(x), _mm512_castps_pd(y)));
    };
    const __m512 r0 = lo(t0, t2), r1 = hi(t0, t2), r2 = lo(t1, t3), r3 = hi(t1, t3);
    const __m512 d = _mm512_mul_ps(_mm512_add_ps(_mm512_add_ps(r0, r2), _mm512_add_ps(r1, r3)), _mm512_set1_ps(scale));
    _mm_storeu_ps(att, _mm512_castps512_ps128(d));
    _mm_storeu_ps(att + att_stride, _mm512_extractf32x4_ps(d, 1));
    _mm_storeu_ps(att + 2 * att_stride, _mm512_extractf32x4_ps(d, 2));
    _mm_storeu_ps(att + 3 * att_stride, _mm512_extractf32x4_ps(d, 3));
}
#endif

// For each of H heads h: out_h[0, 16 NC) = sum over positions p of (att_h[p] * inv[h]) v_p[0, 16 NC),
// v_p = v + p * stride, out_h = out + h * out_stride, att_h = att + h * att_stride, in position order
// starting from zero: per element out[i] += a * v[i] in that order, with out held in registers.
// Init: out starts from zero; otherwise the sums continue from out (stored and reloaded exactly, so a
// range split into pieces gives the same bits as one call). The heads share each V load, and their sums
// are H independent add chains per element: one head alone waits on its adds' latency every position.
// A head's arithmetic never depends on H.
template <int NC, bool Init, int H>
inline void weighted_sum(float* out, int64_t out_stride, const float* v, int64_t stride, const float* att,
                         int64_t att_stride, const float* inv, int32_t first, int32_t n_pos) {
    constexpr int n = NC * k_parts;
    vnat o[H][n];
    for (int h = 0; h < H; ++h)
        for (int c = 0; c < n; ++c) o[h][c] = Init ? vnat{} : loadn(out + h * out_stride + k_w * c);
    for (int32_t p = first; p < n_pos; ++p) {
        const float* vp = v + static_cast<int64_t>(p) * stride;
        vnat vv[n];
        for (int c = 0; c < n; ++c) vv[c] = loadn(vp + k_w * c);
        for (int h = 0; h < H; ++h) {
            const float a = att[h * att_stride + p] * inv[h];
            for (int c = 0; c < n; ++c) o[h][c] += a * vv[c];
        }
    }
    for (int h = 0; h < H; ++h) std::memcpy(out + h * out_stride, o[h], sizeof o[h]);
}

// ---- SwiGLU ------------------------------------------------------------------------------------

using vint = int32_t __attribute__((vector_size(4 * k_w)));

// e^x in every lane for x in [-80, 80] (clamped to it), Cephes' expf: x = n ln2 + r with n = round(x
// log2 e) (the 1.5 * 2^23 trick, the default rounding mode) and |r| <= ln2 / 2 (ln2 in two parts, n ln2_hi
// exact), e^r = 1 + r + r^2 P(r) with P of degree 5 (~1 ulp), times 2^n from the exponent bits. The range
// keeps every value SiLU forms from it normal: denormals (e^-87 and 1 / (1 + e^87)) cost a microcode
// assist each, which made the whole kernel 3x slower on gate values of a few hundred. NaN passes through
// (the comparisons are false for it). Per-lane operations only, no FMA contraction (-ffp-contract=off):
// every build gives the same bits.
inline vnat exp_lanes(vnat x) {
    x = x > 80.0f ? vnat{} + 80.0f : x;
    x = x < -80.0f ? vnat{} - 80.0f : x;
    const vnat n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    vnat r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    vnat p = vnat{} + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    // NaN lanes convert 0 instead (a NaN float-to-int conversion is undefined); p carries their NaN.
    const vint e = (__builtin_convertvector(n == n ? n : vnat{}, vint) + 127) << 23;
    return p * (vnat)e;  // GCC vector casts reinterpret the bits
}

// y = act(g, u) over n elements, k_w lanes at a time; the last n % k_w through a padded vector, so every
// element gets the same operations wherever it sits. u = 1 when up is null.
template <typename Act>
inline void glu_lanes(float* y, const float* gate, const float* up, int64_t n, Act act) {
    const vnat ones = vnat{} + 1.0f;
    int64_t i = 0;
    for (; i + k_w <= n; i += k_w) {
        const vnat v = act(loadn(gate + i), up ? loadn(up + i) : ones);
        std::memcpy(y + i, &v, sizeof v);
    }
    if (i < n) {
        float g[k_w] = {}, u[k_w] = {};
        std::copy(gate + i, gate + n, g);
        if (up)
            std::copy(up + i, up + n, u);
        else
            std::fill(u, u + k_w, 1.0f);
        const vnat v = act(loadn(g), loadn(u));
        std::memcpy(y + i, &v, static_cast<size_t>(n - i) * sizeof(float));
    }
}

// y = silu(g) * u = g * (1 / (1 + e^-g)) * u. Below g = -80 (where e^-g is clamped) y is 0 * u: the true
// |y| is under 2e-33 |u| there, and -inf gives 0 rather than NaN. Above g = 80, 1 / (1 + e^-g) is 1 in
// float, clamped or not.
void swiglu_lanes(float* y, const float* gate, const float* up, int64_t n) {
    glu_lanes(y, gate, up, n, [](vnat g, vnat u) {
        return g < -80.0f ? 0.0f * u : g * (1.0f / (1.0f + exp_lanes(-g))) * u;
    });
}

// y = gelu_tanh(g) * u, GELU's tanh approximation as ggml and Gemma use it, in its sigmoid form:
// 0.5 (1 + tanh(z)) = 1 / (1 + e^(-2z)), z = sqrt(2 / pi) (g + 0.044715 g^3), so -2z = g (c1 + c2 g^2).
// No cancellation where tanh(z) nears -1 (the tanh form loses all digits of 1 + tanh there), and the same
// exp as SiLU. Where -2z > 80 (g below about -9.3) y is 0 * u: the true |y| is under 2e-34 |g u|.
void geglu_lanes(float* y, const float* gate, const float* up, int64_t n) {
    glu_lanes(y, gate, up, n, [](vnat g, vnat u) {
        const vnat a = g * (-1.59576912160573071f + -0.0713548162726002527f * (g * g));
        return a > 80.0f ? 0.0f * u : g * (1.0f / (1.0f + exp_lanes(a))) * u;
    });
}

// tanh(z) in every lane: below |z| = 0.125 its odd Taylor series to z^9 (relative error under 1e-11
// there), above it (1 - t) / (1 + t) with t = e^(-2|z|) and z's sign (within ~4 ulp: 1 - t keeps all but
// 2 bits from |z| = 0.125 on). |z| >= 40 gives +-1 (t clamped to e^-80), NaN stays NaN.
inline vnat tanh_lanes(vnat z) {
    const vnat a = z < 0.0f ? -z : z, z2 = z * z;
    const vnat series = z + z * z2 * (-0.333333333333333333f +
                                      z2 * (0.133333333333333333f + z2 * (-0.053968253968253968f +
                                                                           z2 * 0.021869488536155203f)));
    const vnat t = exp_lanes(-2.0f * a);
    const vnat big = (1.0f - t) / (1.0f + t);
    return a < 0.125f ? series : (z < 0.0f ? -big : big);
}

// y = cap * tanh(x / cap) (Gemma-2's soft-capping of logits and attention scores), n elements.
void softcap_lanes(float* y, const float* x, int64_t n, float cap) {
    glu_lanes(y, x, nullptr, n, [cap](vnat g, vnat) { return cap * tanh_lanes(g / cap); });
}

// max of x[0, n) (exact in any order), n >= 1.
inline float max_lanes(const float* x, int64_t n) {
    int64_t i = 0;
    float m = x[0];
    if (n >= k_w) {
        vnat v = loadn(x);
        for (i = k_w; i + k_w <= n; i += k_w) {
            const vnat w = loadn(x + i);
            v = w > v ? w : v;
        }
        for (int j = 0; j < k_w; ++j) m = v[j] > m ? v[j] : m;
    }
    for (; i < n; ++i) m = x[i] > m ? x[i] : m;
    return m;
}

// x[i] = e^(x[i] - m) for i < n, returning their sum: 16 lane sums (element i into lane i % 16, as dot()),
// folded lane[j] += lane[j + w] for w = 8, 4, 2, 1, then the scalar tail in order: the same bits on
// every build. e^ below -80 is clamped to e^-80 (2e-35, where the true value is smaller still).
inline float exp_sub_sum(float* x, int64_t n, float m) {
    int64_t i = 0;
    float s = 0.0f;
    if (n >= k_lanes) {
        lanes16 acc;
        for (int j = 0; j < k_parts; ++j) acc.p[j] = vnat{};
        for (; i + k_lanes <= n; i += k_lanes)
            for (int j = 0; j < k_parts; ++j) {
                const vnat e = exp_lanes(loadn(x + i + k_w * j) - m);
                std::memcpy(x + i + k_w * j, &e, sizeof e);
                acc.p[j] += e;
            }
        const v4 c = fold_to4(acc);
        s = (c[0] + c[2]) + (c[1] + c[3]);
    }
    if (i < n) {  // the last n % 16 through padded vectors, summed in order
        float t[k_lanes] = {};
        std::copy(x + i, x + n, t);
        for (int b = 0; b < k_lanes; b += k_w) {
            const vnat e = exp_lanes(loadn(t + b) - m);
            std::memcpy(t + b, &e, sizeof e);
        }
        for (int64_t j = 0; j < n - i; ++j) {
            x[i + j] = t[j];
            s += t[j];
        }
    }
    return s;
}

// weighted_sum over the first d16 columns (a multiple of 16) of H heads out_stride floats apart: 64 at a
// time, then the rest.
template <bool Init, int H>
inline void weighted_sums(float* out, int64_t out_stride, const float* v, int64_t stride, const float* att,
                          int64_t att_stride, const float* inv, int32_t first, int32_t n_pos, int32_t d16) {
    int32_t d = 0;
    for (; d + 4 * k_lanes <= d16; d += 4 * k_lanes)
        weighted_sum<4, Init, H>(out + d, out_stride, v + d, stride, att, att_stride, inv, first, n_pos);
    switch ((d16 - d) / k_lanes) {
        case 3:
            weighted_sum<3, Init, H>(out + d, out_stride, v + d, stride, att, att_stride, inv, first, n_pos);
            break;
        case 2:
            weighted_sum<2, Init, H>(out + d, out_stride, v + d, stride, att, att_stride, inv, first, n_pos);
            break;
        case 1:
            weighted_sum<1, Init, H>(out + d, out_stride, v + d, stride, att, att_stride, inv, first, n_pos);
            break;
        default:
            break;
    }
}

// The value pass of `group` heads over positions [p0, p1) and their first head_dim / 16 * 16 columns:
// k_value_heads at a time where the build's registers hold their sums, then one by one.
template <bool Init>
inline void weighted_sums_group(float* out, int32_t group, const float* v, int64_t stride, const float* att,
                                int32_t n_pos, const float* inv, int32_t p0, int32_t p1, int32_t head_dim) {
    const int32_t d16 = head_dim / k_lanes * k_lanes;
    int32_t h = 0;
    for (; h + k_value_heads <= group; h += k_value_heads)
        weighted_sums<Init, k_value_heads>(out + static_cast<int64_t>(h) * head_dim, head_dim, v, stride,
                                           att + static_cast<int64_t>(h) * n_pos, n_pos, inv + h, p0, p1, d16);
    for (; h < group; ++h)
        weighted_sums<Init, 1>(out + static_cast<int64_t>(h) * head_dim, head_dim, v, stride,
                               att + static_cast<int64_t>(h) * n_pos, n_pos, inv + h, p0, p1, d16);
}

// Positions ahead whose K rows the score loop prefetches into L1; it also takes the V rows of its own
// positions into L2 for the value pass. In decode a layer's KV cache comes from DRAM (each layer's
// weight stream evicts it). llama-1b Q4_0, positions 64-160, 2 threads, `bench --stages` (builds
// alternating x3), with the cache row-major: attention 0.49-0.56 ms per token without, 0.39-0.46 with
// this (16 positions ahead 0.39-0.51; K alone 0.39-0.49); head-major (the context's layout since stop
// 44, one stream per KV head), still 0.48-0.56 without against 0.30-0.40, and after a 1024-token prompt
// 2.8-3.3 against 2.3-2.7. Prefetches change no arithmetic.
constexpr int32_t k_prefetch_positions = 8;

// The head_dim floats of the 4 rows from k (stride floats apart), every cache line: Locality 3 is
// prefetcht0 (L1), 2 prefetcht1 (L2).
template <int Locality>
inline void prefetch_rows(const float* k, int64_t stride, int32_t head_dim) {
    for (int j = 0; j < 4; ++j)
        for (int32_t i = 0; i < head_dim; i += 16) __builtin_prefetch(k + j * stride + i, 0, Locality);
}

// Query heads per attend_group call at most (attention_causal splits larger GQA groups).
constexpr int32_t k_max_group = 16;

// Positions per block of the value pass: the block's V rows (64 of 64 floats: 16 KiB) stay in L1 while
// every head of the group reads them.
constexpr int32_t k_value_block = 64;

// One query token's attention for `group` (<= k_max_group) query heads sharing one KV head (GQA): q and out hold the
// heads head_dim floats apart, the cache rows of the KV head start at position 0 (kv_stride floats
// apart), n_pos positions, att scratch [group * n_pos]. Each head's arithmetic is the same sequence of
// float operations whatever the group, so grouping only changes which loads are shared: 4 K rows serve
// every head's dot4 (AVX-512: 4 heads' dot16) from L1, and a block of V rows every head's weighted sums
// (4 heads at a time on AVX-512; each head re-read the whole K and V slice of its KV head from L2 before:
// 256 KiB each at position 1000 on llama-1b). One
// token, 32 heads of 64 over 4 KV heads, one AVX2 thread: 368 -> 307 us per layer at position 1000,
// 1729 -> 1289 at 4000 (after the vector softmax; /tmp harness, stop 23).
void attend_group(const float* q, int32_t group, const float* k_cache, const float* v_cache, int32_t n_pos,
                  int64_t kv_stride, const attention_shape& shape, float* out, float* att) {
    const int32_t head_dim = shape.head_dim;
    const float scale = shape.scale > 0.0f ? shape.scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
    const int32_t first = shape.window > 0 ? std::max(0, n_pos - shape.window) : 0;
    int32_t p = first;
    if (head_dim % k_lanes == 0) {
        for (; p + 4 <= n_pos; p += 4) {
            const float* k = k_cache + static_cast<int64_t>(p) * kv_stride;
            if (p + k_prefetch_positions + 4 <= n_pos)
                prefetch_rows<3>(k + k_prefetch_positions * static_cast<int64_t>(kv_stride), kv_stride, head_dim);
            prefetch_rows<2>(v_cache + static_cast<int64_t>(p) * kv_stride, kv_stride, head_dim);
            int32_t h = 0;
#if defined(__AVX512F__)
            for (; h + 4 <= group; h += 4)
                dot16(q + static_cast<int64_t>(h) * head_dim, head_dim, k, kv_stride, head_dim, scale,
                      att + static_cast<int64_t>(h) * n_pos + p, n_pos);
#endif
            for (; h < group; ++h) {
                float s[4];
                dot4(q + static_cast<int64_t>(h) * head_dim, k, kv_stride, head_dim, s);
                for (int j = 0; j < 4; ++j) att[static_cast<int64_t>(h) * n_pos + p + j] = s[j] * scale;
            }
        }
    }
    for (; p < n_pos; ++p)
        for (int32_t h = 0; h < group; ++h)
            att[static_cast<int64_t>(h) * n_pos + p] =
                dot(q + static_cast<int64_t>(h) * head_dim, k_cache + static_cast<int64_t>(p) * kv_stride, head_dim) *
                scale;
    // Soft-capping, max and the exponentials in vectors, not libm's tanhf and expf per score: one token at
    // position 1000, 32 heads of 64 over 4 KV heads, one AVX2 thread, 500 -> 368 us per layer, with
    // Gemma-2's soft-capping 1062 -> 418 (/tmp harness, stop 23).
    float inv[k_max_group];
    for (int32_t h = 0; h < group; ++h) {
        float* a = att + static_cast<int64_t>(h) * n_pos + first;
        if (shape.softcap > 0.0f) softcap_lanes(a, a, n_pos - first, shape.softcap);
        inv[h] = 1.0f / exp_sub_sum(a, n_pos - first, max_lanes(a, n_pos - first));
    }
    const int32_t d16 = head_dim / k_lanes * k_lanes;
    for (int32_t p0 = first; p0 < n_pos; p0 += k_value_block) {
        const int32_t p1 = std::min(n_pos, p0 + k_value_block);
        if (p0 == first)
            weighted_sums_group<true>(out, group, v_cache, kv_stride, att, n_pos, inv, p0, p1, head_dim);
        else
            weighted_sums_group<false>(out, group, v_cache, kv_stride, att, n_pos, inv, p0, p1, head_dim);
    }
    if (d16 < head_dim) {  // the last head_dim % 16 elements, in the same order
        for (int32_t h = 0; h < group; ++h) {
            const float* a = att + static_cast<int64_t>(h) * n_pos;
            float* o = out + static_cast<int64_t>(h) * head_dim;
            std::fill(o + d16, o + head_dim, 0.0f);
            for (p = first; p < n_pos; ++p) {
                const float w = a[p] * inv[h];
                const float* v = v_cache + static_cast<int64_t>(p) * kv_stride;
                for (int32_t i = d16; i < head_dim; ++i) o[i] += w * v[i];
            }
        }
    }
}

// This build's table (attention_fns).
inline attention_fns this_build_fns() {
    return {attend_group, swiglu_lanes, geglu_lanes, softcap_lanes};
}

}  // namespace
}  // namespace sl::kernels::detail

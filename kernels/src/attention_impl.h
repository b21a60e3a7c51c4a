// One (token, head) of causal attention, included by attention.cpp (portable build),
// attention_avx512.cpp and attention_avx2.cpp (AVX-512 and AVX2 builds). Everything is in an anonymous
// namespace so each including TU, built with its own ISA flags, gets its own copy.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "sparselens/kernels/attention.h"

#if defined(__AVX2__) && !defined(__AVX512F__)
#include <immintrin.h>
#define SL_ATTENTION_YMM 1  // dot and axpy below on two ymm halves per 16 lanes
#endif

namespace sl::kernels::detail {

// attend_one of one build: q [head_dim], the cache rows of its KV head from position 0 (kv_stride
// floats apart), n_pos positions, att scratch [n_pos].
using attend_fn = void (*)(const float* q, const float* k_cache, const float* v_cache, int32_t n_pos,
                           int32_t kv_stride, const attention_shape& shape, float* out, float* att);

// The AVX-512 and AVX2 builds of attend_one (attention_avx512.cpp, attention_avx2.cpp), bit-identical
// to the portable one.
attend_fn attend_avx512();
attend_fn attend_avx2();

namespace {

// 16 floats as one value: GCC/clang lower it to whatever the including TU's ISA has (one zmm op with
// AVX-512, 4 SSE ops on the portable x86-64 baseline) with the same per-lane arithmetic and no FMA
// contraction (-ffp-contract=off), so both builds give identical bits. The scalar loops it replaced were bound by the latency
// of one float add per element (~178 us per decode layer at position 127, 32 heads x 64).
using v16 = float __attribute__((vector_size(64)));
constexpr int32_t k_lanes = 16;

// Unaligned load; by reference, since returning a 64-byte vector from a function changes the ABI
// between ISAs (GCC warns).
inline void load16(v16& v, const float* p) { std::memcpy(&v, p, sizeof v); }

#ifdef SL_ATTENTION_YMM
// The AVX2 build spells the 16 lanes as two ymm with intrinsics: GCC moves a 64-byte vector through
// the stack in 16-byte pieces when registers are 32 bytes wide (store-forwarding stalls, 1.6x slower
// than the SSE build). Same lanes, same operations, same fold order as the generic code below.
inline float dot(const float* q, const float* k, int32_t n) {
    int32_t i = 0;
    float s = 0.0f;
    if (n >= k_lanes) {
        __m256 lo = _mm256_mul_ps(_mm256_loadu_ps(q), _mm256_loadu_ps(k));
        __m256 hi = _mm256_mul_ps(_mm256_loadu_ps(q + 8), _mm256_loadu_ps(k + 8));
        for (i = k_lanes; i + k_lanes <= n; i += k_lanes) {
            lo = _mm256_add_ps(lo, _mm256_mul_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i)));
            hi = _mm256_add_ps(hi, _mm256_mul_ps(_mm256_loadu_ps(q + i + 8), _mm256_loadu_ps(k + i + 8)));
        }
        const __m256 w8 = _mm256_add_ps(lo, hi);  // lane[j] += lane[j + 8]
        const __m128 w4 = _mm_add_ps(_mm256_castps256_ps128(w8), _mm256_extractf128_ps(w8, 1));
        const __m128 w2 = _mm_add_ps(w4, _mm_movehl_ps(w4, w4));
        s = _mm_cvtss_f32(_mm_add_ss(w2, _mm_movehdup_ps(w2)));
    }
    for (; i < n; ++i) s += q[i] * k[i];
    return s;
}

inline void axpy(float* out, float a, const float* v, int32_t n) {
    const __m256 av = _mm256_set1_ps(a);
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(out + i), _mm256_mul_ps(av, _mm256_loadu_ps(v + i))));
    for (; i < n; ++i) out[i] += a * v[i];
}
#else
// q . k over head_dim elements: 16 lane sums, folded in a fixed order, then the scalar tail.
inline float dot(const float* q, const float* k, int32_t n) {
    int32_t i = 0;
    float s = 0.0f;
    if (n >= k_lanes) {
        v16 a, b;
        load16(a, q);
        load16(b, k);
        v16 acc = a * b;
        for (i = k_lanes; i + k_lanes <= n; i += k_lanes) {
            load16(a, q + i);
            load16(b, k + i);
            acc += a * b;
        }
        float lane[k_lanes];
        std::memcpy(lane, &acc, sizeof lane);
        for (int w = k_lanes / 2; w > 0; w /= 2)
            for (int j = 0; j < w; ++j) lane[j] += lane[j + w];
        s = lane[0];
    }
    for (; i < n; ++i) s += q[i] * k[i];
    return s;
}

// out += a * v, element by element (the same rounding as the scalar loop).
inline void axpy(float* out, float a, const float* v, int32_t n) {
    int32_t i = 0;
    for (; i + k_lanes <= n; i += k_lanes) {
        v16 o, w;
        load16(o, out + i);
        load16(w, v + i);
        o += a * w;
        std::memcpy(out + i, &o, sizeof o);
    }
    for (; i < n; ++i) out[i] += a * v[i];
}
#endif

void attend_one(const float* q, const float* k_cache, const float* v_cache, int32_t n_pos, int32_t kv_stride,
                const attention_shape& shape, float* out, float* att) {
    const int32_t head_dim = shape.head_dim;
    const float scale = shape.scale > 0.0f ? shape.scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
    const int32_t first = shape.window > 0 ? std::max(0, n_pos - shape.window) : 0;
    float max_score = -INFINITY;
    for (int32_t p = first; p < n_pos; ++p) {
        const float* k = k_cache + static_cast<int64_t>(p) * kv_stride;
        float s = dot(q, k, head_dim) * scale;
        if (shape.softcap > 0.0f) s = shape.softcap * std::tanh(s / shape.softcap);
        att[p] = s;
        max_score = std::max(max_score, s);
    }
    float sum = 0.0f;
    for (int32_t p = first; p < n_pos; ++p) {
        att[p] = std::exp(att[p] - max_score);
        sum += att[p];
    }
    const float inv = 1.0f / sum;
    std::fill(out, out + head_dim, 0.0f);
    for (int32_t p = first; p < n_pos; ++p) {
        const float* v = v_cache + static_cast<int64_t>(p) * kv_stride;
        axpy(out, att[p] * inv, v, head_dim);
    }
}

}  // namespace
}  // namespace sl::kernels::detail

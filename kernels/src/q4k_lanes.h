// Private: the float steps every Q4_K dot takes against Q8_K activations, shared by the row kernels of
// the AVX2 and AVX-512 files and the 8-row interleaved kernel (Q4_Kx8r, q4k_r8_avx512.h). Include only from
// files built with AVX2 + FMA + F16C (anonymous namespace: one copy per TU, as row_dots_avx2.h).
//
// A row's dot is kept in two float lanes: lane e sums the elements whose index mod 8 is in [4e, 4e + 4).
// Per super-block each lane takes an exact integer A_e = sum sc_g q x over its elements and an exact
// integer B_e = sum m_g S_g over a fixed half of the groups (lane 0: groups 0, 1, 4, 5; lane 1: 2, 3, 6,
// 7; S_g the sum of x's quants in group g), then acc_e = fma(A_e, d dx, acc_e) and
// acc_e = fnmadd(B_e, dmin dx, acc_e); the row is acc_0 + acc_1. Why this shape: an 8-row interleaved
// kernel holds a row in exactly two dword lanes (vpdpbusd over an 8-byte broadcast of x), so its scale,
// minimum and float work is vector-wide across rows; the row kernels reduce their lanes to the same two
// integers, so a row's bits do not depend on its layout, its ISA (AVX2 or AVX-512) or on whether a dense
// gemv or a sparse gather computed it.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace sl::kernels::detail {
namespace {

// S_g for every 32 quants of x (cols a multiple of 32), in a grow-only thread_local buffer valid until
// the thread's next call.
inline const int16_t* q4k_group_sums(const int8_t* qs, int64_t cols) {
    thread_local std::vector<int16_t> buf;
    if (buf.size() < static_cast<size_t>(cols / 32 + 8)) buf.resize(static_cast<size_t>(cols / 32 + 8));
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int64_t g = 0; g < cols / 32; ++g) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * g));
        const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, x), ones16);  // 8 dwords
        __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        t = _mm_add_epi32(t, _mm_unpackhi_epi64(t, t));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 1));
        buf[static_cast<size_t>(g)] = static_cast<int16_t>(_mm_cvtsi128_si32(t));  // |S_g| <= 32 * 128
    }
    return buf.data();
}

// The 6-bit scales and minima of a Q4_Kx8r group's 8 rows (its scale words at g + 32, 64, 96; dword r is
// row r's): v[0] scales of groups 0-3, v[1] of 4-7, v[2] minima of 0-3, v[3] of 4-7, one byte per group
// (dword r: row r), by the bit formula of k4_scale_bytes. Both Q4_Kx8r kernels start from these.
inline void q4k_x8_scale_bytes(const uint8_t* g, __m256i (&v)[4]) {
    const __m256i u0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 32));
    const __m256i u1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 64));
    const __m256i u2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 96));
    const __m256i k3f = _mm256_set1_epi8(0x3f), k0f = _mm256_set1_epi8(0x0f), k03 = _mm256_set1_epi8(0x03);
    const auto high2 = [&](__m256i u) { return _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u, 6), k03), 4); };
    v[0] = _mm256_and_si256(u0, k3f);
    v[1] = _mm256_or_si256(_mm256_and_si256(u2, k0f), high2(u0));
    v[2] = _mm256_and_si256(u1, k3f);
    v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), k0f), high2(u1));
}

// d and dmin of a Q4_K super-block (adjacent fp16 at blk) times dx: lanes 0 and 1.
inline __m128 q4k_scales(const uint8_t* blk, float dx) {
    uint32_t u;
    std::memcpy(&u, blk, 4);
    return _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(u))), _mm_set1_ps(dx));
}

// One super-block into acc (lanes 0 and 1): s8 holds 8 int32 lanes whose lane l sums 4-element dots of
// elements 4l..4l+3 of its groups (the AVX2 row kernel's lanes: l even is lane 0's class, l odd lane 1's),
// m8 the 8 minima (bytes 0-7), sums the super-block's 8 S_g, dd [d dx, dmin dx] (q4k_scales).
inline __m128 q4k_step(__m128 acc, __m128i a4, __m128i m8, const int16_t* sums, __m128 dd) {
    __m128i a = _mm_add_epi32(a4, _mm_unpackhi_epi64(a4, a4));
    __m128i b = _mm_madd_epi16(_mm_cvtepu8_epi16(m8), _mm_loadu_si128(reinterpret_cast<const __m128i*>(sums)));
    b = _mm_add_epi32(b, _mm_unpackhi_epi64(b, b));  // lane 0: groups 0, 1 + 4, 5; lane 1: 2, 3 + 6, 7
    acc = _mm_fmadd_ps(_mm_cvtepi32_ps(a), _mm_shuffle_ps(dd, dd, 0x00), acc);
    return _mm_fnmadd_ps(_mm_cvtepi32_ps(b), _mm_shuffle_ps(dd, dd, 0x55), acc);
}
inline __m128i q4k_fold(__m256i s8) {  // lanes l + l+4 (the same class)
    return _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
}
inline float q4k_row_value(__m128 acc) { return _mm_cvtss_f32(_mm_add_ss(acc, _mm_movehdup_ps(acc))); }

}  // namespace
}  // namespace sl::kernels::detail

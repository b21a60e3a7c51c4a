// AVX2 integer-dot kernels for the block types decoded through quant_unpack.h: one row kernel over
// per-type SIMD decoders (Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS) or the scalar decoder for the rest.
#include "quant_unpack.h"
#include "row_dots_avx2.h"
#include "sparse_internal.h"

namespace sl::kernels::detail {
namespace {

template <dtype T>
constexpr int64_t k_qk = dtype_block_elems(T);
template <dtype T>
constexpr int64_t k_bytes = dtype_block_bytes(T);

// Per-type constants the row kernel branches on at compile time.
template <dtype T>
struct shape {
    // q >= 0 always: maddubs takes q directly (no sign transfer onto x).
    static constexpr bool non_negative = T == dtype::q4_1 || T == dtype::q5_1 || T == dtype::q2_k ||
                                         T == dtype::q4_k || T == dtype::q5_k;
    static constexpr bool has_min = T == dtype::q4_1 || T == dtype::q5_1 || T == dtype::q2_k ||
                                    T == dtype::q4_k || T == dtype::q5_k;
    static constexpr bool min16 = T == dtype::q2_k;  // minimum changes every 16 elements
    static constexpr bool scale16 = T == dtype::q2_k || T == dtype::q3_k || T == dtype::q6_k;
};

inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Decoders: block -> q[qk / 32] (32 signed int8 each, element order) and a, b per 16 elements.
// Default: the scalar decoder into a buffer.
template <dtype T>
struct decoder {
    static void run(const uint8_t* blk, __m256i* q, float* a, float* b) {
        alignas(32) int8_t buf[k_qk<T>];
        quant_info(T).unpack(blk, buf, a, b);
        for (int64_t k = 0; k < k_qk<T> / 32; ++k) q[k] = _mm256_load_si256(reinterpret_cast<const __m256i*>(buf + 32 * k));
    }
};

// Q4_K / Q5_K scales stay scalar (8 six-bit pairs per 256 elements); the values are SIMD.
void k4_scales(const uint8_t* blk, float* a, float* b) {
    const float d = half_at(blk), dmin = half_at(blk + 2);
    const uint8_t* s = blk + 4;
    for (int j = 0; j < 8; ++j) {
        const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        a[2 * j] = a[2 * j + 1] = d * static_cast<float>(sc);
        b[2 * j] = b[2 * j + 1] = -(dmin * static_cast<float>(m));
    }
}

// Integer scales of a super-block: sc per 16 elements (int16), m per 32 (Q4_K minimum), and the
// fp16 factors d, dmin. With Q8_K activations (one scale per 256) the whole super-block is then one
// exact integer sum, converted to f32 once, as ggml does.
struct int_scales {
    int16_t sc[16];
    int16_t m[8];
    float d, dmin;
};

template <dtype T>
constexpr bool k_int_path = T == dtype::q4_k || T == dtype::q5_k || T == dtype::q6_k;

void k4_int_scales(const uint8_t* blk, int_scales& o) {
    o.d = half_at(blk);
    o.dmin = half_at(blk + 2);
    const uint8_t* s = blk + 4;
    for (int j = 0; j < 8; ++j) {
        const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        o.m[j] = static_cast<int16_t>(j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4));
        o.sc[2 * j] = o.sc[2 * j + 1] = static_cast<int16_t>(sc);
    }
}

// Q4_K and Q5_K share their 6-bit scale/min layout; only the value unpacking differs.
template <typename Values>
struct k4_decoder {
    static void run_int(const uint8_t* blk, __m256i* q, int_scales& o) {
        k4_int_scales(blk, o);
        Values::values(blk, q);
    }
    static void run(const uint8_t* blk, __m256i* q, float* a, float* b) {
        k4_scales(blk, a, b);
        Values::values(blk, q);
    }
};

template <>
struct decoder<dtype::q4_k> : k4_decoder<decoder<dtype::q4_k>> {
    static void values(const uint8_t* blk, __m256i* q) {
        const __m256i m4 = _mm256_set1_epi8(0x0f);
        SL_UNROLL
        for (int c = 0; c < 4; ++c) {
            const __m256i v = load32(blk + 16 + 32 * c);
            q[2 * c] = _mm256_and_si256(v, m4);
            q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        }
    }
};

template <>
struct decoder<dtype::q5_k> : k4_decoder<decoder<dtype::q5_k>> {
    static void values(const uint8_t* blk, __m256i* q) {
        const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
        const __m256i qh = load32(blk + 16);
        SL_UNROLL
        for (int c = 0; c < 4; ++c) {
            const __m256i v = load32(blk + 48 + 32 * c);
            const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one);
            const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one);
            q[2 * c] = _mm256_or_si256(_mm256_and_si256(v, m4), _mm256_slli_epi16(h0, 4));
            q[2 * c + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), _mm256_slli_epi16(h1, 4));
        }
    }
};

template <>
struct decoder<dtype::q6_k> {
    static void run_int(const uint8_t* blk, __m256i* q, int_scales& o) {
        o.d = half_at(blk + 208);
        o.dmin = 0.0f;
        const auto* sc = reinterpret_cast<const int8_t*>(blk + 192);
        for (int j = 0; j < 16; ++j) o.sc[j] = sc[j];
        values(blk, q);
    }
    static void run(const uint8_t* blk, __m256i* q, float* a, float* b) {
        const float d = half_at(blk + 208);
        const auto* sc = reinterpret_cast<const int8_t*>(blk + 192);
        for (int j = 0; j < 16; ++j) {
            a[j] = d * static_cast<float>(sc[j]);
            b[j] = 0.0f;
        }
        values(blk, q);
    }
    static void values(const uint8_t* blk, __m256i* q) {
        const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3), off = _mm256_set1_epi8(32);
        SL_UNROLL
        for (int h = 0; h < 2; ++h) {
            const __m256i l0 = load32(blk + 64 * h), l1 = load32(blk + 64 * h + 32), hb = load32(blk + 128 + 32 * h);
            auto hi = [&](int shift) { return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, shift), m2), 4); };
            q[4 * h + 0] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(l0, m4), hi(0)), off);
            q[4 * h + 1] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(l1, m4), hi(2)), off);
            q[4 * h + 2] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), hi(4)), off);
            q[4 * h + 3] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), hi(6)), off);
        }
    }
};

// IQ4: 16 bytes of nibbles (low = elements 0-15) through the non-linear value table.
inline __m256i iq4_values(const uint8_t* qs) {
    const __m128i table = _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0f));
    return _mm256_shuffle_epi8(_mm256_set_m128i(table, table), nib);
}

template <>
struct decoder<dtype::iq4_nl> {
    static void run(const uint8_t* blk, __m256i* q, float* a, float* b) {
        a[0] = a[1] = half_at(blk);
        b[0] = b[1] = 0.0f;
        q[0] = iq4_values(blk + 2);
    }
};

template <>
struct decoder<dtype::iq4_xs> {
    static void run(const uint8_t* blk, __m256i* q, float* a, float* b) {
        const float d = half_at(blk);
        uint16_t sh;
        std::memcpy(&sh, blk + 2, 2);
        SL_UNROLL
        for (int ib = 0; ib < 8; ++ib) {
            const int ls = ((blk[4 + ib / 2] >> (4 * (ib % 2))) & 0x0f) | (((sh >> (2 * ib)) & 3) << 4);
            a[2 * ib] = a[2 * ib + 1] = d * static_cast<float>(ls - 32);
            b[2 * ib] = b[2 * ib + 1] = 0.0f;
            q[ib] = iq4_values(blk + 8 + 16 * ib);
        }
    }
};

// Q4_K/Q5_K minimum term (k_int_path): lane k of an 8-lane accumulator collects -dmin * m_k * s_k of
// every super-block (s_k = d_x * sum of x group k), summed with the dot lanes at the end. Vector, not
// a scalar chain of 16 dependent operations per super-block (which took a third of the Q4_K time);
// the AVX-512 kernel (quant_rows_avx512.cpp) does exactly the same operations.
// One row: per 32 elements an exact integer dot (lanes 0-3 hold elements 0-15, lanes 4-7 elements
// 16-31, so 16-granular scales are one two-valued vector), scaled in f32 by the weight and activation
// scales. The minimum term is b * d_x * sum(x_q): per 32 from the precomputed s = d_x * sum, per 16
// (Q2_K) from a second integer sum. Two accumulators alternate blocks of 32.
template <dtype T, bool Prefetch>
void row_dot(const uint8_t* w, int64_t, int64_t cols, const q8_act* xa, float* y, const uint8_t* pf) {
    using S = shape<T>;
    constexpr int64_t qk = k_qk<T>, bytes = k_bytes<T>, nq = qk / 32;
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    __m256 corr_v = _mm256_setzero_ps();
    float corr = 0.0f;
    if constexpr (k_int_path<T>) {
        // Q8_K activations: d is the same for the 8 blocks of 32 of a super-block.
        for (int64_t blk = 0; blk < cols / qk; ++blk) {
            if constexpr (Prefetch) prefetch_span<bytes>(pf, blk * bytes);
            __m256i q[nq];
            int_scales o;
            decoder<T>::run_int(w + blk * bytes, q, o);
            __m256i isum = _mm256_setzero_si256();
            SL_UNROLL
            for (int64_t k = 0; k < nq; ++k) {
                const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa->qs + (blk * nq + k) * 32));
                const __m256i p16 = S::non_negative ? _mm256_maddubs_epi16(q[k], xq)
                                                    : _mm256_maddubs_epi16(_mm256_sign_epi8(q[k], q[k]), _mm256_sign_epi8(xq, q[k]));
                const __m256i sc = _mm256_set_m128i(_mm_set1_epi16(o.sc[2 * k + 1]), _mm_set1_epi16(o.sc[2 * k]));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p16, sc));
            }
            const int64_t ab = blk * nq;
            acc[blk & 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(o.d * xa->d[ab]), acc[blk & 1]);
            if constexpr (S::has_min) {  // 8 groups of 32 in the 8 lanes (see above)
                const __m256 m = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(o.m))));
                corr_v = _mm256_fnmadd_ps(_mm256_set1_ps(o.dmin), _mm256_mul_ps(m, _mm256_loadu_ps(xa->s + ab)), corr_v);
            }
        }
        *y = S::has_min ? hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), corr_v)) : hsum(_mm256_add_ps(acc[0], acc[1])) + corr;
        return;
    }
    for (int64_t blk = 0; blk < cols / qk; ++blk) {
        if constexpr (Prefetch) prefetch_span<bytes>(pf, blk * bytes);
        __m256i q[nq];
        alignas(32) float a[qk / 16], b[qk / 16];
        decoder<T>::run(w + blk * bytes, q, a, b);
        SL_UNROLL
        for (int64_t k = 0; k < nq; ++k) {
            const int64_t ab = blk * nq + k;
            const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa->qs + ab * 32));
            const __m256i p16 = S::non_negative ? _mm256_maddubs_epi16(q[k], xq)
                                                : _mm256_maddubs_epi16(_mm256_sign_epi8(q[k], q[k]), _mm256_sign_epi8(xq, q[k]));
            const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones16));
            const float dx = xa->d[ab];
            const __m256 sc = S::scale16 ? _mm256_set_m128(_mm_set1_ps(a[2 * k + 1] * dx), _mm_set1_ps(a[2 * k] * dx))
                                         : _mm256_set1_ps(a[2 * k] * dx);
            acc[k & 1] = _mm256_fmadd_ps(p, sc, acc[k & 1]);
            if constexpr (S::min16) {
                const __m256i sum = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), xq), ones16);
                const __m256 mb = _mm256_set_m128(_mm_set1_ps(b[2 * k + 1] * dx), _mm_set1_ps(b[2 * k] * dx));
                corr_v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), mb, corr_v);
            } else if constexpr (S::has_min) {
                corr += b[2 * k] * xa->s[ab];
            }
        }
    }
    *y = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), corr_v)) + corr;
}

template <dtype T>
void rows(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    const auto* xa = static_cast<const q8_act*>(xv);
    for (int64_t r = 0; r < n_rows; ++r) row_dot<T, true>(w + r * rb, rb, cols, xa, y + r, w + r * rb + 4096);
}

template <dtype... Ts>
void fill_rows(kernel_table& k) {
    ((k.rows[static_cast<int>(Ts)] = rows<Ts>, k.rows_cached[static_cast<int>(Ts)] = rows<Ts>), ...);
}

template <dtype... Ts>
void fill_dots(sparse_table& k) {
    ((k.dots[static_cast<int>(Ts)] = gather_dots<q8_act, row_dot<Ts, true>, row_dot<Ts, false>>), ...);
}

#define SL_UNPACKED_TYPES                                                                                          \
    dtype::q4_1, dtype::q5_0, dtype::q5_1, dtype::q2_k, dtype::q3_k, dtype::q4_k, dtype::q5_k, dtype::q6_k, \
        dtype::iq4_nl, dtype::iq4_xs

}  // namespace

void add_unpacked_rows_avx2(kernel_table& k) { fill_rows<SL_UNPACKED_TYPES>(k); }

void add_unpacked_dots_avx2(sparse_table& k) { fill_dots<SL_UNPACKED_TYPES>(k); }

}  // namespace sl::kernels::detail

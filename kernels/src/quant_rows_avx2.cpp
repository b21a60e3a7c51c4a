// AVX2 integer-dot kernels for the block types decoded through quant_unpack.h: one row kernel over
// per-type SIMD decoders (Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS) or the scalar decoder for the rest.
#include <vector>

#include "q4k_lanes.h"
#include "q4k_r8_avx2.h"
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
    static constexpr bool non_negative =
        T == dtype::q4_1 || T == dtype::q5_1 || T == dtype::q2_k || T == dtype::q4_k || T == dtype::q5_k;
    static constexpr bool has_min =
        T == dtype::q4_1 || T == dtype::q5_1 || T == dtype::q2_k || T == dtype::q4_k || T == dtype::q5_k;
    static constexpr bool min16 = T == dtype::q2_k;  // minimum changes every 16 elements
    static constexpr bool scale16 = T == dtype::q2_k || T == dtype::q3_k || T == dtype::q6_k;
};

inline __m256i load32(const void* p) {
    return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// Decoders: block -> q[qk / 32] (32 signed int8 each, element order) and a, b per 16 elements.
// Default: the scalar decoder into a buffer.
template <dtype T>
struct decoder {
    static void run(const uint8_t* blk, __m256i* q, float* a, float* b) {
        alignas(32) int8_t buf[k_qk<T>];
        quant_info(T).unpack(blk, buf, a, b);
        for (int64_t k = 0; k < k_qk<T> / 32; ++k)
            q[k] = _mm256_load_si256(reinterpret_cast<const __m256i*>(buf + 32 * k));
    }
};

// K-quant super-blocks (Q4_K, Q5_K, Q6_K) against Q8_K activations: the whole super-block is one exact
// integer sum in 8 int32 lanes, converted to f32 once, as ggml does. Lane l collects, for every 32
// elements k of the super-block, sc * (the 4-element dot of elements 32k + 4l .. 32k + 4l + 3), where sc
// is the scale of the 16 or 32 elements those belong to (lanes 0-3: elements 0-15 of the 32, lanes 4-7:
// 16-31). The AVX-512 kernels (quant_rows_avx512.h) form the same lanes and the same float epilogue, so
// both ISAs give identical bits (avx512_rows_equal_avx2_rows); how the lanes are computed is free.
//
// Per 32 elements: one maddubs (unsigned quants x signed activations, pair sums exact in int16), one madd
// by the group's scale (a vpshufb of a scale vector decoded once per super-block), one add. The scales
// are decoded with 64-bit integer arithmetic instead of a loop over bytes.

// Dword g of each 128-bit lane of v in all 4 dwords of that lane: with the scales stored as dwords
// (s, s) this is a group's scale in all 16 words. An immediate shuffle, so no control vector is loaded:
// vector loads, not ALU ops, bounded these kernels (x, weights and constants all go through the two
// 256-bit load pipes).
// (g is a constant once the loops are unrolled; the switch folds away).
inline __m256i scale(__m256i v, int g) {
    switch (g) {
        case 0:
            return _mm256_shuffle_epi32(v, 0x00);
        case 1:
            return _mm256_shuffle_epi32(v, 0x55);
        case 2:
            return _mm256_shuffle_epi32(v, 0xaa);
        default:
            return _mm256_shuffle_epi32(v, 0xff);
    }
}

// Q4_K / Q5_K: 8 pairs of 6-bit (scale, min) packed in 12 bytes at blk + 4, as 8 bytes each.
inline void k4_scale_bytes(const uint8_t* blk, uint64_t& sc, uint64_t& mn) {
    uint32_t u[3];
    std::memcpy(u, blk + 4, 12);
    sc = (u[0] & 0x3f3f3f3fu) | static_cast<uint64_t>((u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4)) << 32;
    mn = (u[1] & 0x3f3f3f3fu) | static_cast<uint64_t>(((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4))
                                    << 32;
}

// Bit b of every byte of v moved to bit 4 (the rest cleared). Word shifts carry bits across the bytes of a
// word, but never into bit 4 of a byte from a shift of at most 4 places.
inline __m256i bit_to_4(__m256i v, int b) {
    const __m256i t = b < 4 ? _mm256_slli_epi16(v, 4 - b) : b > 4 ? _mm256_srli_epi16(v, b - 4) : v;
    return _mm256_and_si256(t, _mm256_set1_epi8(0x10));
}

// Q4_K / Q5_K (values 0..15 / 0..31, a scale and a minimum per 32): m receives the 8 minima as bytes.
template <dtype T>
struct k4_sum {
    static constexpr bool has_min = true;
    template <bool Pre>
    static __m256i isum(const uint8_t* blk, const int8_t* xq, const int16_t*, __m128i& m) {
        uint64_t sc, mn;
        k4_scale_bytes(blk, sc, mn);
        m = _mm_cvtsi64_si128(static_cast<int64_t>(mn));
        // Scale g as the dword (s_g, s_g) of both lanes: g < 4 in s_lo, g >= 4 in s_hi.
        const __m128i scb = _mm_cvtsi64_si128(static_cast<int64_t>(sc));
        const __m256i s2 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(scb, scb));
        const __m256i s_lo = _mm256_permute4x64_epi64(s2, 0x44), s_hi = _mm256_permute4x64_epi64(s2, 0xee);
        const __m256i m4 = _mm256_set1_epi8(0x0f);
        const uint8_t* qs = blk + (T == dtype::q5_k ? 48 : 16);
        __m256i qh = _mm256_setzero_si256();
        if constexpr (T == dtype::q5_k) qh = load32(blk + 16);
        __m256i s = _mm256_setzero_si256();
        SL_UNROLL
        for (int c = 0; c < 4; ++c) {
            const __m256i v = load32(qs + 32 * c);
            __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            if constexpr (T == dtype::q5_k) {
                lo = _mm256_or_si256(lo, bit_to_4(qh, 2 * c));
                hi = _mm256_or_si256(hi, bit_to_4(qh, 2 * c + 1));
            }
            const __m256i p0 = _mm256_maddubs_epi16(lo, load32(xq + 64 * c));
            const __m256i p1 = _mm256_maddubs_epi16(hi, load32(xq + 64 * c + 32));
            s = _mm256_add_epi32(s, _mm256_madd_epi16(p0, scale(c < 2 ? s_lo : s_hi, 2 * c % 4)));
            s = _mm256_add_epi32(s, _mm256_madd_epi16(p1, scale(c < 2 ? s_lo : s_hi, (2 * c + 1) % 4)));
        }
        return s;
    }
    // d and dmin (adjacent fp16) widened by one conversion: lanes 0 and 1.
    static __m128 d_dmin(const uint8_t* blk) {
        uint32_t u;
        std::memcpy(&u, blk, 4);
        return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(u)));
    }
};

// Q6_K: values q - 32 with q = 0..63 (low nibbles in 128 bytes, high bit pairs in 64), int8 scales per 16.
// The quants enter maddubs unsigned and 32 * x is taken off per pair: (q - 32) x summed in int16 exactly
// (|pair| <= 16128), the same pair sums as a sign transfer would give, two ops fewer per 32 elements.
// The 32 * x pair sums depend on x alone: with Pre they are read from x32 (q6k_x32, once per call),
// otherwise formed here (maddubs of 32 and x); the same values either way.
struct q6k_sum {
    static constexpr bool has_min = false;
    template <bool Pre>
    static __m256i isum(const uint8_t* blk, const int8_t* xq, const int16_t* x32, __m128i&) {
        // The 32 elements k take scale 2k in lane 0 and 2k + 1 in lane 1: as dwords (s, s), dword k % 4
        // of s_lo (k < 4) or s_hi.
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
        const __m256i s_lo =
            _mm256_cvtepi8_epi16(_mm_shuffle_epi8(raw, _mm_setr_epi8(0, 0, 2, 2, 4, 4, 6, 6, 1, 1, 3, 3, 5, 5, 7, 7)));
        const __m256i s_hi = _mm256_cvtepi8_epi16(
            _mm_shuffle_epi8(raw, _mm_setr_epi8(8, 8, 10, 10, 12, 12, 14, 14, 9, 9, 11, 11, 13, 13, 15, 15)));
        const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
        __m256i s = _mm256_setzero_si256();
        SL_UNROLL
        for (int h = 0; h < 2; ++h) {
            const __m256i l0 = load32(blk + 64 * h), l1 = load32(blk + 64 * h + 32), hb = load32(blk + 128 + 32 * h);
            // High bit pairs 0-1, 2-3, 4-5, 6-7 of hb to bits 4-5 (word shifts: see bit_to_4).
            const __m256i u[4] = {
                _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30)),
                _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m30)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30))};
            SL_UNROLL
            for (int j = 0; j < 4; ++j) {
                const int k = 4 * h + j;
                const __m256i x = load32(xq + 32 * k);
                const __m256i off = Pre ? load32(x32 + 16 * k) : _mm256_maddubs_epi16(k32, x);
                const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u[j], x), off);
                s = _mm256_add_epi32(s, _mm256_madd_epi16(p, scale(h == 0 ? s_lo : s_hi, j)));
            }
        }
        return s;
    }
    static __m128 d_dmin(const uint8_t* blk) { return _mm_set_ss(half_at(blk + 208)); }
};

template <dtype T>
struct kquant {};
template <>
struct kquant<dtype::q4_k> : k4_sum<dtype::q4_k> {};
template <>
struct kquant<dtype::q5_k> : k4_sum<dtype::q5_k> {};
template <>
struct kquant<dtype::q6_k> : q6k_sum {};

template <dtype T>
constexpr bool k_int_path = T == dtype::q4_k || T == dtype::q5_k || T == dtype::q6_k;

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

// One K-quant row (k_int_path) against Q8_K activations (d the same for the 8 blocks of 32 of a
// super-block): per super-block the exact integer lanes of kquant<T>, converted and scaled by d_w * d_x
// into one of two accumulators that alternate super-blocks. The minimum term (Q4_K/Q5_K): lane k of
// corr_v collects -dmin * m_k * s_k (s_k = d_x * sum of x group k), summed with the dot lanes at the end;
// a vector, not a scalar chain of 16 dependent operations per super-block. The AVX-512 kernel
// (quant_rows_avx512.h) does exactly these float operations.
template <dtype T, int Prefetch, bool Pre = false>
[[gnu::always_inline]] inline void kquant_row(const uint8_t* w, int64_t cols, const q8_act* xa, const int16_t* x32, float* y, const uint8_t* pf) {
    using K = kquant<T>;
    constexpr int64_t qk = k_qk<T>, bytes = k_bytes<T>;
    __m256 corr_v = _mm256_setzero_ps();
    auto step = [&](int64_t blk, __m256 a) {
        const uint8_t* p = w + blk * bytes;
        __m128i m;
        const __m256i isum = K::template isum<Pre>(p, xa->qs + blk * qk, Pre ? x32 + blk * qk / 2 : nullptr, m);
        const int64_t ab = blk * (qk / 32);
        const __m128 dm = K::d_dmin(p);
        if constexpr (K::has_min) {
            const __m256 mf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m));
            corr_v = _mm256_fnmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(dm)),
                                      _mm256_mul_ps(mf, _mm256_loadu_ps(xa->s + ab)), corr_v);
        }
        return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(_mm_cvtss_f32(dm) * xa->d[ab]), a);
    };
    // Two super-blocks per step keep both accumulators in registers (indexing them by blk & 1 put them
    // on the stack: a store-forwarding round trip per super-block, measured 1.8x slower). The prefetch
    // covers the two super-blocks' lines (5 for Q4_K instead of 3 per super-block).
    const int64_t nsb = cols / qk;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t blk = 0;
    for (; blk + 2 <= nsb; blk += 2) {
        if constexpr (Prefetch) prefetch_span<2 * bytes, Prefetch>(pf, blk * bytes);
        a0 = step(blk, a0);
        a1 = step(blk + 1, a1);
    }
    if (blk < nsb) a0 = step(blk, a0);
    const float corr = 0.0f;
    *y = K::has_min ? hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), corr_v)) : hsum(_mm256_add_ps(a0, a1)) + corr;
}

// One Q4_K row in the two float lanes of q4k_lanes.h (xa->sums set): the super-block's 8 integer lanes
// of k4_sum reduced to the two lane classes, then q4k_step.
template <int Prefetch>
[[gnu::always_inline]] inline void q4k_row(const uint8_t* w, int64_t cols, const q8_act* xa, float* y,
                                           const uint8_t* pf) {
    using K = kquant<dtype::q4_k>;
    constexpr int64_t qk = k_qk<dtype::q4_k>, bytes = k_bytes<dtype::q4_k>;
    __m128 acc = _mm_setzero_ps();
    auto step = [&](int64_t blk) {
        const uint8_t* p = w + blk * bytes;
        __m128i m;
        const __m256i isum = K::template isum<false>(p, xa->qs + blk * qk, nullptr, m);
        acc = q4k_step(acc, q4k_fold(isum), m, xa->sums + blk * (qk / 32), q4k_scales(p, xa->d[blk * (qk / 32)]));
    };
    const int64_t nsb = cols / qk;
    int64_t blk = 0;
    for (; blk + 2 <= nsb; blk += 2) {
        if constexpr (Prefetch) prefetch_span<2 * bytes, Prefetch>(pf, blk * bytes);
        step(blk);
        step(blk + 1);
    }
    if (blk < nsb) step(blk);
    *y = q4k_row_value(acc);
}

// One row of the other types: per 32 elements an exact integer dot (lanes 0-3 hold elements 0-15, lanes
// 4-7 elements 16-31, so 16-granular scales are one two-valued vector), scaled in f32 by the weight and
// activation scales. The minimum term is b * d_x * sum(x_q): per 32 from the precomputed s = d_x * sum,
// per 16 (Q2_K) from a second integer sum. Two accumulators alternate blocks of 32.
// Always inlined into the row loops and gathers, as row_dots_avx2.h's kernels (a call per row costs).
template <dtype T, int Prefetch>
[[gnu::always_inline]] inline void row_dot(const uint8_t* w, int64_t, int64_t cols, const q8_act* xa, float* y, const uint8_t* pf) {
    using S = shape<T>;
    constexpr int64_t qk = k_qk<T>, bytes = k_bytes<T>, nq = qk / 32;
    if constexpr (T == dtype::q4_k) {
        q4k_row<Prefetch>(w, cols, xa, y, pf);
    } else if constexpr (k_int_path<T>) {
        kquant_row<T, Prefetch>(w, cols, xa, nullptr, y, pf);
    } else {
        const __m256i ones16 = _mm256_set1_epi16(1);
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        __m256 corr_v = _mm256_setzero_ps();
        float corr = 0.0f;
        for (int64_t blk = 0; blk < cols / qk; ++blk) {
            if constexpr (Prefetch) prefetch_span<bytes, Prefetch>(pf, blk * bytes);
            __m256i q[nq];
            alignas(32) float a[qk / 16], b[qk / 16];
            decoder<T>::run(w + blk * bytes, q, a, b);
            SL_UNROLL
            for (int64_t k = 0; k < nq; ++k) {
                const int64_t ab = blk * nq + k;
                const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa->qs + ab * 32));
                const __m256i p16 =
                    S::non_negative ? _mm256_maddubs_epi16(q[k], xq)
                                    : _mm256_maddubs_epi16(_mm256_sign_epi8(q[k], q[k]), _mm256_sign_epi8(xq, q[k]));
                const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones16));
                const float dx = xa->d[ab];
                const __m256 sc = S::scale16
                                      ? _mm256_set_m128(_mm_set1_ps(a[2 * k + 1] * dx), _mm_set1_ps(a[2 * k] * dx))
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
}

// Software prefetch of the streaming rows: into L2, k_l2_ahead (8 KiB) ahead in the row
// (dense_internal.h). The AVX2 VM had measured T0 only (0-8 KiB: 2 KiB best, 8 KiB worst); on a Zen 4
// with these kernels forced (SPARSELENS_ISA=avx2, 2 threads, 1 GB of copies) L2 8 KiB ahead against L1
// 2 KiB: Q4_K 14336 columns 27 -> 34 GB/s, Q6_K 21 -> 38, 8192 columns Q6_K 36 -> 46, Q4_K 33 -> 33;
// no shape slower.

// 32 * (x_2i + x_2i+1) for the Q6_K offset (q6k_sum), as int16, once per call; thread-local, grows only.
const int16_t* q6k_x32(const q8_act* xa, int64_t cols) {
    thread_local std::vector<int16_t> buf;
    if (buf.size() < static_cast<size_t>(cols / 2)) buf.resize(static_cast<size_t>(cols / 2));
    const __m256i k32 = _mm256_set1_epi8(32);
    for (int64_t k = 0; k < cols / 32; ++k)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(buf.data() + 16 * k),
                            _mm256_maddubs_epi16(k32, load32(xa->qs + 32 * k)));
    return buf.data();
}

// x as row_dot<T> takes it: Q4_K with its group sums (q4k_lanes.h) in `with`, once per call.
template <dtype T>
const q8_act* row_act(const void* xv, int64_t cols, q8_act& with) {
    const auto* xa = static_cast<const q8_act*>(xv);
    if constexpr (T != dtype::q4_k) return xa;
    with = *xa;
    with.sums = q4k_group_sums(xa->qs, cols);
    return &with;
}

template <dtype T>
void rows(const uint8_t* w, int64_t rb, int64_t n_rows, int64_t cols, const void* xv, float* y) {
    q8_act with;
    const q8_act* xa = row_act<T>(xv, cols, with);
    if constexpr (T == dtype::q6_k) {
        if (n_rows >= 4) {
            const int16_t* x32 = q6k_x32(xa, cols);
            for (int64_t r = 0; r < n_rows; ++r)
                kquant_row<T, pf_l2, true>(w + r * rb, cols, xa, x32, y + r, ahead<pf_l2>(w + r * rb));
            return;
        }
    }
    for (int64_t r = 0; r < n_rows; ++r)
        row_dot<T, pf_l2>(w + r * rb, rb, cols, xa, y + r, ahead<pf_l2>(w + r * rb));
}

template <dtype... Ts>
void fill_rows(kernel_table& k) {
    ((k.rows[static_cast<int>(Ts)] = rows<Ts>, k.rows_cached[static_cast<int>(Ts)] = rows<Ts>), ...);
}

template <dtype T>
void dots(const uint8_t* const* rows, const uint8_t* const* pf, int64_t n, int64_t cols, const void* x, float* y) {
    q8_act with;
    gather_dots<q8_act, row_dot<T, pf_l2>, row_dot<T, pf_none>>(rows, pf, n, cols, row_act<T>(x, cols, with), y);
}

template <dtype... Ts>
void fill_dots(sparse_table& k) {
    ((k.dots[static_cast<int>(Ts)] = dots<Ts>), ...);
}

#define SL_UNPACKED_TYPES                                                                                   \
    dtype::q4_1, dtype::q5_0, dtype::q5_1, dtype::q2_k, dtype::q3_k, dtype::q4_k, dtype::q5_k, dtype::q6_k, \
        dtype::iq4_nl, dtype::iq4_xs

}  // namespace

void add_unpacked_rows_avx2(kernel_table& k) {
    fill_rows<SL_UNPACKED_TYPES>(k);
    k.rows[static_cast<int>(dtype::q4_k_r8)] = k.rows_cached[static_cast<int>(dtype::q4_k_r8)] = rows_x8_avx2;
}

void add_unpacked_dots_avx2(sparse_table& k) {
    fill_dots<SL_UNPACKED_TYPES>(k);
}

}  // namespace sl::kernels::detail

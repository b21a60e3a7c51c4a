// AVX-512 (F/BW/VL/DQ) sparse kernels: multi-row axpy over f32/f16/bf16/Q8_0/Q4_0 rows.
// GCC 12's avx512fintrin.h builds "undefined" vectors from themselves (GCC bug 105593), which
// -Wuninitialized reports at every inlined use; the kernels below initialise everything they read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "sparse_internal.h"

// Fixed-trip loops over rows must be unrolled so the per-row values stay in registers.
#define SL_UNROLL _Pragma("GCC unroll 16")

namespace sl::kernels::detail {
namespace {

inline float half_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

template <int G>
inline void prefetch_rows(const uint8_t* const* pf, int64_t off) {
    SL_UNROLL
    for (int g = 0; g < G; ++g) _mm_prefetch(reinterpret_cast<const char*>(pf[g] + off), _MM_HINT_T0);
}

// Widening loaders: 16 consecutive weights as f32, or the first popcount(m) with zeros after.
struct load_f32 {
    using elem = float;
    static __m512 load(const elem* p) { return _mm512_loadu_ps(p); }
    static __m512 load(const elem* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct load_f16 {
    using elem = uint16_t;
    static __m512 load(const elem* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static __m512 load(const elem* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
struct load_bf16 {
    using elem = uint16_t;
    static __m512 widen(__m256i v) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16)); }
    static __m512 load(const elem* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
    static __m512 load(const elem* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};

// Float rows, 32 elements per step; the tail uses masked loads in the same arithmetic.
template <typename L>
struct float_op {
    template <int G, bool Init, bool PF>
    static void run(float* acc, const uint8_t* const* rows, const float* s, int64_t n, const uint8_t* const* pf) {
        using E = typename L::elem;
        const E* r[G];
        __m512 sv[G];
        SL_UNROLL
        for (int g = 0; g < G; ++g) {
            r[g] = reinterpret_cast<const E*>(rows[g]);
            sv[g] = _mm512_set1_ps(s[g]);
        }
        int64_t i = 0;
        for (; i + 32 <= n; i += 32) {
            if constexpr (PF) {
                SL_UNROLL
                for (int l = 0; l < 32 * static_cast<int>(sizeof(E)); l += 64) prefetch_rows<G>(pf, i * sizeof(E) + l);
            }
            __m512 a0 = Init ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + i);
            __m512 a1 = Init ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + i + 16);
            SL_UNROLL
            for (int g = 0; g < G; ++g) {
                a0 = _mm512_fmadd_ps(sv[g], L::load(r[g] + i), a0);
                a1 = _mm512_fmadd_ps(sv[g], L::load(r[g] + i + 16), a1);
            }
            _mm512_storeu_ps(acc + i, a0);
            _mm512_storeu_ps(acc + i + 16, a1);
        }
        for (; i < n; i += 16) {
            const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1u);
            __m512 a = Init ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, acc + i);
            SL_UNROLL
            for (int g = 0; g < G; ++g) a = _mm512_fmadd_ps(sv[g], L::load(r[g] + i, m), a);
            _mm512_mask_storeu_ps(acc + i, m, a);
        }
    }
};

// Quantized rows. Per group of 8 blocks the fp16 scales of each row are extracted with two word
// permutes (not 8 scalar loads and conversions) and multiplied by s[g]; each block then widens its
// 32 integers and adds c * q with FMAs. Q4_0 adds unsigned nibbles and removes 8 * c per block once
// for all rows. Q8_0: 32 signed bytes; Q4_0: element j < 16 is the low nibble of byte j, j + 16 the high.
struct q8_values {
    static constexpr int64_t bytes = sizeof(block_q8_0);
    static constexpr bool offset = false;
    // Scales of the 8 blocks at p (272 bytes): words 0, 17, 34, 51 of [p, p + 128) and of [p + 136, p + 264).
    static __m256 scales8(const uint8_t* p) {
        const __m512i idx = _mm512_setr_epi32(0x00110000, 0x00330022, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
        const __m512i a = _mm512_permutex2var_epi16(_mm512_loadu_si512(p), idx, _mm512_loadu_si512(p + 64));
        const __m512i b = _mm512_permutex2var_epi16(_mm512_loadu_si512(p + 136), idx, _mm512_loadu_si512(p + 200));
        return _mm256_cvtph_ps(_mm_unpacklo_epi64(_mm512_castsi512_si128(a), _mm512_castsi512_si128(b)));
    }
    static void get(const uint8_t* p, __m512& w0, __m512& w1) {
        w0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2))));
        w1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 18))));
    }
    // 2 blocks of int dots (16 int32: 8 lanes per block) against 64 activation bytes: |w| times x
    // with w's sign, because maddubs needs an unsigned operand.
    static __m512i pair_dot(const uint8_t* p, __m512i xq) {
        const __m512i wq =
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2))),
                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + bytes + 2)), 1);
        const __m512i sx = _mm512_mask_sub_epi8(xq, _mm512_movepi8_mask(wq), _mm512_setzero_si512(), xq);
        return _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(wq), sx), _mm512_set1_epi16(1));
    }
    static __m256i one_dot(const uint8_t* p, __m256i xq) {
        const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
        return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(xq, wq)),
                                 _mm256_set1_epi16(1));
    }
};
struct q4_values {
    static constexpr int64_t bytes = sizeof(block_q4_0);
    static constexpr bool offset = true;  // stored nibble n means n - 8
    // Scales of the 8 blocks at p (144 bytes; all in the first 128): words 0, 9, ..., 63.
    static __m256 scales8(const uint8_t* p) {
        const __m512i idx =
            _mm512_setr_epi32(0x00090000, 0x001b0012, 0x002d0024, 0x003f0036, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
        const __m512i v = _mm512_permutex2var_epi16(_mm512_loadu_si512(p), idx, _mm512_loadu_si512(p + 64));
        return _mm256_cvtph_ps(_mm512_castsi512_si128(v));
    }
    static void get(const uint8_t* p, __m512& w0, __m512& w1) {  // unsigned nibbles
        const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2)));
        w0 = _mm512_cvtepi32_ps(_mm512_and_si512(v, _mm512_set1_epi32(0x0f)));
        w1 = _mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4));
    }
    // Unsigned nibbles straight into maddubs; the -8 comes back through the caller's s[] term.
    static __m512i pair_dot(const uint8_t* p, __m512i xq) {
        const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
        const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + bytes + 2));
        const __m512i raw = _mm512_castsi256_si512(_mm256_set_m128i(q1, q0));
        const __m512i dup = _mm512_shuffle_i64x2(raw, raw, _MM_SHUFFLE(1, 1, 0, 0));  // [q0 q0 q1 q1]
        const __m512i shifts = _mm512_set_epi64(0x0004000400040004LL, 0x0004000400040004LL, 0, 0, 0x0004000400040004LL,
                                                0x0004000400040004LL, 0, 0);
        const __m512i nib = _mm512_and_si512(_mm512_srlv_epi16(dup, shifts), _mm512_set1_epi8(0x0f));
        return _mm512_madd_epi16(_mm512_maddubs_epi16(nib, xq), _mm512_set1_epi16(1));
    }
    static __m256i one_dot(const uint8_t* p, __m256i xq) {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
        const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0f));
        return _mm256_madd_epi16(_mm256_maddubs_epi16(nib, xq), _mm256_set1_epi16(1));
    }
};

template <typename V>
struct quant_op {
    template <int G, bool Init>
    static void block(float* a_out, const uint8_t* const (&r)[G], const float* c, float bias, int64_t off) {
        __m512 a0 = Init ? _mm512_setzero_ps() : _mm512_loadu_ps(a_out);
        __m512 a1 = Init ? _mm512_setzero_ps() : _mm512_loadu_ps(a_out + 16);
        SL_UNROLL
        for (int g = 0; g < G; ++g) {
            const __m512 cv = _mm512_set1_ps(c[g]);
            __m512 w0, w1;
            V::get(r[g] + off, w0, w1);
            a0 = _mm512_fmadd_ps(cv, w0, a0);
            a1 = _mm512_fmadd_ps(cv, w1, a1);
        }
        if constexpr (V::offset) {
            const __m512 b8 = _mm512_set1_ps(8.0f * bias);
            a0 = _mm512_sub_ps(a0, b8);
            a1 = _mm512_sub_ps(a1, b8);
        }
        _mm512_storeu_ps(a_out, a0);
        _mm512_storeu_ps(a_out + 16, a1);
    }

    template <int G, bool Init, bool PF>
    static void run(float* acc, const uint8_t* const* rows, const float* s, int64_t n, const uint8_t* const* pf) {
        // Local copies: the stores to acc could alias the caller's pointer arrays otherwise.
        const uint8_t* r[G];
        const uint8_t* p[G];
        float sg[G];
        SL_UNROLL
        for (int g = 0; g < G; ++g) {
            r[g] = rows[g];
            p[g] = PF ? pf[g] : nullptr;
            sg[g] = s[g];
        }
        const int64_t nb = n / 32;
        int64_t b = 0;
        for (; b + 8 <= nb; b += 8) {
            const int64_t off = b * V::bytes;
            if constexpr (PF) {  // the 8 blocks' lines of each next row, once per group
                SL_UNROLL
                for (int g = 0; g < G; ++g) {
                    SL_UNROLL
                    for (int l = 0; l < 8 * static_cast<int>(V::bytes); l += 64)
                        _mm_prefetch(reinterpret_cast<const char*>(p[g] + off + l), _MM_HINT_T0);
                    _mm_prefetch(reinterpret_cast<const char*>(p[g] + off + 8 * V::bytes - 1), _MM_HINT_T0);
                }
            }
            alignas(32) float c[8][G];  // c[j][g]: coefficient of row g in block b + j
            alignas(32) float bias[8];
            __m256 sum = _mm256_setzero_ps();
            SL_UNROLL
            for (int g = 0; g < G; ++g) {
                const __m256 cg = _mm256_mul_ps(V::scales8(r[g] + off), _mm256_set1_ps(sg[g]));
                sum = _mm256_add_ps(sum, cg);
                alignas(32) float t[8];
                _mm256_store_ps(t, cg);
                SL_UNROLL
                for (int j = 0; j < 8; ++j) c[j][g] = t[j];
            }
            _mm256_store_ps(bias, sum);
            SL_UNROLL
            for (int j = 0; j < 8; ++j) block<G, Init>(acc + (b + j) * 32, r, c[j], bias[j], off + j * V::bytes);
        }
        for (; b < nb; ++b) {
            const int64_t off = b * V::bytes;
            if constexpr (PF) prefetch_rows<G>(p, off);
            float c[G];
            float bias = 0.0f;
            SL_UNROLL
            for (int g = 0; g < G; ++g) {
                c[g] = sg[g] * half_at(r[g] + off);
                bias += c[g];
            }
            block<G, Init>(acc + b * 32, r, c, bias, off);
        }
    }
};

// Row count, init and prefetch become template arguments, so each inner loop is branch-free.
template <typename Op>
void axpy(float* acc, bool init, int n_rows, const uint8_t* const* rows, const float* s, int64_t n,
          const uint8_t* const* pf) {
    auto go = [&]<int G>() {
        if (init) {
            pf ? Op::template run<G, true, true>(acc, rows, s, n, pf)
               : Op::template run<G, true, false>(acc, rows, s, n, pf);
        } else {
            pf ? Op::template run<G, false, true>(acc, rows, s, n, pf)
               : Op::template run<G, false, false>(acc, rows, s, n, pf);
        }
    };
    static_assert(k_axpy_rows == 4);
    switch (n_rows) {
        case 1:
            go.template operator()<1>();
            break;
        case 2:
            go.template operator()<2>();
            break;
        case 3:
            go.template operator()<3>();
            break;
        default:
            go.template operator()<4>();
            break;
    }
}

inline float hsum256(__m256 v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

inline float hsum512(__m512 v) {
    return hsum256(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

// Same arithmetic as the dense AVX-512 rows kernel (4 accumulators of 16 lanes, 64 elements per step,
// then 16, then a masked tail into accumulator 1, same final sum), so results are identical; only
// the prefetch target differs: the next listed row, at the offset being read.
template <typename L>
void dots_float(const uint8_t* const* rows, const uint8_t* const* pfs, int64_t n, int64_t cols, const void* xv,
                float* y) {
    using E = typename L::elem;
    const auto* x = static_cast<const float*>(xv);
    for (int64_t k = 0; k < n; ++k) {
        const E* row = reinterpret_cast<const E*>(rows[k]);
        const char* pf = pfs ? reinterpret_cast<const char*>(pfs[k]) : nullptr;
        __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        int64_t c = 0;
        for (; c + 64 <= cols; c += 64) {
            if (pf) {
                SL_UNROLL
                for (int l = 0; l < 64 * static_cast<int>(sizeof(E)); l += 64)
                    _mm_prefetch(pf + c * static_cast<int64_t>(sizeof(E)) + l, _MM_HINT_T0);
            }
            SL_UNROLL
            for (int u = 0; u < 4; ++u)
                a[u] = _mm512_fmadd_ps(L::load(row + c + 16 * u), _mm512_loadu_ps(x + c + 16 * u), a[u]);
        }
        for (; c + 16 <= cols; c += 16) a[0] = _mm512_fmadd_ps(L::load(row + c), _mm512_loadu_ps(x + c), a[0]);
        if (c < cols) {
            const __mmask16 m = static_cast<__mmask16>((1u << (cols - c)) - 1u);
            a[1] = _mm512_fmadd_ps(L::load(row + c, m), _mm512_maskz_loadu_ps(m, x + c), a[1]);
        }
        y[k] = hsum512(_mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])));
    }
}

// Integer block dots against the quantized activations, 8 blocks per step: the 8 weight scales
// come from two permutes and are combined with the activation scales in one multiply; each block
// pair takes its two scales with one permute. The order of every operation is the dense AVX-512
// kernel's, so the results are bit-identical to it; only the prefetch target differs.
template <typename V>
float dot_quant(const uint8_t* w, int64_t nb, const q8_act* xa, const char* pf) {
    const __m512i pidx[4] = {
        _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
        _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3),
        _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5),
        _mm512_setr_epi32(6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7),
    };
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    __m256 corr8 = _mm256_setzero_ps();
    float corr = 0.0f;
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const uint8_t* p = w + b * V::bytes;
        if (pf) {
            SL_UNROLL
            for (int l = 0; l < 8 * static_cast<int>(V::bytes); l += 64)
                _mm_prefetch(pf + b * V::bytes + l, _MM_HINT_T0);
        }
        const __m256 dw = V::scales8(p);
        if constexpr (V::offset) corr8 = _mm256_fmadd_ps(dw, _mm256_loadu_ps(xa->s + b), corr8);
        const __m512 dd = _mm512_castps256_ps512(_mm256_mul_ps(dw, _mm256_loadu_ps(xa->d + b)));
        SL_UNROLL
        for (int k = 0; k < 4; ++k) {
            const __m512i xq = _mm512_loadu_si512(xa->qs + (b + 2 * k) * 32);
            const __m512 prod = _mm512_cvtepi32_ps(V::pair_dot(p + 2 * k * V::bytes, xq));
            if (k & 1) {
                acc1 = _mm512_fmadd_ps(prod, _mm512_permutexvar_ps(pidx[k], dd), acc1);
            } else {
                acc0 = _mm512_fmadd_ps(prod, _mm512_permutexvar_ps(pidx[k], dd), acc0);
            }
        }
    }
    // Leftovers exactly as the dense kernel does them: block pairs multiplied then added into
    // accumulator 0, an odd last block as a separate 256-bit sum.
    float tail = 0.0f;
    for (; b + 2 <= nb; b += 2) {
        const uint8_t* p = w + b * V::bytes;
        const float dw0 = half_at(p), dw1 = half_at(p + V::bytes);
        if constexpr (V::offset) corr += dw0 * xa->s[b] + dw1 * xa->s[b + 1];
        const __m512 sc = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(dw0 * xa->d[b])),
                                             _mm256_set1_ps(dw1 * xa->d[b + 1]), 1);
        const __m512i xq = _mm512_loadu_si512(xa->qs + b * 32);
        acc0 = _mm512_add_ps(acc0, _mm512_mul_ps(_mm512_cvtepi32_ps(V::pair_dot(p, xq)), sc));
    }
    if (b < nb) {
        const uint8_t* p = w + b * V::bytes;
        const float dw = half_at(p);
        if constexpr (V::offset) corr += dw * xa->s[b];
        const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa->qs + b * 32));
        tail = hsum256(_mm256_cvtepi32_ps(V::one_dot(p, xq))) * (dw * xa->d[b]);
    }
    const float dot = hsum512(_mm512_add_ps(acc0, acc1)) + tail;
    return V::offset ? dot - 8.0f * (hsum256(corr8) + corr) : dot;
}

template <typename V>
void dots_quant(const uint8_t* const* rows, const uint8_t* const* pfs, int64_t n, int64_t cols, const void* xv,
                float* y) {
    const auto* xa = static_cast<const q8_act*>(xv);
    for (int64_t k = 0; k < n; ++k)
        y[k] = dot_quant<V>(rows[k], cols / 32, xa, pfs ? reinterpret_cast<const char*>(pfs[k]) : nullptr);
}

}  // namespace

const sparse_table& sparse_avx512_table() {
    static const sparse_table t = [] {
        sparse_table k;
        k.axpy[0] = axpy<float_op<load_f32>>;
        k.axpy[1] = axpy<float_op<load_f16>>;
        k.axpy[2] = axpy<float_op<load_bf16>>;
        k.axpy[3] = axpy<quant_op<q8_values>>;
        k.axpy[4] = axpy<quant_op<q4_values>>;
        k.dots[0] = dots_float<load_f32>;
        k.dots[1] = dots_float<load_f16>;
        k.dots[2] = dots_float<load_bf16>;
        k.dots[3] = dots_quant<q8_values>;
        k.dots[4] = dots_quant<q4_values>;
        return k;
    }();
    return t;
}

}  // namespace sl::kernels::detail

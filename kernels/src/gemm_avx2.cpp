// AVX2 prefill GEMMs, bit-identical to the portable kernels of gemm_internal.h.
// Int8: vpmaddubsw (u8 x s8 -> int16 pair sums) against panels whose u8 operand is the type's raw q
// (q + offset; the offset is removed per group with the tokens' sums), or vpmaddwd on int16 q and
// activations for the types whose q spans int8 (Q8_0, IQ4). A register tile is 16 rows (two ymm) x
// up to 6 tokens for one scale group; the panel's f32 accumulators of every token stay in L1 while
// the tokens' group-major activations stream past, so each weight line is loaded once per tile.
// F16/BF16: a 16-row panel widened and transposed once per column chunk, 16 rows x 6 tokens of f32
// FMAs per register tile, the tokens read straight from x (no transposed copy).
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "gemm_internal.h"
#include "sparselens/kernels/kernels.h"

#define SL_UNROLL _Pragma("GCC unroll 16")
// The column-step loops stay rolled: unrolled, GCC schedules every step's products ahead of their
// adds and spills them all to the stack.
#define SL_NO_UNROLL _Pragma("GCC unroll 1")

namespace sl::kernels::detail {
namespace {

inline __m256i load_si(const void* p) {
    return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// Ends one token's step: GCC otherwise hoists every token's broadcast ahead of the products and runs
// out of the 16 ymm registers (12 accumulators + 2 weights + broadcast + product), spilling
// accumulators to the stack inside the hottest loop. Volatile asm statements keep their order, so
// each token's broadcast, products and adds stay together.
#define SL_KEEP_ORDER(a, b) __asm__ volatile("" : "+x"(a), "+x"(b))

inline __m256i bcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// accf[t * 16 + r] = fma(float(isum - offset * sum), a * dx, accf), then fma(b, xm, accf) with a
// minimum: the f32 step of one group for T tokens, exactly as the portable kernel orders it. The
// conversion is the magic-number one (gemm_internal.h): vpmaddwd/vpmaddubsw/vcvtdq2ps/FMA all issue
// on the same two pipes here, integer adds and f32 subtracts do not.
template <int T, bool MIN>
inline void group_epilogue(__m256i (&isum)[2][T], const float* a, const float* b, const gemm_group_side* side,
                           float* accf) {
    const __m256 magic = _mm256_set1_ps(12582912.0f);  // 1.5 * 2^23, the value of k_f32_magic
    SL_UNROLL
    for (int h = 0; h < 2; ++h) {
        const __m256 av = _mm256_loadu_ps(a + 8 * h);
        SL_UNROLL
        for (int t = 0; t < T; ++t) {
            const __m256i v = _mm256_add_epi32(isum[h][t], _mm256_set1_epi32(side[t].bias));
            const __m256 f = _mm256_sub_ps(_mm256_castsi256_ps(v), magic);
            const __m256 sc = _mm256_mul_ps(av, _mm256_set1_ps(side[t].dx));
            float* o = accf + t * 16 + 8 * h;
            __m256 acc = _mm256_fmadd_ps(f, sc, _mm256_loadu_ps(o));
            if constexpr (MIN) acc = _mm256_fmadd_ps(_mm256_loadu_ps(b + 8 * h), _mm256_set1_ps(side[t].xm), acc);
            _mm256_storeu_ps(o, acc);
        }
    }
}

// The tiles' run() functions are noinline: inlined into panel_groups, GCC kept the accumulators of
// the smaller tiles on the stack.

// Offset panels whose whole group fits int16 (steps16 >= G / 4: Q4_0, Q4_1, Q4_K, Q2_K, Q3_K): one
// maddubs + one add per 4 columns x 8 rows x token, widened once per group.
template <int G, bool MIN>
struct int16_groups {
    static constexpr int max_tokens = 6;  // 12 accumulators + 2 weights + 1 broadcast
    using act = int8_t;
    template <int T>
    __attribute__((noinline)) static void run(const gemm_panel& p, int64_t g, const int8_t* xq,
                                              const gemm_group_side* side, float* accf) {
        const uint8_t* wq = p.q + g * G * 16;
        __m256i acc[2][T];
        SL_UNROLL
        for (int t = 0; t < T; ++t) acc[0][t] = acc[1][t] = _mm256_setzero_si256();
        SL_NO_UNROLL
        for (int k4 = 0; k4 < G / 4; ++k4) {
            const __m256i w0 = load_si(wq + 64 * k4), w1 = load_si(wq + 64 * k4 + 32);
            SL_UNROLL
            for (int t = 0; t < T; ++t) {
                const __m256i bx = bcast4(xq + t * G + 4 * k4);
                acc[0][t] = _mm256_add_epi16(acc[0][t], _mm256_maddubs_epi16(w0, bx));
                acc[1][t] = _mm256_add_epi16(acc[1][t], _mm256_maddubs_epi16(w1, bx));
                SL_KEEP_ORDER(acc[0][t], acc[1][t]);
            }
        }
        const __m256i ones = _mm256_set1_epi16(1);
        SL_UNROLL
        for (int t = 0; t < T; ++t) {
            acc[0][t] = _mm256_madd_epi16(acc[0][t], ones);
            acc[1][t] = _mm256_madd_epi16(acc[1][t], ones);
        }
        group_epilogue<T, MIN>(acc, p.a + g * 16, MIN ? p.b + g * 16 : nullptr, side, accf);
    }
};

// Offset panels whose int16 pair sums allow only S = 2 steps (Q5_x, Q6_K), or S = 1: widened to
// int32 every S steps.
template <int G, int S, bool MIN>
struct int32_groups {
    static constexpr int max_tokens = 4;  // 8 accumulators + 2 * S weights + S broadcasts + product
    using act = int8_t;
    template <int T>
    __attribute__((noinline)) static void run(const gemm_panel& p, int64_t g, const int8_t* xq,
                                              const gemm_group_side* side, float* accf) {
        const uint8_t* wq = p.q + g * G * 16;
        const __m256i ones = _mm256_set1_epi16(1);
        __m256i acc[2][T];
        SL_UNROLL
        for (int t = 0; t < T; ++t) acc[0][t] = acc[1][t] = _mm256_setzero_si256();
        SL_NO_UNROLL
        for (int k4 = 0; k4 < G / 4; k4 += S) {
            __m256i w[S][2];
            SL_UNROLL
            for (int s = 0; s < S; ++s) {
                w[s][0] = load_si(wq + 64 * (k4 + s));
                w[s][1] = load_si(wq + 64 * (k4 + s) + 32);
            }
            SL_UNROLL
            for (int t = 0; t < T; ++t) {
                __m256i bx[S];
                SL_UNROLL
                for (int s = 0; s < S; ++s) bx[s] = bcast4(xq + t * G + 4 * (k4 + s));
                SL_UNROLL
                for (int h = 0; h < 2; ++h) {
                    __m256i sum16 = _mm256_maddubs_epi16(w[0][h], bx[0]);
                    SL_UNROLL
                    for (int s = 1; s < S; ++s) sum16 = _mm256_add_epi16(sum16, _mm256_maddubs_epi16(w[s][h], bx[s]));
                    acc[h][t] = _mm256_add_epi32(acc[h][t], _mm256_madd_epi16(sum16, ones));
                }
                SL_KEEP_ORDER(acc[0][t], acc[1][t]);
            }
        }
        group_epilogue<T, MIN>(acc, p.a + g * 16, MIN ? p.b + g * 16 : nullptr, side, accf);
    }
};

// Wide panels (int16 q: Q8_0, IQ4): one vpmaddwd + one add per 2 columns x 8 rows x token, against
// int16 activation pairs. Fewer multiply-pipe ops than moving q's sign onto int8 activations
// (vpsignb + vpmaddubsw + vpmaddwd per 4 columns), and no int8 corner case.
template <int G, bool MIN>
struct wide_groups {
    static constexpr int max_tokens = 6;
    using act = int16_t;
    template <int T>
    __attribute__((noinline)) static void run(const gemm_panel& p, int64_t g, const int16_t* xq,
                                              const gemm_group_side* side, float* accf) {
        const uint8_t* wq = p.q + g * G * 32;
        __m256i acc[2][T];
        SL_UNROLL
        for (int t = 0; t < T; ++t) acc[0][t] = acc[1][t] = _mm256_setzero_si256();
        SL_NO_UNROLL
        for (int k2 = 0; k2 < G / 2; ++k2) {
            const __m256i w0 = load_si(wq + 64 * k2), w1 = load_si(wq + 64 * k2 + 32);
            SL_UNROLL
            for (int t = 0; t < T; ++t) {
                int32_t pair;
                std::memcpy(&pair, xq + t * G + 2 * k2, 4);
                const __m256i bx = _mm256_set1_epi32(pair);
                acc[0][t] = _mm256_add_epi32(acc[0][t], _mm256_madd_epi16(w0, bx));
                acc[1][t] = _mm256_add_epi32(acc[1][t], _mm256_madd_epi16(w1, bx));
                SL_KEEP_ORDER(acc[0][t], acc[1][t]);
            }
        }
        group_epilogue<T, MIN>(acc, p.a + g * 16, MIN ? p.b + g * 16 : nullptr, side, accf);
    }
};

// Tiles of `size` (1..T) tokens: the size is a runtime value, the register tile a template one.
template <class K, int T>
void token_tile(int size, const gemm_panel& p, int64_t g, const typename K::act* xq, const gemm_group_side* side,
                float* accf) {
    if constexpr (T > 1) {
        if (size < T) return token_tile<K, T - 1>(size, p, g, xq, side, accf);
    }
    K::template run<T>(p, g, xq, side, accf);
}

std::vector<float>& thread_acc() {
    thread_local std::vector<float> v;
    return v;
}

// Group-outer: the group's 16 x G weights stay in L1 while every token passes, and the f32
// accumulators of all tokens (64 bytes each) are read and written once per group.
template <class K>
void panel_groups(const gemm_panel& p, const gemm_tokens& x, float* y, int64_t ys, int nr) {
    constexpr int TM = K::max_tokens;
    const int G = p.group;
    const int64_t ng = p.cols / G, n = x.n;
    std::vector<float>& acc = thread_acc();
    if (acc.size() < static_cast<size_t>(n * 16)) acc.resize(static_cast<size_t>(n * 16));
    std::fill(acc.begin(), acc.begin() + n * 16, 0.0f);
    const token_tiles tiles(n, TM);
    const int64_t lines = p.next_bytes / 64;
    for (int64_t g = 0; g < ng; ++g) {
        for (int64_t l = g * lines / ng; l < (g + 1) * lines / ng; ++l)
            _mm_prefetch(reinterpret_cast<const char*>(p.next) + 64 * l, _MM_HINT_T1);
        const auto* xq = static_cast<const typename K::act*>(x.qg) + g * n * G;
        const gemm_group_side* side = x.side + g * n;
        int64_t t = 0;
        for (int64_t i = 0; i < tiles.count; ++i) {
            const int size = tiles.size(i);
            token_tile<K, TM>(size, p, g, xq + t * G, side + t, acc.data() + t * 16);
            t += size;
        }
    }
    for (int64_t t = 0; t < n; ++t)
        std::memcpy(y + t * ys, acc.data() + t * 16, static_cast<size_t>(nr) * sizeof(float));
}

template <int G, bool MIN>
gemm_panel_fn pick(const gemm_panel& p) {
    if (p.format == panel_format::wide) return panel_groups<wide_groups<G, MIN>>;
    if (p.steps16 >= G / 4) return panel_groups<int16_groups<G, MIN>>;
    if (p.steps16 >= 2) return panel_groups<int32_groups<G, 2, MIN>>;
    return panel_groups<int32_groups<G, 1, MIN>>;
}

void panel_dispatch(const gemm_panel& p, const gemm_tokens& x, float* y, int64_t ys, int nr) {
    const bool min = p.b != nullptr;
    gemm_panel_fn f =
        p.group == 32 ? (min ? pick<32, true>(p) : pick<32, false>(p)) : (min ? pick<16, true>(p) : pick<16, false>(p));
    f(p, x, y, ys, nr);
}

// d[j] = dword j of r[0..7] (an 8 x 8 transpose of 32-bit elements).
inline void transpose8_epi32(__m256i (&r)[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; ++i) {
        u[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int j = 0; j < 4; ++j) {
        r[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
        r[4 + j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
    }
}

inline void transpose8_ps(__m256 (&r)[8]) {
    __m256i v[8];
    for (int i = 0; i < 8; ++i) v[i] = _mm256_castps_si256(r[i]);
    transpose8_epi32(v);
    for (int i = 0; i < 8; ++i) r[i] = _mm256_castsi256_ps(v[i]);
}

// 16 rows x T tokens of f32 FMA chains over kc columns.
template <int T>
__attribute__((noinline)) void float_tile(const float* wt, int64_t kc, const float* x, int64_t xs, float* y, int64_t ys,
                                          bool first) {
    __m256 acc[2][T];
    SL_UNROLL
    for (int t = 0; t < T; ++t) {
        acc[0][t] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(y + t * ys);
        acc[1][t] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(y + t * ys + 8);
    }
    for (int64_t c = 0; c < kc; ++c) {
        const __m256 w0 = _mm256_loadu_ps(wt + 16 * c), w1 = _mm256_loadu_ps(wt + 16 * c + 8);
        SL_UNROLL
        for (int t = 0; t < T; ++t) {
            const __m256 xb = _mm256_broadcast_ss(x + t * xs + c);
            acc[0][t] = _mm256_fmadd_ps(w0, xb, acc[0][t]);
            acc[1][t] = _mm256_fmadd_ps(w1, xb, acc[1][t]);
        }
    }
    SL_UNROLL
    for (int t = 0; t < T; ++t) {
        _mm256_storeu_ps(y + t * ys, acc[0][t]);
        _mm256_storeu_ps(y + t * ys + 8, acc[1][t]);
    }
}

template <int T>
void float_tile_n(int size, const float* wt, int64_t kc, const float* x, int64_t xs, float* y, int64_t ys, bool first) {
    if constexpr (T > 1) {
        if (size < T) return float_tile_n<T - 1>(size, wt, kc, x, xs, y, ys, first);
    }
    float_tile<T>(wt, kc, x, xs, y, ys, first);
}

inline float half_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);  // exact, as fp16_to_fp32 (quant_unpack.cpp's scales)
}

inline __m256i nibbles(__m128i v) {  // low nibbles as bytes 0-15, high nibbles as 16-31
    const __m128i m = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

// Direct decoders of the types prefill meets most, straight into the panel (no int8 row copy):
// u(k) = the 32 values q + offset of 32-column chunk k of a block (offset types) or its raw int8 q
// (wide), and scales() the block's a (and b) with quant_unpack.cpp's float operations.
struct q4_0_dec {
    static constexpr int elems = 32, bytes = 18;
    static constexpr bool single_scale = true;  // a = the fp16 at the block's start, no b
    static __m256i u(const uint8_t* blk, int) {
        return nibbles(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2)));
    }
    static void scales(const uint8_t* blk, float* a, float*) { a[0] = half_at(blk); }
};

struct q8_0_dec {
    static constexpr int elems = 32, bytes = 34;
    static constexpr bool single_scale = true;
    static __m256i u(const uint8_t* blk, int) { return load_si(blk + 2); }
    static void scales(const uint8_t* blk, float* a, float*) { a[0] = half_at(blk); }
};

struct q4_k_dec {
    static constexpr int elems = 256, bytes = 144;
    static constexpr bool single_scale = false;
    static __m256i u(const uint8_t* blk, int k) {
        const __m256i v = load_si(blk + 16 + 32 * (k / 2)), m = _mm256_set1_epi8(0x0f);
        return k % 2 ? _mm256_and_si256(_mm256_srli_epi16(v, 4), m) : _mm256_and_si256(v, m);
    }
    // Per 32 (8 per block, one vector): a = d * sc, b = -(dmin * m) with scale_min_k4's 6-bit pairs:
    // j < 4: sc = s[j] & 63, m = s[j + 4] & 63; j >= 4: sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4,
    // m = (s[j + 4] >> 4) | (s[j] >> 6) << 4.
    static constexpr int scale_vecs = 1;
    static void row_scales(const uint8_t* blk, __m256* a, __m256* b) {
        // The 12 scale bytes (and 4 of qs); pshufb index -128 makes a zero byte.
        const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 4));
        const __m128i lo_sc = _mm_shuffle_epi8(
            s, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, -128, -128, -128, -128, -128, -128, -128, -128));
        const __m128i lo_m = _mm_shuffle_epi8(
            s, _mm_setr_epi8(4, 5, 6, 7, 8, 9, 10, 11, -128, -128, -128, -128, -128, -128, -128, -128));
        const __m128i top_sc = _mm_shuffle_epi8(
            s, _mm_setr_epi8(-128, -128, -128, -128, 0, 1, 2, 3, -128, -128, -128, -128, -128, -128, -128, -128));
        const __m128i top_m = _mm_shuffle_epi8(
            s, _mm_setr_epi8(-128, -128, -128, -128, 4, 5, 6, 7, -128, -128, -128, -128, -128, -128, -128, -128));
        const __m128i m63_15 = _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 0, 0, 0, 0, 0, 0, 0, 0);
        const __m128i bits45 = _mm_set1_epi8(0x30);  // (v >> 6) << 4 == (v >> 2) & 0x30
        const __m128i sc = _mm_or_si128(_mm_and_si128(lo_sc, m63_15), _mm_and_si128(_mm_srli_epi16(top_sc, 2), bits45));
        // m: bytes 0-3 are s[j + 4] & 63, bytes 4-7 s[j + 4] >> 4.
        const __m128i m_lo = _mm_blend_epi16(_mm_and_si128(lo_m, _mm_set1_epi8(63)),
                                             _mm_and_si128(_mm_srli_epi16(lo_m, 4), _mm_set1_epi8(15)), 0x0c);
        const __m128i m = _mm_or_si128(m_lo, _mm_and_si128(_mm_srli_epi16(top_m, 2), bits45));
        const __m256 d = _mm256_set1_ps(half_at(blk)), dmin = _mm256_set1_ps(half_at(blk + 2));
        a[0] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc)));
        b[0] = _mm256_xor_ps(_mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m))), _mm256_set1_ps(-0.0f));
    }
};

struct q6_k_dec {
    static constexpr int elems = 256, bytes = 210;
    static constexpr bool single_scale = false;
    // Chunk k = 4 h + s: nibbles of ql[64 h + 32 (s % 2) ..] (low for s < 2) | bit pair s of qh << 4.
    static __m256i u(const uint8_t* blk, int k) {
        const int h = k / 4, sh = k % 4;
        const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
        const __m256i ql = load_si(blk + 64 * h + 32 * (sh % 2)), qh = load_si(blk + 128 + 32 * h);
        const __m256i lo = sh < 2 ? _mm256_and_si256(ql, m4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
        const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * sh)), m2);
        return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
    }
    // Per 16 (16 per block, two vectors): a = d * sc.
    static constexpr int scale_vecs = 2;
    static void row_scales(const uint8_t* blk, __m256* a, __m256*) {
        const __m256 d = _mm256_set1_ps(half_at(blk + 208));
        const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
        a[0] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)));
        a[1] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8))));
    }
};

// Rows [r0, r0 + nr) of w into the panel: per block, each row's scales into a/b, then per 32-column
// chunk the 16 rows' values transposed into 64-byte lines (rows past nr: zeros, and a = b = 0).
template <class D, bool WIDE>
void fill_direct(const tensor_view& w, int64_t r0, int nr, int group, uint8_t* q, float* a, float* b, uint8_t add) {
    const int64_t nblk = w.cols / D::elems;
    const __m256i addv = _mm256_set1_epi8(static_cast<char>(add));
    const int per_blk = D::elems / group;
    const uint8_t* rows[k_panel_rows];
    for (int i = 0; i < k_panel_rows; ++i) rows[i] = i < nr ? w.row(r0 + i) : nullptr;
    for (int64_t blk = 0; blk < nblk; ++blk) {
        const int64_t g0 = blk * per_blk;
        if constexpr (D::single_scale) {  // a = the block's fp16 d: 8 rows per vcvtph2ps
            for (int h = 0; h < 2; ++h) {
                alignas(16) uint16_t d[8];
                for (int i = 0; i < 8; ++i) {
                    const uint8_t* row = rows[8 * h + i];
                    d[i] = 0;
                    if (row) std::memcpy(&d[i], row + blk * D::bytes, 2);
                }
                _mm256_storeu_ps(a + g0 * 16 + 8 * h,
                                 _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(d))));
            }
        } else {  // each row's scale vectors, 8 rows transposed at a time into the row-lane layout
            for (int h = 0; h < 2; ++h) {
                __m256 va[D::scale_vecs][8], vb[D::scale_vecs][8];
                for (int i = 0; i < 8; ++i) {
                    __m256 ra[D::scale_vecs], rb[D::scale_vecs];
                    for (int v = 0; v < D::scale_vecs; ++v) ra[v] = rb[v] = _mm256_setzero_ps();
                    if (const uint8_t* row = rows[8 * h + i]) D::row_scales(row + blk * D::bytes, ra, rb);
                    for (int v = 0; v < D::scale_vecs; ++v) {
                        va[v][i] = ra[v];
                        vb[v][i] = rb[v];
                    }
                }
                for (int v = 0; v < D::scale_vecs; ++v) {
                    transpose8_ps(va[v]);
                    for (int j = 0; j < 8; ++j) _mm256_storeu_ps(a + (g0 + 8 * v + j) * 16 + 8 * h, va[v][j]);
                    if (b) {
                        transpose8_ps(vb[v]);
                        for (int j = 0; j < 8; ++j) _mm256_storeu_ps(b + (g0 + 8 * v + j) * 16 + 8 * h, vb[v][j]);
                    }
                }
            }
        }
        for (int k = 0; k < D::elems / 32; ++k) {
            const int64_t c = blk * D::elems + 32 * k;
            for (int h = 0; h < 2; ++h) {
                __m256i u[8];
                for (int i = 0; i < 8; ++i)
                    u[i] = rows[8 * h + i] ? D::u(rows[8 * h + i] + blk * D::bytes, k) : _mm256_setzero_si256();
                if constexpr (WIDE) {
                    __m256i v[8];
                    for (int i = 0; i < 8; ++i) v[i] = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(u[i], 1));
                    for (int i = 0; i < 8; ++i) u[i] = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(u[i]));
                    transpose8_epi32(u);
                    transpose8_epi32(v);
                    for (int j = 0; j < 8; ++j) {
                        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + (c / 2 + j) * 64 + 32 * h), u[j]);
                        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + (c / 2 + 8 + j) * 64 + 32 * h), v[j]);
                    }
                } else {
                    transpose8_epi32(u);
                    for (int j = 0; j < 8; ++j)
                        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + (c / 4 + j) * 64 + 32 * h),
                                            _mm256_add_epi8(u[j], addv));
                }
            }
        }
    }
}

// Columns [c0, c1) (a multiple of 8 apart) of 16 rows widened to f32, 8 x 8 blocks transposed into
// wt[(c - c0) * 16 + r]; rows past nr are zeros.
template <bool BF16>
void widen_columns(const tensor_view& w, int64_t r0, int nr, int64_t c0, int64_t c1, float* wt) {
    const uint8_t* rows[k_panel_rows];
    for (int i = 0; i < k_panel_rows; ++i) rows[i] = i < nr ? w.row(r0 + i) : nullptr;
    for (int64_t c = c0; c < c1; c += 8)
        for (int h = 0; h < 2; ++h) {
            __m256 v[8];
            for (int i = 0; i < 8; ++i) {
                const uint8_t* row = rows[8 * h + i];
                if (!row) {
                    v[i] = _mm256_setzero_ps();
                    continue;
                }
                const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c));
                v[i] = BF16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16))
                            : _mm256_cvtph_ps(bits);
            }
            transpose8_ps(v);
            for (int j = 0; j < 8; ++j) _mm256_storeu_ps(wt + (c - c0 + j) * 16 + 8 * h, v[j]);
        }
}

}  // namespace

gemm_panel_fn gemm_panel_avx2() {
    return panel_dispatch;
}

void gemm_pack_panel_avx2(const int8_t* rows, int64_t cols, panel_format format, int offset, uint8_t* q) {
    if (format == panel_format::wide) {
        // 16 columns of 8 rows at a time: widened to int16 pairs (one dword per row and column pair),
        // transposed so dword j of the result holds column pair j of the 8 rows.
        for (int64_t c = 0; c < cols; c += 16)
            for (int h = 0; h < 2; ++h) {
                __m256i r[8];
                for (int i = 0; i < 8; ++i)
                    r[i] = _mm256_cvtepi8_epi16(
                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows + (8 * h + i) * cols + c)));
                transpose8_epi32(r);
                for (int j = 0; j < 8; ++j)
                    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + (c / 2 + j) * 64 + 32 * h), r[j]);
            }
        return;
    }
    const __m256i off = _mm256_set1_epi8(static_cast<char>(offset));
    for (int64_t c = 0; c < cols; c += 32)
        for (int h = 0; h < 2; ++h) {
            __m256i r[8];
            for (int i = 0; i < 8; ++i) r[i] = load_si(rows + (8 * h + i) * cols + c);
            transpose8_epi32(r);
            for (int j = 0; j < 8; ++j)
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + (c / 4 + j) * 64 + 32 * h),
                                    _mm256_add_epi8(r[j], off));
        }
}

bool gemm_fill_panel_avx2(const tensor_view& w, int64_t r0, int nr, int group, uint8_t* q, float* a, float* b,
                          uint8_t add) {
    switch (w.type) {
        case dtype::q4_0:
            fill_direct<q4_0_dec, false>(w, r0, nr, group, q, a, nullptr, add);
            return true;
        case dtype::q8_0:
            fill_direct<q8_0_dec, true>(w, r0, nr, group, q, a, nullptr, add);
            return true;
        case dtype::q4_k:
            fill_direct<q4_k_dec, false>(w, r0, nr, group, q, a, b, add);
            return true;
        case dtype::q6_k:
            fill_direct<q6_k_dec, false>(w, r0, nr, group, q, a, nullptr, add);
            return true;
        default:
            return false;
    }
}

void gemm_pack_token_avx2(const int8_t* qs, const float* d, int64_t cols, int group, int offset, bool wide, int64_t t,
                          int64_t n, void* qg, gemm_group_side* side) {
    const int64_t ng = cols / group;
    const __m128i m128 = _mm_set1_epi8(-128);
    for (int64_t g = 0; g < ng; ++g) {
        const int8_t* src = qs + g * group;
        // sad of (q ^ 0x80) against 0 sums q + 128 exactly; the 128s are taken off below.
        __m128i sad = _mm_setzero_si128();
        for (int i = 0; i < group; i += 16) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
            const int64_t at = (g * n + t) * group + i;
            if (wide) {
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<int16_t*>(qg) + at),
                                    _mm256_cvtepi8_epi16(v));
            } else {
                _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<int8_t*>(qg) + at), v);
            }
            sad = _mm_add_epi64(sad, _mm_sad_epu8(_mm_xor_si128(v, m128), _mm_setzero_si128()));
        }
        const int32_t sum = static_cast<int32_t>(_mm_cvtsi128_si64(sad) + _mm_extract_epi64(sad, 1)) - 128 * group;
        const float dg = d[g * group / 32];
        side[g * n + t] = {k_f32_magic - offset * sum, dg, dg * static_cast<float>(sum)};
    }
}

void gemm_widen_panel_avx2(const tensor_view& w, int64_t r0, int nr, int64_t c0, int64_t c1, float* wt) {
    const int64_t c8 = c0 + (c1 - c0) / 8 * 8;
    if (w.type == dtype::bf16)
        widen_columns<true>(w, r0, nr, c0, c8, wt);
    else
        widen_columns<false>(w, r0, nr, c0, c8, wt);
    for (int64_t c = c8; c < c1; ++c)
        for (int r = 0; r < 16; ++r) {
            float v = 0.0f;
            if (r < nr) {
                uint16_t bits;
                std::memcpy(&bits, w.row(r0 + r) + 2 * c, 2);
                if (w.type == dtype::bf16) {
                    const uint32_t u = static_cast<uint32_t>(bits) << 16;
                    std::memcpy(&v, &u, 4);
                } else {
                    v = fp16_to_fp32(bits);
                }
            }
            wt[(c - c0) * 16 + r] = v;
        }
}

void gemm_float_panel_avx2(const float* wt, int64_t kc, const float* x, int64_t xs, int64_t n, float* y, int64_t ys,
                           bool first, const gemm_prefetch_rows& next) {
    constexpr int TM = 6;  // 12 accumulators + 2 weights + 1 broadcast
    const token_tiles tiles(n, TM);
    int64_t t = 0;
    for (int64_t i = 0; i < tiles.count; ++i) {
        next.prefetch_part(i, tiles.count);
        const int size = tiles.size(i);
        float_tile_n<TM>(size, wt, kc, x + t * xs, xs, y + t * ys, ys, first);
        t += size;
    }
}

}  // namespace sl::kernels::detail

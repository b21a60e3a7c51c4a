// AVX-512 VNNI + VBMI input-sparse kernels for Q8_0/Q4_0 input-major rows: integer dots (vpdpbusd)
// instead of widening every weight to f32.
//
// Why: the f32 axpy (sparse_avx512.cpp) spends ~7 vector uops per 32 weights (widen, mask/shift, two
// converts, two FMAs), so at density 1 the input-sparse GEMV ran at 0.44-0.56x the row-major Q4_0 gemv,
// which uses integer dots. Here, per output block b (32 outputs) and chunk of up to 32 active channels i,
// the coefficients c_ib = x_i * d_ib are quantized to int8 k_ib with one scale S_b = max_i |c_ib| / 127
// per (chunk, block) — the same kind of rounding as ggml's Q8 activation blocks, with the weight scale
// folded in — and y_o += S_b * sum_i k_ib * q_io runs as vpdpbusd: 4 channels' bytes interleaved into
// each dword by one byte permute, 64 multiply-adds per instruction, int32 sums kept in registers
// across the chunk. About 11 uops per 128 weights; the kernel becomes memory-bound.
// Every quantity is a function of the chunk and the block only, so any split of the outputs gives
// identical bits (the scalar tail below rounds exactly like the vector path).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "row_dots_avx512.h"
#include "int8_coefs.h"
#include "sparse_internal.h"

#if !defined(__AVX512VNNI__) || !defined(__AVX512VBMI__)
#error "sparse_vnni_avx512.cpp needs -mavx512vnni -mavx512vbmi (kernels/CMakeLists.txt)"
#endif

namespace sl::kernels::detail {
namespace {

constexpr int k_groups = k_chunk_rows / 4;  // channels go 4 to a dword
constexpr int64_t k_seg_blocks = 128;       // blocks per coefficient table (stack: ~21 KiB)

// Byte-permute tables built at compile time.
struct perm64 {
    alignas(64) uint8_t v[64];
};
// Q4_0: lane j holds row j's 16 bytes; dword o gathers byte o of each lane.
constexpr perm64 q4_perm() {
    perm64 p{};
    for (int o = 0; o < 16; ++o)
        for (int j = 0; j < 4; ++j) p.v[4 * o + j] = static_cast<uint8_t>(16 * j + o);
    return p;
}
// Q8_0: a = [row 0 | row 1], b = [row 2 | row 3] (32 bytes each); dword o gathers byte o + half of each row.
constexpr perm64 q8_perm(int half) {
    perm64 p{};
    for (int o = 0; o < 16; ++o)
        for (int j = 0; j < 4; ++j) p.v[4 * o + j] = static_cast<uint8_t>(32 * j + 16 * half + o);
    return p;
}
// 4 rows x 8 blocks of int8 coefficients -> dword b = the 4 rows' coefficients of block b.
constexpr perm64 coef_perm() {
    perm64 p{};
    for (int b = 0; b < 8; ++b)
        for (int j = 0; j < 4; ++j) p.v[4 * b + j] = static_cast<uint8_t>(8 * j + b);
    return p;
}
constexpr perm64 k_q4_perm = q4_perm(), k_q8_lo = q8_perm(0), k_q8_hi = q8_perm(1), k_coef_perm = coef_perm();

inline __m512i load_perm(const perm64& p) {
    return _mm512_load_si512(p.v);
}

// Stored weights as unsigned bytes: Q4_0 nibbles n mean n - 8; Q8_0 bytes q are flipped to q + 128.
struct q4_ints : q4_block {
    static constexpr int32_t zero = 8;
    static void get(const uint8_t* const* r, int64_t off, __m512i perm, __m512i, __m512i& lo, __m512i& hi) {
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[0] + off + 2)));
        v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[1] + off + 2)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[2] + off + 2)), 2);
        v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[3] + off + 2)), 3);
        const __m512i t = _mm512_permutexvar_epi8(perm, v);
        const __m512i m = _mm512_set1_epi8(0x0f);
        lo = _mm512_and_si512(t, m);
        hi = _mm512_and_si512(_mm512_srli_epi16(t, 4), m);
    }
};
struct q8_ints : q8_block {
    static constexpr int32_t zero = 128;
    static void get(const uint8_t* const* r, int64_t off, __m512i perm_lo, __m512i perm_hi, __m512i& lo, __m512i& hi) {
        const auto ld = [&](int j) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r[j] + off + 2)); };
        const __m512i a = _mm512_inserti64x4(_mm512_castsi256_si512(ld(0)), ld(1), 1);
        const __m512i b = _mm512_inserti64x4(_mm512_castsi256_si512(ld(2)), ld(3), 1);
        const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
        lo = _mm512_xor_si512(_mm512_permutex2var_epi8(a, perm_lo, b), flip);
        hi = _mm512_xor_si512(_mm512_permutex2var_epi8(a, perm_hi, b), flip);
    }
};

// Coefficient tables of one segment of blocks: kq[g][b] = the int8 coefficients of channels 4g..4g+3
// in block b, scale[b] = S_b, start[b] = -zero * sum_i k_ib (the unsigned weights' offset, exact).
struct coef_tables {
    alignas(64) uint32_t kq[k_groups][k_seg_blocks];
    alignas(64) float scale[k_seg_blocks];
    alignas(64) int32_t start[k_seg_blocks];
    alignas(64) float c[k_chunk_rows][8];
};

// Blocks [b0, b0 + 8) from the fp16 scales of each row (two permutes per row, no scalar loads).
template <typename V>
void coefs8(coef_tables& t, const uint8_t* const* r, const float* s, int nr, int64_t off, int64_t b0) {
    __m256 mx = _mm256_setzero_ps();
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int i = 0; i < nr; ++i) {
        const __m256 c = _mm256_mul_ps(V::scales8(r[i] + off), _mm256_set1_ps(s[i]));
        _mm256_store_ps(t.c[i], c);
        mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, c));
    }
    const __mmask8 nz = _mm256_cmp_ps_mask(mx, _mm256_setzero_ps(), _CMP_GT_OQ);
    const __m256 inv = _mm256_maskz_div_ps(nz, _mm256_set1_ps(127.0f), mx);
    _mm256_store_ps(t.scale + b0, _mm256_div_ps(mx, _mm256_set1_ps(127.0f)));
    __m256i sum = _mm256_setzero_si256();
    const __m256i perm = _mm512_castsi512_si256(load_perm(k_coef_perm));
    for (int g = 0; g * 4 < nr; ++g) {
        __m128i q[4];
        for (int j = 0; j < 4; ++j) {
            const int i = 4 * g + j;
            const __m256i k = i < nr ? _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_load_ps(t.c[i]), inv))
                                     : _mm256_setzero_si256();
            sum = _mm256_add_epi32(sum, k);
            q[j] = _mm256_cvtsepi32_epi8(k);  // 8 bytes
        }
        const __m256i rows = _mm256_set_m128i(_mm_unpacklo_epi64(q[2], q[3]), _mm_unpacklo_epi64(q[0], q[1]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(t.kq[g] + b0), _mm256_permutexvar_epi8(perm, rows));
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(t.start + b0), _mm256_sub_epi32(_mm256_setzero_si256(),
                                                                                   _mm256_mullo_epi32(sum, _mm256_set1_epi32(V::zero))));
}

template <typename V>
void chunk(float* acc, bool init, int n_rows, const uint8_t* const* rows, const float* s, int64_t n,
           const uint8_t* const* pf, int n_pf) {
    const uint8_t* r[k_chunk_rows];
    const int ng = (n_rows + 3) / 4;
    for (int i = 0; i < 4 * ng; ++i) r[i] = rows[i < n_rows ? i : 0];  // padding rows get k = 0
    const __m512i perm_a = load_perm(std::is_same_v<V, q4_ints> ? k_q4_perm : k_q8_lo);
    const __m512i perm_b = load_perm(k_q8_hi);
    coef_tables t;
    const int64_t nb = n / 32;
    for (int64_t s0 = 0; s0 < nb; s0 += k_seg_blocks) {
        const int64_t ns = std::min(k_seg_blocks, nb - s0);
        const int64_t off0 = s0 * V::bytes;
        int64_t b = 0;
        for (; b + 8 <= ns; b += 8) coefs8<V>(t, r, s, n_rows, off0 + b * V::bytes, b);
        for (; b < ns; ++b) coefs_one_block<V::zero>(t, b, r, s, n_rows, off0 + b * V::bytes);
        // The next chunk's rows go to L2 while this one is consumed: a chunk's rows (up to 32 x 4 KiB) do
        // not fit L1 next to the current ones. T1 beat T0/T2/none (d = 1, 4096x14336 Q4_0, one thread:
        // 2.3 / ~3.5 / 3.1 / ~4 ms). The lines are requested row after row, a few per block, so DRAM
        // sees sequential runs, not 32 interleaved streams: minimum over 60 calls out of cache, one
        // thread, time / dense at d = 1 went 1.20-1.26 -> 1.03-1.05 (Q4_0) and 1.48-1.62 -> 1.34-1.43
        // (Q8_0) on the 2048x8192 and 8192x2048 shapes.
        const int64_t seg_lines = (ns * V::bytes + 63) / 64 + 1;
        const int per_block = static_cast<int>((n_pf * seg_lines + ns - 1) / ns);
        int pi = 0;
        int64_t pl = 0;
        for (b = 0; b < ns; ++b) {
            const int64_t off = off0 + b * V::bytes;
            for (int q = 0; q < per_block && pi < n_pf; ++q) {
                _mm_prefetch(reinterpret_cast<const char*>(pf[pi] + off0 + pl * 64), _MM_HINT_T1);
                if (++pl == seg_lines) {
                    pl = 0;
                    ++pi;
                }
            }
            __m512i a0 = _mm512_set1_epi32(t.start[b]), a1 = a0;
            for (int g = 0; g < ng; ++g) {
                __m512i lo, hi;
                V::get(r + 4 * g, off, perm_a, perm_b, lo, hi);
                const __m512i kv = _mm512_set1_epi32(static_cast<int32_t>(t.kq[g][b]));
                a0 = _mm512_dpbusd_epi32(a0, lo, kv);
                a1 = _mm512_dpbusd_epi32(a1, hi, kv);
            }
            const __m512 sv = _mm512_set1_ps(t.scale[b]);
            float* out = acc + (s0 + b) * 32;
            if (init) {
                _mm512_storeu_ps(out, _mm512_mul_ps(sv, _mm512_cvtepi32_ps(a0)));
                _mm512_storeu_ps(out + 16, _mm512_mul_ps(sv, _mm512_cvtepi32_ps(a1)));
            } else {
                _mm512_storeu_ps(out, _mm512_fmadd_ps(sv, _mm512_cvtepi32_ps(a0), _mm512_loadu_ps(out)));
                _mm512_storeu_ps(out + 16, _mm512_fmadd_ps(sv, _mm512_cvtepi32_ps(a1), _mm512_loadu_ps(out + 16)));
            }
        }
    }
}

}  // namespace

void add_vnni_chunks(sparse_table& k) {
    if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512vbmi")) return;
    k.chunk[static_cast<int>(dtype::q8_0)] = chunk<q8_ints>;
    k.chunk[static_cast<int>(dtype::q4_0)] = chunk<q4_ints>;
}

}  // namespace sl::kernels::detail

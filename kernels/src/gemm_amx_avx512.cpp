// AMX int8 GEMM panel kernel (Intel Sapphire Rapids and later): the integer sums of 16 tokens x 16 weight
// rows x one scale group in one tile multiply (TDPBSUD: signed activations x the panel's q + 128), and
// the same per-group float arithmetic as the VNNI kernel (gemm_avx512.cpp), so the bits are identical to
// it and to the scalar reference (gemm_internal.h's contract).
//
// Why: on this VM's Xeon (2 vCPUs, AMX-INT8) prefill of llama-1b Q4_0 spent half its time in the VNNI
// panel kernel, whose vpdpbusd does 64 multiply-adds per instruction next to a broadcast of each token's 4
// activations; llama.cpp's CPU backend uses the tiles there. Here a group of 16 tokens costs one tile
// load of the activations, one of the weights (the panel's lines are already the B tile layout: line c/4
// = 4 columns of the 16 rows, 4 bytes each), one multiply (16 x 16 x 32) and a store of the 16 x 16 int32
// sums, which the float epilogue reads back: about 100 instructions per 8192 multiply-adds instead of
// ~370. Tokens past the last whole 16 run on the VNNI kernel (same bits). (llama.cpp's Sapphire Rapids CPU
// variant, the peer's libggml-cpu-sapphirerapids.so, has an AMX matmul of its own.)
//
// Measured (/tmp harness, gemm of Q4_0 on 128 tokens, AMX on and off alternating in one process, medians of
// 7): 5632x2048 on 1 thread 105-110 -> 119-126 GMAC/s; 14336x4096 on 2 threads 114-124 -> 129-140. The cap is
// the per-group scales: the gemm contract converts each 32 columns' integer sums to float, so every
// multiply's 16 x 16 sums go through a tile store and vector loads. A probe of the bare tile ops (K = 32)
// ran 430 GMAC/s per core, and 180 with that store and read-back.
//
// Linux hands out the tiles' 8 KiB of state per process on request (arch_prctl ARCH_REQ_XCOMP_PERM); a
// kernel that refuses, or a CPU without AMX-INT8, leaves gemm on the VNNI kernel.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cpuid.h>

#include "gemm_internal.h"

#if !(defined(__AMX_TILE__) || defined(__AMXTILE__)) || !(defined(__AMX_INT8__) || defined(__AMXINT8__))  // GCC, clang
#error "gemm_amx_avx512.cpp needs -mamx-tile -mamx-int8 (kernels/CMakeLists.txt)"
#endif

#define SL_UNROLL _Pragma("GCC unroll 16")

namespace sl::kernels::detail {
namespace {

// The LDTILECFG memory operand (palette 1): bytes per row and rows of each of the 8 tiles.
struct alignas(64) tile_config {
    uint8_t palette = 1;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};

// Tiles: 0, 1 the int32 sums (16 tokens x 16 rows) of two groups in flight; 2, 3 their activations (16
// tokens x G bytes); 4, 5 their weights (G / 4 lines of 64 bytes).
tile_config config_for(int group) {
    tile_config c;
    for (int t = 0; t < 2; ++t) {
        c.colsb[t] = 64, c.rows[t] = 16;
        c.colsb[2 + t] = static_cast<uint16_t>(group), c.rows[2 + t] = 16;
        c.colsb[4 + t] = 64, c.rows[4 + t] = static_cast<uint8_t>(group / 4);
    }
    return c;
}

// Group g's integer sums into tile C (0 or 1) from activations tile C + 2 and weights tile C + 4. The
// tile numbers are spelled out: GCC's intrinsics paste them into the instruction text.
template <int C, int G>
[[gnu::always_inline]] inline void multiply(const gemm_panel& p, const int8_t* xq, int64_t g) {
    if constexpr (C == 0) {
        _tile_zero(0);
        _tile_loadd(2, xq + g * 16 * G, G);
        _tile_loadd(4, p.q + g * G * 16, 64);
        _tile_dpbsud(0, 2, 4);
    } else {
        _tile_zero(1);
        _tile_loadd(3, xq + g * 16 * G, G);
        _tile_loadd(5, p.q + g * G * 16, 64);
        _tile_dpbsud(1, 3, 5);
    }
}

// The VNNI kernel's per-group float step for 16 tokens, from the sums s[t][row].
template <bool M>
[[gnu::always_inline]] inline void accumulate(const gemm_panel& p, const gemm_tokens& x, int64_t t0, int64_t g,
                                              int64_t ng, const int32_t (&s)[16][16], __m512 (&acc)[16]) {
    const __m512 av = _mm512_loadu_ps(p.a + g * 16);
    SL_UNROLL
    for (int t = 0; t < 16; ++t) {
        const int64_t gi = (t0 + t) * ng + g;
        const __m512i isum = _mm512_load_si512(s[t]);
        const __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(isum, _mm512_set1_epi32(x.corr[gi])));
        acc[t] = _mm512_fmadd_ps(f, _mm512_mul_ps(av, _mm512_set1_ps(x.dx[gi])), acc[t]);
        if constexpr (M) acc[t] = _mm512_fmadd_ps(_mm512_loadu_ps(p.b + g * 16), _mm512_set1_ps(x.xm[gi]), acc[t]);
    }
}

// Tokens [t0, t0 + 16) against the panel; groups go in pairs so one multiply runs while the other's
// sums are converted. No prefetch of the next panel (the VNNI kernel's): gemm of 14336x4096 Q4_0 on 128
// tokens, 2 threads, two builds alternating, ran 129-132 GMAC/s with it and 133-134 without.
template <int G, bool M>
void tokens16(const gemm_panel& p, const gemm_tokens& x, int64_t t0, float* y, int64_t ys, int nr) {
    const int64_t ng = p.cols / G;
    const int8_t* xq = x.qa + t0 * x.cols;  // [ng][16][G] for these 16 tokens
    alignas(64) int32_t s[2][16][16];
    __m512 acc[16];
    SL_UNROLL
    for (int t = 0; t < 16; ++t) acc[t] = _mm512_setzero_ps();
    // Group g: its multiply is issued two steps ahead of its sums' conversion, and its sums are stored one
    // step ahead, so the vector loads never wait on the tile store they read.
    multiply<0, G>(p, xq, 0);
    if (ng > 1) multiply<1, G>(p, xq, 1);
    _tile_stored(0, s[0], 64);
    for (int64_t g = 0; g < ng; g += 2) {
        if (g + 2 < ng) multiply<0, G>(p, xq, g + 2);
        if (g + 1 < ng) _tile_stored(1, s[1], 64);
        accumulate<M>(p, x, t0, g, ng, s[0], acc);
        if (g + 1 >= ng) break;
        if (g + 3 < ng) multiply<1, G>(p, xq, g + 3);
        if (g + 2 < ng) _tile_stored(0, s[0], 64);
        accumulate<M>(p, x, t0, g + 1, ng, s[1], acc);
    }
    const __mmask16 m = static_cast<__mmask16>((1u << nr) - 1u);
    SL_UNROLL
    for (int t = 0; t < 16; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * ys, m, acc[t]);
}

gemm_panel_fn g_vnni = nullptr;  // the tail's kernel, set with the permission

void panel_amx(const gemm_panel& p, const gemm_tokens& x, float* y, int64_t ys, int nr) {
    const int64_t whole = x.n / 16 * 16;
    if (whole > 0) {
        // The configuration is per thread and cheap next to a panel (cols x 16 tokens at least).
        const tile_config cfg = config_for(p.group);
        _tile_loadconfig(&cfg);
        for (int64_t t0 = 0; t0 < whole; t0 += 16) {
            if (p.group == 32)
                p.b ? tokens16<32, true>(p, x, t0, y, ys, nr) : tokens16<32, false>(p, x, t0, y, ys, nr);
            else
                p.b ? tokens16<16, true>(p, x, t0, y, ys, nr) : tokens16<16, false>(p, x, t0, y, ys, nr);
        }
    }
    if (whole < x.n) {  // the last n % 16 tokens: the same arithmetic per token on the VNNI kernel
        const int64_t ng = x.cols / p.group;
        gemm_tokens rest = x;
        rest.qs += whole * x.cols;
        rest.corr += whole * ng;
        rest.dx += whole * ng;
        if (rest.xm) rest.xm += whole * ng;
        rest.n = x.n - whole;
        g_vnni(p, rest, y + whole * ys, ys, nr);
    }
}

// CPUID leaf 7: EDX bit 24 AMX-TILE, bit 25 AMX-INT8; XCR0 bits 17 and 18 (XTILECFG, XTILEDATA) enabled.
bool cpu_has_amx_int8() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || (d & (1u << 24)) == 0 || (d & (1u << 25)) == 0) return false;
    if (!__get_cpuid(1, &a, &b, &c, &d) || (c & bit_OSXSAVE) == 0) return false;
    unsigned lo = 0, hi = 0;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & (3u << 17)) == (3u << 17);
}

// Linux (5.16+) enables the tile data state for a process only on request.
bool os_grants_tiles() {
    constexpr long k_arch_req_xcomp_perm = 0x1023, k_xfeature_xtiledata = 18;
    return syscall(SYS_arch_prctl, k_arch_req_xcomp_perm, k_xfeature_xtiledata) == 0;
}

}  // namespace

gemm_panel_fn gemm_panel_amx() {
    static const gemm_panel_fn fn = [] {
        g_vnni = gemm_panel_avx512();
        return g_vnni && cpu_has_amx_int8() && os_grants_tiles() ? panel_amx : nullptr;
    }();
    return fn;
}

}  // namespace sl::kernels::detail

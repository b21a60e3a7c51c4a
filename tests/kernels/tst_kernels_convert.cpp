// fp16/bf16 conversions (exhaustive over 16-bit patterns, every rounding case) and Q8_0/Q4_0 codecs.
#include <immintrin.h>
#include <cpuid.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "sparselens/kernels/kernels.h"
#include "sparselens/kernels/sparse.h"

namespace {

using sl::dtype;
namespace k = sl::kernels;

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
float from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

uint64_t g_state = 12345;
uint64_t next_u64() {  // splitmix64
    uint64_t z = (g_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// n values in [-10000, 10000] / div from splitmix64 seeded with `seed` (steps of 1 / div: ties and zeros).
std::vector<float> spread_values(int64_t n, uint64_t seed, float div) {
    g_state = seed;
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = static_cast<float>(static_cast<int64_t>(next_u64() % 20001) - 10000) / div;
    return x;
}

// Value of a finite half by its definition (no bit tricks shared with the library).
double half_value(uint16_t h) {
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

// Nearest half by search over the sorted table of all positive finite halves, ties to even
// mantissa, overflow at max + half an ulp (65520) to Inf. NaN handled by the caller.
uint16_t reference_fp16(float f) {
    static const std::vector<double> table = [] {
        std::vector<double> t(0x7c00);
        for (uint32_t h = 0; h < 0x7c00; ++h) t[h] = half_value(static_cast<uint16_t>(h));
        return t;
    }();
    const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    const double a = std::fabs(static_cast<double>(f));
    if (a >= 65520.0) return sign | 0x7c00;
    const auto it = std::upper_bound(table.begin(), table.end(), a);  // first value > a
    const uint32_t hi = static_cast<uint32_t>(it - table.begin());
    const uint32_t lo = hi - 1;  // table[lo] <= a
    if (table[lo] == a || hi == 0x7c00) return static_cast<uint16_t>(sign | lo);
    const double dlo = a - table[lo], dhi = table[hi] - a;
    const uint32_t pick = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) ? hi : lo);
    return static_cast<uint16_t>(sign | pick);
}

// Nearest bf16 by comparing the two candidate neighbours in double, ties to even.
uint16_t reference_bf16(float f) {
    const uint32_t u = bits(f);
    const uint16_t lo = static_cast<uint16_t>(u >> 16);
    const double v = std::fabs(static_cast<double>(f));
    const double vlo = std::fabs(static_cast<double>(from_bits(static_cast<uint32_t>(lo) << 16)));
    // The next pattern up in magnitude; above the largest finite it is Inf (compare in double).
    const uint16_t up = static_cast<uint16_t>(lo + 1);
    const double vhi = (up & 0x7fff) == 0x7f80 ? std::ldexp(1.0, 128) : std::fabs(static_cast<double>(from_bits(static_cast<uint32_t>(up) << 16)));
    if (v == vlo) return lo;
    const double dlo = v - vlo, dhi = vhi - v;
    return dlo < dhi ? lo : dhi < dlo ? up : ((lo & 1) ? up : lo);
}

__attribute__((target("f16c"))) uint16_t hw_fp16(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
__attribute__((target("f16c"))) float hw_fp32(uint16_t h) { return _cvtsh_ss(h); }
// CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c").
bool have_f16c() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c >> 29 & 1u) != 0;
}

// Floats covering every rounding case of a target keeping the top `keep_bits` bits: every prefix
// with the dropped bits at 0, 1, just below/at/above halfway, all ones and one random pattern.
std::vector<float> rounding_cases(int keep_bits) {
    const uint32_t low_bits = 32 - static_cast<uint32_t>(keep_bits);
    const uint32_t half = 1u << (low_bits - 1);
    const uint32_t mask = (1u << low_bits) - 1u;
    std::vector<float> out;
    out.reserve((size_t{1} << keep_bits) * 7);
    for (uint32_t top = 0; top < (1u << keep_bits); ++top)
        for (uint32_t low : {0u, 1u, half - 1, half, half + 1, mask, static_cast<uint32_t>(next_u64()) & mask})
            out.push_back(from_bits((top << low_bits) | low));
    return out;
}

TEST(fp16, all_65536_patterns_decode_exactly) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = k::fp16_to_fp32(static_cast<uint16_t>(h));
        const bool is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (is_nan) {
            ASSERT_TRUE(std::isnan(f)) << h;
            ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << h;
        } else if ((h & 0x7fff) == 0x7c00) {
            ASSERT_TRUE(std::isinf(f)) << h;
        } else {
            ASSERT_EQ(static_cast<double>(f), half_value(static_cast<uint16_t>(h))) << h;
            ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << h;
        }
        if (have_f16c()) {
            ASSERT_EQ(bits(f), bits(hw_fp32(static_cast<uint16_t>(h)))) << h;  // incl. NaN payloads
        }
        // Every half survives the round trip (NaNs stay NaN).
        const uint16_t back = k::fp32_to_fp16(f);
        if (is_nan) {
            ASSERT_TRUE((back & 0x7c00) == 0x7c00 && (back & 0x3ff)) << h;
        } else {
            ASSERT_EQ(back, h);
        }
    }
}

TEST(fp16, encode_rounds_to_nearest_even_in_every_case) {
    // Midpoints between consecutive halves (exact ties) and their float neighbours.
    for (uint32_t h = 0; h < 0x7bff; ++h) {
        const double mid = (half_value(static_cast<uint16_t>(h)) + half_value(static_cast<uint16_t>(h + 1))) / 2;
        const float fm = static_cast<float>(mid);
        ASSERT_EQ(static_cast<double>(fm), mid);  // every half midpoint is a float
        const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
        ASSERT_EQ(k::fp32_to_fp16(fm), even) << h;
        ASSERT_EQ(k::fp32_to_fp16(-fm), even | 0x8000) << h;
        ASSERT_EQ(k::fp32_to_fp16(std::nextafter(fm, 0.0f)), h) << h;
        ASSERT_EQ(k::fp32_to_fp16(std::nextafter(fm, 1e9f)), h + 1) << h;
    }
    EXPECT_EQ(k::fp32_to_fp16(65519.996f), 0x7bff);
    EXPECT_EQ(k::fp32_to_fp16(65520.0f), 0x7c00);
    EXPECT_EQ(k::fp32_to_fp16(INFINITY), 0x7c00);
    EXPECT_EQ(k::fp32_to_fp16(-INFINITY), 0xfc00);
    EXPECT_EQ(k::fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even zero
    EXPECT_EQ(k::fp32_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
    EXPECT_EQ(k::fp32_to_fp16(1e-40f), 0x0000);  // float subnormal
    EXPECT_EQ(k::fp32_to_fp16(-0.0f), 0x8000);
    const uint16_t qnan = k::fp32_to_fp16(from_bits(0x7f800001u));  // signalling NaN stays NaN
    EXPECT_TRUE((qnan & 0x7c00) == 0x7c00 && (qnan & 0x3ff));

    // Structured sweep over all exponents/signs against the table reference and F16C.
    for (float f : rounding_cases(19)) {
        const uint16_t got = k::fp32_to_fp16(f);
        if (std::isnan(f)) {
            ASSERT_TRUE((got & 0x7c00) == 0x7c00 && (got & 0x3ff)) << bits(f);
        } else {
            ASSERT_EQ(got, reference_fp16(f)) << std::hex << bits(f);
        }
        if (have_f16c()) {
            ASSERT_EQ(got, hw_fp16(f)) << std::hex << bits(f);
        }
    }
}

TEST(bf16, all_65536_patterns_and_rounding) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = k::bf16_to_fp32(static_cast<uint16_t>(h));
        ASSERT_EQ(bits(f), h << 16);
        const uint16_t back = k::fp32_to_bf16(f);
        if (std::isnan(f)) {
            ASSERT_TRUE(std::isnan(k::bf16_to_fp32(back))) << h;
        } else {
            ASSERT_EQ(back, h) << h;
        }
    }
    for (float f : rounding_cases(16)) {
        const uint16_t got = k::fp32_to_bf16(f);
        if (std::isnan(f)) {
            ASSERT_TRUE(std::isnan(k::bf16_to_fp32(got))) << std::hex << bits(f);
            ASSERT_EQ(got & 0x8000, (bits(f) >> 16) & 0x8000);
        } else {
            ASSERT_EQ(got, reference_bf16(f)) << std::hex << bits(f);
        }
    }
    EXPECT_EQ(k::fp32_to_bf16(from_bits(0x3f808000u)), 0x3f80);  // tie, even stays
    EXPECT_EQ(k::fp32_to_bf16(from_bits(0x3f818000u)), 0x3f82);  // tie, odd rounds up
    EXPECT_EQ(k::fp32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to Inf
    EXPECT_EQ(k::fp32_to_bf16(from_bits(0x00008000u)), 0x0000);  // subnormal tie to even zero
    EXPECT_EQ(k::fp32_to_bf16(from_bits(0x00018000u)), 0x0002);  // subnormal tie, odd rounds up
}

TEST(quant, q4_0_layout_and_signed_max) {
    // x[j] = j - 8 and x[j+16] = j - 8: max |x| is -8, so d = 1 and q = x + 8 exactly.
    float x[32];
    for (int j = 0; j < 16; ++j) x[j] = x[j + 16] = static_cast<float>(j - 8);
    sl::block_q4_0 b;
    k::quantize_row(dtype::q4_0, x, &b, 32);
    EXPECT_EQ(b.d, k::fp32_to_fp16(1.0f));
    for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], j | (j << 4)) << j;
    // A positive maximum gives a negative scale: +8 maps to nibble 0.
    for (int j = 0; j < 32; ++j) x[j] = j == 5 ? 8.0f : 0.0f;
    k::quantize_row(dtype::q4_0, x, &b, 32);
    EXPECT_EQ(k::fp16_to_fp32(b.d), -1.0f);
    EXPECT_EQ(b.qs[5] & 15, 0);
    EXPECT_EQ(b.qs[0], 0x88);
}

TEST(quant, round_trip_error_bounds) {
    g_state = 99;
    const int64_t n = 32 * 4096;
    std::vector<float> x(n), y(n);
    for (int64_t i = 0; i < n; ++i) {
        const float u = static_cast<float>(next_u64() >> 40) / 16777216.0f * 2.0f - 1.0f;
        x[i] = u * std::ldexp(1.0f, static_cast<int>(i / 32 % 24) - 12);  // scales 2^-12 .. 2^11 per block
    }
    for (int64_t i = 0; i < 32; ++i) x[i] = 0.0f;  // all-zero block: d = 0, exact zeros back
    std::vector<sl::block_q8_0> q8(n / 32);
    std::vector<sl::block_q4_0> q4(n / 32);
    k::quantize_row(dtype::q8_0, x.data(), q8.data(), n);
    k::quantize_row(dtype::q4_0, x.data(), q4.data(), n);
    for (dtype t : {dtype::q8_0, dtype::q4_0}) {
        k::dequantize_row(t, t == dtype::q8_0 ? static_cast<const void*>(q8.data()) : q4.data(), y.data(), n);
        for (int64_t b = 0; b < n / 32; ++b) {
            float amax = 0.0f;
            for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
            // Q8_0: half a step (d = amax/127) plus the fp16 rounding of d times |q| <= 127; that
            // rounding is 2^-11 relative, or 2^-25 absolute once d is an fp16 subnormal (< 2^-14).
            // Q4_0: values opposite to the signed max can clip at +7 steps: one step (d = amax/8).
            const double d = t == dtype::q8_0 ? amax / 127.0 : amax / 8.0;
            const double d_err = std::max(d * std::ldexp(1.0, -11), std::ldexp(1.0, -25));
            const double bound = t == dtype::q8_0 ? 0.5 * d + 127 * d_err : d + 8 * d_err;
            for (int j = 0; j < 32; ++j)
                ASSERT_LE(std::fabs(static_cast<double>(y[b * 32 + j]) - x[b * 32 + j]), bound * (1 + 1e-6))
                    << sl::dtype_name(t) << " block " << b << " j " << j;
        }
    }
    // Non-finite input must not crash or produce UB-dependent garbage in other blocks.
    x[40] = NAN;
    x[100] = INFINITY;
    k::quantize_row(dtype::q8_0, x.data(), q8.data(), 128);
    k::quantize_row(dtype::q4_0, x.data(), q4.data(), 128);
    k::dequantize_row(dtype::q8_0, q8.data(), y.data(), 128);
    EXPECT_EQ(y[0], 0.0f);
}

TEST(quant, dequantize_is_identical_on_every_isa) {
    const k::isa saved = k::active_isa();
    const int64_t n = 32 * 37 + 0;
    const std::vector<float> x = spread_values(n, 7, 1000.0f);
    for (dtype t : {dtype::f32, dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_0}) {
        std::vector<uint8_t> enc(static_cast<size_t>(sl::dtype_row_bytes(t, n)));
        k::quantize_row(t, x.data(), enc.data(), n);
        std::vector<float> ref;
        for (k::isa i : {k::isa::scalar, k::isa::avx2, k::isa::avx512}) {
            if (k::set_active_isa(i) != i) continue;
            // Odd lengths too (float types only): SIMD tails must match.
            for (int64_t len : {n, t == dtype::q8_0 || t == dtype::q4_0 ? int64_t{32} : int64_t{13}}) {
                std::vector<float> y(static_cast<size_t>(n), -7.0f);
                k::dequantize_row(t, enc.data(), y.data(), len);
                for (int64_t j = len; j < n; ++j) ASSERT_EQ(y[j], -7.0f) << "wrote past the end";
                if (len != n) continue;
                if (ref.empty()) ref = y;
                ASSERT_EQ(0, std::memcmp(ref.data(), y.data(), n * 4)) << sl::dtype_name(t) << " " << k::isa_name(i);
            }
        }
    }
    k::set_active_isa(saved);
}

// The x8 forms are the base type's blocks regrouped (types.h): per 8 blocks the 8 fp16 scales, then
// the 8 blocks' quants. Encoding, decoding and regroup_x8 agree with that byte for byte on every ISA.
TEST(quant, x8_forms_are_the_base_blocks_regrouped) {
    const k::isa saved = k::active_isa();
    const int64_t n = 256 * 5;
    const std::vector<float> x = spread_values(n, 11, 777.0f);
    for (dtype base : {dtype::q8_0, dtype::q4_0}) {
        const dtype x8 = sl::dtype_x8_form(base);
        EXPECT_TRUE(sl::dtype_is_x8(x8));
        EXPECT_EQ(sl::dtype_x8_base(x8), base);
        EXPECT_FALSE(sl::dtype_is_file_type(x8));
        ASSERT_EQ(sl::dtype_row_bytes(x8, n), sl::dtype_row_bytes(base, n));  // same bytes
        std::vector<uint8_t> eb(static_cast<size_t>(sl::dtype_row_bytes(base, n))), ex = eb, back = eb, re = eb;
        k::quantize_row(base, x.data(), eb.data(), n);
        k::quantize_row(x8, x.data(), ex.data(), n);
        const int64_t bb = sl::dtype_block_bytes(base), qb = bb - 2;
        for (int64_t b = 0; b < n / 32; ++b) {
            const uint8_t* blk = eb.data() + b * bb;
            const uint8_t* group = ex.data() + b / 8 * 8 * bb;
            ASSERT_EQ(0, std::memcmp(group + 2 * (b % 8), blk, 2)) << "scale of block " << b;
            ASSERT_EQ(0, std::memcmp(group + 16 + b % 8 * qb, blk + 2, static_cast<size_t>(qb))) << "quants " << b;
        }
        k::regroup_x8(base, eb.data(), re.data(), n);
        EXPECT_EQ(re, ex);
        k::regroup_x8(x8, ex.data(), back.data(), n);
        EXPECT_EQ(back, eb);
        for (k::isa i : {k::isa::scalar, k::isa::avx2, k::isa::avx512}) {
            if (k::set_active_isa(i) != i) continue;
            std::vector<float> yb(static_cast<size_t>(n)), yx(static_cast<size_t>(n));
            k::dequantize_row(base, eb.data(), yb.data(), n);
            k::dequantize_row(x8, ex.data(), yx.data(), n);
            ASSERT_EQ(0, std::memcmp(yb.data(), yx.data(), n * 4)) << sl::dtype_name(x8) << " " << k::isa_name(i);
        }
    }
    k::set_active_isa(saved);
}

// Q6_0x8 (types.h), written out from its description: per block of 32 the signed value of largest
// magnitude sets d = max / -32 (stored fp16), q = min(63, trunc(x / d + 32.5)), x' = d * (q - 32); the
// 6-bit grid's error is at most half a step (d / 2), a whole step where +32 d is clamped to 31 d.
TEST(quant, q6_0x8_encodes_six_bit_blocks) {
    const k::isa saved = k::active_isa();
    const int64_t n = 256 * 3;
    std::vector<float> x = spread_values(n, 5, 313.0f);
    for (int i = 0; i < 32; ++i) x[static_cast<size_t>(64 + i)] = 0.0f;  // an all-zero block
    std::vector<uint8_t> enc(static_cast<size_t>(sl::dtype_row_bytes(dtype::q6_0x8, n)));
    ASSERT_EQ(enc.size(), 3u * 208u);
    k::quantize_row(dtype::q6_0x8, x.data(), enc.data(), n);
    std::vector<float> ref(static_cast<size_t>(n));
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* xb = x.data() + b * 32;
        float amax = 0.0f, max = 0.0f;
        for (int i = 0; i < 32; ++i)
            if (amax < std::fabs(xb[i])) amax = std::fabs(xb[i]), max = xb[i];
        const float d = max / -32.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        const uint8_t* g = enc.data() + b / 8 * 208;
        const int j = static_cast<int>(b % 8);
        uint16_t h;
        std::memcpy(&h, g + 2 * j, 2);
        ASSERT_EQ(h, k::fp32_to_fp16(d)) << "scale of block " << b;
        for (int i = 0; i < 32; ++i) {
            const int q = std::min(63, std::max(0, static_cast<int>(xb[i] * id + 32.5f)));
            const int nib = i < 16 ? g[16 + 16 * j + i] & 15 : g[16 + 16 * j + i - 16] >> 4;
            const int hi = g[144 + 8 * j + i % 8] >> (2 * (i / 8)) & 3;
            ASSERT_EQ(nib | hi << 4, q) << "block " << b << " element " << i;
            ref[static_cast<size_t>(b * 32 + i)] = k::fp16_to_fp32(h) * static_cast<float>(q - 32);
            const bool clamped = xb[i] * id + 32.5f >= 64.0f;
            EXPECT_LE(std::fabs(ref[static_cast<size_t>(b * 32 + i)] - xb[i]), std::fabs(d) * (clamped ? 1.01f : 0.501f) + 1e-5f);
        }
    }
    for (k::isa i : {k::isa::scalar, k::isa::avx2, k::isa::avx512}) {
        if (k::set_active_isa(i) != i) continue;
        std::vector<float> y(static_cast<size_t>(n));
        k::dequantize_row(dtype::q6_0x8, enc.data(), y.data(), n);
        ASSERT_EQ(0, std::memcmp(y.data(), ref.data(), n * 4)) << k::isa_name(i);
    }
    k::set_active_isa(saved);
}

// The layouts (input-major copies and neuron bundles) built on every ISA equal the scalar reference
// encoder applied to the gathered columns / rows, bit for bit: the AVX2 encoders transpose in registers
// and round like quantize_row, including all-zero and signed-zero blocks, magnitude ties (the first
// one sets the Q4_0 scale), exact .5 steps, NaN, Inf and fp16 subnormal scales.
TEST(quant, layouts_are_identical_on_every_isa_and_equal_the_reference_encoder) {
    const k::isa saved = k::active_isa();
    g_state = 31;
    const auto value = [](uint64_t r, int64_t i) {
        switch (r % 16) {
            case 0: return 0.0f;
            case 1: return -0.0f;
            case 2: return static_cast<float>(static_cast<int64_t>(r >> 8) % 17 - 8);  // small integers: ties
            case 3: return static_cast<float>(static_cast<int64_t>(r >> 8) % 255 - 127) * 0.5f;  // .5 steps
            case 4: return std::ldexp(1.0f, -20) * static_cast<float>(r >> 60);  // fp16-subnormal scales
            default: return static_cast<float>(static_cast<int64_t>(r >> 20) % 20001 - 10000) / 997.0f *
                            static_cast<float>(1 + i % 7);
        }
    };
    struct shape {
        int64_t rows, cols;
    };
    for (const shape sh : {shape{64, 256}, shape{32, 40}, shape{96, 264}, shape{256, 520}}) {
        std::vector<float> w(static_cast<size_t>(sh.rows * sh.cols));
        for (int64_t i = 0; i < sh.rows * sh.cols; ++i) w[static_cast<size_t>(i)] = value(next_u64(), i);
        // Whole special blocks along the outputs: column 1 all zeros, 2 all -0, 3 with NaN and Inf.
        for (int64_t r = 0; r < sh.rows; ++r) {
            w[static_cast<size_t>(r * sh.cols + 1)] = 0.0f;
            w[static_cast<size_t>(r * sh.cols + 2)] = -0.0f;
            if (r % 9 == 4) w[static_cast<size_t>(r * sh.cols + 3)] = r % 2 ? NAN : -INFINITY;
        }
        const sl::tensor_view src{dtype::f32, sh.rows, sh.cols, w.data()};
        for (dtype t : {dtype::q8_0, dtype::q4_0, dtype::f16, dtype::f32, dtype::q8_0x8, dtype::q4_0x8, dtype::q6_0x8}) {
            if (sl::dtype_block_elems(t) == 256 && sh.rows % 256 != 0) continue;  // whole groups of 256 outputs
            // Reference: each column through quantize_row.
            const int64_t rb = sl::dtype_row_bytes(t, sh.rows);
            std::vector<uint8_t> ref(static_cast<size_t>(rb * sh.cols));
            std::vector<float> col(static_cast<size_t>(sh.rows));
            for (int64_t c = 0; c < sh.cols; ++c) {
                for (int64_t r = 0; r < sh.rows; ++r) col[static_cast<size_t>(r)] = w[static_cast<size_t>(r * sh.cols + c)];
                k::quantize_row(t, col.data(), ref.data() + c * rb, sh.rows);
            }
            for (k::isa i : {k::isa::scalar, k::isa::avx2, k::isa::avx512}) {
                if (k::set_active_isa(i) != i) continue;
                const k::owned_matrix m = k::to_input_major(src, t);
                ASSERT_EQ(m.view.bytes(), static_cast<int64_t>(ref.size()));
                ASSERT_EQ(0, std::memcmp(m.view.data, ref.data(), ref.size()))
                    << sl::dtype_name(t) << " " << k::isa_name(i) << " " << sh.rows << "x" << sh.cols;
            }
        }
        // Rows of a bundle (gate = up = src, down = its transpose) through the row encoder.
        if (sh.cols % 32 != 0 || sh.rows % 32 != 0) continue;
        std::vector<float> wt(w.size());
        for (int64_t r = 0; r < sh.rows; ++r)
            for (int64_t c = 0; c < sh.cols; ++c) wt[static_cast<size_t>(c * sh.rows + r)] = w[static_cast<size_t>(r * sh.cols + c)];
        const sl::tensor_view down{dtype::f32, sh.cols, sh.rows, wt.data()};
        for (dtype t : {dtype::q8_0, dtype::q4_0, dtype::f16}) {
            std::vector<uint8_t> first;
            for (k::isa i : {k::isa::scalar, k::isa::avx2, k::isa::avx512}) {
                if (k::set_active_isa(i) != i) continue;
                const k::owned_bundles b = k::make_bundles(src, src, down, t);
                const auto* p = static_cast<const uint8_t*>(b.view.data);
                const std::vector<uint8_t> got(p, p + b.view.n_neurons * b.view.bundle_bytes());
                if (first.empty()) {
                    first = got;
                    // Scalar: gate row j is quantize_row of row j.
                    std::vector<uint8_t> row(static_cast<size_t>(b.view.part_bytes()));
                    k::quantize_row(t, w.data() + 5 * sh.cols, row.data(), sh.cols);
                    ASSERT_EQ(0, std::memcmp(row.data(), b.view.bundle(5), row.size()));
                }
                ASSERT_EQ(first, got) << "bundles " << sl::dtype_name(t) << " " << k::isa_name(i);
            }
        }
    }
    k::set_active_isa(saved);
}

}  // namespace

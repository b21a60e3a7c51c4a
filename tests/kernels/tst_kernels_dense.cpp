// Dense gemv/gemm for every dtype x ISA against a naive double-precision reference.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "sparselens/kernels/kernels.h"
#include "sparselens/kernels/membw.h"

namespace {

using sl::dtype;
namespace k = sl::kernels;

struct shape {
    int64_t rows, cols;
};

// The brief's shapes plus ones that exercise every tail: rows % 4, cols % 8/16/32, odd block counts.
// Quantized kernels step 8 blocks at a time, then block pairs/single blocks: 416 = 13 blocks and
// 800 = 25 blocks exercise every leftover path after full 8-block groups.
const std::vector<shape> k_shapes = {{64, 172}, {172, 64}, {1, 32}, {7, 96},   {333, 1024}, {2048, 8192}, {5, 7},
                                     {9, 17},   {3, 40},   {21, 160}, {6, 31}, {11, 1000}, {19, 416},   {37, 800}};

const dtype k_types[] = {dtype::f32, dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_0};

uint64_t g_state = 0x9e3779b97f4a7c15ULL;
void reseed(uint64_t s) { g_state = s * 0x9e3779b97f4a7c15ULL + 1; }
uint64_t next_u64() {  // splitmix64
    uint64_t z = (g_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
float uniform() { return static_cast<float>(next_u64() >> 40) / 16777216.0f * 2.0f - 1.0f; }
float gaussish() { return (uniform() + uniform() + uniform() + uniform()) * 0.8660254f; }  // unit variance

std::vector<k::isa> isas() {
    std::vector<k::isa> v{k::isa::scalar};
    if (k::detected_isa() >= k::isa::avx2) v.push_back(k::isa::avx2);
    if (k::detected_isa() >= k::isa::avx512) v.push_back(k::isa::avx512);
    return v;
}

// Restores dispatch after a test that switches ISAs.
struct isa_guard {
    k::isa saved = k::active_isa();
    ~isa_guard() { k::set_active_isa(saved); }
};

// Independent decoders (not the library's): value of each stored weight.
double half_value(uint16_t h) {
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

std::vector<double> decode_row(dtype t, const uint8_t* p, int64_t cols) {
    std::vector<double> out(static_cast<size_t>(cols));
    for (int64_t c = 0; c < cols; ++c) {
        switch (t) {
            case dtype::f32: {
                float f;
                std::memcpy(&f, p + 4 * c, 4);
                out[c] = f;
                break;
            }
            case dtype::f16: {
                uint16_t h;
                std::memcpy(&h, p + 2 * c, 2);
                out[c] = half_value(h);
                break;
            }
            case dtype::bf16: {
                uint16_t h;
                std::memcpy(&h, p + 2 * c, 2);
                const uint32_t u = static_cast<uint32_t>(h) << 16;
                float f;
                std::memcpy(&f, &u, 4);
                out[c] = f;
                break;
            }
            case dtype::q8_0: {
                const auto* b = reinterpret_cast<const sl::block_q8_0*>(p) + c / 32;
                out[c] = half_value(b->d) * b->qs[c % 32];
                break;
            }
            case dtype::q4_0: {
                const auto* b = reinterpret_cast<const sl::block_q4_0*>(p) + c / 32;
                const int j = static_cast<int>(c % 32);
                const int nib = j < 16 ? (b->qs[j] & 15) : (b->qs[j - 16] >> 4);
                out[c] = half_value(b->d) * (nib - 8);
                break;
            }
        }
    }
    return out;
}

struct matrix {
    sl::tensor_view view;
    std::vector<uint8_t> bytes;
    std::vector<double> exact;  // decoded stored weights, [rows * cols]
};

matrix make_matrix(dtype t, int64_t rows, int64_t cols, uint64_t seed) {
    reseed(seed);
    matrix m;
    m.view.type = t;
    m.view.rows = rows;
    m.view.cols = cols;
    m.bytes.resize(static_cast<size_t>(m.view.bytes()));
    m.view.data = m.bytes.data();
    std::vector<float> src(static_cast<size_t>(cols));
    m.exact.resize(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
        const bool zero_row = r == 2;  // d = 0 blocks must work too
        for (auto& v : src) v = zero_row ? 0.0f : uniform();
        k::quantize_row(t, src.data(), m.bytes.data() + r * m.view.row_bytes(), cols);
        const auto d = decode_row(t, m.bytes.data() + r * m.view.row_bytes(), cols);
        std::copy(d.begin(), d.end(), m.exact.begin() + r * cols);
    }
    return m;
}

std::vector<float> make_x(int64_t cols, uint64_t seed) {
    reseed(seed);
    std::vector<float> x(static_cast<size_t>(cols));
    for (auto& v : x) v = gaussish();
    if (cols >= 64)
        for (int j = 32; j < 64; ++j) x[j] = 0.0f;  // an all-zero activation block (scale 0)
    return x;
}

// The documented activation quantization (blocks of 32, d = amax/127, q = nearbyint(x*127/amax)),
// written independently here: dequantized values of what the Q8_0/Q4_0 kernels multiply with.
std::vector<double> quantized_x(const std::vector<float>& x) {
    std::vector<double> out(x.size());
    for (size_t b = 0; b < x.size() / 32; ++b) {
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const float d = amax / 127.0f;
        for (int j = 0; j < 32; ++j) out[b * 32 + j] = static_cast<double>(d) * std::nearbyint(x[b * 32 + j] * id);
    }
    return out;
}

std::vector<double> reference(const matrix& m, const std::vector<double>& x) {
    std::vector<double> y(static_cast<size_t>(m.view.rows));
    for (int64_t r = 0; r < m.view.rows; ++r) {
        double s = 0.0;
        const double* w = m.exact.data() + r * m.view.cols;
        for (int64_t c = 0; c < m.view.cols; ++c) s += w[c] * x[c];
        y[r] = s;
    }
    return y;
}

double nmse(const float* y, const std::vector<double>& ref) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
        num += (y[i] - ref[i]) * (y[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0.0 ? num / den : num;
}

bool is_quant(dtype t) { return t == dtype::q8_0 || t == dtype::q4_0; }
bool valid(dtype t, const shape& s) { return s.cols % sl::dtype_block_elems(t) == 0; }

// Stored weights are exact after decoding, so only f32 accumulation error remains.
constexpr double k_float_bound = 1e-10;
// Q8_0/Q4_0 additionally quantize x to 8 bits per block of 32: for unit-variance x that adds
// about (2.5/127)^2/12 ~ 3e-5 relative error; the bound leaves 3x headroom.
constexpr double k_act_quant_bound = 1e-4;

class dense_by_type : public ::testing::TestWithParam<dtype> {};

TEST_P(dense_by_type, gemv_matches_double_reference) {
    const dtype t = GetParam();
    isa_guard guard;
    for (const shape& s : k_shapes) {
        if (!valid(t, s)) continue;
        const matrix m = make_matrix(t, s.rows, s.cols, 1000 + s.rows * 7 + s.cols);
        const std::vector<float> x = make_x(s.cols, 77 + s.cols);
        const std::vector<double> xe(x.begin(), x.end());
        const std::vector<double> ref_exact = reference(m, xe);
        const std::vector<double> ref_used = is_quant(t) ? reference(m, quantized_x(x)) : ref_exact;
        std::vector<float> first;
        for (k::isa i : isas()) {
            SCOPED_TRACE(::testing::Message() << sl::dtype_name(t) << " " << k::isa_name(i) << " " << s.rows << "x"
                                              << s.cols);
            ASSERT_EQ(k::set_active_isa(i), i);
            std::vector<float> y1(static_cast<size_t>(s.rows), -1.0f), y2 = y1;
            k::gemv(m.view, x.data(), y1.data(), 1);
            k::gemv(m.view, x.data(), y2.data(), 3);
            // The row partition never changes a row's arithmetic: thread count is bit-invisible.
            EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * 4));
            EXPECT_LE(nmse(y1.data(), ref_used), k_float_bound);
            if (is_quant(t)) {
                const double e = nmse(y1.data(), ref_exact);
                EXPECT_LE(e, k_act_quant_bound);
                if (s.rows * s.cols >= (1 << 20) && i == isas().back())
                    std::printf("[ info ] %s %lldx%lld activation-quantization nmse vs exact f32 x: %.3g\n",
                                std::string(sl::dtype_name(t)).c_str(), static_cast<long long>(s.rows),
                                static_cast<long long>(s.cols), e);
            }
            if (first.empty()) {
                first = y1;
            } else {  // ISAs agree to float rounding
                std::vector<double> f(first.begin(), first.end());
                EXPECT_LE(nmse(y1.data(), f), k_float_bound);
            }
        }
    }
}

TEST_P(dense_by_type, gemm_equals_gemv_per_token) {
    const dtype t = GetParam();
    isa_guard guard;
    const shape shapes[] = {{64, 172}, {333, 1024}, {7, 96}, {130, 256}, {9, 17}, {13, 416}};
    for (const shape& s : shapes) {
        if (!valid(t, s)) continue;
        const matrix m = make_matrix(t, s.rows, s.cols, 5 + s.rows);
        for (int64_t n : {1, 3, 17}) {
            std::vector<float> x;
            for (int64_t tok = 0; tok < n; ++tok) {
                const auto xt = make_x(s.cols, 900 + tok);
                x.insert(x.end(), xt.begin(), xt.end());
            }
            for (k::isa i : isas()) {
                SCOPED_TRACE(::testing::Message() << sl::dtype_name(t) << " " << k::isa_name(i) << " " << s.rows
                                                  << "x" << s.cols << " n=" << n);
                k::set_active_isa(i);
                std::vector<float> y(static_cast<size_t>(n * s.rows), -1.0f);
                k::gemm(m.view, x.data(), n, y.data(), 2);
                for (int64_t tok = 0; tok < n; ++tok) {
                    std::vector<float> yv(static_cast<size_t>(s.rows), -1.0f);
                    k::gemv(m.view, x.data() + tok * s.cols, yv.data(), 1);
                    // Stronger than "within rounding": gemm runs each row through the same per-row
                    // arithmetic as gemv (F16/BF16 via exactly widened f32 tiles), so prefill and
                    // decode produce identical bits.
                    for (int64_t r = 0; r < s.rows; ++r)
                        ASSERT_EQ(y[tok * s.rows + r], yv[r]) << "token " << tok << " row " << r;
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(all_types, dense_by_type, ::testing::ValuesIn(k_types),
                         [](const auto& p) { return std::string(sl::dtype_name(p.param)); });

TEST(dense, empty_and_degenerate_shapes) {
    float x[32] = {};
    float y[4] = {1, 1, 1, 1};
    sl::tensor_view w;
    w.type = dtype::f32;
    w.rows = 0;
    w.cols = 32;
    k::gemv(w, x, y, 2);  // no rows: nothing written
    EXPECT_EQ(y[0], 1.0f);
    w.rows = 4;
    w.cols = 0;
    k::gemv(w, x, y, 2);  // no columns: empty sums
    for (float v : y) EXPECT_EQ(v, 0.0f);
}

TEST(dense, isa_override_clamps_to_cpu) {
    isa_guard guard;
    EXPECT_EQ(k::set_active_isa(k::isa::scalar), k::isa::scalar);
    EXPECT_EQ(k::active_isa(), k::isa::scalar);
    EXPECT_EQ(k::set_active_isa(k::isa::avx512), k::detected_isa());
    EXPECT_STREQ(k::isa_name(k::isa::avx2), "avx2");
    EXPECT_GE(k::default_threads(), 1);
}

TEST(membw, small_buffer_gives_a_finite_positive_rate) {
    const double gbs = k::measure_read_bandwidth_gbs(2, int64_t{8} << 20, 3);
    EXPECT_GT(gbs, 0.1);
    EXPECT_LT(gbs, 1e5);
    EXPECT_EQ(k::measure_read_bandwidth_gbs(1, 0, 3), 0.0);
}

}  // namespace

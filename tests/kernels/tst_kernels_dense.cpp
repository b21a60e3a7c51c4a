// Dense gemv/gemm for every dtype x ISA against a naive double-precision reference.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "quant_reference.h"
#include "sparselens/kernels/kernels.h"
#include "sparselens/kernels/membw.h"

namespace {

using sl::dtype;
namespace k = sl::kernels;
using namespace sl::kernel_test;

struct shape {
    int64_t rows, cols;
};

// The brief's shapes plus ones that exercise every tail: rows % 4, cols % 8/16/32, odd block counts.
// Quantized kernels step 8 blocks at a time, then block pairs/single blocks: 416 = 13 blocks and
// 800 = 25 blocks exercise every leftover path after full 8-block groups.
const std::vector<shape> k_shapes = {{64, 172}, {172, 64}, {1, 32}, {7, 96},   {333, 1024}, {2048, 8192}, {5, 7},
                                     {9, 17},   {3, 40},   {21, 160}, {6, 31}, {11, 1000}, {19, 416},   {37, 800}};

// y = w x for the decoded weights w ([rows * cols]) of m.
std::vector<double> reference(const matrix& m, const std::vector<double>& w_exact, const std::vector<double>& x) {
    std::vector<double> y(static_cast<size_t>(m.view.rows));
    for (int64_t r = 0; r < m.view.rows; ++r) {
        double s = 0.0;
        const double* w = w_exact.data() + r * m.view.cols;
        for (int64_t c = 0; c < m.view.cols; ++c) s += w[c] * x[c];
        y[r] = s;
    }
    return y;
}

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
        const std::vector<double> w = decode(m.view);
        const std::vector<double> ref_exact = reference(m, w, xe);
        const std::vector<double> ref_used = is_quant(t) ? reference(m, w, quantized_x_for(t, x)) : ref_exact;
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

TEST_P(dense_by_type, gemm_matches_gemv_per_token) {
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
                    // F32: stronger than "within rounding": gemm runs each row through the same per-row
                    // arithmetic as gemv. F16/BF16 and block types (n >= 2): the blocked GEMMs sum the
                    // same products in another f32 order (tst_kernels_gemm checks them against double
                    // references and across ISAs).
                    if (t != dtype::f32 && n > 1) {
                        const std::vector<double> yvd(yv.begin(), yv.end());
                        EXPECT_LE(nmse(y.data() + tok * s.rows, yvd), 1e-10) << "token " << tok;
                        continue;
                    }
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

// The pattern read behind `bench kernels`' "read GB/s" and `bench --stages`' ideal at the access pattern
// must read exactly the listed rows: its checksum is the sum of their 8-byte words (whole 32-byte groups,
// then the trailing bytes) on the unaligned path, whatever the ISA, thread count or mode (mode 3 in
// several groups of rows side by side, with a next group to prefetch).
TEST(membw, listed_rows_read_exactly_the_listed_bytes) {
    isa_guard guard;
    for (int64_t rb : {int64_t{1152}, int64_t{37}, int64_t{4096 + 8}}) {
        std::vector<uint8_t> buf(static_cast<size_t>(rb * 200 + 1));  // read from + 1: the unaligned path
        uint32_t s = 7;
        for (uint8_t& b : buf) b = static_cast<uint8_t>((s = s * 1103515245u + 12345u) >> 24);
        std::vector<int32_t> idx = {0, 3, 4, 5, 17, 50, 98, 99};
        for (int32_t r = 100; r < 200; r += 2) idx.push_back(r);
        uint64_t want = 0;
        for (int32_t r : idx) {
            const uint8_t* p = buf.data() + 1 + r * rb;
            int64_t o = 0;
            for (; o + 32 <= rb; o += 32)  // whole 32-byte groups as words, then single bytes
                for (int j = 0; j < 4; ++j) {
                    uint64_t w;
                    std::memcpy(&w, p + o + 8 * j, 8);
                    want += w;
                }
            for (; o < rb; ++o) want += p[o];
        }
        for (k::isa i : isas()) {
            k::set_active_isa(i);
            for (int threads : {1, 2, 3})
                for (int mode = 0; mode < k::k_read_listed_modes; ++mode)
                    EXPECT_EQ(k::read_listed_rows(buf.data() + 1, rb, idx.data(), static_cast<int64_t>(idx.size()),
                                                  threads, mode),
                              want)
                        << rb << " " << k::isa_name(i) << " " << threads << " " << mode;
        }
        EXPECT_EQ(k::read_listed_rows(buf.data() + 1, rb, idx.data(), 0, 2, 1), 0u);
    }
}

}  // namespace

// Every block weight type beyond Q8_0/Q4_0 (K-quants, Q4_1/Q5_x, IQ4): dequantization, dense GEMV/GEMM
// and the sparse kernels on every ISA this CPU has, against independent double-precision references.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numeric>

#include "quant_reference.h"
#include "sparselens/kernels/sparse.h"

namespace {

using namespace sl;
using namespace sl::kernel_test;
namespace k = sl::kernels;

class quant_type : public ::testing::TestWithParam<dtype> {};

// y = W x in double over the decoded weights.
std::vector<double> ref_gemv(const std::vector<double>& w, int64_t rows, int64_t cols, const std::vector<double>& x) {
    std::vector<double> y(static_cast<size_t>(rows), 0.0);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) y[static_cast<size_t>(r)] += w[static_cast<size_t>(r * cols + c)] * x[static_cast<size_t>(c)];
    return y;
}

TEST_P(quant_type, traits_match_ggml_layout) {
    const dtype t = GetParam();
    const auto& info = dtype_info(t);
    EXPECT_TRUE(info.block_elems == 32 || info.block_elems == 256);
    EXPECT_TRUE(dtype_is_quantized(t));
    EXPECT_EQ(dtype_layout_type(t), dtype::q8_0);  // no encoder of our own: copies are Q8_0
}

TEST_P(quant_type, dequantize_matches_reference_on_every_isa) {
    const dtype t = GetParam();
    const int64_t qk = dtype_block_elems(t);
    const matrix m = random_blocks(t, 1, 16 * qk, 11 + static_cast<int>(t));
    const std::vector<double> ref = ref_decode(m.view);
    isa_guard guard;
    std::vector<float> first;
    for (k::isa i : isas()) {
        k::set_active_isa(i);
        std::vector<float> y(static_cast<size_t>(m.view.cols));
        k::dequantize_row(t, m.view.data, y.data(), m.view.cols);
        for (size_t j = 0; j < y.size(); ++j) {
            // f32 rounding of the scale products and of a*q + b: a few ulps of the operands.
            const double tol = 1e-6 * (std::fabs(ref[j]) + 0.02 * 64);
            ASSERT_NEAR(y[j], ref[j], tol) << dtype_name(t) << " element " << j << " isa " << k::isa_name(i);
        }
        if (first.empty()) first = y;
        EXPECT_EQ(0, std::memcmp(first.data(), y.data(), y.size() * 4)) << "dequantization differs across ISAs";
    }
}

TEST_P(quant_type, gemv_and_gemm_match_double_reference) {
    const dtype t = GetParam();
    const int64_t qk = dtype_block_elems(t);
    isa_guard guard;
    for (const auto& [rows, nblk] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 2}, {7, 3}, {33, 5}, {64, 8}}) {
        const int64_t cols = nblk * qk;
        const matrix m = random_blocks(t, rows, cols, rows * 131 + nblk);
        const std::vector<double> w = ref_decode(m.view);
        const int64_t n_tok = 3;
        std::vector<float> xs;
        for (int64_t tk = 0; tk < n_tok; ++tk) {
            const std::vector<float> x = make_x(cols, 900 + tk + rows);
            xs.insert(xs.end(), x.begin(), x.end());
        }
        for (k::isa i : isas()) {
            k::set_active_isa(i);
            std::vector<float> yg(static_cast<size_t>(n_tok * rows));
            k::gemm(m.view, xs.data(), n_tok, yg.data(), 2);
            for (int64_t tk = 0; tk < n_tok; ++tk) {
                const std::vector<float> x(xs.begin() + tk * cols, xs.begin() + (tk + 1) * cols);
                std::vector<float> y(static_cast<size_t>(rows));
                k::gemv(m.view, x.data(), y.data(), 1);
                // Exactly the quantized activations the kernels use: only f32 accumulation error.
                const std::vector<double> ref_q = ref_gemv(w, rows, cols, quantized_x_for(t, x));
                EXPECT_LE(nmse(y.data(), ref_q), act_q8_1(t) ? 1e-6 : 1e-10) << dtype_name(t) << " " << rows << "x" << cols << " " << k::isa_name(i);
                // Against the exact f32 x: activation quantization error only (~1e-4).
                std::vector<double> xd(x.begin(), x.end());
                EXPECT_LE(nmse(y.data(), ref_gemv(w, rows, cols, xd)), 2e-3) << dtype_name(t);
                // gemm (blocked int8, exact integer sums minus ggml's fp16 d*sum rounding): same bounds.
                EXPECT_LE(nmse(yg.data() + tk * rows, ref_q), act_q8_1(t) ? 1e-6 : 1e-10)
                    << "gemm token " << tk << ", " << dtype_name(t) << " " << k::isa_name(i);
            }
        }
    }
}

// The AVX-512 K-quant kernels and Q8_K activation quantizer reproduce the AVX2 kernels and the scalar
// quantizer bit for bit (same exact integer lanes, same float steps), so a row's value does not depend
// on which of the two SIMD paths ran it.
TEST_P(quant_type, avx512_rows_equal_avx2_rows) {
    if (k::detected_isa() < k::isa::avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
    const dtype t = GetParam();
    const int64_t cols = 9 * dtype_block_elems(t), rows = 21;
    const matrix m = random_blocks(t, rows, cols, 4242);
    std::vector<float> x = make_x(cols, 4243);
    // A magnitude tie of opposite signs (Q8_K takes the sign of the first) and an exact rounding tie.
    x[3] = 9.0f;
    x[7] = -9.0f;
    x[11] = 9.0f * 0.5f / 127.0f;
    isa_guard guard;
    std::vector<float> y2(static_cast<size_t>(rows)), y5(static_cast<size_t>(rows));
    k::set_active_isa(k::isa::avx2);
    k::gemv(m.view, x.data(), y2.data(), 1);
    k::set_active_isa(k::isa::avx512);
    k::gemv(m.view, x.data(), y5.data(), 2);
    EXPECT_EQ(0, std::memcmp(y2.data(), y5.data(), y2.size() * 4)) << dtype_name(t);
}

TEST_P(quant_type, output_sparse_equals_gemv_rows) {
    const dtype t = GetParam();
    const int64_t cols = 4 * dtype_block_elems(t), rows = 96;
    const matrix m = random_blocks(t, rows, cols, 77);
    const std::vector<float> x = make_x(cols, 78);
    std::vector<int32_t> idx;
    for (int32_t r = 0; r < rows; r += 3) idx.push_back(r);
    idx.push_back(rows - 1);
    isa_guard guard;
    for (k::isa i : isas()) {
        k::set_active_isa(i);
        std::vector<float> dense(static_cast<size_t>(rows)), sparse(idx.size());
        k::gemv(m.view, x.data(), dense.data(), 1);
        k::gemv_output_sparse(m.view, x.data(), idx.data(), static_cast<int64_t>(idx.size()), sparse.data(), 2);
        for (size_t j = 0; j < idx.size(); ++j)
            EXPECT_EQ(sparse[j], dense[static_cast<size_t>(idx[j])]) << dtype_name(t) << " " << k::isa_name(i);
    }
}

// Input-sparse and the fused MLP run on layouts re-encoded as dtype_layout_type (Q8_0): checked
// against the double reference of the original weights within Q8_0 re-quantization error.
TEST_P(quant_type, input_sparse_and_fused_mlp_on_layout_copies) {
    const dtype t = GetParam();
    const int64_t dim = 2 * dtype_block_elems(t), hidden = 256;
    const matrix down = random_blocks(t, dim, hidden, 5);
    const matrix gate = random_blocks(t, hidden, dim, 6), up = random_blocks(t, hidden, dim, 7);
    const std::vector<double> wd = ref_decode(down.view), wg = ref_decode(gate.view), wu = ref_decode(up.view);
    const std::vector<float> x = make_x(hidden, 8), xm = make_x(dim, 9);
    std::vector<int32_t> idx;
    for (int32_t j = 0; j < hidden; j += 2) idx.push_back(j);
    const auto n = static_cast<int64_t>(idx.size());
    // References: down restricted to active channels; the MLP over active neurons.
    std::vector<double> xs(static_cast<size_t>(hidden), 0.0);
    for (int32_t j : idx) xs[static_cast<size_t>(j)] = x[static_cast<size_t>(j)];
    const std::vector<double> ref_in = ref_gemv(wd, dim, hidden, xs);
    const std::vector<double> xmd(xm.begin(), xm.end());
    const std::vector<double> g = ref_gemv(wg, hidden, dim, xmd), u = ref_gemv(wu, hidden, dim, xmd);
    std::vector<double> act(static_cast<size_t>(hidden), 0.0);
    for (int32_t j : idx) act[static_cast<size_t>(j)] = g[static_cast<size_t>(j)] / (1.0 + std::exp(-g[static_cast<size_t>(j)])) * u[static_cast<size_t>(j)];
    const std::vector<double> ref_mlp = ref_gemv(wd, dim, hidden, act);

    const dtype lt = dtype_layout_type(t);
    const k::owned_matrix wt = k::to_input_major(down.view, lt);
    const k::owned_bundles b = k::make_bundles(gate.view, up.view, down.view, lt);
    isa_guard guard;
    for (k::isa i : isas()) {
        k::set_active_isa(i);
        std::vector<float> y(static_cast<size_t>(dim));
        k::gemv_input_sparse(wt.view, x.data(), idx.data(), n, y.data(), 2);
        // + the VNNI kernels' int8 coefficient rounding (~2e-5, the dense gemv's activation-rounding level).
        const double in_bound = k::input_sparse_rounds_activations(lt) ? 1.5e-4 : 1e-4;
        EXPECT_LE(nmse(y.data(), ref_in), in_bound) << dtype_name(t) << " input-sparse " << k::isa_name(i);
        std::vector<float> scratch(static_cast<size_t>(k::fused_mlp_scratch_floats(dim, 2)));
        k::fused_sparse_mlp(b.view, xm.data(), idx.data(), n, y.data(), scratch.data(), nullptr, 2);
        EXPECT_LE(nmse(y.data(), ref_mlp), 1e-3) << dtype_name(t) << " fused " << k::isa_name(i);
    }
}

// gemv_multi (decode's q/k/v and gate/up in one call) equals separate gemv calls bit for bit, also when
// the matrices take differently quantized activations (Q4_K/Q6_K: Q8_K; Q4_0: f32-scaled Q8; F16: f32),
// and with an x per matrix (inputs pruned differently): shared, alternating and repeated x pointers, so
// a thread's quantized x is reused only for the x it was made from.
TEST(gemv_multi, equals_separate_gemv_calls) {
    const int64_t cols = 512;
    const std::vector<float> x = make_x(cols, 31);
    std::vector<float> x2 = make_x(cols, 32), x3 = x;
    for (int64_t c = 0; c < cols; c += 3) x3[static_cast<size_t>(c)] = 0.0f;  // a masked copy of x
    const float* xs[] = {x.data(), x2.data(), x2.data(), x3.data(), x.data()};
    std::vector<matrix> ms;  // views re-pointed below: the list's copies own the bytes
    for (const auto& [t, rows] : std::vector<std::pair<dtype, int64_t>>{
             {dtype::q4_k, 70}, {dtype::q6_k, 9}, {dtype::q4_k, 33}, {dtype::q4_0, 40}, {dtype::iq4_nl, 17}}) {
        ms.push_back(random_blocks(t, rows, cols, 100 + ms.size()));
        ms.back().view.data = ms.back().bytes.data();
    }
    isa_guard guard;
    for (k::isa i : isas()) {
        k::set_active_isa(i);
        std::vector<tensor_view> views;
        std::vector<std::vector<float>> sep, multi;
        std::vector<float*> ys;
        for (const matrix& m : ms) {
            views.push_back(m.view);
            sep.emplace_back(static_cast<size_t>(m.view.rows));
            multi.emplace_back(static_cast<size_t>(m.view.rows), -1.0f);
            k::gemv(m.view, x.data(), sep.back().data(), 1);
        }
        for (auto& y : multi) ys.push_back(y.data());
        for (int threads : {1, 2, 3}) {
            k::gemv_multi(views.data(), ys.data(), static_cast<int>(views.size()), x.data(), threads);
            for (size_t j = 0; j < ms.size(); ++j)
                EXPECT_EQ(0, std::memcmp(sep[j].data(), multi[j].data(), sep[j].size() * 4))
                    << "matrix " << j << " " << dtype_name(ms[j].view.type) << " threads " << threads << " " << k::isa_name(i);
        }
        ASSERT_EQ(std::size(xs), ms.size());
        for (size_t j = 0; j < ms.size(); ++j) k::gemv(ms[j].view, xs[j], sep[j].data(), 1);
        for (int threads : {1, 2, 3}) {
            for (auto& y : multi) std::fill(y.begin(), y.end(), -1.0f);
            k::gemv_multi(views.data(), ys.data(), static_cast<int>(views.size()), xs, threads);
            for (size_t j = 0; j < ms.size(); ++j)
                EXPECT_EQ(0, std::memcmp(sep[j].data(), multi[j].data(), sep[j].size() * 4))
                    << "own x: matrix " << j << " " << dtype_name(ms[j].view.type) << " threads " << threads << " "
                    << k::isa_name(i);
        }
    }
}

// What the engine regroups by default (rows_x8_faster) is a subset of what has a kernel (rows_x8_native),
// on every ISA: Q4_K wherever it has one, Q4_0 and Q8_0 either on both or on neither (one vendor rule),
// and no other type.
TEST(rows_x8, faster_types_have_kernels) {
    isa_guard guard;
    for (const kernels::isa i : {kernels::isa::scalar, kernels::isa::avx2, kernels::isa::avx512}) {
        if (kernels::set_active_isa(i) != i) continue;
        for (int t = 0; t < n_dtypes; ++t) {
            const auto d = static_cast<dtype>(t);
            if (kernels::rows_x8_faster(d)) {
                EXPECT_TRUE(kernels::rows_x8_native(d)) << dtype_info(d).name;
            }
            if (dtype_rows_x8_form(d) == d) {
                EXPECT_FALSE(kernels::rows_x8_native(d)) << dtype_info(d).name;
            }
        }
        EXPECT_EQ(kernels::rows_x8_faster(dtype::q4_k), kernels::rows_x8_native(dtype::q4_k)) << kernels::isa_name(i);
        EXPECT_EQ(kernels::rows_x8_faster(dtype::q4_0), kernels::rows_x8_faster(dtype::q8_0)) << kernels::isa_name(i);
    }
}

// Q4_Kx8r / Q4_0x8r / Q8_0x8r (Q4_K / Q4_0 / Q8_0 rows interleaved 8 at a time for the dense kernels)
// give every row the bits the rows give it: gemv and gemm against the same matrix row-major, on every ISA
// (the AVX-512 VNNI kernels of their own, the copy back to rows elsewhere), with 1-3 threads, and inside
// gemv_multi beside another type of the same activations (Q6_K, Q8_0, Q4_0: the quantized x is shared).
// For Q4_K the two float lanes of q4k_lanes.h make this hold (the double-reference test above checks
// their value); for Q4_0 and Q8_0 the kernels repeat the row kernel's lanes and sums (q40_r8_avx512.h,
// q80_r8_avx512.h).
TEST(rows_x8, equal_rows_in_gemv_gemv_multi_and_gemm) {
    isa_guard guard;
    for (const dtype base : {dtype::q4_k, dtype::q4_0, dtype::q8_0}) {
        for (const auto& [rows, nsb] : std::vector<std::pair<int64_t, int64_t>>{{8, 1}, {48, 9}, {136, 8}}) {
            const int64_t cols = nsb * qk_k;
            const matrix m = random_blocks(base, rows, cols, 7000 + rows);
            const dtype other_type = base == dtype::q4_k   ? dtype::q6_k
                                     : base == dtype::q4_0 ? dtype::q8_0
                                                           : dtype::q4_0;
            const matrix other = random_blocks(other_type, 24, cols, 7100 + rows);
            const k::owned_matrix x8 = k::to_rows_x8(m.view);
            ASSERT_EQ(x8.view.type, dtype_rows_x8_form(base));
            ASSERT_EQ(x8.view.bytes(), m.view.bytes());  // the same bytes, regrouped
            const int64_t n_tok = 3;
            std::vector<float> xs;
            for (int64_t t = 0; t < n_tok; ++t) {
                const std::vector<float> x = make_x(cols, 7200 + t);
                xs.insert(xs.end(), x.begin(), x.end());
            }
            for (k::isa i : isas()) {
                k::set_active_isa(i);
                const std::string at = std::string(dtype_name(base)) + " " + std::to_string(rows) + "x" +
                                       std::to_string(cols) + " " + k::isa_name(i);
                std::vector<float> y_rows(static_cast<size_t>(rows)), y_x8(static_cast<size_t>(rows));
                k::gemv(m.view, xs.data(), y_rows.data(), 1);
                for (int threads : {1, 2, 3}) {
                    std::fill(y_x8.begin(), y_x8.end(), -1.0f);
                    k::gemv(x8.view, xs.data(), y_x8.data(), threads);
                    EXPECT_EQ(0, std::memcmp(y_rows.data(), y_x8.data(), y_rows.size() * 4))
                        << "gemv " << at << " threads " << threads;
                }
                std::vector<float> y_other(24), y_other_multi(24), y_multi(static_cast<size_t>(rows));
                k::gemv(other.view, xs.data(), y_other.data(), 1);
                const tensor_view views[] = {other.view, x8.view};
                float* ys[] = {y_other_multi.data(), y_multi.data()};
                k::gemv_multi(views, ys, 2, xs.data(), 2);
                EXPECT_EQ(0, std::memcmp(y_rows.data(), y_multi.data(), y_rows.size() * 4)) << "gemv_multi " << at;
                EXPECT_EQ(0, std::memcmp(y_other.data(), y_other_multi.data(), y_other.size() * 4))
                    << "gemv_multi beside " << dtype_name(other.view.type) << " " << at;
                std::vector<float> g_rows(static_cast<size_t>(n_tok * rows)), g_x8(g_rows.size());
                k::gemm(m.view, xs.data(), n_tok, g_rows.data(), 2);
                k::gemm(x8.view, xs.data(), n_tok, g_x8.data(), 2);
                EXPECT_EQ(0, std::memcmp(g_rows.data(), g_x8.data(), g_rows.size() * 4)) << "gemm " << at;
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(new_types, quant_type, ::testing::ValuesIn(k_new_types),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

}  // namespace

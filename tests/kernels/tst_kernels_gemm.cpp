// The blocked GEMMs of prefill (int8 for every block type, f32 for F16/BF16) x ISA: against a
// double-precision reference over the activations the kernels multiply with, bit-identical across
// ISAs (the AVX-512 kernels against the portable ones), and within rounding of gemv per token.
#include <gtest/gtest.h>

#include <cstring>

#include "quant_reference.h"

namespace {

using namespace sl;
using namespace sl::kernel_test;
namespace k = sl::kernels;

std::vector<dtype> block_types() {
    std::vector<dtype> v;
    for (dtype t : {dtype::q8_0, dtype::q4_0}) v.push_back(t);
    for (dtype t : k_new_types) v.push_back(t);
    return v;
}

// Decoded weights in double: the Q8_0/Q4_0 decoder of kernel_test_util.h, quant_reference.h's for the rest.
std::vector<double> decode_any(const tensor_view& v) {
    return is_quant(v.type) ? decode(v) : ref_decode(v);
}

// y[t][r] = sum_c W[r, c] * xq_t[c] in double.
std::vector<double> ref_gemm(const std::vector<double>& w, int64_t rows, int64_t cols, const std::vector<double>& xq) {
    std::vector<double> y;
    for (size_t t = 0; t < xq.size() / static_cast<size_t>(cols); ++t)
        for (int64_t r = 0; r < rows; ++r) {
            double acc = 0.0;
            for (int64_t c = 0; c < cols; ++c)
                acc +=
                    w[static_cast<size_t>(r * cols + c)] * xq[t * static_cast<size_t>(cols) + static_cast<size_t>(c)];
            y.push_back(acc);
        }
    return y;
}

// n tokens of cols activations (make_x, seeds seed + step * tk; token `small` scaled by 1e-3) into xs, and
// the values gemm multiplies with for type t, in double, into xq.
void make_tokens(dtype t, int64_t cols, int64_t n, uint64_t seed, uint64_t step, int64_t small,
                 std::vector<float>& xs, std::vector<double>& xq) {
    for (int64_t tk = 0; tk < n; ++tk) {
        const std::vector<float> x = make_x(cols, seed + step * static_cast<uint64_t>(tk), tk == small ? 1e-3f : 1.0f);
        xs.insert(xs.end(), x.begin(), x.end());
        const std::vector<double> q = quantized_x_for(t, x);
        xq.insert(xq.end(), q.begin(), q.end());
    }
}

// gemm on ISA i, checked against ref (nmse) and bit for bit against `first` (the first ISA's result,
// stored there when empty); returns Y.
std::vector<float> checked_gemm(const matrix& m, const std::vector<float>& xs, int64_t n, k::isa i,
                                const std::vector<double>& ref, std::vector<float>& first) {
    SCOPED_TRACE(::testing::Message() << dtype_name(m.view.type) << " " << k::isa_name(i) << " " << m.view.rows << "x"
                                      << m.view.cols << " n=" << n);
    k::set_active_isa(i);
    std::vector<float> y(static_cast<size_t>(n * m.view.rows), -7.0f);
    k::gemm(m.view, xs.data(), n, y.data(), 2);
    // Exact integer block sums or exact weights, then one f32 FMA chain per output: f32 rounding only.
    EXPECT_LE(nmse(y.data(), ref), 1e-11);
    if (first.empty())
        first = y;
    else
        EXPECT_EQ(0, std::memcmp(first.data(), y.data(), y.size() * 4)) << "gemm differs across ISAs";
    return y;
}

class gemm_int8 : public ::testing::TestWithParam<dtype> {};

TEST_P(gemm_int8, matches_reference_identical_across_isas_close_to_gemv) {
    const dtype t = GetParam();
    const int64_t qk = dtype_block_elems(t);
    isa_guard guard;
    // Row counts around the 16-row panel (partial panels, one row, several panels per thread) and
    // token counts covering the 8/4/2/1 token blocks of the VNNI kernel.
    const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {15, 2}, {17, 3}, {33, 1}, {50, 4}};
    for (const auto& [rows, nblk] : shapes) {
        const int64_t cols = nblk * qk * (qk == 32 ? 3 : 1);
        const matrix m = random_blocks(t, rows, cols, 7 * rows + nblk + static_cast<int>(t));
        const std::vector<double> w = decode_any(m.view);
        for (int64_t n : {2, 3, 7, 13, 16}) {
            std::vector<float> xs;
            std::vector<double> xq;
            make_tokens(t, cols, n, 300 + rows, 17, 1, xs, xq);
            const std::vector<double> ref = ref_gemm(w, rows, cols, xq);
            std::vector<float> first;
            for (k::isa i : isas()) {
                const std::vector<float> y = checked_gemm(m, xs, n, i, ref, first);
                for (int64_t tk = 0; tk < n; ++tk) {
                    std::vector<float> yv(static_cast<size_t>(rows));
                    k::gemv(m.view, xs.data() + tk * cols, yv.data(), 1);
                    // Same quantized activations, another f32 summation order (Q8_1 types: gemv uses
                    // ggml's fp16-rounded d*sum for the minimum, gemm the exact integer sum).
                    const std::vector<double> yvd(yv.begin(), yv.end());
                    EXPECT_LE(nmse(y.data() + tk * rows, yvd), act_q8_1(t) ? 1e-6 : 1e-10)
                        << dtype_name(t) << " " << k::isa_name(i) << " n=" << n << " token " << tk;
                }
            }
        }
    }
}

// The largest integer pair sums the AVX2 panel encodings must hold without saturating: every weight
// bit set (each type's largest q + offset) against activation blocks at +127, -127 and -128 (a block
// of denormals quantizes to +-127 / -128: 127 / amax overflows to inf). Identical across ISAs, and
// the all-normal tokens within rounding of the double reference.
TEST(gemm_int8_extremes, largest_pair_sums_identical_across_isas) {
    isa_guard guard;
    for (dtype t : block_types()) {
        SCOPED_TRACE(dtype_name(t));
        const int64_t rows = 21, cols = 512, n = 6;
        matrix m = random_blocks(t, rows, cols, 11 + static_cast<int>(t));
        const std::vector<int> halves = half_fields(t);
        for (int64_t i = 0; i < static_cast<int64_t>(m.bytes.size()); ++i) {
            const int at = static_cast<int>(i % dtype_block_bytes(t));
            bool is_half = false;
            for (int off : halves) is_half = is_half || at == off || at == off + 1;
            if (!is_half) m.bytes[static_cast<size_t>(i)] = 0xff;
        }
        const float levels[n] = {1.0f, -1.0f, -1e-39f, 1e-39f, 0.5f, -0.25f};
        std::vector<float> xs;
        for (float v : levels) xs.insert(xs.end(), static_cast<size_t>(cols), v);
        std::vector<float> first;
        for (k::isa i : isas()) {
            k::set_active_isa(i);
            std::vector<float> y(static_cast<size_t>(n * rows));
            k::gemm(m.view, xs.data(), n, y.data(), 2);
            if (first.empty())
                first = y;
            else
                EXPECT_EQ(0, std::memcmp(first.data(), y.data(), y.size() * 4)) << k::isa_name(i);
        }
        const std::vector<double> w = decode_any(m.view);
        for (int64_t tk : {0, 1, 4, 5}) {
            const std::vector<float> x(static_cast<size_t>(cols), levels[tk]);
            const std::vector<double> ref = ref_gemm(w, rows, cols, quantized_x_for(t, x));
            EXPECT_LE(nmse(first.data() + tk * rows, ref), 1e-11) << "token " << tk;
        }
    }
}

TEST(gemm_threads, results_do_not_depend_on_thread_count) {
    isa_guard guard;
    // 70 rows: a partial last panel of 16 (int8) and of the AVX2 float kernel's 16, on either thread.
    for (dtype t : {dtype::q4_k, dtype::q8_0, dtype::q6_k, dtype::f16}) {
        const matrix m = t == dtype::f16 ? make_matrix(t, 70, 512, 3) : random_blocks(t, 70, 512, 3);
        std::vector<float> xs;
        for (int tk = 0; tk < 9; ++tk) {
            const std::vector<float> x = make_x(512, 40 + tk);
            xs.insert(xs.end(), x.begin(), x.end());
        }
        for (k::isa i : isas()) {
            k::set_active_isa(i);
            std::vector<float> y1(9 * 70), y2(9 * 70);
            k::gemm(m.view, xs.data(), 9, y1.data(), 1);
            k::gemm(m.view, xs.data(), 9, y2.data(), 2);
            EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * 4)) << dtype_name(t) << " " << k::isa_name(i);
        }
    }
}

// The AMX tile kernel (CPUs with AMX-INT8; gemm uses it at the avx512 ISA) against the VNNI kernel: the
// same bits for every block type (groups of 32 and of 16, with and without a minimum), partial panels, and
// token counts around its 16-token tiles (the rest runs on the VNNI kernel), and near the double reference.
TEST(gemm_amx, same_bits_as_vnni_kernel) {
    if (!k::amx_available()) GTEST_SKIP() << "this CPU (or its OS) offers no AMX-INT8 tiles";
    isa_guard guard;
    k::set_active_isa(k::isa::avx512);
    struct amx_guard {
        ~amx_guard() { k::set_amx_enabled(true); }
    } restore;
    for (dtype t : block_types()) {
        for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{15, 512}, {70, 768}}) {
            const matrix m = random_blocks(t, rows, cols, 11 * rows + static_cast<int>(t));
            const std::vector<double> w = decode_any(m.view);
            for (int64_t n : {16, 17, 33, 48}) {
                SCOPED_TRACE(::testing::Message() << dtype_name(t) << " " << rows << "x" << cols << " n=" << n);
                std::vector<float> xs;
                std::vector<double> xq;
                make_tokens(t, cols, n, 500 + rows, 13, 3, xs, xq);
                std::vector<float> on(static_cast<size_t>(n * rows), -7.0f), off = on;
                ASSERT_TRUE(k::set_amx_enabled(true));
                k::gemm(m.view, xs.data(), n, on.data(), 2);
                ASSERT_FALSE(k::set_amx_enabled(false));
                k::gemm(m.view, xs.data(), n, off.data(), 2);
                EXPECT_EQ(0, std::memcmp(on.data(), off.data(), on.size() * 4)) << "AMX and VNNI differ";
                EXPECT_LE(nmse(on.data(), ref_gemm(w, rows, cols, xq)), 1e-11);
            }
        }
    }
}

// gemm keeps the last quantized x to reuse for the next matrix: the same buffer with new contents,
// or the same contents for a type quantized another way, must not see a stale quantization, and a
// type of other scale groups must not see the last one's group sums or tiles (17 tokens: one whole
// AMX tile of 16 where this CPU has them).
TEST(gemm_int8_reuse, same_buffer_new_contents_and_other_activation_kinds) {
    const int64_t rows = 20, cols = 512, n = 17;
    const matrix a = random_blocks(dtype::q4_k, rows, cols, 1), b = random_blocks(dtype::q4_0, rows, cols, 2);
    const matrix c = random_blocks(dtype::q6_k, rows, cols, 3);
    std::vector<float> xs(static_cast<size_t>(n * cols));
    auto fill = [&](uint64_t seed) {
        for (int64_t tk = 0; tk < n; ++tk) {
            const std::vector<float> x = make_x(cols, seed + tk);
            std::copy(x.begin(), x.end(), xs.begin() + tk * cols);
        }
    };
    // nmse of gemm(m, xs) against the double reference of xs as it is now.
    auto error = [&](const matrix& m) {
        std::vector<double> xq;
        for (int64_t tk = 0; tk < n; ++tk) {
            const std::vector<float> x(xs.begin() + tk * cols, xs.begin() + (tk + 1) * cols);
            const std::vector<double> q = quantized_x_for(m.view.type, x);
            xq.insert(xq.end(), q.begin(), q.end());
        }
        std::vector<float> y(static_cast<size_t>(n * rows));
        k::gemm(m.view, xs.data(), n, y.data(), 2);
        return nmse(y.data(), ref_gemm(decode_any(m.view), rows, cols, xq));
    };
    fill(10);
    EXPECT_LE(error(a), 1e-11);
    EXPECT_LE(error(a), 1e-11);  // same x: reused
    xs[7] += 1.0f;               // one element changes in place
    EXPECT_LE(error(a), 1e-11);
    EXPECT_LE(error(b), 1e-11);  // same x, another activation kind (Q8_K vs f32-scaled Q8)
    EXPECT_LE(error(a), 1e-11);
    EXPECT_LE(error(c), 1e-11);  // same x and kind (Q8_K), groups of 16 instead of 32
    EXPECT_LE(error(a), 1e-11);
    EXPECT_LE(error(a), 1e-11);  // the token pass skipped
}

class gemm_float : public ::testing::TestWithParam<dtype> {};

TEST_P(gemm_float, matches_reference_identical_across_isas_close_to_gemv) {
    const dtype t = GetParam();
    isa_guard guard;
    // Row counts around the 8-row block (portable), the 16-row panel (AVX2) and the 32-row panel
    // (AVX-512), token counts around the 6/12-token tiles and past the 128-token blocks (300 = 128 +
    // 128 + 44); 1100 columns span several column chunks (<= 512) and end in a partial 8-column step.
    const std::pair<int64_t, int64_t> shapes[] = {{1, 16}, {7, 33}, {9, 100}, {30, 256}, {20, 1100}, {45, 200}};
    for (const auto& [rows, cols] : shapes) {
        const matrix m = make_matrix(t, rows, cols, 3 * rows + cols);
        const std::vector<double> w = decode(m.view);
        for (int64_t n : {2, 15, 17, 33, 48, 300}) {
            std::vector<float> xs;
            for (int64_t tk = 0; tk < n; ++tk) {
                const std::vector<float> x = make_x(cols, 500 + 13 * tk + rows);
                xs.insert(xs.end(), x.begin(), x.end());
            }
            const std::vector<double> ref = ref_gemm(w, rows, cols, std::vector<double>(xs.begin(), xs.end()));
            std::vector<float> first;
            for (k::isa i : isas()) {
                const std::vector<float> y = checked_gemm(m, xs, n, i, ref, first);
                // (Tokens past 48 are checked by the ISA identity and the reference above: the bits of
                // the blocked AVX2 path equal the unblocked scalar ones.)
                for (int64_t tk = 0; tk < std::min<int64_t>(n, 48); tk += 7) {
                    std::vector<float> yv(static_cast<size_t>(rows));
                    k::gemv(m.view, xs.data() + tk * cols, yv.data(), 1);
                    EXPECT_LE(nmse(y.data() + tk * rows, std::vector<double>(yv.begin(), yv.end())), 1e-11)
                        << dtype_name(t) << " " << k::isa_name(i) << " n=" << n << " token " << tk;
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(float_types, gemm_float, ::testing::Values(dtype::f16, dtype::bf16),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

INSTANTIATE_TEST_SUITE_P(block_types, gemm_int8, ::testing::ValuesIn(block_types()),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

}  // namespace

// Weight types against ggml itself: blocks made by ggml's quantizer decode to ggml's values bit for bit
// and dot like a double reference on every ISA; files quantized by llama.cpp give llama.cpp's logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "../kernels/quant_reference.h"
#include "peer_parity.h"
#include "sparselens/core/context.h"
#include "sparselens/core/eval.h"
#include "sparselens/core/model.h"
#include "sparselens/core/synthetic.h"
#include "sparselens/kernels/sparse.h"

namespace {

using namespace sl::test;
using namespace sl::kernel_test;
using sl::dtype;
namespace k = sl::kernels;

// ggml's type_name for each type (lower case, K upper).
std::string ggml_name(dtype t) {
    std::string n(sl::dtype_name(t));
    for (char& c : n)
        if (c != 'K') c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return n;
}

struct ggml_blocks {
    std::vector<uint8_t> q;
    std::vector<float> deq;
};

// Rows of x quantized by ggml_quantize_chunk and dequantized by ggml's to_float.
ggml_blocks ggml_quantize(dtype t, const std::vector<float>& x, int64_t per_row) {
    const std::string in = write_array("gq_in.f32", x);
    const std::string out = write_temp("gq_out.bin", {}), deq = write_temp("gq_deq.f32", {});
    const run_result r = run_peer("ggml-quant " + ggml_name(t) + " '" + in + "' " + std::to_string(per_row) + " '" +
                                  out + "' '" + deq + "'");
    EXPECT_EQ(r.code, 0) << r.err;
    return {read_array<uint8_t>(out), read_array<float>(deq)};
}

class peer_quant : public ::testing::TestWithParam<dtype> {};

// Gaussian rows of different scales, a few outliers and an all-zero row: what real weights look like
// to a quantizer (the scale search, the minimum, the sign of d all get exercised).
std::vector<float> weight_like(int64_t rows, int64_t cols, uint64_t seed) {
    reseed(seed);
    std::vector<float> x(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
        const float scale = r == 3 ? 0.0f : 0.01f * static_cast<float>(1 + r % 5);
        for (int64_t c = 0; c < cols; ++c) {
            float v = scale * gaussish();
            if ((r * cols + c) % 97 == 0) v *= 6.0f;
            x[static_cast<size_t>(r * cols + c)] = v + (r % 4 == 1 ? 0.5f * scale : 0.0f);  // some rows off-centre
        }
    }
    return x;
}

TEST_P(peer_quant, dequantization_equals_ggml_bit_for_bit_and_dots_match_double) {
    const dtype t = GetParam();
    const int64_t rows = 24, cols = 1024;
    const std::vector<float> w = weight_like(rows, cols, 100 + static_cast<int>(t));
    const ggml_blocks g = ggml_quantize(t, w, cols);
    const sl::tensor_view view{t, rows, cols, g.q.data()};
    ASSERT_EQ(static_cast<int64_t>(g.q.size()), view.bytes()) << "block size disagrees with ggml's";
    ASSERT_EQ(g.deq.size(), w.size());
    std::vector<double> wd(g.deq.begin(), g.deq.end());
    const std::vector<float> x = make_x(cols, 7);
    std::vector<double> ref_q(static_cast<size_t>(rows), 0.0), ref_x(static_cast<size_t>(rows), 0.0);
    const std::vector<double> xq = quantized_x_for(t, x);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            ref_q[static_cast<size_t>(r)] += wd[static_cast<size_t>(r * cols + c)] * xq[static_cast<size_t>(c)];
            ref_x[static_cast<size_t>(r)] += wd[static_cast<size_t>(r * cols + c)] * x[static_cast<size_t>(c)];
        }
    std::vector<int32_t> idx{0, 2, 3, 5, 11, 12, 13, 23};
    isa_guard guard;
    for (k::isa i : isas()) {
        k::set_active_isa(i);
        std::vector<float> deq(w.size());
        for (int64_t r = 0; r < rows; ++r) k::dequantize_row(t, view.row(r), deq.data() + r * cols, cols);
        size_t bad = 0;
        for (size_t j = 0; j < deq.size(); ++j) bad += std::memcmp(&deq[j], &g.deq[j], 4) != 0;
        EXPECT_EQ(bad, 0u) << sl::dtype_name(t) << " " << k::isa_name(i) << ": values differing from ggml's";
        std::vector<float> y(static_cast<size_t>(rows)), ys(idx.size());
        k::gemv(view, x.data(), y.data(), 2);
        EXPECT_LE(nmse(y.data(), ref_q), act_q8_1(t) ? 1e-6 : 1e-10) << sl::dtype_name(t) << " " << k::isa_name(i);
        EXPECT_LE(nmse(y.data(), ref_x), 1e-3) << sl::dtype_name(t) << " " << k::isa_name(i);
        k::gemv_output_sparse(view, x.data(), idx.data(), static_cast<int64_t>(idx.size()), ys.data(), 2);
        for (size_t j = 0; j < idx.size(); ++j) EXPECT_EQ(ys[j], y[static_cast<size_t>(idx[j])]);
    }
}

INSTANTIATE_TEST_SUITE_P(ggml_types, peer_quant,
                         ::testing::Values(dtype::q4_0, dtype::q8_0, dtype::q4_1, dtype::q5_0, dtype::q5_1, dtype::q2_k,
                                           dtype::q3_k, dtype::q4_k, dtype::q5_k, dtype::q6_k, dtype::iq4_nl,
                                           dtype::iq4_xs),
                         [](const auto& p) { return std::string(sl::dtype_name(p.param)); });

// ---- Whole files quantized by llama.cpp ------------------------------------------------------------

const std::string& synthetic_f32() {
    static const std::string path = [] {
        sl::synthetic_params sp = sl::synthetic_default_params();
        sp.path = write_temp("kq_small.gguf", {});
        sp.shape = "small-512";
        sp.seed = 5;
        auto s = sl::synthetic_write(sp);
        EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.message());
        return sp.path;
    }();
    return path;
}

// Random-weight models have flat logits (top-2 gap often < 0.05) and int8 activation rounding turns
// any tiny difference (RMSNorm sum order, softmax) into ~2% logit noise on both engines alike: the
// measured rms(ours - llama.cpp) is 0.02-0.03 with logits of rms 1, the same size as either engine's
// distance from the F32 model. Top-1 is therefore judged on the clear positions (peer_parity.h).

class peer_file : public ::testing::TestWithParam<const char*> {};

TEST_P(peer_file, teacher_forced_logits_match_llama_cpp) {
    const std::string ftype = GetParam();
    const std::string q = write_temp("kq_small_" + ftype + ".gguf", {});
    const run_result r = run_peer("quantize '" + synthetic_f32() + "' '" + q + "' " + ftype);
    ASSERT_EQ(r.code, 0) << r.err;
    std::vector<int32_t> ids(192);
    reseed(17);
    for (auto& id : ids) id = 3 + static_cast<int32_t>(next_u64() % 1000);
    ids[0] = 1;  // BOS
    // Flips of the top token inside the noise band only: all positions >= 85%, clear ones >= 98%.
    expect_peer_parity({{"small-512 " + ftype, q, 1e-3, 0.85, 0.98, 64.0 / 192.0}}, ids);
}

// The file types issue 11 names plus Q3_K_M; Q2_K, Q4_1, Q5_0 and Q5_1 measured alike (KL 1.7e-4 to
// 3.5e-4) but are left to the block-level test above to keep this one near a minute.
INSTANTIATE_TEST_SUITE_P(llama_cpp_files, peer_file,
                         ::testing::Values("Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS", "Q3_K_M"),
                         [](const auto& p) { return std::string(p.param); });

}  // namespace

SL_TEST_MAIN_NEEDS_PEER(false)

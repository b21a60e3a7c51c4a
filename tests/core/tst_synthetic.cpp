// Synthetic llama GGUF writer: every weight type loads back with the right shapes and sane values.
#include <cmath>
#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "sparselens/core/gguf.h"
#include "sparselens/core/model.h"
#include "sparselens/core/synthetic.h"
#include "sparselens/core/tokenizer.h"
#include "sparselens/kernels/kernels.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;

class synthetic : public ::testing::Test {
protected:
    void SetUp() override {
        m_dir = fs::temp_directory_path() / ("sparselens_synth_" + std::to_string(::getpid()));
        fs::create_directories(m_dir);
    }
    void TearDown() override { fs::remove_all(m_dir); }
    std::string path(const std::string& name) const { return (m_dir / name).string(); }

    sl::synthetic_summary write(const std::string& name, sl::dtype t, uint64_t seed = 42, int32_t vocab = 0) {
        sl::synthetic_params p = sl::synthetic_default_params();
        p.path = path(name);
        p.shape = "tiny";
        p.type = t;
        p.seed = seed;
        p.vocab = vocab;
        auto r = sl::synthetic_write(p);
        EXPECT_TRUE(r.ok()) << r.message();
        return r.ok() ? r.value() : sl::synthetic_summary{};
    }

    fs::path m_dir;
};

std::vector<float> dequant(const sl::tensor_view& v) {
    std::vector<float> out(static_cast<size_t>(v.rows * v.cols));
    for (int64_t r = 0; r < v.rows; ++r) sl::kernels::dequantize_row(v.type, v.row(r), out.data() + r * v.cols, v.cols);
    return out;
}

TEST_F(synthetic, every_dtype_loads_with_right_shapes_and_plausible_values) {
    const auto expected = sl::synthetic_shape("tiny");
    ASSERT_TRUE(expected.ok());
    for (sl::dtype t : {sl::dtype::f32, sl::dtype::f16, sl::dtype::bf16, sl::dtype::q8_0, sl::dtype::q4_0}) {
        SCOPED_TRACE(std::string(sl::dtype_name(t)));
        const auto s = write("tiny.gguf", t);
        EXPECT_EQ(s.file_bytes, fs::file_size(s.path));
        EXPECT_TRUE(s.tied_output);
        EXPECT_EQ(s.n_tensors, 2 + 9 * 5);
        auto m = sl::model_load(s.path);
        ASSERT_TRUE(m.ok()) << m.message();
        const auto& hp = m->hp;
        EXPECT_EQ(hp.dim, 64);
        EXPECT_EQ(hp.hidden_dim, 172);
        EXPECT_EQ(hp.n_layers, 5);
        EXPECT_EQ(hp.n_heads, 8);
        EXPECT_EQ(hp.n_kv_heads, 4);
        EXPECT_EQ(hp.vocab_size, 512);
        EXPECT_EQ(hp.seq_len, 512);
        EXPECT_EQ(hp.rope_dim, 8);
        EXPECT_EQ(hp.rope_theta, expected->rope_theta);
        EXPECT_EQ(hp.norm_eps, expected->norm_eps);
        EXPECT_TRUE(m->tied_output);
        EXPECT_EQ(m->output.data, m->tok_embd.data);
        EXPECT_EQ(m->name, "synthetic-tiny");
        const bool block = t == sl::dtype::q8_0 || t == sl::dtype::q4_0;
        for (const auto& L : m->layers) {
            EXPECT_EQ(L.wq.type, t);
            EXPECT_EQ(L.w_gate.type, t);
            EXPECT_EQ(L.w_down.type, block ? sl::dtype::f32 : t);  // 172-wide rows cannot be blocked by 32
            for (int i = 0; i < 64; ++i) {
                ASSERT_EQ(L.attn_norm[i], 1.0f);
                ASSERT_EQ(L.ffn_norm[i], 1.0f);
            }
        }
        // Fan-in scaled N(0, 1/in): check mean and standard deviation on two matrices.
        for (const sl::tensor_view* v : {&m->layers[2].w_gate, &m->layers[4].w_down, &m->tok_embd}) {
            const auto x = dequant(*v);
            double sum = 0, sq = 0;
            for (float f : x) {
                ASSERT_TRUE(std::isfinite(f));
                sum += f;
                sq += static_cast<double>(f) * f;
            }
            const double mean = sum / static_cast<double>(x.size());
            const double sd = std::sqrt(sq / static_cast<double>(x.size()) - mean * mean);
            const double want = 1.0 / std::sqrt(static_cast<double>(v->cols));
            EXPECT_NEAR(mean, 0.0, 0.05 * want);
            EXPECT_NEAR(sd, want, 0.1 * want);
        }
    }
}

// All dtypes encode the same underlying values: f16/bf16/q8_0 agree with f32 within their rounding.
TEST_F(synthetic, dtypes_encode_the_same_weights) {
    auto f32 = sl::model_load(write("a.gguf", sl::dtype::f32).path);
    ASSERT_TRUE(f32.ok());
    const auto ref = dequant(f32->layers[1].wq);
    struct tol { sl::dtype t; double rel; };
    for (const tol& c : {tol{sl::dtype::f16, 1.0 / 2048}, tol{sl::dtype::bf16, 1.0 / 256}, tol{sl::dtype::q8_0, 1.0 / 100},
                         tol{sl::dtype::q4_0, 1.0 / 6}}) {
        auto m = sl::model_load(write(std::string(sl::dtype_name(c.t)) + ".gguf", c.t).path);
        ASSERT_TRUE(m.ok());
        const auto got = dequant(m->layers[1].wq);
        double max_abs = 0, max_err = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
            max_abs = std::max(max_abs, std::fabs(static_cast<double>(ref[i])));
            max_err = std::max(max_err, std::fabs(static_cast<double>(ref[i]) - got[i]));
        }
        EXPECT_LE(max_err, c.rel * max_abs) << sl::dtype_name(c.t);
        EXPECT_GT(max_err, 0.0) << sl::dtype_name(c.t);
    }
}

TEST_F(synthetic, deterministic_per_seed) {
    const auto a = sl::test::read_bytes(write("a.gguf", sl::dtype::q8_0, 7).path);
    const auto b = sl::test::read_bytes(write("b.gguf", sl::dtype::q8_0, 7).path);
    const auto c = sl::test::read_bytes(write("c.gguf", sl::dtype::q8_0, 8).path);
    EXPECT_TRUE(a == b);
    EXPECT_EQ(a.size(), c.size());
    EXPECT_FALSE(a == c);
}

TEST_F(synthetic, vocabulary_is_usable) {
    const auto s = write("v.gguf", sl::dtype::f16, 42, 2000);
    auto m = sl::model_load(s.path);
    ASSERT_TRUE(m.ok()) << m.message();
    EXPECT_EQ(m->hp.vocab_size, 2000);
    const auto& v = m->vocab;
    ASSERT_EQ(v.tokens.size(), 2000u);
    EXPECT_EQ(v.tokens[0], "<unk>");
    EXPECT_EQ(v.tokens[1], "<s>");
    EXPECT_EQ(v.tokens[2], "</s>");
    EXPECT_EQ(v.tokens[3], "<0x00>");
    EXPECT_EQ(v.tokens[258], "<0xFF>");
    EXPECT_EQ(v.types[0], 2);
    EXPECT_EQ(v.types[1], 3);
    EXPECT_EQ(v.types[100], 6);
    EXPECT_EQ(v.types[1999], 1);
    EXPECT_EQ(std::set<std::string>(v.tokens.begin(), v.tokens.end()).size(), 2000u) << "pieces must be unique";
    auto tok = sl::tokenizer::from_embedded_vocab(v, s.path);
    ASSERT_TRUE(tok.ok()) << tok.message();
    const std::string text = "the quick brown fox, 42!";
    const auto ids = tok->encode(text, true, false);
    EXPECT_LT(ids.size(), text.size()) << "letter pieces should merge";
    EXPECT_EQ(tok->decode_all(ids), text);
}

TEST_F(synthetic, progress_and_cancel) {
    sl::synthetic_params p = sl::synthetic_default_params();
    p.path = path("c.gguf");
    std::vector<float> seen;
    p.progress = [&](float f) { seen.push_back(f); return true; };
    ASSERT_TRUE(sl::synthetic_write(p).ok());
    ASSERT_GT(seen.size(), 10u);
    EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
    EXPECT_EQ(seen.back(), 1.0f);
    fs::remove(p.path);
    for (size_t stop : {size_t{0}, seen.size() / 2, seen.size() - 1}) {
        size_t n = 0;
        p.progress = [&](float) { return n++ < stop; };
        auto r = sl::synthetic_write(p);
        ASSERT_FALSE(r.ok());
        EXPECT_TRUE(r.cancelled());
        EXPECT_EQ(r.message(), p.path + ": write cancelled");
        EXPECT_EQ(n, stop + 1);
        EXPECT_FALSE(fs::exists(p.path));
        EXPECT_FALSE(fs::exists(p.path + ".partial"));
    }
}

TEST_F(synthetic, shapes_and_errors) {
    auto l1 = sl::synthetic_shape("llama-1b");
    ASSERT_TRUE(l1.ok());
    EXPECT_EQ(l1->dim, 2048);
    EXPECT_EQ(l1->hidden_dim, 8192);
    EXPECT_EQ(l1->n_layers, 16);
    EXPECT_EQ(l1->n_heads, 32);
    EXPECT_EQ(l1->n_kv_heads, 8);
    EXPECT_EQ(l1->vocab_size, 32000);
    EXPECT_EQ(l1->rope_theta, 500000.0f);
    EXPECT_EQ(sl::synthetic_shape("llama-1b", 128256)->vocab_size, 128256);
    auto l8 = sl::synthetic_shape("llama-8b-layer");
    ASSERT_TRUE(l8.ok());
    EXPECT_EQ(l8->dim, 4096);
    EXPECT_EQ(l8->hidden_dim, 14336);
    EXPECT_EQ(l8->n_layers, 1);
    EXPECT_EQ(l8->kv_dim(), 1024);
    EXPECT_EQ(sl::synthetic_shape("llama-8b-4layer")->n_layers, 4);
    EXPECT_EQ(sl::synthetic_shape("small-512")->dim % 256, 0);  // K-quant super-blocks tile every row
    EXPECT_EQ(sl::synthetic_shape("small-512")->hidden_dim % 256, 0);
    EXPECT_EQ(sl::synthetic_shape_names().size(), 8u);
    auto wide = sl::synthetic_shape("qwen3-0.6b-mini");
    ASSERT_TRUE(wide.ok());
    EXPECT_EQ(wide->head_dim(), 128);
    EXPECT_EQ(wide->q_dim(), 2 * wide->dim);
    EXPECT_EQ(sl::synthetic_shape("gemma2-2b-mini")->q_dim(), 512);  // narrower than dim 768

    EXPECT_FALSE(sl::synthetic_shape("llama-70b").ok());
    EXPECT_NE(sl::synthetic_shape("llama-70b").message().find("tiny"), std::string::npos);
    EXPECT_FALSE(sl::synthetic_shape("tiny", 100).ok());
    sl::synthetic_params p = sl::synthetic_default_params();
    EXPECT_FALSE(sl::synthetic_write(p).ok());  // no path
    p.path = path("x.gguf");
    p.shape = "nope";
    auto r = sl::synthetic_write(p);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.message().rfind(p.path + ": ", 0), 0u) << r.message();
    p.shape = "tiny";
    p.type = sl::dtype::q4_k;  // no encoder here: a one-line error, not an assertion or garbage blocks
    r = sl::synthetic_write(p);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find("q4_0"), std::string::npos) << r.message();
    EXPECT_FALSE(fs::exists(p.path));
    p.type = sl::dtype::f32;
    p.path = path("no/such/dir/x.gguf");
    EXPECT_FALSE(sl::synthetic_write(p).ok());
}

}  // namespace

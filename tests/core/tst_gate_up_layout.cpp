// DIP's gate and up as one input-major matrix [gate | up] (context::set_method, method_traits::
// mlp_inputs_shared) against the two separate layouts it replaces, on synthetic llama models of every
// input-major layout family the synthetic writer makes (F32, F16, BF16, Q8_0x8, Q4_0x8), 1 and 2 threads: the same
// logits bit for bit, the same read densities, no more layout bytes, and the read log shows one read
// per chosen channel of both matrices. At density 1 DIP plans no layout (both run row-major). The rows
// here are short (the kernels split them by channels either way; see set_method on longer rows).
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sparselens/core/context.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/model.h"
#include "sparselens/core/synthetic.h"
#include "sparselens/kernels/sparse.h"

namespace {

namespace fs = std::filesystem;

// The inner method with mlp_inputs_shared set as told; `uneven` also drops the first of gate's chosen
// channels from up's (a method breaking the promise, to reach the engine's exact fallback).
class wrapped final : public sl::sparsity_method {
public:
    wrapped(sl::sparsity_method& inner, bool shared, bool uneven = false)
        : m_in(inner), m_shared(shared), m_uneven(uneven) {}
    std::string name() const override { return m_in.name(); }
    sl::method_traits traits() const override {
        sl::method_traits t = m_in.traits();
        t.mlp_inputs_shared = m_shared;
        return t;
    }
    float planned_input_density(int32_t l, sl::proj p) const override { return m_in.planned_input_density(l, p); }
    void select_mlp_inputs(const sl::token_info& t, std::span<const float> x, sl::layer_masks& m) override {
        m_in.select_mlp_inputs(t, x, m);
        if (m_uneven && !m.up_in.all && !m.up_in.idx.empty()) m.up_in.idx.erase(m.up_in.idx.begin());
    }
    void select_down(const sl::token_info& t, std::span<const float> glu, sl::layer_masks& m) override {
        m_in.select_down(t, glu, m);
    }

private:
    sl::sparsity_method& m_in;
    bool m_shared, m_uneven;
};

struct run {
    std::vector<float> logits;
    std::vector<sl::weight_read> log;
    std::vector<sl::layer_density> read;
    uint64_t layout_bytes = 0;
};

run decode_tokens(const sl::model& m, sl::sparsity_method& method, int threads) {
    sl::context_params xp = sl::context_default_params();
    xp.n_threads = threads;
    xp.n_ctx = 64;
    auto ctx = sl::context::create(m, xp);
    EXPECT_TRUE(ctx.ok());
    run r;
    if (!ctx.ok()) return r;
    ctx->set_method(&method);
    r.layout_bytes = ctx->layout_bytes();
    ctx->set_read_log(&r.log);
    const int32_t vocab = m.hp.vocab_size;
    for (int32_t pos = 0; pos < 6; ++pos) {
        const float* lg = ctx->decode((pos * 37 + 11) % vocab, pos);
        r.logits.insert(r.logits.end(), lg, lg + vocab);
    }
    r.read = ctx->read_density_sum();
    return r;
}

TEST(GateUpLayout, EqualsTheSeparateLayoutsBitForBit) {
    const fs::path dir = fs::temp_directory_path() / ("sparselens_gate_up_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    for (const sl::dtype type : {sl::dtype::f32, sl::dtype::f16, sl::dtype::bf16, sl::dtype::q8_0, sl::dtype::q4_0}) {
        SCOPED_TRACE(sl::dtype_name(type));
        sl::synthetic_params p = sl::synthetic_default_params();
        p.shape = "small";  // dim 256, hidden 768: whole x8 groups (256 outputs)
        p.type = type;
        p.path = (dir / (std::string(sl::dtype_name(type)) + ".gguf")).string();
        ASSERT_TRUE(sl::synthetic_write(p).ok());
        auto m = sl::model_load(p.path);
        ASSERT_TRUE(m.ok()) << m.message();
        const sl::layer_weights& lw0 = m->layers[0];
        for (const float density : {0.3f, 1.0f}) {
            SCOPED_TRACE(density);
            sl::method_config c = sl::method_default_config();
            c.name = "dip";
            c.density = density;
            auto dip = sl::make_method(c, *m, nullptr);
            ASSERT_TRUE(dip.ok()) << dip.message();
            ASSERT_TRUE((*dip)->traits().mlp_inputs_shared);
            wrapped separate(**dip, false);
            for (const int threads : {1, 2}) {
                SCOPED_TRACE(threads);
                const run one = decode_tokens(*m, **dip, threads);
                const run two = decode_tokens(*m, separate, threads);
                ASSERT_FALSE(one.logits.empty());
                EXPECT_EQ(one.logits, two.logits);
                // Same weights chosen: the same read densities per layer and projection.
                ASSERT_EQ(one.read.size(), two.read.size());
                for (size_t l = 0; l < one.read.size(); ++l)
                    for (int q = 0; q < sl::proj_count; ++q) EXPECT_EQ(one.read[l].d[q], two.read[l].d[q]);
                if (density == 1.0f) {  // planned dense: no layouts, both read the row-major matrices
                    EXPECT_EQ(one.layout_bytes, 0u);
                    EXPECT_EQ(two.layout_bytes, 0u);
                    continue;
                }
                // The joined layout holds the separate ones' bytes (each part block-aligned; < 64 bytes of
                // alignment per buffer).
                EXPECT_GT(one.layout_bytes, 0u);
                EXPECT_LE(one.layout_bytes, two.layout_bytes);
                EXPECT_GE(one.layout_bytes + 64 * m->layers.size(), two.layout_bytes);
                // One gate/up read per token and layer, rows of both matrices' bytes; two apart.
                auto mlp_reads = [](const run& r, int64_t& row_bytes) {
                    int64_t n = 0;
                    for (const sl::weight_read& w : r.log)
                        if (w.at == sl::stage::mlp_in) {
                            ++n;
                            row_bytes = w.row_bytes;
                        }
                    return n;
                };
                int64_t joined_row = 0, apart_row = 0;
                const int64_t joined = mlp_reads(one, joined_row), split = mlp_reads(two, apart_row);
                EXPECT_EQ(joined, 6 * static_cast<int64_t>(m->layers.size()));
                EXPECT_EQ(split, 2 * joined);
                EXPECT_EQ(joined_row, 2 * apart_row);
                EXPECT_EQ(apart_row, sl::dtype_row_bytes(sl::kernels::input_major_type(lw0.w_up), lw0.w_up.rows));
            }
        }
    }
    fs::remove_all(dir);
}

// A method that claims mlp_inputs_shared but gives up fewer channels than gate: the joined layout runs
// twice (gate's channels, then up's) and must equal the separate layouts on the same masks.
TEST(GateUpLayout, UnevenMasksFallBackExactly) {
    const fs::path dir = fs::temp_directory_path() / ("sparselens_gate_up_uneven_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    sl::synthetic_params p = sl::synthetic_default_params();
    p.shape = "small";
    p.type = sl::dtype::q4_0;
    p.path = (dir / "q4_0.gguf").string();
    ASSERT_TRUE(sl::synthetic_write(p).ok());
    auto m = sl::model_load(p.path);
    ASSERT_TRUE(m.ok()) << m.message();
    sl::method_config c = sl::method_default_config();
    c.name = "dip";
    c.density = 0.3f;
    auto dip = sl::make_method(c, *m, nullptr);
    ASSERT_TRUE(dip.ok()) << dip.message();
    wrapped claims(**dip, true, true), honest(**dip, false, true);
    for (const int threads : {1, 2}) {
        const run one = decode_tokens(*m, claims, threads);
        const run two = decode_tokens(*m, honest, threads);
        ASSERT_FALSE(one.logits.empty());
        EXPECT_EQ(one.logits, two.logits);
        for (size_t l = 0; l < one.read.size(); ++l) {
            EXPECT_EQ(one.read[l].d[4], two.read[l].d[4]);  // gate
            EXPECT_EQ(one.read[l].d[5], two.read[l].d[5]);  // up: one channel fewer than gate's
            EXPECT_LT(one.read[l].d[5], one.read[l].d[4]);
        }
    }
    fs::remove_all(dir);
}

}  // namespace

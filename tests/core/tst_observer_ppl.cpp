// Activation observer contents and windowed perplexity, checked against independent recomputation.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "sparselens/core/context.h"
#include "sparselens/core/model.h"
#include "sparselens/core/perplexity.h"
#include "sparselens/core/tokenizer.h"
#include "test_support.h"

namespace {

struct recorder : sl::activation_observer {
    std::map<std::pair<int32_t, sl::probe>, std::vector<float>> data;
    std::map<std::pair<int32_t, sl::probe>, int32_t> width;
    std::vector<std::pair<int32_t, sl::probe>> order;
    void on_activation(int32_t layer, sl::probe where, int32_t pos0, int32_t n, const float* d, int32_t w) override {
        auto& v = data[{layer, where}];
        v.insert(v.end(), d, d + static_cast<size_t>(n) * w);
        width[{layer, where}] = w;
        order.emplace_back(layer, where);
    }
};

sl::model load_f32() {
    auto m = sl::model_load(sl::test::shared_path("models/stories260K_f32.bin"));
    EXPECT_TRUE(m.ok());
    return std::move(m).value();
}

TEST(Observer, ReportsEveryProbeInOrderWithConsistentValues) {
    const sl::model m = load_f32();
    auto ctx = sl::context::create(m);
    ASSERT_TRUE(ctx.ok());
    recorder rec;
    ctx->set_observer(&rec);
    const std::vector<int32_t> tokens{1, 403, 407, 261, 300, 280};
    const float* logits = ctx->prefill(tokens, 0);
    std::vector<float> observed(logits, logits + m.hp.vocab_size);

    ASSERT_EQ(rec.order.size(), static_cast<size_t>(m.hp.n_layers) * sl::probe_count);
    for (int32_t l = 0; l < m.hp.n_layers; ++l) {
        EXPECT_EQ((rec.width[{l, sl::probe::attn_in}]), m.hp.dim);
        EXPECT_EQ((rec.width[{l, sl::probe::glu}]), m.hp.hidden_dim);
        const auto& gate = rec.data[{l, sl::probe::gate_pre}];
        const auto& up = rec.data[{l, sl::probe::up_pre}];
        const auto& glu = rec.data[{l, sl::probe::glu}];
        ASSERT_EQ(glu.size(), tokens.size() * m.hp.hidden_dim);
        for (size_t i = 0; i < glu.size(); ++i) {
            const double want = gate[i] / (1.0 + std::exp(-double(gate[i]))) * up[i];
            ASSERT_NEAR(glu[i], want, 1e-5 * (1 + std::fabs(want))) << "layer " << l << " index " << i;
        }
        EXPECT_EQ((rec.data[{l, sl::probe::mlp_in}].size()), tokens.size() * m.hp.dim);
        EXPECT_EQ((rec.data[{l, sl::probe::attn_out}].size()), tokens.size() * m.hp.dim);
    }
    // Detaching gives the same logits (the observer must not perturb the computation).
    ctx->set_observer(nullptr);
    const float* plain = ctx->prefill(tokens, 0);
    for (int32_t i = 0; i < m.hp.vocab_size; ++i) ASSERT_EQ(plain[i], observed[static_cast<size_t>(i)]);
}

TEST(Perplexity, MatchesTokenByTokenRecomputation) {
    const sl::model m = load_f32();
    auto tok = sl::tokenizer::from_llama2c_file(sl::test::shared_path("models/tok512.bin"), m.hp.vocab_size);
    ASSERT_TRUE(tok.ok());
    const std::vector<uint8_t> raw = sl::test::read_bytes(sl::test::shared_path("text/tinystories_sample.txt"));
    const std::vector<int32_t> tokens = tok->encode(std::string(raw.begin(), raw.end()), true, false);
    constexpr int32_t n_ctx = 64;
    sl::context_params cp;
    cp.n_ctx = n_ctx;
    auto ctx = sl::context::create(m, cp);
    ASSERT_TRUE(ctx.ok());
    sl::perplexity_params pp;
    pp.n_ctx = n_ctx;
    pp.max_chunks = 3;
    auto r = sl::perplexity_evaluate(*ctx, tokens, pp);
    ASSERT_TRUE(r.ok()) << r.message();

    // Independent: decode each window token by token and average -log p over the second half.
    double sum = 0;
    int64_t n = 0;
    for (int32_t c = 0; c < 3; ++c) {
        for (int32_t j = 0; j < n_ctx - 1; ++j) {
            const int32_t input = j == 0 ? 1 : tokens[static_cast<size_t>(c * n_ctx + j)];
            const float* l = ctx->decode(input, j);
            if (j < n_ctx / 2) continue;
            const int32_t target = tokens[static_cast<size_t>(c * n_ctx + j + 1)];
            double mx = -1e300, s = 0;
            for (int32_t i = 0; i < m.hp.vocab_size; ++i) mx = std::max(mx, double(l[i]));
            for (int32_t i = 0; i < m.hp.vocab_size; ++i) s += std::exp(double(l[i]) - mx);
            sum += std::log(s) + mx - l[target];
            ++n;
        }
    }
    EXPECT_EQ(r->n_scored, n);
    EXPECT_NEAR(r->ppl, std::exp(sum / double(n)), 1e-4 * r->ppl);
    EXPECT_GT(r->ppl_stderr, 0.0);
    std::printf("stories260K on tinystories_sample (3 x %d): ppl %.3f +/- %.3f\n", n_ctx, r->ppl, r->ppl_stderr);
    // An in-domain story model is far better than uniform guessing over 512 tokens.
    EXPECT_LT(r->ppl, 512.0 / 4);
}

TEST(Perplexity, CancelAndShortText) {
    const sl::model m = load_f32();
    sl::context_params cp;
    cp.n_ctx = 32;
    auto ctx = sl::context::create(m, cp);
    ASSERT_TRUE(ctx.ok());
    std::vector<int32_t> tokens(200, 300);
    sl::perplexity_params pp;
    pp.n_ctx = 32;
    int calls = 0;
    pp.progress = [&](float) { return ++calls < 2; };
    auto r = sl::perplexity_evaluate(*ctx, tokens, pp);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.cancelled());
    EXPECT_EQ(calls, 2);
    pp.progress = nullptr;
    auto short_r = sl::perplexity_evaluate(*ctx, std::vector<int32_t>(10, 300), pp);
    ASSERT_FALSE(short_r.ok());
    EXPECT_FALSE(short_r.cancelled());
    EXPECT_NE(short_r.message().find("fewer than one window"), std::string::npos);
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

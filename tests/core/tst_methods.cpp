// Sparsity methods in the engine on the real model: full-density exactness, exact densities, DIP-CA.
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "sparselens/core/context.h"
#include "sparselens/core/eval.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/model.h"
#include "sparselens/core/tokenizer.h"
#include "sparselens/core/model_stats.h"
#include "sparselens/core/stage_ideal.h"
#include "stories_fixture.h"

namespace {

struct fixture {
    sl::model m;
    std::vector<int32_t> tokens;
};

const fixture& fx() {
    static const fixture f = [] {
        const sl::test::stories_model& s = sl::test::stories260k();
        fixture r;
        r.m = s.m;
        r.tokens = s.tok.encode(sl::test::shared_text("text/tinystories_sample.txt"), true, false);
        return r;
    }();
    return f;
}

// Logits of a teacher-forced run of `n` tokens with a method attached (nullptr: dense method path).
// `layouts`: the method set whose layouts the context holds (reserve_layouts).
std::vector<float> run(sl::sparsity_method* method, int32_t n, sl::residency_source* res = nullptr,
                       const sl::method_traits& layouts = {}) {
    auto ctx = sl::context::create(fx().m);
    EXPECT_TRUE(ctx.ok());
    ctx->reserve_layouts(layouts);
    ctx->set_method(method);
    ctx->set_residency(res);
    std::vector<float> all(static_cast<size_t>(n) * fx().m.hp.vocab_size);
    ctx->prefill({fx().tokens.data(), static_cast<size_t>(n)}, 0, all.data());
    return all;
}

std::unique_ptr<sl::sparsity_method> make(const std::string& name, float density, float gamma = 0.2f) {
    sl::method_config c = sl::method_default_config();
    c.name = name;
    c.density = density;
    c.gamma = gamma;
    auto r = sl::make_method(c, fx().m, nullptr);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.message());
    return std::move(r).value();
}

// One layout per matrix, chosen for the whole method set: at density 1 every method equals the dense
// method on those layouts bit for bit (the layouts replace the row-major matrices, dense tokens too).
TEST(Methods, FullDensityReproducesDenseLogitsExactly) {
    std::vector<std::unique_ptr<sl::sparsity_method>> methods;
    sl::method_traits all;
    for (const std::string& name : sl::method_names()) {
        if (sl::method_needs_calibration(name)) continue;
        methods.push_back(make(name, 1.0f, 1.0f));
        const sl::method_traits t = methods.back()->traits();
        all.attn_inputs |= t.attn_inputs;
        all.o_input |= t.o_input;
        all.mlp_inputs |= t.mlp_inputs;
        all.neurons_pre |= t.neurons_pre;
        all.neurons_post |= t.neurons_post;
        all.down_in |= t.down_in;
        all.fused |= t.fused;
    }
    auto dense = make("dense", 1.0f);
    const std::vector<float> ref = run(dense.get(), 40, nullptr, all);
    for (const auto& m : methods) EXPECT_EQ(run(m.get(), 40, nullptr, all), ref) << m->name();
    // Each method alone, on its own layouts: dense within rounding (F32 transposes are exact; only
    // the summation order of the input-major kernels differs).
    const std::vector<float> plain = run(dense.get(), 40);
    for (const auto& m : methods) {
        const std::vector<float> own = run(m.get(), 40);
        double err = 0;
        for (size_t i = 0; i < own.size(); ++i) err = std::max(err, std::fabs(double(own[i]) - plain[i]));
        EXPECT_LE(err, 2e-5) << m->name();
    }
}

TEST(Methods, DenseMethodMatchesPlainForward) {
    auto dense = make("dense", 1.0f);
    const std::vector<float> a = run(dense.get(), 40);
    const std::vector<float> b = run(nullptr, 40);
    double err = 0;
    for (size_t i = 0; i < a.size(); ++i) err = std::max(err, std::fabs(double(a[i]) - b[i]));
    EXPECT_LE(err, 2e-5);  // GEMM prefill vs per-token GEMV: rounding only
}

TEST(Methods, TopKMethodsHitTheirDensityExactly) {
    auto ctx = sl::context::create(fx().m);
    ASSERT_TRUE(ctx.ok());
    sl::eval_params ep;
    ep.n_ctx = 64;
    ep.max_windows = 2;
    auto ref = sl::eval_dense_reference(*ctx, fx().tokens, ep);
    ASSERT_TRUE(ref.ok()) << ref.message();
    const int32_t dim = fx().m.hp.dim, hidden = fx().m.hp.hidden_dim;

    sl::method_config c;
    c.name = "dip";
    c.d_in = 0.5f;
    c.d_down = 0.25f;
    auto dip = sl::make_method(c, fx().m, nullptr);
    ASSERT_TRUE(dip.ok());
    auto r = sl::eval_method(*ctx, *ref, **dip, nullptr, ep);
    ASSERT_TRUE(r.ok());
    const float want_in = float(sl::density_to_k(0.5f, dim)) / dim;
    const float want_down = float(sl::density_to_k(0.25f, hidden)) / hidden;
    for (const sl::layer_density& d : r->per_layer) {
        EXPECT_FLOAT_EQ(d.d[int(sl::proj::gate)], want_in);
        EXPECT_FLOAT_EQ(d.d[int(sl::proj::up)], want_in);
        EXPECT_FLOAT_EQ(d.d[int(sl::proj::down)], want_down);
        EXPECT_FLOAT_EQ(d.d[int(sl::proj::q)], 1.0f);
    }
    EXPECT_NEAR(r->mlp_density, (2 * want_in + want_down) / 3, 1e-6);
    EXPECT_GT(r->kld_mean, 0.0);
    EXPECT_LT(r->top1_agreement, 1.0 + 1e-12);

    // Stage times of the decoded (scored) tokens: dense never selects, DIP does; neither runs the fused
    // stage; the stages of a token add up to its forward pass, inside the timed decode call.
    const int64_t decoded = int64_t{ep.max_windows} * ref->scored_per_window();
    EXPECT_EQ(ref->stages.tokens, decoded);
    EXPECT_EQ(r->stages.tokens, decoded);
    EXPECT_EQ(r->dense_stages.tokens, decoded);
    EXPECT_EQ(r->dense_stages.total(), ref->stages.total());
    EXPECT_EQ(ref->stages.at(sl::stage::select), 0.0);
    EXPECT_GT(r->stages.at(sl::stage::select), 0.0);

    // Stage bytes: dense reads every weight; DIP reads its densities' share of gate/up and down (its
    // input-major layouts) and the rest whole; its selection reads activations only.
    double qkv = 0, o = 0, mlp_in = 0, down = 0;
    for (const sl::layer_weights& lw : fx().m.layers) {
        qkv += double(lw.wq.bytes() + lw.wk.bytes() + lw.wv.bytes());
        o += double(lw.wo.bytes());
        mlp_in += double(lw.w_gate.bytes() + lw.w_up.bytes());
        down += double(lw.w_down.bytes());
    }
    const auto at = [](const double* b, sl::stage s) { return b[int(s)]; };
    EXPECT_DOUBLE_EQ(at(r->dense_stage_bytes, sl::stage::qkv), qkv);
    EXPECT_DOUBLE_EQ(at(r->dense_stage_bytes, sl::stage::mlp_in), mlp_in);
    EXPECT_DOUBLE_EQ(at(r->dense_stage_bytes, sl::stage::down), down);
    EXPECT_DOUBLE_EQ(at(r->dense_stage_bytes, sl::stage::logits), double(fx().m.output.bytes()));
    EXPECT_NEAR(at(r->stage_bytes, sl::stage::qkv), qkv, 1e-9 * qkv);
    EXPECT_NEAR(at(r->stage_bytes, sl::stage::o), o, 1e-9 * o);
    EXPECT_NEAR(at(r->stage_bytes, sl::stage::mlp_in), want_in * mlp_in, 1e-6 * mlp_in);
    EXPECT_NEAR(at(r->stage_bytes, sl::stage::down), want_down * down, 1e-6 * down);
    EXPECT_EQ(at(r->stage_bytes, sl::stage::select), 0.0);
    EXPECT_EQ(at(r->stage_bytes, sl::stage::mlp_fused), 0.0);
    // Its ideal shrinks exactly those stages in dense's time per byte.
    double ideal[sl::stage_count];
    sl::stage_ideal_ms(r->dense_stages, r->dense_stage_bytes, r->stage_bytes, ideal);
    const auto ms = [&](sl::stage s) { return 1e3 * r->dense_stages.at(s) / double(r->dense_stages.tokens); };
    EXPECT_NEAR(ideal[int(sl::stage::mlp_in)], want_in * ms(sl::stage::mlp_in), 1e-6 * ms(sl::stage::mlp_in));
    EXPECT_NEAR(ideal[int(sl::stage::down)], want_down * ms(sl::stage::down), 1e-6 * ms(sl::stage::down));
    EXPECT_NEAR(ideal[int(sl::stage::attention)], ms(sl::stage::attention), 1e-12);
    EXPECT_EQ(ideal[int(sl::stage::select)], 0.0);
    for (const sl::stage_times* st : {&ref->stages, &r->stages}) {
        for (sl::stage s : {sl::stage::qkv, sl::stage::attention, sl::stage::o, sl::stage::mlp_in, sl::stage::glu,
                            sl::stage::down, sl::stage::logits, sl::stage::other})
            EXPECT_GT(st->at(s), 0.0) << sl::stage_name(s);
        EXPECT_EQ(st->at(sl::stage::mlp_fused), 0.0);
        EXPECT_EQ(st->at(sl::stage::fetch), 0.0);
    }
    double window_s = 0;
    for (double w : ref->window_seconds) window_s += w;
    EXPECT_LE(ref->stages.total(), window_s);
    EXPECT_STREQ(sl::stage_name(sl::stage::mlp_fused), "mlp_fused");
    EXPECT_STREQ(sl::stage_name(static_cast<sl::stage>(sl::stage_count)), "?");

    for (const char* name : {"glu", "gate", "up"}) {
        auto m = make(name, 0.8f);
        auto e = sl::eval_method(*ctx, *ref, *m, nullptr, ep);
        ASSERT_TRUE(e.ok());
        // The MLP density is set through k = round(keep * hidden): within one neuron of the target.
        EXPECT_NEAR(e->mlp_density, 0.8, 1.0 / hidden) << name;
        std::printf("%-5s at 80%% MLP density: ppl %.3f (dense %.3f), KL %.4f, top-1 %.1f%%\n", name, e->ppl,
                    e->ppl_dense, e->kld_mean, 100 * e->top1_agreement);
    }
}

TEST(Methods, AccuracyDegradesMonotonicallyWithDensity) {
    auto ctx = sl::context::create(fx().m);
    ASSERT_TRUE(ctx.ok());
    sl::eval_params ep;
    ep.n_ctx = 64;
    ep.max_windows = 3;
    auto ref = sl::eval_dense_reference(*ctx, fx().tokens, ep);
    ASSERT_TRUE(ref.ok());
    double prev_kl = -1;
    for (float d : {0.9f, 0.6f, 0.3f}) {
        auto m = make("dip", d);
        auto e = sl::eval_method(*ctx, *ref, *m, nullptr, ep);
        ASSERT_TRUE(e.ok());
        std::printf("dip at %.0f%%: ppl %.3f (dense %.3f), KL %.4f\n", 100 * d, e->ppl, e->ppl_dense, e->kld_mean);
        EXPECT_GT(e->kld_mean, prev_kl);
        prev_kl = e->kld_mean;
    }
}

TEST(Methods, DipCaWithGammaOneEqualsDipAndLowGammaFavoursCache) {
    sl::lfu_residency cache(fx().m.hp.n_layers, fx().m.hp.dim, fx().m.hp.hidden_dim, 0.5f);
    auto dip = make("dip", 0.5f);
    auto ca1 = make("dip-ca", 0.5f, 1.0f);
    EXPECT_EQ(run(dip.get(), 48), run(ca1.get(), 48, &cache));

    // With gamma < 1 the masks move toward resident units: the stand-in cache hit rate rises.
    auto hit_rate = [&](float gamma) {
        sl::lfu_residency c(fx().m.hp.n_layers, fx().m.hp.dim, fx().m.hp.hidden_dim, 0.5f);
        auto m = make("dip-ca", 0.5f, gamma);
        run(m.get(), 96, &c);
        return double(c.hits()) / double(c.hits() + c.misses());
    };
    const double h1 = hit_rate(1.0f), h02 = hit_rate(0.2f);
    std::printf("LFU stand-in hit rate at 50%% density: gamma 1 -> %.3f, gamma 0.2 -> %.3f\n", h1, h02);
    EXPECT_GT(h02, h1);
}

// A residency source's bookkeeping (the GUI's device simulator, DIP-CA's stand-in cache) is not the
// engine's work: the context times it apart (residency_seconds) and eval's decode speed, which is set
// against a dense reference run without one, leaves it out. Here a source that spins 2 ms per layer
// and token: counted in, it would make every decoded token take over 10 ms; the model takes ~0.1 ms.
TEST(Methods, EvalDecodeTimeLeavesOutTheResidencySource) {
    struct slow_cache final : sl::residency_source {
        sl::lfu_residency inner{fx().m.hp.n_layers, fx().m.hp.dim, fx().m.hp.hidden_dim, 0.5f};
        const uint8_t* resident_inputs(int32_t l) const override { return inner.resident_inputs(l); }
        const uint8_t* resident_neurons(int32_t l) const override { return inner.resident_neurons(l); }
        void on_token(int32_t layer, int32_t pos, const sl::layer_masks& m) override {
            inner.on_token(layer, pos, m);
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
            while (std::chrono::steady_clock::now() < until) {
            }
        }
        void reset() override { inner.reset(); }
    } cache;
    auto ctx = sl::context::create(fx().m);
    ASSERT_TRUE(ctx.ok());
    sl::eval_params ep = sl::eval_default_params();
    ep.n_ctx = 16;
    ep.max_windows = 2;
    auto ref = sl::eval_dense_reference(*ctx, fx().tokens, ep);
    ASSERT_TRUE(ref.ok()) << ref.message();
    auto m = make("dip-ca", 0.5f);
    const double before = ctx->residency_seconds();
    auto e = sl::eval_method(*ctx, *ref, *m, &cache, ep);
    ASSERT_TRUE(e.ok()) << e.message();
    const double spent = ctx->residency_seconds() - before;
    const int64_t decoded = e->n_scored;
    ASSERT_GT(decoded, 0);
    EXPECT_GE(spent, 0.002 * static_cast<double>(decoded * fx().m.hp.n_layers));
    const double decode_seconds = static_cast<double>(decoded) / e->decode_tokens_per_second;
    EXPECT_LT(decode_seconds, 0.25 * spent) << "decode " << decode_seconds << " s, the source's " << spent << " s";
}

// The issue-12 memory metric: a layout replaces the matrix it transposes, so with a mapped file (whose
// replaced pages are handed back) an F32 model's weights stay resident once; read into memory, nothing
// can be handed back and the layouts come on top; a fused method adds its compact buffers, and a fixed
// fused set (GRIFFIN) hands back gate/up between prompts.
TEST(Methods, ResidentWeightBytesCountLayoutsInAndReplacedMatricesOut) {
    for (bool mapped : {true, false}) {
        sl::model_load_params lp = sl::model_default_load_params();
        lp.use_mmap = mapped;
        auto m = sl::model_load(sl::test::shared_path("models/stories260K_f32.bin"), lp);
        ASSERT_TRUE(m.ok()) << m.message();
        const uint64_t weights = sl::model_count_bytes(*m).total();
        auto ctx = sl::context::create(*m);
        ASSERT_TRUE(ctx.ok());
        EXPECT_EQ(ctx->resident_weight_bytes(), weights);
        sl::method_config c = sl::method_default_config();
        c.name = "dip";
        c.density = 0.5f;
        auto dip = sl::make_method(c, *m, nullptr);
        ASSERT_TRUE(dip.ok()) << dip.message();
        ctx->set_method(dip->get());
        ASSERT_GT(ctx->layout_bytes(), 0u);
        // DIP lays out all three MLP matrices (F32: as many bytes, plus each buffer's alignment slack).
        const uint64_t mlp = sl::model_count_bytes(*m).mlp;
        EXPECT_EQ(ctx->resident_weight_bytes(), (mapped ? weights - mlp : weights) + ctx->layout_bytes()) << mapped;
        EXPECT_LE(ctx->layout_bytes(), mlp + 64 * 3 * m->layers.size());
        c.name = "griffin";
        auto griffin = sl::make_method(c, *m, nullptr);
        ASSERT_TRUE(griffin.ok()) << griffin.message();
        ctx->set_method(griffin->get());
        std::vector<float> logits(static_cast<size_t>(m->hp.vocab_size) * 8);
        ctx->prefill({fx().tokens.data(), 8}, 0, logits.data());
        for (int32_t p = 8; p < 11; ++p) ctx->decode(fx().tokens[static_cast<size_t>(p)], p);
        const uint64_t compact = ctx->fused_stats().memory_bytes;
        EXPECT_GT(compact, 0u);
        // GRIFFIN keeps gate/up rows for its prompts and replaces down with its F32 layout; once the
        // experts are copied (fixed until the next prompt) the gate/up pages are handed back too.
        EXPECT_EQ(ctx->resident_weight_bytes(), (mapped ? weights - mlp : weights) + ctx->layout_bytes() + compact)
            << mapped;
        // The next prompt reads gate/up densely again and drops the old copy.
        const uint64_t down = static_cast<uint64_t>(m->layers.size()) * m->hp.dim * m->hp.hidden_dim * 4;
        ctx->prefill({fx().tokens.data() + 11, 4}, 11, logits.data());
        EXPECT_EQ(ctx->fused_stats().memory_bytes, 0u);
        EXPECT_EQ(ctx->resident_weight_bytes(), (mapped ? weights - down : weights) + ctx->layout_bytes()) << mapped;
        ctx->decode(fx().tokens[15], 15);
        EXPECT_GT(ctx->fused_stats().memory_bytes, 0u);
        ctx->set_method(nullptr);
        EXPECT_EQ(ctx->resident_weight_bytes(), weights);
    }
}

// context_params::keep_replaced (bench's side-by-side timing): nothing is handed back, neither the
// matrices a layout replaces nor GRIFFIN's gate/up, and the tokens are the same as with release.
TEST(Methods, KeepReplacedHandsNothingBackAndComputesTheSame) {
    auto m = sl::model_load(sl::test::shared_path("models/stories260K_f32.bin"));
    ASSERT_TRUE(m.ok()) << m.message();
    const uint64_t weights = sl::model_count_bytes(*m).total();
    for (const char* name : {"dip", "griffin"}) {
        sl::method_config c = sl::method_default_config();
        c.name = name;
        c.density = 0.5f;
        std::vector<float> out[2];
        for (bool keep : {false, true}) {
            sl::context_params cp = sl::context_default_params();
            cp.keep_replaced = keep;
            auto ctx = sl::context::create(*m, cp);
            ASSERT_TRUE(ctx.ok());
            auto method = sl::make_method(c, *m, nullptr);
            ASSERT_TRUE(method.ok()) << method.message();
            ctx->set_method(method->get());
            std::vector<float>& logits = out[keep];
            logits.resize(static_cast<size_t>(m->hp.vocab_size) * 8);
            ctx->prefill({fx().tokens.data(), 8}, 0, logits.data());
            for (int32_t p = 8; p < 11; ++p) {
                const float* l = ctx->decode(fx().tokens[static_cast<size_t>(p)], p);
                logits.insert(logits.end(), l, l + m->hp.vocab_size);
            }
            const uint64_t held = weights + ctx->layout_bytes() + ctx->fused_stats().memory_bytes;
            if (keep)
                EXPECT_EQ(ctx->resident_weight_bytes(), held) << name;
            else
                EXPECT_LT(ctx->resident_weight_bytes(), held) << name;  // the mapped file's pages went
        }
        EXPECT_EQ(out[0], out[1]) << name;
    }
}

TEST(Methods, FactoryErrors) {
    sl::method_config c;
    c.name = "no-such-method";
    auto r = sl::make_method(c, fx().m, nullptr);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find("unknown sparsity method"), std::string::npos);
    c.name = "dip";
    c.density = 1.5f;
    EXPECT_FALSE(sl::make_method(c, fx().m, nullptr).ok());
    c.name = "dip-ca";
    c.density = 0.5f;
    c.gamma = -1.0f;
    EXPECT_FALSE(sl::make_method(c, fx().m, nullptr).ok());
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

// One set of knobs over several methods (GUI sweeps, `tune --pin`): each method keeps what it reads,
// the rest go back to their defaults, so a run records what ran and TEAL is not handed a pin it refuses.
TEST(Methods, ConfigForKeepsOnlyTheKnobsAMethodReads) {
    sl::method_config k = sl::method_default_config();
    k.density = 0.5f;
    k.d_in = 0.4f;
    k.d_down = 0.7f;
    k.gamma = 0.6f;
    k.pin_fraction = 0.1f;
    k.attn_density = 0.5f;
    k.rank = 7;
    k.ffsplit_heavy = 0.3f;
    k.ffsplit_mode = "q4";
    const sl::method_config def = sl::method_default_config();
    const sl::method_config chess = sl::method_config_for(k, "chess-attn");
    EXPECT_EQ(chess.name, "chess-attn");
    EXPECT_EQ(chess.density, 0.5f);
    EXPECT_EQ(chess.pin_fraction, 0.1f);
    EXPECT_EQ(chess.attn_density, 0.5f);
    EXPECT_EQ(chess.d_in, def.d_in);
    EXPECT_EQ(chess.gamma, def.gamma);
    EXPECT_EQ(chess.rank, def.rank);
    EXPECT_EQ(chess.ffsplit_mode, def.ffsplit_mode);
    EXPECT_EQ(sl::method_knobs_text(chess), "pin 10%, attention 50%");
    const sl::method_config teal = sl::method_config_for(k, "teal");
    EXPECT_EQ(teal.pin_fraction, 0.0f);
    EXPECT_EQ(teal.attn_density, 0.5f);
    EXPECT_EQ(sl::method_knobs_text(teal), "attention 50%");
    const sl::method_config dipca = sl::method_config_for(k, "dip-ca");
    EXPECT_EQ(dipca.d_in, 0.4f);
    EXPECT_EQ(dipca.gamma, 0.6f);
    EXPECT_EQ(dipca.attn_density, 1.0f);
    const sl::method_config ff = sl::method_config_for(k, "ffsplit");
    EXPECT_EQ(ff.rank, 7);
    EXPECT_EQ(ff.ffsplit_mode, "q4");
    EXPECT_EQ(ff.pin_fraction, 0.0f);
    const sl::method_config dense = sl::method_config_for(k, "dense");
    EXPECT_EQ(dense, [&] {
        sl::method_config d = def;
        d.name = "dense";
        return d;
    }());
    EXPECT_EQ(sl::method_knobs_text(dense), "");
}

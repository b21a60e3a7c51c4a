// The simulator in lockstep with the real engine on stories260K (label model): DIP-CA reads the simulated
// cache through sim_residency. Checks that DIP-CA at gamma 1 produces DIP's trace, that lowering gamma
// raises the hit rate (printed), and that Belady beats every policy on these real traces.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "sparselens/core/context.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/tokenizer.h"
#include "sparselens/sim/residency.h"
#include "test_support.h"

namespace {

using namespace sl::sim;

struct fixture {
    sl::model m;
    std::vector<int32_t> tokens;
};

const fixture& fx() {
    static const fixture f = [] {
        fixture x;
        x.m = sl::model_load(sl::test::shared_path("models/stories260K_f32.bin")).value();
        const auto tok =
            sl::tokenizer::from_llama2c_file(sl::test::shared_path("models/tok512.bin"), x.m.hp.vocab_size);
        std::ifstream in(sl::test::shared_path("text/tinystories_sample.txt"));
        std::stringstream ss;
        ss << in.rdbuf();
        x.tokens = tok->encode(ss.str().substr(0, 1200), true, false);
        if (x.tokens.size() > 256) x.tokens.resize(256);
        return x;
    }();
    return f;
}

sim_params params_for(const model_shape& s, const mlp_layout& l, double cache_fraction, cache_policy pol) {
    sim_params p = sim_default_params();
    p.quant = quant_default(8);
    p.context_tokens = 256;
    p.policy = pol;
    const auto mm = memory_map_build(s, p.quant, l, p.context_tokens).value();
    p.device.dram_bytes = mm.resident_bytes() + static_cast<uint64_t>(cache_fraction * double(mm.mlp_dynamic_bytes));
    return p;
}

struct run_result {
    trace t;
    double hit_rate = 0, tokens_per_s = 0;
};

// Runs the prompt through the engine with `method` while the simulator keeps the cache state.
run_result run_method(const std::string& method, float gamma, float density, double cache_fraction) {
    const fixture& f = fx();
    const model_shape shape = shape_from_model(f.m);
    const mlp_layout layout = layout_parse("dip").value();
    sl::method_config cfg = sl::method_default_config();
    cfg.name = method;
    cfg.density = density;
    cfg.gamma = gamma;
    auto meth = sl::make_method(cfg, f.m, nullptr);
    EXPECT_TRUE(meth.ok()) << meth.message();
    auto res = sim_residency::create(shape, layout, params_for(shape, layout, cache_fraction, cache_policy::lfu));
    EXPECT_TRUE(res.ok()) << res.message();
    run_result r;
    r.t = trace_create(shape, layout, method).value();
    (*res)->record(&r.t);
    sl::context_params cp = sl::context_default_params();
    cp.n_threads = 1;
    auto ctx = sl::context::create(f.m, cp);
    EXPECT_TRUE(ctx.ok());
    ctx->set_method(meth->get());
    ctx->set_residency(res->get());
    ctx->prefill(f.tokens, 0);
    EXPECT_EQ((*res)->last_error(), "");
    const run_report rep = (*res)->sim().report();
    r.hit_rate = rep.hit_rate;
    r.tokens_per_s = rep.tokens_per_s;
    return r;
}

TEST(SimEngine, DipCaAtGammaOneIsDip) {
    const run_result dip = run_method("dip", 1.0f, 0.5f, 0.3);
    const run_result ca1 = run_method("dip-ca", 1.0f, 0.5f, 0.3);
    ASSERT_EQ(dip.t.n_tokens, fx().tokens.size());
    EXPECT_EQ(dip.t.ids, ca1.t.ids);
    EXPECT_EQ(dip.t.offsets, ca1.t.offsets);
    EXPECT_DOUBLE_EQ(dip.hit_rate, ca1.hit_rate);
    // The recorded trace replays to the same figures as the lockstep run.
    const model_shape shape = shape_from_model(fx().m);
    const run_report rep = replay(dip.t, params_for(shape, dip.t.layout, 0.3, cache_policy::lfu)).value();
    EXPECT_DOUBLE_EQ(rep.hit_rate, dip.hit_rate);
    EXPECT_DOUBLE_EQ(rep.tokens_per_s, dip.tokens_per_s);
}

TEST(SimEngine, LowerGammaRaisesTheHitRate) {
    std::printf("stories260K, DIP-CA density 0.5, LFU, caches = 30%% of the MLP, %zu tokens:\n", fx().tokens.size());
    double prev = -1, at_one = 0, at_02 = 0;
    for (float gamma : {1.0f, 0.5f, 0.2f, 0.1f, 0.0f}) {
        const run_result r = run_method("dip-ca", gamma, 0.5f, 0.3);
        std::printf("  gamma %.1f: hit rate %.4f, %.1f simulated tokens/s\n", gamma, r.hit_rate, r.tokens_per_s);
        if (gamma == 1.0f) at_one = r.hit_rate;
        if (gamma == 0.2f) at_02 = r.hit_rate;
        EXPECT_GE(r.hit_rate, prev - 0.01) << "gamma " << gamma;  // essentially monotone
        prev = r.hit_rate;
    }
    EXPECT_GT(at_02, at_one + 0.02);
}

TEST(SimEngine, BeladyBeatsEveryPolicyOnRealTraces) {
    const model_shape shape = shape_from_model(fx().m);
    for (const char* method : {"dip", "dip-ca"}) {
        const run_result r = run_method(method, 0.2f, 0.4f, 0.3);
        for (double frac : {0.05, 0.2, 0.4, 0.7}) {
            sim_params opt = params_for(shape, r.t.layout, frac, cache_policy::belady);
            const double best = replay(r.t, opt).value().hit_rate;
            for (cache_policy pol : {cache_policy::none, cache_policy::lru, cache_policy::lfu, cache_policy::window}) {
                const double h = replay(r.t, params_for(shape, r.t.layout, frac, pol)).value().hit_rate;
                EXPECT_GE(best, h) << method << " " << cache_policy_name(pol) << " cache " << frac;
            }
        }
    }
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

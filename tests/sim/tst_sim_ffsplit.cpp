// FFSplit in the simulator on stories260K: its exact heavy neurons and its compressed light part are two
// unit groups whose bytes are those of the split the engine executes (label model).
#include <cstdio>
#include <string>
#include <vector>

#include "sparselens/core/context.h"
#include "sparselens/core/ffsplit.h"
#include "sparselens/core/methods.h"
#include "sparselens/sim/residency.h"
#include "sparselens/sim/trace.h"
#include "sparselens/sim/tuner.h"
#include "stories_fixture.h"

namespace {

using sl::test::ffsplit_config;

using namespace sl::sim;

const sl::model& model() { return sl::test::stories260k().m; }

const sl::calibration& calib() {
    static const sl::calibration c = [] {
        const sl::tokenizer& tok = sl::test::stories260k().tok;
        const std::string raw = sl::test::shared_text("text/stories260K_samples.txt");
        return sl::test::stories_calibration(tok.encode(raw.substr(0, 12000), true, false), 128, 2048);
    }();
    return c;
}

// What the engine's split holds per layer (the bytes a token reads), summed over layers.
uint64_t engine_split_bytes(const sl::sparsity_method& m) {
    uint64_t b = 0;
    for (int32_t l = 0; l < model().hp.n_layers; ++l)
        for (uint64_t x : m.split_layer(l)->split_bytes) b += x;
    return b;
}

// The model is F32: at 32 bits per weight without scales the simulator's bytes are the engine's.
sim_params f32_params(const memory_map& mm) {
    sim_params p = sim_default_params();
    p.quant = quant_default(32);
    p.context_tokens = 64;
    p.policy = cache_policy::none;  // every unit read from flash every token: the per-token MLP bytes
    p.device.flash_page_bytes = 1;
    p.device.dram_bytes = mm.resident_bytes() + 1;
    return p;
}

struct simulated {
    mlp_layout layout;
    memory_map map;
    run_report report;
};

simulated simulate(const sl::method_config& c) {
    simulated out;
    auto method = sl::make_method(c, model(), &calib());
    EXPECT_TRUE(method.ok()) << method.message();
    const model_shape shape = shape_from_model(model());
    auto name = method_layout_of(c.name, **method, shape.n_layers);
    EXPECT_TRUE(name.ok()) << name.message();
    out.layout = layout_parse(*name).value();
    out.map = memory_map_build(shape, quant_default(32), out.layout, 64).value();
    auto res = sim_residency::create(shape, out.layout, f32_params(out.map));
    EXPECT_TRUE(res.ok()) << res.message();
    sl::context_params cp = sl::context_default_params();
    cp.n_threads = 1;
    cp.n_ctx = 64;
    auto ctx = sl::context::create(model(), cp);
    ctx->set_method(method->get());
    ctx->set_residency(res->get());
    const std::vector<int32_t> toks = sl::test::stories260k().tok.encode("Once upon a time there was a cat", true, false);
    ctx->prefill(toks, 0);
    EXPECT_EQ((*res)->last_error(), "");
    out.report = (*res)->sim().report();
    const uint64_t split = engine_split_bytes(**method);
    EXPECT_EQ(out.map.mlp_dynamic_bytes, split) << *name;
    EXPECT_EQ(out.map.mlp_static_bytes, 0u) << *name;
    // Both parts of every layer stream from flash for every token, nothing else does.
    EXPECT_EQ(out.report.flash_bytes_per_token, static_cast<double>(split)) << *name;
    EXPECT_EQ(out.report.dram_bytes_per_token, static_cast<double>(out.map.per_token_static_read_bytes())) << *name;
    const uint64_t dense = memory_map_build(shape, quant_default(32), layout_parse("bundle").value(), 64)->mlp_dynamic_bytes;
    EXPECT_LT(split, dense) << *name;
    std::printf("%-24s MLP bytes per token %llu of dense %llu, %.0f tok/s\n", name->c_str(),
                static_cast<unsigned long long>(split), static_cast<unsigned long long>(dense), out.report.tokens_per_s);
    return out;
}

TEST(SimFfsplit, SvdPartsHaveTheEngineBytes) {
    const simulated s = simulate(ffsplit_config("svd", 0.1f, 0.5f, 0));
    ASSERT_EQ(s.layout.groups.size(), 2u);
    EXPECT_EQ(s.layout.groups[0], unit_kind::split_heavy);
    EXPECT_EQ(s.layout.groups[1], unit_kind::split_light);
    EXPECT_FALSE(s.layout.split.q4);
    EXPECT_GT(s.layout.split.rank, 0);
    // Heavy units are neuron bundles: 3 rows of dim F32 weights each.
    EXPECT_EQ(s.map.groups[0].unit_bytes, 3u * 4u * static_cast<uint64_t>(model().hp.dim));
    EXPECT_EQ(s.map.groups[1].units_per_layer, 1u);
}

TEST(SimFfsplit, FixedRankAndQ4PartsHaveTheEngineBytes) {
    const simulated r = simulate(ffsplit_config("svd", 0.2f, 0.5f, 4));
    EXPECT_EQ(r.layout.split.rank, 4);
    const simulated q = simulate(ffsplit_config("q4", 0.1f, 0.5f, 0));
    EXPECT_TRUE(q.layout.split.q4);
    // The light part is Q4_0 whatever the map's bit width: 18 bytes per 32 weights of 3 matrices.
    const uint64_t light = static_cast<uint64_t>(model().hp.hidden_dim - q.layout.split.heavy);
    EXPECT_EQ(q.map.groups[1].unit_bytes, 3u * light * static_cast<uint64_t>(model().hp.dim) / 32u * 18u);
}

TEST(SimFfsplit, AllLightNoHeavyIsOneGroup) {
    const simulated s = simulate(ffsplit_config("svd", 0.0f, 0.3f, 0));
    ASSERT_EQ(s.layout.groups.size(), 1u);
    EXPECT_EQ(s.layout.groups[0], unit_kind::split_light);
}

TEST(SimFfsplit, TraceFilesRefuseSplitLayouts) {
    const mlp_layout l = layout_parse("ffsplit:17:svd:6").value();
    trace t = trace_create(shape_from_model(model()), l, "ffsplit").value();
    const std::string path = "/tmp/sl_tst_sim_ffsplit_" + std::to_string(::getpid()) + ".sltrace";
    const sl::outcome o = trace_write(path, t);
    ASSERT_FALSE(o.ok());
    EXPECT_NE(o.message().find("cannot hold the split layout ffsplit:17:svd:6"), std::string::npos) << o.message();
    std::remove(path.c_str());
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

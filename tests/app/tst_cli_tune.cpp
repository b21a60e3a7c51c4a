// `sparselens tune` end to end on stories260K: calibrate → tune (small grid) → --export → `eval --config`
// reproduces the tuned accuracy and `run --config` generates the same greedy tokens as the API with the
// tuned method; --session records every evaluation and the export, and `session export` of a tuner run gives
// the config --export wrote (pinning included, which needs a calibration even for DIP).
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "sparselens/core/calibration.h"
#include "sparselens/core/context.h"
#include "sparselens/core/generate.h"
#include "sparselens/core/methods.h"
#include "sparselens/sessions/session_store.h"
#include "sparselens/sim/residency.h"
#include "sparselens/sim/shape.h"
#include "sparselens/sim/tuner.h"
#include "stories_fixture.h"

namespace {

using sl::test::q;
using sl::test::run_cli;
using sl::test::run_result;

struct temp_dir {
    std::filesystem::path p;
    temp_dir() {
        p = std::filesystem::temp_directory_path() / ("sl_tune_" + std::to_string(::getpid()));
        std::filesystem::create_directories(p);
    }
    ~temp_dir() { std::filesystem::remove_all(p); }
    std::string operator/(const std::string& name) const { return (p / name).string(); }
};

const std::string model = q("models/stories260K_f32.bin") + " -z " + q("models/tok512.bin");
const std::string text = q("text/stories260K_samples.txt");
// The MLP does not fit: 480 KB of DRAM at 8 bits with a 512-token KV cache (docs/simulator.md), byte-exact
// flash reads so that these tiny units are not dominated by 4 KB pages.
const std::string device = " --device a18 --dram 480KB --bits 8 --context 512 --page 0 --threads 1";

// `tune` with a calibration of the text's first 2048 tokens (made first) and `args`.
run_result calibrate_and_tune(const std::string& calib, const std::string& args) {
    const run_result c =
        run_cli("calibrate " + model + " " + text + " --max-tokens 2048 --threads 1 --json --out '" + calib + "'");
    if (c.code != 0) return c;
    return run_cli("tune " + model + " " + text + " --calib '" + calib + "'" + device + args + " --json");
}

TEST(CliTune, CalibrateTuneExportEvalAndRunAgree) {
    temp_dir dir;
    const std::string calib = dir / "s.calib", cfg = dir / "tuned.json", session = dir / "s.slsession";
    run_result r = calibrate_and_tune(calib,
                " --methods dip,cats --densities 0.6,0.8 --windows 4 --coarse-windows 2 --refine-steps 2 --dip-splits 2"
                " --budget ppl+0.5 --budget 'kld<0.05' --export '" + cfg + "' --session '" + session + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["offset"], 2048) << "the eval text must start after the calibration's tokens";
    ASSERT_EQ(j["budgets"].size(), 2u);
    EXPECT_EQ(j["budgets"][0]["budget"], "ppl+0.5");
    const auto& cands = j["candidates"];
    ASSERT_FALSE(j["budgets"][0]["recommended"].is_null()) << "nothing beat dense within ppl+0.5";
    const auto& rec = cands[j["budgets"][0]["recommended"].get<size_t>()];
    EXPECT_LE(rec["ppl"].get<double>(), j["ppl_dense"].get<double>() + 0.5);
    EXPECT_GT(rec["objective"].get<double>(), j["dense"]["objective"].get<double>());
    EXPECT_TRUE(rec["full"].get<bool>());
    EXPECT_EQ(rec["windows"], 4);

    // The export re-measured the config as `eval --config` does and found what the tuner saw.
    const auto& ex = j["export"];
    EXPECT_EQ(ex["path"], cfg);
    EXPECT_EQ(ex["measured"]["ppl"].get<double>(), rec["ppl"].get<double>());
    EXPECT_EQ(ex["measured"]["kld_mean"].get<double>(), rec["kld_mean"].get<double>());

    r = run_cli("eval " + model + " " + text + " --config '" + cfg + "' --threads 1 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto e = nlohmann::json::parse(r.out);
    EXPECT_EQ(e["method"], rec["method"]);
    EXPECT_EQ(e["ppl"].get<double>(), rec["ppl"].get<double>());
    EXPECT_EQ(e["kld_mean"].get<double>(), rec["kld_mean"].get<double>());
    EXPECT_EQ(e["top1_agreement"].get<double>(), rec["top1_agreement"].get<double>());
    EXPECT_EQ(e["mlp_density"].get<double>(), rec["mlp_density"].get<double>());

    // `run --config` against the API with the tuned method (and the device cache DIP-CA would read).
    const int steps = 40;
    r = run_cli("run " + model + " --config '" + cfg + "' --prompt 'Once upon a time' --temp 0 --steps " +
                std::to_string(steps) + " --threads 1 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto run = nlohmann::json::parse(r.out);
    const std::vector<int32_t> cli_tokens = run["tokens"].get<std::vector<int32_t>>();

    const auto& s = sl::test::stories260k();
    sl::method_config mc = sl::method_default_config();
    mc.name = rec["method"].get<std::string>();
    mc.density = rec["density_target"].get<float>();
    mc.d_in = rec["d_in"].get<float>();
    mc.d_down = rec["d_down"].get<float>();
    mc.gamma = rec["gamma"].get<float>();
    auto cal = sl::calibration_load(calib);
    ASSERT_TRUE(cal.ok()) << cal.message();
    auto method = sl::make_method(mc, s.m, &*cal);
    ASSERT_TRUE(method.ok()) << method.message();
    sl::sim::sim_params sp = sl::sim::sim_default_params();
    auto dev = sl::sim::device_find("a18");
    ASSERT_TRUE(dev.ok());
    sp.device = *dev;
    sp.device.dram_bytes = 480000;
    sp.device.flash_page_bytes = 0;
    sp.quant = sl::sim::quant_default(8);
    sp.context_tokens = 512;
    ASSERT_TRUE(sl::sim::cache_policy_parse(rec["policy"].get<std::string>(), sp.policy));
    auto layout = sl::sim::layout_parse(sl::sim::method_layout(mc.name));
    ASSERT_TRUE(layout.ok());
    auto cache = sl::sim::sim_residency::create(sl::sim::shape_from_model(s.m), *layout, sp);
    ASSERT_TRUE(cache.ok()) << cache.message();
    sl::context_params cp = sl::context_default_params();
    cp.n_threads = 1;
    auto ctx = sl::context::create(s.m, cp);
    ASSERT_TRUE(ctx.ok());
    ctx->set_method(method->get());
    ctx->set_residency(cache->get());
    sl::generate_params gp = sl::generate_default_params();
    gp.steps = steps;
    gp.sampling.temperature = 0.0f;
    gp.bos_id = s.tok.bos_id();
    const std::vector<int32_t> prompt = s.tok.encode("Once upon a time", true, false);
    auto g = sl::generate(*ctx, prompt, gp, [](const sl::generate_step&) { return true; });
    ASSERT_TRUE(g.ok()) << g.message();
    EXPECT_EQ(cli_tokens, g->tokens);

    // Every evaluation is a run of the session (dense + candidates), and the export points at one of them.
    auto store = sl::sessions::session_store::open(session, true);
    ASSERT_TRUE(store.ok()) << store.message();
    auto runs = store->runs();
    ASSERT_TRUE(runs.ok()) << runs.message();
    EXPECT_EQ(static_cast<int64_t>(runs->size()), j["evaluations"].get<int64_t>());
    auto exports = store->exports();
    ASSERT_TRUE(exports.ok());
    ASSERT_EQ(exports->size(), 1u);
    auto exported_run = store->run((*exports)[0].run_id);
    ASSERT_TRUE(exported_run.ok());
    EXPECT_EQ(exported_run->method, rec["method"].get<std::string>());
    EXPECT_EQ(exported_run->ppl, rec["ppl"].get<double>());
}

// A tune with --pin on a method that needs no calibration of its own (DIP): the pinning does, so the export
// carries a sidecar. With --session, `session export` of the recommended run gives the same method, device
// and simulator setting as --export, and `eval --config` reproduces the run's accuracy exactly.
TEST(CliTune, PinnedSessionRunsExportLikeTheTuner) {
    temp_dir dir;
    const std::string calib = dir / "s.calib", cfg = dir / "pinned.json", session = dir / "p.slsession",
                      from_session = dir / "from-session.json";
    run_result r = calibrate_and_tune(calib,
                " --methods dip --pin 0.05 --densities 0.6,0.8 --windows 3 --coarse-windows 3 --refine-steps 1"
                " --dip-splits 0 --budget ppl+0.5 --export '" + cfg + "' --session '" + session + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_FALSE(j["budgets"][0]["recommended"].is_null()) << "nothing beat dense within ppl+0.5";
    EXPECT_TRUE(std::filesystem::exists(dir / "pinned.calib")) << "the pinned neurons come from the calibration";
    EXPECT_EQ(j["session"]["path"], session);

    auto store = sl::sessions::session_store::open(session, true);
    ASSERT_TRUE(store.ok()) << store.message();
    auto exports = store->exports();
    ASSERT_TRUE(exports.ok());
    ASSERT_EQ(exports->size(), 1u);
    const int64_t run_id = (*exports)[0].run_id;
    EXPECT_TRUE(store->run(run_id)->calibration_id.has_value());

    r = run_cli("session export '" + session + "' " + std::to_string(run_id) + " --out '" + from_session + "' --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto read_json = [](const std::string& path) {
        std::ifstream f(path);
        return nlohmann::json::parse(f);
    };
    const auto tuned = read_json(cfg), exported = read_json(from_session);
    EXPECT_EQ(exported["method"], tuned["method"]);
    EXPECT_EQ(exported["device"], tuned["device"]);
    EXPECT_EQ(exported["simulation"], tuned["simulation"]);
    EXPECT_EQ(exported["per_layer"], tuned["per_layer"]);
    EXPECT_FALSE(exported["calibration"].is_null());

    r = run_cli("eval " + model + " " + text + " --config '" + from_session + "' --threads 1 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto e = nlohmann::json::parse(r.out);
    for (const char* k : {"ppl", "ppl_dense", "kld_mean", "kld_p99", "top1_agreement", "mlp_density", "attn_density"})
        EXPECT_EQ(e["drift"][k].get<double>(), 0.0) << k;
}

TEST(CliTune, ErrorsAreOneLine) {
    for (const std::string& args : {std::string(" --budget 'ppl-0.2'"), std::string(" --objective fast"),
                                    std::string(" --policy belady"), std::string(" --grid huge")}) {
        const run_result r = run_cli("tune " + model + " " + text + " --methods dip" + args);
        EXPECT_EQ(r.code, 2) << args;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

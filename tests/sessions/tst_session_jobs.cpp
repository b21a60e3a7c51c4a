// Session jobs (sessions/jobs.h) on stories260K and a temporary session: recording an evaluation, export ->
// import round trip and the mismatched-model error, an in-memory calibration saved beside the session, the
// whole simulator setting exported, tune and sweep recorded as sweeps (and cancelled), Save As while the
// source stays open, and the request parsers.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <unistd.h>

#include "sparselens/core/context.h"
#include "sparselens/core/fingerprint.h"
#include "sparselens/sessions/jobs.h"
#include "sparselens/sessions/session_copy.h"
#include "sparselens/sim/cache.h"
#include "stories_fixture.h"

namespace fs = std::filesystem;
namespace ss = sl::sessions;
using namespace sl;
using namespace sl::sessions;

namespace {

class SessionJobs : public ::testing::Test {
protected:
    void SetUp() override {
        dir = fs::temp_directory_path() / ("sl_session_jobs_" + std::to_string(::getpid()) + "_" +
                                           ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir);
        fs::create_directories(dir);
        const auto& s = test::stories260k();
        text = test::shared_text("text/stories260K_samples.txt");
        tokens = s.tok.encode(text, true, false);
        model_sha = sha256_file(s.m.path).value();
        in.m = &s.m;
        in.model_sha256 = model_sha;
        in.text_name = "stories260K_samples.txt";
        in.text = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size());
    }
    void TearDown() override { fs::remove_all(dir); }

    std::string path(const std::string& name) const { return (dir / name).string(); }

    ss::session_store make_session(const std::string& name = "a.slsession") {
        auto s = new_session(path(name));
        EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.message());
        return std::move(s).value();
    }

    eval_params eparams(int32_t windows) const {
        eval_params ep = eval_default_params();
        ep.n_ctx = 64;
        ep.max_windows = windows;
        ep.bos_id = test::stories260k().tok.bos_id();
        return ep;
    }

    context make_context() const {
        context_params cp = context_default_params();
        cp.n_ctx = 64;
        return context::create(test::stories260k().m, cp).value();
    }

    // A calibration of the text's start, as the GUI makes one.
    calibration calibrate_text() const {
        calibration_params cp = calibration_default_params();
        cp.n_ctx = 64;
        cp.max_tokens = 1024;
        return calibrate(test::stories260k().m, tokens, cp).value();
    }

    // `cfg` evaluated against `ref` (calibrated with `cal` when given), as the engine records it.
    evaluation evaluate(context& ctx, const dense_reference& ref, const eval_params& ep, const method_config& cfg,
                        const calibration* cal = nullptr) const {
        evaluation r;
        r.config = cfg;
        r.eval = eval_method(ctx, ref, *make_method(cfg, test::stories260k().m, cal).value(), nullptr, ep).value();
        return r;
    }

    fs::path dir;
    std::string text, model_sha;
    std::vector<int32_t> tokens;
    run_inputs in;
};

sim::tune_params small_tune() {
    sim::tune_params p = sim::tune_default_params();
    p.methods = {"dip", "dip-ca"};
    p.densities = {0.5f, 0.8f};
    p.gammas = {0.5f};
    p.coarse_windows = 2;
    p.refine_steps = 1;
    p.dip_split_points = 0;
    p.budgets = parse_budgets("ppl+0.5").value();
    p.belady_bound = false;
    p.sim.device.dram_bytes = 400 * 1024;  // a fraction of stories260K's weights: the cache matters
    return p;
}

}  // namespace

TEST_F(SessionJobs, RecordsAnEvaluationThatExportsAndImportsBack) {
    ss::session_store s = make_session();
    context ctx = make_context();
    const eval_params ep = eparams(4);
    const dense_reference ref = eval_dense_reference(ctx, tokens, ep).value();
    method_config cfg = method_default_config();
    cfg.name = "dip";
    cfg.density = 0.5f;
    evaluation r = evaluate(ctx, ref, ep, cfg);
    r.seconds = 0.5;
    record_params rp;
    rp.label = "from the tuning panel";
    rp.n_ctx = 64;
    rp.windows = 4;

    run_inputs no_model = in;
    no_model.m = nullptr;
    EXPECT_FALSE(record_evaluation(s, r, no_model, rp).ok());
    const int64_t id = record_evaluation(s, r, in, rp).value();
    const ss::run_record run = s.run(id).value();
    EXPECT_EQ(run.method, "dip");
    EXPECT_EQ(run.label, "from the tuning panel");
    EXPECT_DOUBLE_EQ(run.ppl, r.eval.ppl);
    EXPECT_DOUBLE_EQ(run.kld_mean, r.eval.kld_mean);
    EXPECT_FALSE(run.sim_tok_s.has_value());
    EXPECT_EQ(ss::method_config_from_json(run.params_json, "run").value(), cfg);
    // DIP resolves per-layer values; the run must carry them for the export to be runnable.
    const auto resolved = ss::per_layer_resolved_from_json(run.per_layer_json, "run").value();
    EXPECT_EQ(resolved, resolve_per_layer(cfg, test::stories260k().m, nullptr).value());

    // Export (H1's export_run) -> import: method and "no device" come back; the model matches.
    const ss::export_result ex = ss::export_run(s, id, path("dip.json"), {}).value();
    const sim::deploy_model identity = sim::deploy_model_identity(test::stories260k().m.path, test::stories260k().m).value();
    const imported_config ic = import_config(path("dip.json"), identity).value();
    EXPECT_EQ(ic.config.method, cfg);
    EXPECT_FALSE(ic.config.has_device());
    EXPECT_TRUE(ic.warnings.empty());
    EXPECT_NE(ic.summary.find("dip"), std::string::npos);
    EXPECT_EQ(ic.config.expected.ppl, run.ppl);

    // Another model shape: the error names the config, the field and both values.
    sim::deploy_model other = identity;
    other.hidden_dim = identity.hidden_dim * 2;
    auto mismatch = import_config(path("dip.json"), other);
    ASSERT_FALSE(mismatch.ok());
    EXPECT_NE(mismatch.message().find(path("dip.json")), std::string::npos) << mismatch.message();
    EXPECT_NE(mismatch.message().find("hidden_dim"), std::string::npos) << mismatch.message();
    EXPECT_NE(mismatch.message().find(std::to_string(identity.hidden_dim)), std::string::npos) << mismatch.message();
    // Same shape, other bytes: refused unless other weights are allowed.
    sim::deploy_model other_bytes = identity;
    other_bytes.sha256 = std::string(64, '0');
    EXPECT_FALSE(import_config(path("dip.json"), other_bytes).ok());
    EXPECT_TRUE(import_config(path("dip.json"), other_bytes, true).ok());

    // A file that is not a config.
    auto bad = import_config(path("a.slsession"), identity);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.message().find("a.slsession"), std::string::npos) << bad.message();
}

TEST_F(SessionJobs, InMemoryCalibrationIsSavedAndTheWholeDeviceSettingExported) {
    ss::session_store s = make_session("cal.slsession");
    const calibration cal = calibrate_text();
    in.calib = &cal;  // no calibration_path: calibrated "in the GUI"
    context ctx = make_context();
    const eval_params ep = eparams(2);
    const dense_reference ref = eval_dense_reference(ctx, tokens, ep).value();
    method_config cfg = method_default_config();
    cfg.name = "cats";
    cfg.density = 0.6f;
    evaluation r = evaluate(ctx, ref, ep, cfg, &cal);
    // Every part of the simulator setting, not only the bits, travels run -> config.
    sim::sim_params sp = sim::sim_default_params();
    sp.policy = sim::cache_policy::window;
    sp.window_tokens = 7;
    sp.quant = {8, 64, 32, 6};
    sp.context_tokens = 300;
    sp.device.dram_bytes = 123456;
    record_params rp;
    rp.n_ctx = 64;
    rp.windows = 2;
    rp.setting = sim_setting_of(sp, "bundle", 96);
    r.sim_tokens_per_s = 12.5;  // as the engine's online simulation reported it
    r.hit_rate = 0.25;
    const int64_t id = record_evaluation(s, r, in, rp).value();
    const ss::run_record run = s.run(id).value();
    ASSERT_TRUE(run.calibration_id.has_value());
    const ss::calibration_record cr = s.calibration(*run.calibration_id).value();
    EXPECT_EQ(fs::path(cr.path).parent_path(), dir);
    EXPECT_TRUE(fs::exists(cr.path));
    EXPECT_EQ(run.device_name, sp.device.name);
    EXPECT_EQ(run.sim_tok_s.value_or(0), 12.5);
    const ss::sim_setting back = ss::sim_setting_from_json(run.device_json, "run").value();
    EXPECT_EQ(back.policy, sim::cache_policy::window);
    // Recording again reuses the same calibration file.
    const int64_t id2 = record_evaluation(s, r, in, rp).value();
    EXPECT_EQ(s.run(id2).value().calibration_id, run.calibration_id);
    // The export writes the sidecar; importing gives the device back for the Tuning panel.
    ASSERT_TRUE(ss::export_run(s, id, path("cats.json"), {}).ok());
    const sim::deploy_model identity = sim::deploy_model_identity(test::stories260k().m.path, test::stories260k().m).value();
    const imported_config ic = import_config(path("cats.json"), identity).value();
    ASSERT_TRUE(ic.calib.has_value());
    ASSERT_TRUE(ic.config.has_device());
    const sim::sim_params got = sim::deploy_sim_params(ic.config);
    EXPECT_EQ(got.device, sp.device);
    EXPECT_EQ(got.policy, sim::cache_policy::window);
    EXPECT_EQ(got.window_tokens, 7u);
    EXPECT_EQ(got.quant.bits, 8u);
    EXPECT_EQ(got.quant.group_size, 64u);
    EXPECT_EQ(got.quant.scale_bits, 32u);
    EXPECT_EQ(got.quant.embedding_bits, 6u);
    EXPECT_EQ(got.context_tokens, 300u);
    EXPECT_EQ(ic.config.layout, "bundle");
    EXPECT_EQ(ic.config.expected.sim_tokens, 96u);
    EXPECT_EQ(ic.config.expected.sim_tokens_per_s, 12.5);
}

// Pinning needs a calibration even for a method that does not (DIP): the run must reference it, or its
// export could not rebuild the method.
TEST_F(SessionJobs, PinnedRunKeepsItsCalibration) {
    ss::session_store s = make_session("pin.slsession");
    const calibration cal = calibrate_text();
    in.calib = &cal;
    context ctx = make_context();
    const eval_params ep = eparams(2);
    const dense_reference ref = eval_dense_reference(ctx, tokens, ep).value();
    method_config cfg = method_default_config();
    cfg.name = "dip";
    cfg.density = 0.6f;
    cfg.pin_fraction = 0.05f;
    ASSERT_TRUE(method_config_needs_calibration(cfg));
    evaluation r = evaluate(ctx, ref, ep, cfg, &cal);
    record_params rp;
    rp.n_ctx = 64;
    rp.windows = 2;
    const int64_t id = record_evaluation(s, r, in, rp).value();
    EXPECT_TRUE(s.run(id).value().calibration_id.has_value());
    const ss::export_result ex = ss::export_run(s, id, path("pinned.json"), {}).value();
    EXPECT_FALSE(ex.config.calibration_file.empty());
    EXPECT_TRUE(fs::exists(path("pinned.calib")));
    // Without pinning DIP needs none, and its run references none.
    cfg.pin_fraction = 0.0f;
    r = evaluate(ctx, ref, ep, cfg);
    EXPECT_FALSE(s.run(record_evaluation(s, r, in, rp).value()).value().calibration_id.has_value());
}

TEST_F(SessionJobs, TuneRecordsEveryEvaluationAsOneSweep) {
    ss::session_store s = make_session();
    context ctx = make_context();
    const eval_params ep = eparams(4);
    const dense_reference ref = eval_dense_reference(ctx, tokens, ep).value();
    sim::tune_params p = small_tune();
    std::vector<float> seen;
    p.progress = [&](float f) {
        seen.push_back(f);
        return true;
    };
    const tune_job_result r = tune_into_session(s, ctx, ref, p, ep, in).value();
    ASSERT_EQ(r.candidate_run_ids.size(), r.tune.candidates.size());
    ASSERT_EQ(r.recommended_run_ids.size(), 1u);
    ASSERT_FALSE(seen.empty());
    EXPECT_FLOAT_EQ(seen.back(), 1.0f);

    ss::run_filter f;
    f.sweep_id = r.sweep_id;
    const auto runs = s.runs(f).value();
    EXPECT_EQ(runs.size(), r.tune.candidates.size() + 1);  // + dense
    EXPECT_EQ(s.run(r.dense_run_id).value().method, "dense");
    for (size_t i = 0; i < r.tune.candidates.size(); ++i) {
        const sim::tune_candidate& c = r.tune.candidates[i];
        const ss::run_record run = s.run(r.candidate_run_ids[i]).value();
        EXPECT_EQ(ss::method_config_from_json(run.params_json, "run").value(), c.config);
        EXPECT_DOUBLE_EQ(run.ppl, c.eval.ppl);
        EXPECT_EQ(run.windows, c.windows);
        EXPECT_EQ(run.label.rfind("tune " + c.stage, 0), 0u) << run.label;
        ASSERT_GE(c.best_sim, 0);
        EXPECT_DOUBLE_EQ(run.sim_tok_s.value_or(-1), c.sims[static_cast<size_t>(c.best_sim)].tokens_per_s);
        EXPECT_TRUE(ss::sim_setting_from_json(run.device_json, "run").ok()) << run.device_json;
    }
    if (r.tune.budgets[0].recommended >= 0) {
        const int64_t rec = r.recommended_run_ids[0];
        EXPECT_EQ(rec, r.candidate_run_ids[static_cast<size_t>(r.tune.budgets[0].recommended)]);
        // A tuner run exports as a runnable config.
        EXPECT_TRUE(ss::export_run(s, rec, path("rec.json"), {}).ok());
    }
}

TEST_F(SessionJobs, CancelledTuneKeepsWhatWasRecorded) {
    ss::session_store s = make_session();
    context ctx = make_context();
    const eval_params ep = eparams(4);
    const dense_reference ref = eval_dense_reference(ctx, tokens, ep).value();
    sim::tune_params p = small_tune();
    // Cancel once the dense baseline and one candidate are in.
    int64_t recorded_before_cancel = 0;
    p.progress = [&](float) {
        recorded_before_cancel = s.info().value().runs;
        return recorded_before_cancel < 2;
    };
    auto r = tune_into_session(s, ctx, ref, p, ep, in);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.cancelled()) << r.message();
    EXPECT_EQ(s.info().value().runs, 2);
    EXPECT_EQ(s.sweeps().value().size(), 1u);
    EXPECT_EQ(s.sweeps().value()[0].n_runs, 2);
}

TEST_F(SessionJobs, SweepEvaluatesTheGridOnAllWindows) {
    ss::session_store s = make_session();
    context ctx = make_context();
    const eval_params ep = eparams(3);
    const dense_reference ref = eval_dense_reference(ctx, tokens, ep).value();
    sim::tune_params p = sim::tune_default_params();
    p.methods = {"dip", "teal"};
    p.densities = parse_densities("0.4, 0.7").value();
    p.budgets.clear();
    p.belady_bound = false;
    // TEAL needs a calibration; without one the sweep fails before recording anything but its sweep row.
    auto no_cal = sweep_into_session(s, ctx, ref, p, ep, in);
    ASSERT_FALSE(no_cal.ok());
    EXPECT_FALSE(no_cal.cancelled());
    EXPECT_NE(no_cal.message().find("teal"), std::string::npos) << no_cal.message();

    p.methods = {"dip", "glu"};
    const tune_job_result r = sweep_into_session(s, ctx, ref, p, ep, in).value();
    ASSERT_EQ(r.tune.candidates.size(), 4u);  // 2 methods x 2 densities, no refinement
    for (const sim::tune_candidate& c : r.tune.candidates) {
        EXPECT_TRUE(c.full);
        EXPECT_EQ(c.windows, ref.n_windows);
        EXPECT_EQ(c.stage, "coarse");
    }
    const auto sweeps = s.sweeps().value();
    ASSERT_EQ(sweeps.size(), 2u);
    EXPECT_EQ(sweeps[1].n_runs, 5);
    EXPECT_EQ(sweeps[1].label, "sweep");
}

TEST_F(SessionJobs, SaveAsCopiesAnOpenSessionAndSwitchesToTheCopy) {
    ss::session_store s = make_session("orig.slsession");
    ss::run_record r;
    r.method = "dip";
    r.model_id = s.add_model(ss::model_record_of(test::stories260k().m, model_sha)).value();
    const int64_t id = s.add_run(r).value();
    // A reader (the Session panel's connection) stays open meanwhile.
    ss::session_store reader = ss::session_store::open(path("orig.slsession"), true).value();

    ss::session_store copy = save_session_as(s, path("copy.slsession"), false).value();
    EXPECT_EQ(copy.path(), path("copy.slsession"));
    EXPECT_FALSE(copy.read_only());
    EXPECT_EQ(copy.info().value().name, "copy");
    EXPECT_EQ(copy.run(id).value().method, "dip");
    EXPECT_TRUE(copy.add_run(r).ok());  // writable, and the original is untouched
    EXPECT_EQ(reader.info().value().runs, 1);
    EXPECT_EQ(copy.info().value().runs, 2);

    auto exists = save_session_as(s, path("copy.slsession"), false);
    ASSERT_FALSE(exists.ok());
    EXPECT_NE(exists.message().find("already exists"), std::string::npos) << exists.message();
    EXPECT_TRUE(save_session_as(s, path("copy.slsession"), true).ok());
    EXPECT_EQ(ss::session_store::probe(path("copy.slsession")).value().runs, 1);
    auto self = ss::session_copy(path("orig.slsession"), path("orig.slsession"), {true, {}});
    EXPECT_FALSE(self.ok());
    // Not a session: nothing is written.
    std::FILE* f = std::fopen(path("junk.slsession").c_str(), "wb");
    std::fputs("not sqlite", f);
    std::fclose(f);
    EXPECT_FALSE(ss::session_copy(path("junk.slsession"), path("junk-copy.slsession")).ok());
    EXPECT_FALSE(fs::exists(path("junk-copy.slsession")));
    for (const auto& e : fs::directory_iterator(dir))
        EXPECT_EQ(e.path().string().find(".saving-"), std::string::npos) << e.path();
}

TEST(SessionJobParsers, BudgetsAndDensities) {
    auto b = parse_budgets(" ppl+0.2, kld<0.05 ,top1>0.9");
    ASSERT_TRUE(b.ok()) << b.message();
    ASSERT_EQ(b->size(), 3u);
    EXPECT_EQ((*b)[1].metric, sim::budget_metric::kld_max);
    EXPECT_TRUE(parse_budgets("").value().empty());
    auto bad = parse_budgets("ppl+0.2, fast");
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.message().find("fast"), std::string::npos);

    auto d = parse_densities("0.3, 0.5;0.7 1");
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(*d, (std::vector<float>{0.3f, 0.5f, 0.7f, 1.0f}));
    EXPECT_FALSE(parse_densities("0.5, 1.5").ok());
    EXPECT_FALSE(parse_densities("0").ok());
    EXPECT_FALSE(parse_densities("0.5x").ok());
    EXPECT_FALSE(parse_densities(" ").ok());
}

SL_TEST_MAIN_NEEDS_SHARED()

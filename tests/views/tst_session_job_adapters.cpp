// The GUI's adapters over the session jobs (views/src/session_jobs.h) on stories260K: a Tuning panel result
// is recorded unless partial, with the simulated numbers only when a device was simulated, and an
// exported config's device comes back as Tuning panel fields. The jobs themselves: tests/sessions.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "session_jobs.h"
#include "sparselens/core/context.h"
#include "sparselens/core/fingerprint.h"
#include "stories_fixture.h"

namespace fs = std::filesystem;
namespace ss = sl::sessions;
using namespace sl;
using namespace sl::views;

TEST(SessionJobAdapters, TuningResultAndImportedDevice) {
    const fs::path dir = fs::temp_directory_path() / ("sl_session_adapters_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const auto& fx = test::stories260k();
    const std::string text = test::shared_text("text/stories260K_samples.txt");
    const std::vector<int32_t> tokens = fx.tok.encode(text, true, false);
    ss::run_inputs in;
    in.m = &fx.m;
    in.model_sha256 = sha256_file(fx.m.path).value();
    in.text_name = "stories260K_samples.txt";
    in.text = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size());
    ss::session_store s = ss::new_session((dir / "a.slsession").string()).value();

    context_params cp = context_default_params();
    cp.n_ctx = 64;
    context ctx = context::create(fx.m, cp).value();
    eval_params ep = eval_default_params();
    ep.n_ctx = 64;
    ep.max_windows = 2;
    ep.bos_id = fx.tok.bos_id();
    const dense_reference ref = eval_dense_reference(ctx, tokens, ep).value();
    tuning_result r;
    r.config = method_default_config();
    r.config.name = "dip";
    r.config.density = 0.5f;
    r.eval = eval_method(ctx, ref, *make_method(r.config, fx.m, nullptr).value(), nullptr, ep).value();
    r.sim_tokens_per_s = 40.0;
    r.sim_hit_rate = 0.5;
    ss::record_params rp;
    rp.n_ctx = 64;
    rp.windows = 2;

    r.partial = true;
    auto refused = record_tuning_result(s, r, in, rp);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.message().find("partial"), std::string::npos) << refused.message();
    r.partial = false;

    // Not simulated: the sim_* fields of the snapshot are not the run's.
    const ss::run_record plain = s.run(record_tuning_result(s, r, in, rp).value()).value();
    EXPECT_FALSE(plain.sim_tok_s.has_value());
    EXPECT_FALSE(plain.hit_rate.has_value());
    EXPECT_DOUBLE_EQ(plain.ppl, r.eval.ppl);

    sim::sim_params sp = sim::sim_default_params();
    sp.policy = sim::cache_policy::lru;
    sp.quant = sim::quant_default(8);
    sp.device.dram_bytes = 300000;
    rp.setting = ss::sim_setting_of(sp);
    const int64_t id = record_tuning_result(s, r, in, rp).value();
    EXPECT_EQ(s.run(id).value().sim_tok_s.value_or(0), 40.0);

    const std::string cfg = (dir / "dip.json").string();
    ASSERT_TRUE(ss::export_run(s, id, cfg, {}).ok());
    const sim::deploy_model identity = sim::deploy_model_identity(fx.m.path, fx.m).value();
    const ss::imported_config ic = ss::import_config(cfg, identity).value();
    ASSERT_TRUE(ic.config.has_device());
    const device_settings d = device_settings_of(ic.config);
    EXPECT_EQ(d.device, sp.device.name);
    EXPECT_EQ(d.dram_bytes, 300000u);
    EXPECT_EQ(d.bits, 8u);
    EXPECT_EQ(d.policy, "lru");
    EXPECT_EQ(d.flash_bandwidth, sp.device.flash_bandwidth);
    fs::remove_all(dir);
}

SL_TEST_MAIN_NEEDS_SHARED()

// Deployment configs end to end on stories260K: `config export` → `eval --config` reproduces the stored
// expectations exactly → `run --config` generates what the engine API generates with that method;
// every refusal (other weights, other shape, newer version, bad sidecar) is one precise line.
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "stories_cli.h"
#include "sparselens/core/context.h"
#include "sparselens/core/generate.h"
#include "sparselens/core/methods.h"
#include "stories_fixture.h"

namespace fs = std::filesystem;

namespace {

using namespace sl::test::stories_cli;

std::string temp_dir(const std::string& name) {
    const fs::path p = fs::temp_directory_path() / ("sl_cli_config_" + std::to_string(::getpid())) / name;
    fs::create_directories(p);
    return p.string();
}

struct remove_temp_dirs : ::testing::Environment {
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(fs::temp_directory_path() / ("sl_cli_config_" + std::to_string(::getpid())), ec);
    }
};
[[maybe_unused]] const auto* const cleanup = ::testing::AddGlobalTestEnvironment(new remove_temp_dirs);

std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void spit(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes; }

// Greedy tokens the engine produces with `cfg` attached, through the API (generate has no method flags).
std::vector<int32_t> api_greedy(const sl::method_config& cfg, const std::string& prompt, int32_t steps) {
    const auto& s = sl::test::stories260k();
    auto method = sl::make_method(cfg, s.m, nullptr);
    EXPECT_TRUE(method.ok());
    auto ctx = sl::context::create(s.m);
    EXPECT_TRUE(ctx.ok());
    ctx->set_method(method->get());
    sl::generate_params gp = sl::generate_default_params();
    gp.steps = steps;
    gp.sampling.temperature = 0.0f;
    gp.bos_id = s.tok.bos_id();
    const std::vector<int32_t> ids = s.tok.encode(prompt, true, false);
    auto r = sl::generate(*ctx, ids, gp, [](const sl::generate_step&) { return true; });
    EXPECT_TRUE(r.ok());
    return r->tokens;
}

TEST(CliConfig, ExportEvalRunReproduceDip) {
    const std::string dir = temp_dir("dip");
    const std::string cfg = dir + "/tuned.json";
    run_result r = run_cli("config export " + model_arg + " --text " + text_arg +
                           " --method dip --density 0.5 --ctx 64 --windows 4 --offset 20000 --json --out '" + cfg + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto exported = nlohmann::json::parse(r.out);
    EXPECT_TRUE(exported["sidecar"].is_null());  // DIP needs no calibration
    const auto file = nlohmann::json::parse(slurp(cfg));
    EXPECT_EQ(file, exported["config"]);
    const auto& e = file["expected"];
    EXPECT_EQ(e["windows"], 4);
    EXPECT_EQ(e["offset"], 20000);
    EXPECT_NEAR(e["mlp_density"].get<double>(), 0.5, 0.01);
    EXPECT_GT(e["kld_mean"].get<double>(), 0.0);
    EXPECT_EQ(file["per_layer"]["d_in"].size(), 5u);

    // Same windows, deterministic engine: drift exactly 0.
    r = run_cli("eval " + model_arg + " " + text_arg + " --config '" + cfg + "' --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto ev = nlohmann::json::parse(r.out);
    for (const char* k : {"ppl", "ppl_dense", "kld_mean", "kld_p99", "top1_agreement", "mlp_density", "attn_density"})
        EXPECT_EQ(ev["drift"][k].get<double>(), 0.0) << k;
    EXPECT_TRUE(ev["drift"]["same_text"].get<bool>());
    EXPECT_EQ(ev["ppl"], e["ppl"]);
    EXPECT_EQ(r.err.find("warning"), std::string::npos);

    // Another text: a warning, not an error.
    r = run_cli("eval " + model_arg + " " + q("text/tinystories_sample.txt") + " --config '" + cfg + "' --json");
    EXPECT_NE(r.err.find("warning: "), std::string::npos);

    // Greedy generation with the config = the API with the same method.
    r = run_cli("run " + model_arg + " --config '" + cfg + "' --prompt 'Once upon a time' --temp 0 --steps 48 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto run = nlohmann::json::parse(r.out);
    sl::method_config mc;
    mc.name = "dip";
    mc.density = 0.5f;
    EXPECT_EQ(run["tokens"].get<std::vector<int32_t>>(), api_greedy(mc, "Once upon a time", 48));
    EXPECT_NEAR(run["mlp_density"].get<double>(), 0.5, 0.01);
    // ... and differs from dense (the method really is attached).
    EXPECT_NE(run["tokens"].get<std::vector<int32_t>>(), api_greedy(sl::method_default_config(), "Once upon a time", 48));

    // The Q8_0 file of the same network: refused unless allowed; DIP resolves the same values on it.
    r = run_cli("run " + q("models/stories260K_q80.bin") + " -z " + q("models/tok512.bin") + " --config '" + cfg +
                "' --temp 0 --steps 8");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find(cfg + ": model file differs from the one tuned (sha256 "), std::string::npos) << r.err;
    r = run_cli("run " + q("models/stories260K_q80.bin") + " -z " + q("models/tok512.bin") + " --config '" + cfg +
                "' --temp 0 --steps 8 --allow-other-weights");
    EXPECT_EQ(r.code, 0) << r.err;

    // Another shape; a newer version.
    auto edited = file;
    edited["model"]["hidden_dim"] = 768;
    spit(dir + "/shape.json", edited.dump(2));
    r = run_cli("run " + model_arg + " --config '" + dir + "/shape.json' --steps 8");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "sparselens: error: " + dir + "/shape.json: config is for a model with hidden_dim 768, this model has 172\n");
    edited = file;
    edited["version"] = 3;
    spit(dir + "/v3.json", edited.dump(2));
    r = run_cli("eval " + model_arg + " " + text_arg + " --config '" + dir + "/v3.json'");
    EXPECT_EQ(r.err, "sparselens: error: " + dir + "/v3.json: config version 3 is newer than this build supports (2)\n");
    // --config owns the method.
    r = run_cli("eval " + model_arg + " " + text_arg + " --config '" + cfg + "' --method cats");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("--method cannot be combined with --config"), std::string::npos) << r.err;
}

TEST(CliConfig, CalibratedMethodOnADeviceWithSidecar) {
    const std::string dir = temp_dir("teal");
    const std::string calib = dir + "/s.calib";
    run_result r = run_cli("calibrate " + model_arg + " " + text_arg + " --ctx 64 --max-tokens 2048 --out '" + calib + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string cfg = dir + "/tuned.json";
    r = run_cli("config export " + model_arg + " --text " + text_arg + " --method chess --density 0.6 --calib '" + calib +
                "' --device apple-a18 --dram 480KB --bits 8 --context 512 --sim-tokens 128 --ctx 64 --windows 3"
                " --offset 30000 --out '" + cfg + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_TRUE(fs::exists(dir + "/tuned.calib"));
    EXPECT_EQ(slurp(dir + "/tuned.calib"), slurp(calib));  // the sidecar is the calibration file, verbatim

    r = run_cli("eval " + model_arg + " " + text_arg + " --config '" + cfg + "' --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto ev = nlohmann::json::parse(r.out);
    EXPECT_EQ(ev["drift"]["kld_mean"].get<double>(), 0.0);
    EXPECT_EQ(ev["drift"]["sim_tokens_per_s"].get<double>(), 0.0);
    EXPECT_EQ(ev["drift"]["sim_hit_rate"].get<double>(), 0.0);
    EXPECT_GT(ev["measured"]["sim_tokens_per_s"].get<double>(), 0.0);

    r = run_cli("run " + model_arg + " --config '" + cfg + "' --temp 0 --steps 24 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_GT(nlohmann::json::parse(r.out)["sim"]["tokens_per_s"].get<double>(), 0.0);

    r = run_cli("config show '" + cfg + "'");
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("score_threshold"), std::string::npos);

    std::string bytes = slurp(dir + "/tuned.calib");
    bytes[bytes.size() / 3] ^= 0x20;
    spit(dir + "/tuned.calib", bytes);
    r = run_cli("config show '" + cfg + "'");
    EXPECT_EQ(r.err, "sparselens: error: " + dir + "/tuned.calib: checksum mismatch: the sidecar does not belong to " +
                         cfg + " or is corrupted\n");
    fs::remove(dir + "/tuned.calib");
    r = run_cli("run " + model_arg + " --config '" + cfg + "' --steps 8");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find(dir + "/tuned.calib: missing: "), std::string::npos) << r.err;
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

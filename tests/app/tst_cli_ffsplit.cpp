// `--method ffsplit --split --compress` end to end: eval, online simulation, deployment config (export, eval
// drift 0, run), option errors.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "stories_cli.h"

namespace {

using namespace sl::test::stories_cli;

// One calibration for the whole executable (ffsplit takes its heavy hitters from it).
const std::string& calib() {
    static const std::string path = [] {
        const std::string p = sl::test::write_temp("ffsplit.calib", {});
        const run_result r = run_cli("calibrate " + model_arg + " " + text_arg + " --ctx 64 --max-tokens 2048 --out '" + p + "'");
        EXPECT_EQ(r.code, 0) << r.err;
        return p;
    }();
    return path;
}

nlohmann::json eval_json(const std::string& method_args) {
    const run_result r = run_cli("eval " + model_arg + " " + text_arg + " --method ffsplit " + method_args + " --calib '" +
                                 calib() + "' --ctx 64 --windows 3 --offset 20000 --threads 1 --json");
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

TEST(CliFFSplit, CompressVariantsRunWithTheirBytesAsDensity) {
    const auto svd8 = eval_json("--split 0.1 --compress svd:8");
    EXPECT_EQ(svd8["ffsplit_mode"], "svd");
    EXPECT_EQ(svd8["rank"], 8);
    EXPECT_FLOAT_EQ(svd8["ffsplit_heavy"].get<float>(), 0.1f);
    const auto svd32 = eval_json("--split 0.1 --compress svd:32");
    // More rank: more bytes, closer to dense.
    EXPECT_GT(svd32["mlp_density"].get<double>(), svd8["mlp_density"].get<double>());
    EXPECT_LT(svd32["kld_mean"].get<double>(), svd8["kld_mean"].get<double>());
    // svd without a rank: the largest rank within --density.
    const auto svd_d = eval_json("--split 0.1 --compress svd --density 0.5");
    EXPECT_LE(svd_d["mlp_density"].get<double>(), 0.5);
    EXPECT_GT(svd_d["mlp_density"].get<double>(), 0.45);
    const auto q4 = eval_json("--split 0.1 --compress q4");
    EXPECT_EQ(q4["ffsplit_mode"], "q4");
    EXPECT_LT(q4["kld_mean"].get<double>(), svd32["kld_mean"].get<double>()) << "4-bit light rows keep more than rank 32";
    EXPECT_LT(q4["mlp_density"].get<double>(), 0.3);
    for (const auto* j : {&svd8, &svd32, &svd_d, &q4}) EXPECT_GT((*j)["decode_tokens_per_second"].get<double>(), 0.0);
}

TEST(CliFFSplit, BadOptionsAreOneLineErrors) {
    for (const char* bad : {"--compress svd:0", "--compress svd:x", "--compress q3", "--split 1.5"}) {
        const run_result r = run_cli("eval " + model_arg + " " + text_arg + " --method ffsplit " + bad + " --calib '" +
                                     calib() + "'");
        EXPECT_EQ(r.code, 2) << bad;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
    const run_result r = run_cli("eval " + model_arg + " " + text_arg + " --method ffsplit --calib /nonexistent.calib");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("/nonexistent.calib"), std::string::npos) << r.err;
}

// `sim MODEL TEXT --method ffsplit` takes --split and --compress like eval: the exact part has the split's
// neurons, the compressed part the bytes of its form (rank-r factors or Q4_0 rows).
TEST(CliFFSplit, OnlineSimulationTakesSplitAndCompress) {
    auto sim = [](const std::string& args) {
        const run_result r = run_cli("sim " + model_arg + " " + text_arg + " --method ffsplit " + args + " --calib '" +
                                     calib() + "' --tokens 64 --threads 1 --json");
        EXPECT_EQ(r.code, 0) << r.err;
        return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
    };
    auto units = [](const nlohmann::json& j, const std::string& kind) {
        for (const auto& u : j["memory"]["units"])
            if (u["kind"] == kind) return std::pair{u["units_per_layer"].get<int64_t>(), u["unit_bytes"].get<int64_t>()};
        ADD_FAILURE() << kind << " missing in " << j["memory"]["units"].dump();
        return std::pair<int64_t, int64_t>{0, 0};
    };
    const auto svd8 = sim("--split 0.2 --compress svd:8");
    const auto svd16 = sim("--split 0.2 --compress svd:16");
    const auto q4 = sim("--split 0.05 --compress q4");
    EXPECT_EQ(svd8["ffsplit_heavy"].get<float>(), 0.2f);
    EXPECT_EQ(svd8["rank"], 8);
    EXPECT_EQ(q4["ffsplit_mode"], "q4");
    EXPECT_EQ(svd8["label"].get<std::string>().rfind("ffsplit, 20% exact, the rest svd:8 on 64 tokens", 0), 0u) << svd8["label"];
    const int64_t hidden = 172;  // stories260K
    EXPECT_EQ(units(svd8, "split_heavy").first, 34);  // 20% of 172, as the engine rounds it
    EXPECT_EQ(units(q4, "split_heavy").first, 9);
    EXPECT_EQ(units(svd8, "split_heavy").second, units(q4, "split_heavy").second);  // an exact neuron is the same bytes
    // Rank 16 factors are more than rank 8's, less than twice (per-layer scales); Q4_0 light rows (4.5 bits
    // a weight) are far more, and no more than the light neurons at the device's 4 bits.
    EXPECT_GT(units(svd16, "split_light").second, units(svd8, "split_light").second);
    EXPECT_LT(units(svd16, "split_light").second, 2 * units(svd8, "split_light").second);
    EXPECT_GT(units(q4, "split_light").second, units(svd16, "split_light").second);
    EXPECT_LE(units(q4, "split_light").second, units(svd8, "split_heavy").second * (hidden - 9));
    EXPECT_LT(svd8["summary"]["flash_bytes_per_token"].get<double>(), q4["summary"]["flash_bytes_per_token"].get<double>());

    // The knobs belong to online simulation; analytic and replay modes refuse them.
    const run_result r = run_cli("sim --shape llama3-8b --split 0.2");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("need MODEL TEXT"), std::string::npos) << r.err;
}

TEST(CliFFSplit, DeploymentConfigReproducesWithZeroDrift) {
    const std::string cfg = sl::test::write_temp("ffsplit_cfg.json", {});
    // The export's calibration sidecar (<stem>.calib beside the config): registered so it goes at exit too.
    const std::string sidecar = sl::test::write_temp("ffsplit_cfg.calib", {});
    std::filesystem::remove(cfg);
    std::filesystem::remove(sidecar);
    run_result r = run_cli("config export " + model_arg + " --text " + text_arg + " --method ffsplit --split 0.15 --compress svd:12"
                           " --calib '" + calib() + "' --ctx 64 --windows 3 --offset 20000 --out '" + cfg + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    r = run_cli("eval " + model_arg + " " + text_arg + " --config '" + cfg + "' --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto ev = nlohmann::json::parse(r.out);
    for (const char* k : {"ppl", "kld_mean", "top1_agreement", "mlp_density"})
        EXPECT_EQ(ev["drift"][k].get<double>(), 0.0) << k;
    EXPECT_GT(ev["measured"]["kld_mean"].get<double>(), 0.0);
    r = run_cli("run " + model_arg + " --config '" + cfg + "' --prompt 'Once upon a time' --temp 0 --steps 16");
    EXPECT_EQ(r.code, 0) << r.err;
    r = run_cli("config show '" + cfg + "'");
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("ffsplit"), std::string::npos) << r.out;
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

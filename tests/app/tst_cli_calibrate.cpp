// `sparselens calibrate` end to end: JSON summary agrees with the file it writes; errors are one line.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "sparselens/core/calibration.h"
#include "sparselens/core/model.h"
#include "cli_runner.h"

namespace {

using sl::test::q;
using sl::test::run_cli;
using sl::test::run_result;

TEST(CliCalibrate, QuantizedGgufWritesALoadableFileMatchingTheSummary) {
    const std::string out = sl::test::write_temp("cli.calib", {});
    const run_result r = run_cli("calibrate " + q("models/gguf/stories260K-Q8_0.gguf") + " " +
                                 q("text/stories260K_samples.txt") + " --ctx 64 --max-tokens 1024 --json --out '" + out + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["n_tokens"], 1024);
    EXPECT_EQ(j["n_windows"], 16);
    ASSERT_EQ(j["layers"].size(), 5u);

    auto cal = sl::calibration_load(out);
    ASSERT_TRUE(cal.ok()) << cal.message();
    EXPECT_EQ(cal->n_ctx, 64);
    EXPECT_EQ(cal->text_hash, j["text_hash"].get<uint64_t>());
    auto m = sl::model_load(sl::test::shared_path("models/gguf/stories260K-Q8_0.gguf"));
    ASSERT_TRUE(m.ok());
    EXPECT_TRUE(sl::calibration_matches(*cal, *m).ok());
    EXPECT_EQ(cal->model.weights_hash, sl::calibration_weights_hash(*m));
    for (int32_t l = 0; l < 5; ++l) {
        const auto& L = j["layers"][static_cast<size_t>(l)];
        EXPECT_EQ(L["threshold_at_density_0.5"]["down_in"].get<float>(), cal->threshold_for_density(l, sl::site::down_in, 0.5f));
        EXPECT_EQ(L["threshold_at_density_0.5"]["gate_act"].get<float>(), cal->threshold_for_density(l, sl::site::gate_act, 0.5f));
        EXPECT_FLOAT_EQ(L["heavy_hitter_top10_share"].get<float>(), cal->heavy_hitter_share(l, 0.1f));
        // Q8_0 down weights are dequantized for the column norms: all positive and finite.
        for (float v : cal->layers[static_cast<size_t>(l)].down_col_norm) ASSERT_TRUE(v > 0.0f && std::isfinite(v));
    }
    std::filesystem::remove(out);
}

TEST(CliCalibrate, ErrorsAreOneLine) {
    const std::string out = sl::test::write_temp("cli_err.calib", {});
    for (const std::string& args :
         {"calibrate " + q("models/stories260K_f32.bin") + " /nonexistent/text.txt -z " + q("models/tok512.bin"),
          "calibrate " + q("models/stories260K_f32.bin") + " " + q("text/tinystories_sample.txt") + " -z " +
              q("models/tok512.bin") + " --ctx 4096 --out '" + out + "'",
          "calibrate " + q("models/stories260K_f32.bin") + " " + q("text/tinystories_sample.txt") + " -z " +
              q("models/tok512.bin") + " --out /nonexistent/dir/x.calib"}) {
        const run_result r = run_cli(args);
        EXPECT_EQ(r.code, 2) << args;
        EXPECT_EQ(r.err.rfind("sparselens: error: ", 0), 0u) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
    std::filesystem::remove(out);
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

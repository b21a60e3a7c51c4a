// `sparselens session ...` and `eval --session` end to end on stories260K.
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli_runner.h"

using sl::test::q;
using sl::test::run_cli;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct session_dir {
    fs::path dir = fs::temp_directory_path() / ("sl_session_cli_" + std::to_string(::getpid()));
    session_dir() {
        fs::remove_all(dir);
        fs::create_directories(dir);
    }
    ~session_dir() { fs::remove_all(dir); }
    std::string f(const std::string& name) const { return "'" + (dir / name).string() + "'"; }
};

json parse(const sl::test::run_result& r) {
    EXPECT_EQ(r.code, 0) << r.err;
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
}

const std::string model_args = q("models/stories260K_f32.bin") + " " + q("text/stories260K_samples.txt") + " -z " +
                               q("models/tok512.bin") + " --ctx 64 --windows 2";

}  // namespace

TEST(session_cli, new_eval_runs_show_export_delete) {
    session_dir d;
    const std::string s = d.f("study.slsession");
    json created = parse(run_cli("session new " + s + " --name study --json"));
    EXPECT_EQ(created["name"], "study");
    EXPECT_EQ(created["runs"], 0);

    // Two evaluations recorded; the second also uses a calibration.
    const std::string calib = d.f("s.calib");
    ASSERT_EQ(run_cli("calibrate " + q("models/stories260K_f32.bin") + " " + q("text/stories260K_samples.txt") + " -z " +
                      q("models/tok512.bin") + " --out " + calib)
                  .code,
              0);
    json e1 = parse(run_cli("eval " + model_args + " --method dip --density 0.5 --session " + s + " --label first --json"));
    json e2 = parse(run_cli("eval " + model_args + " --method chess --density 0.6 --calib " + calib + " --session " + s + " --json"));
    ASSERT_TRUE(e1.contains("session"));
    EXPECT_EQ(e1["session"]["run_id"], 1);
    EXPECT_EQ(e2["session"]["run_id"], 2);

    json runs = parse(run_cli("session runs " + s + " --json"));
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[0]["method"], "dip");
    EXPECT_EQ(runs[0]["label"], "first");
    EXPECT_DOUBLE_EQ(runs[0]["ppl"].get<double>(), e1["ppl"].get<double>());
    EXPECT_DOUBLE_EQ(runs[1]["kld_mean"].get<double>(), e2["kld_mean"].get<double>());
    EXPECT_EQ(runs[1]["params"]["density"], 0.6);
    EXPECT_EQ(runs[1]["n_ctx"], 64);
    EXPECT_TRUE(runs[1]["calibration_id"].is_number());
    json by_ppl = parse(run_cli("session runs " + s + " --sort ppl --json"));
    EXPECT_LE(by_ppl[0]["ppl"].get<double>(), by_ppl[1]["ppl"].get<double>());
    json only = parse(run_cli("session runs " + s + " --method chess --json"));
    ASSERT_EQ(only.size(), 1u);
    EXPECT_EQ(only[0]["id"], 2);

    json show = parse(run_cli("session show " + s + " --json"));
    EXPECT_EQ(show["runs"], 2);
    EXPECT_EQ(show["models"], 1);  // the same model file, once
    EXPECT_EQ(show["texts"], 1);
    EXPECT_EQ(show["calibrations"], 1);
    EXPECT_EQ(show["model_list"][0]["hidden_dim"], 172);
    EXPECT_EQ(show["model_list"][0]["sha256"].get<std::string>().size(), 64u);

    // Export the calibrated run: config + sidecar, and `eval --config` reproduces it without drift.
    const std::string cfg = d.f("chess.json");
    json ex = parse(run_cli("session export " + s + " 2 --out " + cfg + " --json"));
    EXPECT_EQ(ex["calibration_file"], "chess.calib");
    EXPECT_TRUE(fs::exists(d.dir / "chess.calib"));
    json again = parse(run_cli("eval " + q("models/stories260K_f32.bin") + " " + q("text/stories260K_samples.txt") + " -z " +
                               q("models/tok512.bin") + " --config " + cfg + " --json"));
    EXPECT_DOUBLE_EQ(again["ppl"].get<double>(), e2["ppl"].get<double>());
    json one = parse(run_cli("session runs " + s + " --id 2 --json"));
    ASSERT_EQ(one["exports"].size(), 1u);

    json listed = parse(run_cli("session list '" + d.dir.string() + "' --json"));
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0]["name"], "study");
    EXPECT_EQ(listed[0]["runs"], 2);

    json del = parse(run_cli("session delete " + s + " 1 --json"));
    EXPECT_EQ(del["deleted"], 1);
    EXPECT_EQ(del["runs"], 1);
    auto missing = run_cli("session delete " + s + " 2 1 --json");  // 1 is gone: nothing is deleted
    EXPECT_EQ(missing.code, 2);
    EXPECT_NE(missing.err.find("no run 1"), std::string::npos) << missing.err;
    EXPECT_EQ(parse(run_cli("session show " + s + " --json"))["runs"], 1);
    EXPECT_EQ(parse(run_cli("session show " + s + " --json"))["exports"], 1);
    EXPECT_EQ(parse(run_cli("session delete " + s + " --all --json"))["runs"], 0);
}

// `sweep --session` records the grid as one sweep; a DIP-CA point exports with its stand-in cache and
// re-measures without drift.
TEST(session_cli, sweep_records_one_sweep_and_exports) {
    session_dir d;
    const std::string s = d.f("grid.slsession");
    json sw = parse(run_cli("sweep " + model_args + " --methods dip,dip-ca --densities 0.5,0.7 --session " + s +
                            " --label grid --json"));
    ASSERT_TRUE(sw.contains("session"));
    const int64_t sweep_id = sw["session"]["sweep_id"];
    json show = parse(run_cli("session show " + s + " --json"));
    EXPECT_EQ(show["runs"], 4);
    EXPECT_EQ(show["sweeps"], 1);
    json runs = parse(run_cli("session runs " + s + " --method dip-ca --json"));
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[1]["label"], "grid");
    EXPECT_EQ(runs[1]["sweep_id"], sweep_id);
    const json& point = sw["points"][3];  // dip-ca at 70%
    ASSERT_EQ(point["method"], "dip-ca");
    EXPECT_DOUBLE_EQ(runs[1]["ppl"].get<double>(), point["ppl"].get<double>());
    EXPECT_DOUBLE_EQ(runs[1]["sim_hit_rate"].get<double>(), point["cache_hit_rate"].get<double>());

    const std::string cfg = d.f("grid.json");
    parse(run_cli("session export " + s + " " + std::to_string(runs[1]["id"].get<int64_t>()) + " --out " + cfg + " --json"));
    json again = parse(run_cli("eval " + q("models/stories260K_f32.bin") + " " + q("text/stories260K_samples.txt") +
                               " -z " + q("models/tok512.bin") + " --config " + cfg + " --json"));
    EXPECT_EQ(again["drift"]["ppl"].get<double>(), 0.0);
    EXPECT_EQ(again["drift"]["kld_mean"].get<double>(), 0.0);
}

TEST(session_cli, errors_are_one_line_with_exit_code_2) {
    session_dir d;
    {
        std::ofstream f(d.dir / "notes.slsession");
        f << "just some text, not a database\n";
    }
    for (const std::string& cmd : {"session show " + d.f("notes.slsession"), "session runs " + d.f("missing.slsession"),
                                   "session list " + d.f("notes.slsession"), "session new " + d.f("notes.slsession"),
                                   "session export " + d.f("notes.slsession") + " 1 --out " + d.f("x.json")}) {
        auto r = run_cli(cmd + " --json");
        EXPECT_EQ(r.code, 2) << cmd;
        EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
        EXPECT_TRUE(r.out.empty()) << r.out;
    }
    auto r = run_cli("session show " + d.f("notes.slsession"));
    EXPECT_NE(r.err.find("not a SparseLens session (not an SQLite database)"), std::string::npos) << r.err;
    // A folder scan lists the bad file with its error instead of failing.
    json listed = parse(run_cli("session list '" + d.dir.string() + "' --json"));
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_TRUE(listed[0].contains("error"));
}

SL_TEST_MAIN_NEEDS_SHARED()

TEST(session_cli, names_that_are_not_utf8_print_as_json) {
    session_dir d;
    const std::string s = d.f("latin1.slsession");
    ASSERT_EQ(run_cli("session new " + s + " --name 'caf\xe9'").code, 0);  // a Latin-1 name from a shell
    json show = parse(run_cli("session show " + s + " --json"));
    EXPECT_EQ(show["name"], "caf\xef\xbf\xbd");  // U+FFFD in place of the stray byte
    json listed = parse(run_cli("session list '" + d.dir.string() + "' --json"));
    EXPECT_FALSE(listed.empty());
}

// `sparselens pack` and `run --offload` end to end on stories260K (label model): a run reports measured
// bytes equal to the simulator's and to /proc/self/io, and every failure is one line on stderr, exit 2,
// with nothing on stdout.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace {

namespace fs = std::filesystem;
using sl::test::q;
using sl::test::run_cli;

std::string scratch(const std::string& name) { return (fs::path(SL_OFFLOAD_SCRATCH) / name).string(); }

struct files {
    std::string config, pack;
};

const files& fx() {
    static const files f = [] {
        files x;
        x.config = scratch("cli-dipca.json");
        x.pack = scratch("cli-dipca.slpack");
        const auto e = run_cli("config export " + q("models/stories260K_f32.bin") + " -z " + q("models/tok512.bin") +
                               " --text " + q("text/tinystories_sample.txt") +
                               " --method dip-ca --density 0.5 --gamma 0.2 --device apple-a18 --dram 480KB --bits 32"
                               " --context 64 --ctx 32 --windows 1 --sim-tokens 8 --out " + x.config);
        EXPECT_EQ(e.code, 0) << e.err;
        const auto p = run_cli("pack " + q("models/stories260K_f32.bin") + " --config " + x.config + " -o " + x.pack);
        EXPECT_EQ(p.code, 0) << p.err;
        return x;
    }();
    return f;
}

std::string run_args(const std::string& extra, const std::string& pack = "") {
    return "run " + q("models/stories260K_f32.bin") + " -z " + q("models/tok512.bin") + " --config " + fx().config +
           " --offload --pack " + (pack.empty() ? fx().pack : pack) + " -n 40 --temp 0 --prompt 'Once upon a time' " +
           extra;
}

void expect_one_line_failure(const sl::test::run_result& r, const std::string& needle) {
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_TRUE(r.out.empty()) << "no output may be presented: " << r.out;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(OffloadCli, MeasuredBytesEqualTheSimulatorAndTheKernel) {
    const auto r = run_cli(run_args("--dram 1.8MB --json"));
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out)["offload"];
    const auto& m = j["measured"];
    EXPECT_GT(m["bytes_read_per_token"].get<double>(), 0.0);
    EXPECT_DOUBLE_EQ(m["bytes_read_per_token"].get<double>(), j["simulated"]["bytes_read_per_token"].get<double>());
    EXPECT_DOUBLE_EQ(m["hit_rate"].get<double>(), j["simulated"]["hit_rate"].get<double>());
    // Every O_DIRECT read reaches the device (the page cache served none): the process's read_bytes
    // holds them all. It may hold more: /proc/self/io also counts page-ins of the mapped model and the
    // tokenizer when the page cache lost them (seen under the sanitizer stage: +224 KiB), at most once.
    const uint64_t others = fs::file_size(sl::test::shared_path("models/stories260K_f32.bin")) +
                            fs::file_size(sl::test::shared_path("models/tok512.bin")) + fs::file_size(fx().config);
    EXPECT_GE(m["proc_io_read_bytes"].get<uint64_t>(), m["bytes_read_total"].get<uint64_t>());
    EXPECT_LE(m["proc_io_read_bytes"].get<uint64_t>(), m["bytes_read_total"].get<uint64_t>() + others);
    EXPECT_TRUE(j["simulated"]["same_cache_capacities"].get<bool>());
    EXPECT_LE(j["peak_cache_bytes"].get<uint64_t>(), j["cache_capacity_bytes"].get<uint64_t>());
    EXPECT_LE(j["resident"]["total"].get<uint64_t>() + j["cache_capacity_bytes"].get<uint64_t>(), 1800000u);
}

TEST(OffloadCli, PinnedHeavyHittersFromTheConfig) {
    // A DIP config pinning 10% of the neurons: the run pins them in the cache (read once, never missed),
    // the simulator agrees to the byte, and a budget whose caches cannot hold them is one line.
    const std::string calib = scratch("cli-pin.calib"), config = scratch("cli-pin.json"), pack = scratch("cli-pin.slpack");
    const auto c = run_cli("calibrate " + q("models/stories260K_f32.bin") + " " + q("text/tinystories_sample.txt") +
                           " -z " + q("models/tok512.bin") + " -o " + calib);
    ASSERT_EQ(c.code, 0) << c.err;
    const auto e = run_cli("config export " + q("models/stories260K_f32.bin") + " -z " + q("models/tok512.bin") +
                           " --text " + q("text/tinystories_sample.txt") + " --calib " + calib +
                           " --method dip --density 0.5 --pin 0.1 --device apple-a18 --bits 32"
                           " --context 64 --ctx 32 --windows 1 --sim-tokens 8 --out " + config);
    ASSERT_EQ(e.code, 0) << e.err;
    ASSERT_EQ(run_cli("pack " + q("models/stories260K_f32.bin") + " --config " + config + " -o " + pack).code, 0);
    const std::string run = "run " + q("models/stories260K_f32.bin") + " -z " + q("models/tok512.bin") + " --config " +
                            config + " --offload --pack " + pack + " -n 40 --temp 0 --prompt 'Once upon a time' ";
    const auto r = run_cli(run + "--dram 1.2MB --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out)["offload"];
    EXPECT_EQ(j["pinned"]["units"].get<uint64_t>(), 5u * 17u);  // round(0.1 * 172) heavy hitters in 5 layers
    EXPECT_GT(j["pinned"]["bytes_read_once"].get<uint64_t>(), 0u);
    EXPECT_EQ(j["pinned"]["misses_after_load"].get<uint64_t>(), 0u);
    EXPECT_DOUBLE_EQ(j["measured"]["bytes_read_per_token"].get<double>(), j["simulated"]["bytes_read_per_token"].get<double>());
    EXPECT_DOUBLE_EQ(j["measured"]["hit_rate"].get<double>(), j["simulated"]["hit_rate"].get<double>());
    expect_one_line_failure(run_cli(run + "--dram 1.0MB"), "pinned heavy hitters");
}

TEST(OffloadCli, EvalOffloadReportsMeasuredNextToSimulatedWithMergedRuns) {
    // A profile whose runs merge across gaps of 2 pages: the runtime and the simulator must still agree.
    const std::string dev = scratch("merge-device.json");
    std::ofstream(dev) << R"({"schema": "sparselens.device", "version": 1, "name": "merge-test", "dram_bytes": "2MB",
        "dram_bandwidth": "10GB/s", "flash_bandwidth": "1GB/s", "flash_page_bytes": 4096, "flash_read_latency_s": 2e-5,
        "flash_batch_latency_s": 1e-4, "flash_merge_gap_pages": 2, "overlap_io_compute": false})";
    const std::string args = "eval " + q("models/stories260K_f32.bin") + " " + q("text/tinystories_sample.txt") + " -z " +
                             q("models/tok512.bin") + " --config " + fx().config + " --offload --pack " + fx().pack +
                             " --device " + dev + " --dram 1.8MB -n 40";
    const auto r = run_cli(args + " --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out)["offload"];
    const auto &m = j["measured"], &s = j["simulated"];
    EXPECT_GT(m["bytes_read_per_token"].get<double>(), 0.0);
    EXPECT_DOUBLE_EQ(m["bytes_read_per_token"].get<double>(), s["bytes_read_per_token"].get<double>());
    EXPECT_DOUBLE_EQ(m["runs_per_token"].get<double>(), s["reads_per_token"].get<double>());
    EXPECT_DOUBLE_EQ(m["hit_rate"].get<double>(), s["hit_rate"].get<double>());
    // The simulated wait is each token's flash time less the work the run did inside its read windows
    // (measured): zero when that work hides it all, which a busy machine makes likely (seen once in ~70
    // runs next to the bench tests, and at will with the two cores loaded). It is above zero whenever
    // the mean window work is below the mean flash time (then some token's flash time exceeds it).
    const double share = s["io_wait_share"].get<double>(), flash = s["flash_seconds_per_token"].get<double>();
    EXPECT_GT(flash, 0.0);
    EXPECT_GE(share, 0.0);
    EXPECT_LT(share, 1.0);
    if (m["overlapped_seconds_per_token"].get<double>() < flash) {
        EXPECT_GT(share, 0.0);
    }
    const auto t = run_cli(args);
    ASSERT_EQ(t.code, 0) << t.err;
    for (const char* row : {"tokens/s", "bytes read/token", "hit rate", "I/O-wait share", "measured", "simulated"})
        EXPECT_NE(t.out.find(row), std::string::npos) << row << " missing in\n" << t.out;
    const auto bad = run_cli("eval " + q("models/stories260K_f32.bin") + " " + q("text/tinystories_sample.txt") + " -z " +
                             q("models/tok512.bin") + " --offload");
    expect_one_line_failure(bad, "needs --config");
}

TEST(OffloadCli, ProbeThePackJustBeforeAndSplitTheRunsTime) {
    // --probe: the simulated column takes its flash figures from a probe of the pack made just before the
    // run (the profile's 1 GB/s is replaced), and the run's time splits into read windows and the rest.
    const std::string dev = scratch("slow-device.json");
    std::ofstream(dev) << R"({"schema": "sparselens.device", "version": 1, "name": "slow-test", "dram_bytes": "2MB",
        "dram_bandwidth": "10GB/s", "flash_bandwidth": "1GB/s", "flash_page_bytes": 4096, "flash_read_latency_s": 2e-5,
        "flash_batch_latency_s": 1e-4, "flash_merge_gap_pages": 0, "overlap_io_compute": false})";
    const auto r = run_cli(run_args("--dram 1.8MB --json --probe --device " + dev));
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out)["offload"];
    const auto &m = j["measured"], &s = j["simulated"];
    EXPECT_TRUE(s["flash_from_pack_probe"].get<bool>());
    EXPECT_GT(s["flash_bandwidth"].get<double>(), 0.0);
    EXPECT_NE(s["flash_bandwidth"].get<double>(), 1e9);
    EXPECT_DOUBLE_EQ(m["bytes_read_per_token"].get<double>(), s["bytes_read_per_token"].get<double>());
    // Waiting is part of the read windows; compute (outside them) plus the windows is the decode time.
    const double window = m["read_window_seconds_per_token"].get<double>(),
                 wait = m["io_seconds_per_token"].get<double>();
    EXPECT_GT(window, 0.0);
    EXPECT_LE(wait, window);
    EXPECT_NEAR(m["overlapped_seconds_per_token"].get<double>(), window - wait, 1e-12);
    const double per_token = 1.0 / m["tokens_per_s"].get<double>();
    EXPECT_NEAR(m["compute_seconds_per_token"].get<double>() + window, per_token, 1e-6 + 1e-9 * per_token);
    EXPECT_GT(m["read_bytes_per_s"].get<double>(), 0.0);
    const auto plain = run_cli(run_args("--dram 1.8MB --json --device " + dev));
    ASSERT_EQ(plain.code, 0) << plain.err;
    const auto p = nlohmann::json::parse(plain.out)["offload"]["simulated"];
    EXPECT_FALSE(p["flash_from_pack_probe"].get<bool>());
    EXPECT_DOUBLE_EQ(p["flash_bandwidth"].get<double>(), 1e9);
    const auto bad =
        run_cli("run " + q("models/stories260K_f32.bin") + " -z " + q("models/tok512.bin") + " --probe -n 4");
    EXPECT_EQ(bad.code, 2);
}

TEST(OffloadCli, BudgetBelowTheResidentPart) {
    expect_one_line_failure(run_cli(run_args("--dram 100KB")), "is below the resident part");
}

TEST(OffloadCli, ModifiedAndTruncatedPacks) {
    const std::string mod = scratch("cli-mod.slpack"), cut = scratch("cli-cut.slpack");
    fs::copy_file(fx().pack, mod, fs::copy_options::overwrite_existing);
    {
        std::fstream f(mod, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(8197);  // inside layer 0's first region (the index takes the first 4 KiB)
        f.put('\x55');
    }
    expect_one_line_failure(run_cli(run_args("--dram 1.8MB", mod)), "checksum mismatch");
    fs::copy_file(fx().pack, cut, fs::copy_options::overwrite_existing);
    fs::resize_file(cut, fs::file_size(cut) / 2);
    expect_one_line_failure(run_cli(run_args("--dram 1.8MB", cut)), "truncated or modified pack");
    expect_one_line_failure(run_cli(run_args("--dram 1.8MB", scratch("missing.slpack"))), "no such pack");
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

// `sparselens sim` end to end: analytic JSON equals the library, sizes with units, synthetic trace
// write + replay under every policy, and clear refusals (online form, bad device, bad sizes).
#include <array>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

namespace {

struct run_out {
    int code = -1;
    std::string out;
};

run_out run(const std::string& args) {
    const std::string cmd = std::string(SPARSELENS_CLI) + " sim " + args + " 2>&1";
    run_out r;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return r;
    std::array<char, 4096> buf{};
    size_t n = 0;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    const int st = ::pclose(p);
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

const std::string assets = std::string(" --assets ") + SPARSELENS_SOURCE_DIR + "/assets";

TEST(SimCli, AnalyticDenseMatchesTheWorkedExample) {
    const run_out r = run("--shape phi3-medium --method dense --device a18 --dram 4GB --bits 4 --json" + assets);
    ASSERT_EQ(r.code, 0) << r.out;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["mode"], "analytic");
    EXPECT_NEAR(j["summary"]["tokens_per_s"].get<double>(), 0.2461, 5e-5);  // docs/simulator.md
    EXPECT_EQ(j["allocation"]["resident"].get<uint64_t>(), 1'869'793'280ull);
    EXPECT_EQ(j["layers"].size(), 40u);
    EXPECT_EQ(j["layers"][0]["capacity"].get<uint32_t>(), 6163u);
    EXPECT_DOUBLE_EQ(j["quant"]["bits_per_weight"].get<double>(), 4.5);

    const run_out gib = run("--shape phi3-medium --device a18 --dram 4GiB --no-overlap --json" + assets);
    ASSERT_EQ(gib.code, 0) << gib.out;
    const nlohmann::json g = nlohmann::json::parse(gib.out);
    EXPECT_EQ(g["device"]["dram_bytes"].get<uint64_t>(), 4ull << 30);
    EXPECT_FALSE(g["device"]["overlap_io_compute"].get<bool>());
    EXPECT_GT(g["summary"]["tokens_per_s"].get<double>(), 0.2461);  // more DRAM
}

TEST(SimCli, SyntheticTraceReplaysUnderEveryPolicy) {
    const std::string path = "/tmp/sparselens_sim_cli_" + std::to_string(::getpid()) + ".sltrace";
    const run_out w = run("--synthetic " + path + " --shape phi3-mini --tokens 24 --density 0.3" + assets);
    ASSERT_EQ(w.code, 0) << w.out;
    double belady = 0, best_other = 0;
    for (const char* pol : {"none", "lru", "lfu", "belady", "window"}) {
        const run_out r =
            run("--trace " + path + " --device a18 --policy " + pol + " --dram 1.5GB --bits 4 --json" + assets);
        ASSERT_EQ(r.code, 0) << pol << ": " << r.out;
        const nlohmann::json j = nlohmann::json::parse(r.out);
        EXPECT_EQ(j["mode"], "replay");
        EXPECT_EQ(j["summary"]["tokens"].get<int>(), 24);
        const double hit = j["summary"]["hit_rate"].get<double>();
        if (std::string(pol) == "belady")
            belady = hit;
        else
            best_other = std::max(best_other, hit);
    }
    EXPECT_GT(best_other, 0.0);
    EXPECT_GE(belady, best_other);
    const run_out both = run("--trace " + path + " --shape phi3-mini" + assets);
    EXPECT_EQ(both.code, 2);
    std::remove(path.c_str());
}

TEST(SimCli, RefusalsAndErrorsAreOneLine) {
    struct bad_t {
        std::string args, must_mention;
    };
    for (const bad_t& b :
         {bad_t{"--method dip-ca --gamma 0.2 --density 0.5 /nonexistent/model.gguf text.txt", "/nonexistent/model.gguf"},
          bad_t{"--shape phi3-medium --method dip", "needs MODEL TEXT"},
          bad_t{"--shape phi3-medium --device nosuch", "available:"},
          bad_t{"--shape phi3-medium --dram 4XB", "invalid size"}, bad_t{"--shape nosuch", "not found"},
          bad_t{"--shape phi3-medium --policy fifo", "unknown --policy"},
          bad_t{"--shape phi3-medium --policy belady --pin-top 0.5", "needs a trace"},
          bad_t{"--trace /nonexistent.sltrace", "no such file"}, bad_t{"", "--shape"}}) {
        const run_out r = run(b.args + assets);
        EXPECT_EQ(r.code, 2) << b.args << ": " << r.out;
        EXPECT_NE(r.out.find(b.must_mention), std::string::npos) << b.args << ": " << r.out;
        EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << b.args << ": " << r.out;
    }
}

}  // namespace

// `sparselens bench kernels --quick --json` runs and reports a complete, self-consistent result set.
// Checks structure and accounting (rows, bytes per active row, finite positive rates), never speed.
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace {

using sl::test::run_cli;
using sl::test::run_result;

bool finite_positive(const nlohmann::json& v) {
    return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0;
}

// Bytes of one row of `n` elements (ggml block sizes: Q8_0 34 B / 32, Q4_0 18 B / 32).
double row_bytes(const std::string& type, int64_t n) {
    if (type == "F32") return 4.0 * n;
    if (type == "Q8_0") return 34.0 * n / 32;
    if (type == "Q4_0") return 18.0 * n / 32;
    return 2.0 * n;
}

TEST(BenchKernels, QuickJsonIsCompleteAndConsistent) {
    const run_result r = run_cli("bench kernels --quick --json --threads 2");
    ASSERT_EQ(r.code, 0);
    const nlohmann::json j = nlohmann::json::parse(r.out);  // throws (fails) on invalid JSON
    EXPECT_EQ(j["threads"], 2);
    EXPECT_TRUE(j["isa"].is_string());
    EXPECT_TRUE(finite_positive(j["read_bandwidth_gbs"]));
    EXPECT_TRUE(finite_positive(j["read_bandwidth_end_gbs"]));
    const double bw = j["read_bandwidth_gbs"].get<double>();

    const std::set<double> densities = {0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0};
    std::map<std::string, int> count;  // kernel/type -> rows
    for (const auto& row : j["results"]) {
        const std::string kernel = row["kernel"], type = row["type"];
        SCOPED_TRACE(kernel + " " + type + " " + row["weights"].get<std::string>() + " @" + row["density"].dump());
        ++count[kernel + "/" + type];
        const int64_t dim = row["dim"], hidden = row["hidden"], active = row["active"];
        EXPECT_EQ(dim, 2048);
        EXPECT_EQ(hidden, 8192);
        EXPECT_TRUE(finite_positive(row["median_s"]));
        EXPECT_TRUE(finite_positive(row["min_s"]));
        EXPECT_LE(row["min_s"].get<double>(), row["median_s"].get<double>());
        EXPECT_TRUE(finite_positive(row["gbs"]));
        EXPECT_TRUE(finite_positive(row["speedup"]));
        EXPECT_GE(row["copies"].get<int>(), 1);
        // Rates are bytes / median time; even cache-resident they stay within a sane multiple of DRAM.
        EXPECT_NEAR(row["gbs"].get<double>(), row["bytes"].get<double>() / row["median_s"].get<double>() / 1e9,
                    1e-6 * row["gbs"].get<double>());
        EXPECT_LT(row["gbs"].get<double>(), 200 * bw);
        const double d = row["density"];
        // Bytes actually read per kernel: active rows / channels / bundles times their size.
        double want = 0;
        if (kernel == "input_sparse") {
            EXPECT_EQ(active, std::llround(d * hidden));
            want = active * row_bytes(type, dim);  // one input-major row = dim outputs
        } else if (kernel == "output_sparse") {
            EXPECT_EQ(active, std::llround(d * hidden));
            want = active * row_bytes(type, dim);  // one up row = dim inputs
        } else if (kernel == "fused_mlp") {
            EXPECT_EQ(active, std::llround(d * hidden));
            want = active * 3 * row_bytes(type, dim);  // gate row + up row + down column
        } else if (kernel == "pairs") {
            EXPECT_EQ(active, std::llround(d * hidden));
            want = active * 2 * row_bytes(type, dim);  // up row + down column, side by side
        } else if (kernel == "dense_mlp") {
            want = 3 * hidden * row_bytes(type, dim);
        } else if (kernel == "dense_up_down") {
            want = 2 * hidden * row_bytes(type, dim);
        } else {  // dense and the BLAS baselines: one whole matrix
            EXPECT_EQ(d, 1.0);
            want = hidden * row_bytes(type, dim);
        }
        EXPECT_DOUBLE_EQ(row["bytes"].get<double>(), want);
        if (kernel == "input_sparse" || kernel == "output_sparse" || kernel == "fused_mlp" || kernel == "pairs") {
            EXPECT_TRUE(densities.count(d)) << d;
            // The pure read of the same rows, and the target arithmetic made from it.
            EXPECT_TRUE(finite_positive(row["pattern_read_gbs"]));
            const double dense_s = row["speedup"].get<double>() * row["median_s"].get<double>();
            const double read_s = row["bytes"].get<double>() / row["pattern_read_gbs"].get<double>() / 1e9;
            EXPECT_NEAR(row["read_time_over_d_dense"].get<double>(), read_s / (d * dense_s), 1e-9 * read_s / (d * dense_s));
            EXPECT_NEAR(row["fraction_of_pattern_read"].get<double>(),
                        row["gbs"].get<double>() / row["pattern_read_gbs"].get<double>(), 1e-9);
        }
    }
    for (const std::string t : {"F32", "Q8_0", "Q4_0"}) {
        EXPECT_EQ(count["dense/" + t], 2) << t;  // down and up
        EXPECT_EQ(count["dense_mlp/" + t], 1) << t;
        EXPECT_EQ(count["dense_up_down/" + t], 1) << t;
        for (const std::string k : {"input_sparse", "output_sparse", "fused_mlp", "pairs"})
            EXPECT_EQ(count[k + "/" + t], 7) << k << t;
    }
    if (j["eigen"].get<bool>()) {
        EXPECT_EQ(count["eigen_gemv/F32"], 2);
    }
    if (j["openblas"].get<bool>()) {
        EXPECT_EQ(count["openblas_sgemv/F32"], 2);
    }

    // Every target is evaluated from the run's own numbers.
    ASSERT_FALSE(j["targets"].empty());
    for (const auto& t : j["targets"]) {
        EXPECT_TRUE(finite_positive(t["measured"])) << t.dump();
        EXPECT_TRUE(finite_positive(t["target"])) << t.dump();
        EXPECT_EQ(t["met"].get<bool>(), t["measured"].get<double>() >= t["target"].get<double>());
    }
}

// Every type the command accepts runs every kernel (Q6_K's layouts are the input-major-only Q6_0x8; its
// bundles must be Q8_0, a type the row kernels dot: a Q6_0x8 bundle crashed the fused row, stop 21).
TEST(BenchKernels, EveryTypeRunsEveryKernel) {
    for (const char* t : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k"}) {
        const run_result r = run_cli(std::string("bench kernels --shapes 256x512 --densities 0.5 --reps 1 ") +
                                     "--working-set-gb 0.002 --no-baselines --threads 2 --json --types " + t);
        ASSERT_EQ(r.code, 0) << t << ": " << r.err;
        const nlohmann::json j = nlohmann::json::parse(r.out);
        std::set<std::string> kernels;
        for (const auto& row : j["results"]) {
            kernels.insert(row["kernel"].get<std::string>());
            EXPECT_TRUE(finite_positive(row["median_s"])) << t << " " << row.dump();
        }
        for (const char* k : {"dense", "input_sparse", "output_sparse", "fused_mlp", "pairs"})
            EXPECT_EQ(kernels.count(k), 1u) << t << " has no " << k << " row";
    }
}

TEST(BenchKernels, BadOptionsGiveOneLineErrors) {
    EXPECT_EQ(run_cli("bench kernels --shapes 100x7 --quick").code, 2);
    EXPECT_EQ(run_cli("bench kernels --types q3_k --quick").code, 2);
    EXPECT_EQ(run_cli("bench kernels --densities 0,2 --quick").code, 2);
    EXPECT_EQ(run_cli("bench kernels --kernels sgemm --quick").code, 2);
}

}  // namespace

// The executables' OpenMP start-up (kernels::prefer_passive_openmp re-executes once with a passive wait
// policy): a user's OpenMP thread binding must not cost threads. libgomp pins the initial thread to its
// first place before main() runs when OMP_PROC_BIND / OMP_PLACES / GOMP_CPU_AFFINITY are set, and the
// re-executed process used to inherit that one-CPU mask and run on one thread. Also what `bench` reports of
// its kernel choices.
#include <sched.h>

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace {

// `bench --membw --json` with the given environment assignments and no wait policy of the user's (so the
// CLI re-executes itself, as it does for a user who set none): the threads and wait policy it reports.
struct started {
    int threads = 0;
    std::string policy;
    std::string q4_0x8_chunk;  // bench's report of the Q4_0x8 input-sparse chunk
};
started bench_with(const std::string& env) {
    const sl::test::run_result r = sl::test::run_command("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT " + env + " " +
                                                         SPARSELENS_CLI + " bench --membw --membw-gib 0.02 --json");
    EXPECT_EQ(r.code, 0) << env << ": " << r.err;
    if (r.code != 0) return {};
    const auto j = nlohmann::json::parse(r.out);
    return {j["threads"].get<int>(), j["omp_wait_policy"].get<std::string>(), j["q4_0x8_chunk"].get<std::string>()};
}

// The CPUs this process may run on (a container's cpuset can hold fewer than the machine has), and the
// first of them.
int allowed_cpus(int& first) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    first = -1;
    for (int i = 0; i < CPU_SETSIZE && first < 0; ++i)
        if (CPU_ISSET(i, &set)) first = i;
    return CPU_COUNT(&set);
}

TEST(CliOpenmp, ThreadBindingKeepsEveryCpu) {
    int first = 0;
    if (allowed_cpus(first) < 2) GTEST_SKIP() << "one CPU: nothing to lose";
    const started plain = bench_with("");
    ASSERT_GE(plain.threads, 2);
    EXPECT_EQ(plain.policy, "passive");  // it did re-execute
    for (const char* env : {"OMP_PROC_BIND=true", "OMP_PLACES=cores", "OMP_PROC_BIND=spread OMP_PLACES=threads",
                            "GOMP_CPU_AFFINITY=0-1023"}) {
        const started s = bench_with(env);
        EXPECT_EQ(s.threads, plain.threads) << env;
        EXPECT_EQ(s.policy, "passive") << env;
    }
    // A restriction the user asked for stays: one place of one CPU is one thread.
    EXPECT_EQ(bench_with("OMP_PLACES='{" + std::to_string(first) + "}'").threads, 1);
}

// `bench` says which of the two same-bits Q4_0x8 input-sparse chunks ran (a CPU choice): a Zen 5 and a
// Zen 4 figure may differ by it.
TEST(CliOpenmp, BenchReportsTheQ4_0x8Chunk) {
    const started plain = bench_with("");
    EXPECT_TRUE(plain.q4_0x8_chunk == "avx512-vnni" || plain.q4_0x8_chunk == "avx2") << plain.q4_0x8_chunk;
    EXPECT_EQ(bench_with("SPARSELENS_ISA=scalar").q4_0x8_chunk, "scalar");
}

}  // namespace

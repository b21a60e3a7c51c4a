// Prefill GEMM throughput harness (label bench): G multiply-accumulates per second of kernels::gemm
// on the llama-1b projection shapes at 128 tokens, per weight type, for the active ISA, next to the
// portable kernel on one shape (same bits required, and a gross-regression floor on the speed-up).
// The activations stay the same across repetitions, so their quantization is reused as when q/k/v
// (or gate/up) share one input; panel decoding, token packing and the kernel are timed.
// SPARSELENS_BENCH_THREADS (default 2) sets the threads.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "quant_reference.h"

namespace {

using namespace sl;
using namespace sl::kernel_test;
namespace k = sl::kernels;

int bench_threads() {
    const char* e = std::getenv("SPARSELENS_BENCH_THREADS");
    return e ? std::max(1, std::atoi(e)) : 2;
}

// Median seconds of `reps` gemm calls after one warm-up call.
double gemm_seconds(const matrix& m, const std::vector<float>& x, int64_t n, std::vector<float>& y, int nt, int reps) {
    k::gemm(m.view, x.data(), n, y.data(), nt);
    std::vector<double> s;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        k::gemm(m.view, x.data(), n, y.data(), nt);
        s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
}

TEST(throughput, gemm_prefill_shapes) {
    const int nt = bench_threads();
    const int64_t n = 128;
    const k::isa simd = k::active_isa();
    isa_guard guard;
    struct shape {
        int64_t rows, cols;
    };
    const shape shapes[] = {{2048, 2048}, {512, 2048}, {8192, 2048}, {2048, 8192}};  // q/o, k/v, gate/up, down
    std::printf("gemm, %lld tokens, %d threads, %s (GMAC/s, median of 5)\n", static_cast<long long>(n), nt,
                k::isa_name(simd));
    for (dtype t : {dtype::q4_0, dtype::q8_0, dtype::q4_k, dtype::q6_k, dtype::f16}) {
        double macs = 0.0, secs = 0.0;
        std::string line = std::string(dtype_name(t)) + ":";
        for (const shape& sh : shapes) {
            const matrix m =
                t == dtype::f16 ? make_matrix(t, sh.rows, sh.cols, 5) : random_blocks(t, sh.rows, sh.cols, 5);
            std::vector<float> x;
            for (int64_t tk = 0; tk < n; ++tk) {
                const std::vector<float> v = make_x(sh.cols, 70 + tk);
                x.insert(x.end(), v.begin(), v.end());
            }
            std::vector<float> y(static_cast<size_t>(n * sh.rows));
            k::set_active_isa(simd);
            const double s = gemm_seconds(m, x, n, y, nt, 5);
            const double mac = static_cast<double>(sh.rows) * static_cast<double>(sh.cols) * static_cast<double>(n);
            macs += mac;
            secs += s;
            char buf[64];
            std::snprintf(buf, sizeof buf, "  %lldx%lld %.1f", static_cast<long long>(sh.rows),
                          static_cast<long long>(sh.cols), mac / s * 1e-9);
            line += buf;
            if (&sh != &shapes[0] || simd == k::isa::scalar) continue;
            // The portable kernel on the q/o shape: the same bits, and far slower.
            std::vector<float> y_portable(y.size());
            k::set_active_isa(k::isa::scalar);
            const double sp = gemm_seconds(m, x, n, y_portable, nt, 3);
            EXPECT_EQ(0, std::memcmp(y.data(), y_portable.data(), y.size() * 4)) << dtype_name(t);
            std::snprintf(buf, sizeof buf, " (portable %.1f)", mac / sp * 1e-9);
            line += buf;
            // Gross-regression floor: measured 7-16x (int8) and ~3x (F16) on the AVX2 target.
            EXPECT_GT(sp / s, t == dtype::f16 ? 1.5 : 3.0) << dtype_name(t) << " " << k::isa_name(simd);
        }
        std::printf("%s  | all four %.1f\n", line.c_str(), macs / secs * 1e-9);
    }
}

}  // namespace

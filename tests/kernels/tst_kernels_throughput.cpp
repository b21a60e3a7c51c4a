// Quick gemv throughput harness (label bench): GB/s of weight traffic vs the measured read bandwidth
// ("cold" cycles through copies larger than the LLC; "med %bw" = cold median / read bandwidth).
// SPARSELENS_BENCH_THREADS (default 2) and SPARSELENS_BENCH_QUICK=1 (small shapes only) adjust it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sparselens/kernels/kernels.h"
#include "sparselens/kernels/membw.h"

namespace {

using sl::dtype;
namespace k = sl::kernels;

int bench_threads() {
    const char* e = std::getenv("SPARSELENS_BENCH_THREADS");
    return e ? std::max(1, std::atoi(e)) : 2;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Enough copies of the matrix that cycling through them streams > 96 MiB (3x the LLC here): the
// "cold" figure then comes from DRAM, as in a forward pass over a whole model.
struct weight_set {
    std::vector<std::vector<uint8_t>> copies;
    std::vector<sl::tensor_view> views;
    std::vector<float> x;
};

weight_set make_set(dtype t, int64_t rows, int64_t cols) {
    weight_set s;
    sl::tensor_view v{t, rows, cols, nullptr};
    const int64_t n_copies = std::max<int64_t>(1, (int64_t{96} << 20) / v.bytes() + 1);
    std::vector<float> row(static_cast<size_t>(cols));
    std::vector<uint8_t> first(static_cast<size_t>(v.bytes()));
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) row[c] = std::sin(0.001 * static_cast<double>(r * 131 + c * 7));
        k::quantize_row(t, row.data(), first.data() + r * v.row_bytes(), cols);
    }
    s.copies.assign(static_cast<size_t>(n_copies), first);
    for (auto& c : s.copies) s.views.push_back({t, rows, cols, c.data()});
    s.x.resize(static_cast<size_t>(cols));
    for (int64_t c = 0; c < cols; ++c) s.x[c] = std::cos(0.01 * static_cast<double>(c));
    return s;
}

// GB/s over timed gemv calls, either on one matrix (hot) or cycling copies (cold). The machine is
// shared, so report the best call (the kernel's capability) next to the median (what you got).
struct rate {
    double best = 0, median = 0;
};

rate gemv_gbs(const weight_set& s, bool cold, int nt, int max_reps, std::vector<float>& y) {
    const int64_t bytes = s.views[0].bytes();
    const int reps = static_cast<int>(std::clamp<int64_t>((int64_t{1} << 30) / bytes, 8, max_reps));
    std::vector<double> rates;
    k::gemv(s.views[0], s.x.data(), y.data(), nt);  // warm-up (thread pool, scratch)
    for (int i = 0; i < reps; ++i) {
        const sl::tensor_view& v = s.views[cold ? static_cast<size_t>(i) % s.views.size() : 0];
        const auto t0 = std::chrono::steady_clock::now();
        k::gemv(v, s.x.data(), y.data(), nt);
        rates.push_back(static_cast<double>(bytes) / seconds_since(t0) / 1e9);
    }
    std::sort(rates.begin(), rates.end());
    return {rates.back(), rates[rates.size() / 2]};
}

TEST(throughput, gemv_vs_read_bandwidth) {
    const int nt = bench_threads();
    const bool quick = std::getenv("SPARSELENS_BENCH_QUICK") != nullptr;
    const double bw = k::measure_read_bandwidth_gbs(nt, quick ? int64_t{256} << 20 : int64_t{1} << 30, 7);
    std::printf("read bandwidth (%d threads, %s): %.1f GB/s\n", nt, k::isa_name(k::active_isa()), bw);
    ASSERT_GT(bw, 0.0);

    struct shape {
        int64_t rows, cols;
    };
    std::vector<shape> shapes = {{2048, 8192}};
    if (!quick) shapes.push_back({4096, 14336});
    const k::isa saved = k::active_isa();
    std::printf("%-5s %-11s %-7s %16s %16s %9s\n", "type", "shape", "isa", "hot GB/s best/med",
                "cold GB/s best/med", "med %bw");
    for (dtype t : {dtype::f32, dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_0}) {
        for (const shape& sh : shapes) {
            const weight_set s = make_set(t, sh.rows, sh.cols);
            std::vector<float> y(static_cast<size_t>(sh.rows)), y_ref;
            bool have_ref = false;
            for (k::isa i : {k::isa::scalar, k::isa::avx2, k::isa::avx512}) {
                if (k::set_active_isa(i) != i) continue;
                if (i == k::isa::scalar && sh.rows * sh.cols > 2048 * 8192) continue;  // too slow to matter
                const int max_reps = i == k::isa::scalar ? 8 : 200;
                const rate hot = gemv_gbs(s, false, nt, max_reps, y);
                const rate cold = gemv_gbs(s, true, nt, max_reps, y);
                std::printf("%-5s %5lldx%-5lld %-7s %8.1f/%-7.1f %8.1f/%-7.1f %8.0f%%\n",
                            std::string(sl::dtype_name(t)).c_str(), static_cast<long long>(sh.rows),
                            static_cast<long long>(sh.cols), k::isa_name(i), hot.best, hot.median, cold.best,
                            cold.median, 100.0 * cold.median / bw);
                // Results must not depend on the ISA beyond float rounding.
                if (!have_ref) {  // the first ISA run on this shape is the reference
                    y_ref = y;
                    have_ref = true;
                }
                double num = 0, den = 0;
                for (size_t r = 0; r < y.size(); ++r) {
                    num += (static_cast<double>(y[r]) - y_ref[r]) * (static_cast<double>(y[r]) - y_ref[r]);
                    den += static_cast<double>(y_ref[r]) * y_ref[r];
                }
                EXPECT_LE(num / den, 1e-9) << k::isa_name(i);
                // Gross-regression floor for the SIMD paths: a memory-bound kernel far below the
                // machine's bandwidth means something fell back to slow code.
                if (i != k::isa::scalar) {
                    EXPECT_GT(cold.best, 0.25 * bw) << sl::dtype_name(t) << " " << k::isa_name(i);
                }
            }
        }
    }
    k::set_active_isa(saved);
}

}  // namespace

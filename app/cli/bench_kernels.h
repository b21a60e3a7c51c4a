// Kernel benchmark behind `sparselens bench kernels`: dense, sparse and fused GEMV medians over a
// working set larger than the last-level cache, with OpenBLAS and Eigen on the same f32 matrices.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sparselens/kernels/types.h"

namespace CLI {
class App;
}

namespace sl::cli {

// Adds `kernels` under the `bench` subcommand; its callback sets `run` (cmd_bench_kernels.cpp).
CLI::App* register_bench_kernels(CLI::App& bench, std::function<int()>& run);

struct mlp_shape {
    int64_t dim = 0;     // model width: rows of down, columns of gate/up
    int64_t hidden = 0;  // MLP neurons: rows of gate/up, columns of down
};

struct kernel_bench_params {
    std::vector<mlp_shape> shapes;
    std::vector<dtype> types;
    std::vector<double> densities;     // fractions of active channels / rows / neurons
    std::vector<std::string> kernels;  // any of: dense, input_sparse, output_sparse, fused, pairs
    int threads = 1;
    int reps = 15;                // timed calls per measurement, each on the next copy of the weights
    double working_set_gb = 1.0;  // weight copies cycled per measurement (> LLC: DRAM-bound numbers)
    bool baselines = true;        // OpenBLAS and Eigen next to the dense f32 kernel
    // Weight copies advised to use transparent huge pages, as the kernels' own layouts are. Random
    // sparse rows on 4 KiB pages pay a TLB miss each; false shows that case.
    bool huge_pages = true;
};

kernel_bench_params kernel_bench_default_params();

// One measured kernel configuration.
struct kernel_bench_row {
    std::string kernel;  // dense, openblas_sgemv, eigen_gemv, input_sparse, output_sparse, dense_mlp, fused_mlp
    std::string matrix;  // down [dim x hidden], up [hidden x dim], or mlp (gate + up + down)
    dtype type = dtype::f32;
    mlp_shape shape;
    double density = 1.0;
    int64_t active = 0;  // channels / rows / neurons computed
    double median_s = 0, min_s = 0;
    double bytes = 0;      // weight bytes the call reads
    double gbs = 0;        // bytes / median_s / 1e9
    double speedup = 0;    // our dense kernel's median / this median, same weights (1 for dense itself)
    double pattern_gbs = 0;  // sparse kernels: a pure read of the same listed rows (kernels::read_listed_rows)
    std::string baseline;  // the row `speedup` is relative to
    int copies = 0;        // weight copies cycled
};

struct kernel_bench_result {
    int threads = 0;
    std::string isa;
    double read_bw_gbs = 0;      // measured before the kernels
    double read_bw_end_gbs = 0;  // and after, to show how much the shared machine drifted
    double working_set_gb = 0;
    int reps = 0;
    bool have_openblas = false, have_eigen = false;
    bool huge_pages = false;
    std::vector<kernel_bench_row> rows;
};

// `log` receives one progress line per measured matrix set (may be empty).
kernel_bench_result run_kernel_bench(const kernel_bench_params& p, const std::function<void(const std::string&)>& log);

// Baselines (bench_baselines.cpp / bench_eigen.cpp); y = W x for row-major f32 W [rows, cols].
bool openblas_available();
void openblas_sgemv(const float* w, int64_t rows, int64_t cols, const float* x, float* y, int threads);
bool eigen_available();
// Eigen's GEMV is single-threaded; rows are split over `threads` OpenMP threads like our kernels.
void eigen_gemv(const float* w, int64_t rows, int64_t cols, const float* x, float* y, int threads);

}  // namespace sl::cli

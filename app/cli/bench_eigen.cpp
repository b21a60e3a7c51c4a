// Eigen GEMV baseline for `sparselens bench kernels`. Built with AVX2+FMA (see app/CMakeLists.txt) so
// Eigen vectorises like our kernels; only called after a CPUID check. Raw pointers in and out only:
// no standard-library templates are instantiated here with those flags.
#include <Eigen/Core>

#include <omp.h>

#include "bench_kernels.h"

namespace sl::cli {

bool eigen_available() {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

void eigen_gemv(const float* w, int64_t rows, int64_t cols, const float* x, float* y, int threads) {
    using mat = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
    using vec = Eigen::Map<const Eigen::VectorXf>;
    const vec xv(x, cols);
#pragma omp parallel num_threads(threads)
    {
        const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t r0 = rows * t / nt, r1 = rows * (t + 1) / nt;
        Eigen::Map<Eigen::VectorXf> yv(y + r0, r1 - r0);
        yv.noalias() = mat(w + r0 * cols, r1 - r0, cols) * xv;
    }
}

}  // namespace sl::cli

// OpenBLAS cblas_sgemv baseline for `sparselens bench kernels` (absent builds report it unavailable).
#include "bench_kernels.h"

#ifdef SPARSELENS_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace sl::cli {

#ifdef SPARSELENS_HAVE_OPENBLAS

bool openblas_available() {
    return true;
}

void openblas_sgemv(const float* w, int64_t rows, int64_t cols, const float* x, float* y, int threads) {
    // Debian's libopenblas (pthread flavour) keeps its own pool: size it like our OpenMP team.
    static int configured = 0;
    if (configured != threads) {
        openblas_set_num_threads(threads);
        configured = threads;
    }
    cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(rows), static_cast<int>(cols), 1.0f, w,
                static_cast<int>(cols), x, 1, 0.0f, y, 1);
}

#else

bool openblas_available() {
    return false;
}
void openblas_sgemv(const float*, int64_t, int64_t, const float*, float*, int) {}

#endif

}  // namespace sl::cli

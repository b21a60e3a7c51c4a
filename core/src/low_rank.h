// Private: weight matrices as Eigen matrices and truncated SVD (SparseLLM predictor, FFSplit light part).
#pragma once

#include <cstdint>

#include <Eigen/Dense>

#include "sparselens/kernels/types.h"

namespace sl {

using matrix_rm = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// The matrix's values in f32 ([rows, cols], row-major like the view).
matrix_rm dequantize_matrix(const tensor_view& w);

// W ~= a * b with a = U_r diag(S_r) [rows, r] and b = V_r^T [r, cols]: the best rank-r approximation.
struct low_rank_factors {
    matrix_rm a;
    matrix_rm b;
    Eigen::VectorXf singular;  // the r largest singular values, descending
    bool randomized = false;   // computed by the randomized range finder (see truncated_svd)
};

// Smaller side at or below which the SVD is exact (Eigen BDCSVD, thin). Above it an exact SVD costs
// O(rows * cols * min(rows, cols)) with a large constant (measured here: 3.1 s for 2048 x 512, so about
// 200 s per 8192 x 2048 matrix), and the randomized range finder of Halko, Martinsson & Tropp (2011)
// is used instead: oversampling 16, two power iterations, then an exact SVD of the small projected
// matrix (2.6 s for 8192 x 2048, rank 256, capturing 99% of the optimal energy on a test spectrum).
inline constexpr int64_t exact_svd_max_side = 256;

// r is clamped to [0, min(rows, cols)]. Deterministic (fixed seed).
low_rank_factors truncated_svd(const matrix_rm& w, int64_t r);

}  // namespace sl

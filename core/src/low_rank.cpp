// Truncated SVD of weight matrices: exact BDCSVD for small sides, a randomized range finder otherwise.
#include "low_rank.h"

#include <algorithm>
#include <random>

#include "sparselens/kernels/kernels.h"

namespace sl {

matrix_rm dequantize_matrix(const tensor_view& w) {
    matrix_rm m(w.rows, w.cols);
    for (int64_t r = 0; r < w.rows; ++r) kernels::dequantize_row(w.type, w.row(r), m.row(r).data(), w.cols);
    return m;
}

namespace {

// Orthonormal basis of the columns of y (thin Q of a Householder QR).
Eigen::MatrixXf orthonormal_basis(const Eigen::MatrixXf& y) {
    Eigen::HouseholderQR<Eigen::MatrixXf> qr(y);
    return qr.householderQ() * Eigen::MatrixXf::Identity(y.rows(), y.cols());
}

low_rank_factors from_svd(const Eigen::MatrixXf& u, const Eigen::VectorXf& s, const Eigen::MatrixXf& v, int64_t r) {
    low_rank_factors f;
    f.singular = s.head(r);
    f.a = u.leftCols(r) * s.head(r).asDiagonal();
    f.b = v.leftCols(r).transpose();
    return f;
}

}  // namespace

low_rank_factors truncated_svd(const matrix_rm& w, int64_t r) {
    const int64_t side = std::min<int64_t>(w.rows(), w.cols());
    r = std::clamp<int64_t>(r, 0, side);
    const int64_t oversample = 16, power_iterations = 2;
    if (side <= exact_svd_max_side || r + oversample >= side) {
        const Eigen::MatrixXf wc = w;
        Eigen::BDCSVD<Eigen::MatrixXf> svd(wc, Eigen::ComputeThinU | Eigen::ComputeThinV);
        return from_svd(svd.matrixU(), svd.singularValues(), svd.matrixV(), r);
    }
    // Range finder: Q spans W * Omega, sharpened by power iterations (W W^T)^q with re-orthonormalisation.
    const int64_t p = r + oversample;
    std::mt19937_64 rng(0x5eed5eedu);
    std::normal_distribution<float> normal;
    Eigen::MatrixXf omega(w.cols(), p);
    for (int64_t i = 0; i < omega.size(); ++i) omega.data()[i] = normal(rng);
    Eigen::MatrixXf q = orthonormal_basis(w * omega);
    for (int64_t it = 0; it < power_iterations; ++it) {
        const Eigen::MatrixXf z = orthonormal_basis(w.transpose() * q);
        q = orthonormal_basis(w * z);
    }
    const Eigen::MatrixXf small = q.transpose() * w;  // [p, cols]
    Eigen::BDCSVD<Eigen::MatrixXf> svd(small, Eigen::ComputeThinU | Eigen::ComputeThinV);
    low_rank_factors f = from_svd(q * svd.matrixU(), svd.singularValues(), svd.matrixV(), r);
    f.randomized = true;
    return f;
}

}  // namespace sl

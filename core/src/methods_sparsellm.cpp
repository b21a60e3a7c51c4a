// SparseLLM-style fused sparse MLP: a training-free low-rank predictor of the gate picks k neurons per token.
#include <algorithm>
#include <cmath>

#include "low_rank.h"
#include "methods_internal.h"
#include "sparselens/kernels/kernels.h"

namespace sl {

namespace {

// SparseLLM scores neurons with a trained low-rank ("LoRA") projection of the MLP input. Training-free
// here: the rank-r truncated SVD of W_gate, W_gate ~= (U_r S_r) V_r^T, so score_j = |(U_r S_r)(V_r^T x)|_j
// approximates |W_gate x|_j at r (dim + hidden) multiply-adds instead of dim * hidden. The paper's
// quantile threshold at the target sparsity is a top-k with k = density * hidden (exact density).
class sparsellm_method final : public sparsity_method {
public:
    sparsellm_method(const model& m, float density, int32_t rank)
        : m_k(density_to_k(density, m.hp.hidden_dim)),
          m_hidden(m.hp.hidden_dim),
          m_dim(m.hp.dim),
          m_layers(static_cast<size_t>(std::max(0, m.hp.n_layers))) {
        const int64_t side = std::min<int64_t>(m_hidden, m_dim);
        m_rank = std::clamp<int64_t>(rank > 0 ? rank : std::max<int64_t>(1, m_dim / 8), 1, side);
        if (m_k >= m_hidden) return;  // full density: every neuron, no predictor needed
        m_pred.reserve(m.layers.size());  // the views point into each predictor's vectors
        for (const layer_weights& lw : m.layers) {
            const low_rank_factors f = truncated_svd(dequantize_matrix(lw.w_gate), m_rank);
            predictor& p = m_pred.emplace_back();
            p.us.assign(f.a.data(), f.a.data() + f.a.size());
            p.vt.assign(f.b.data(), f.b.data() + f.b.size());
            p.us_view = tensor_view{dtype::f32, m_hidden, m_rank, p.us.data()};
            p.vt_view = tensor_view{dtype::f32, m_rank, m_dim, p.vt.data()};
        }
    }

    std::string name() const override { return "sparsellm"; }
    uint64_t selection_bytes_per_token() const override {
        uint64_t bytes = 0;
        for (const predictor& p : m_pred) bytes += static_cast<uint64_t>(p.us_view.bytes() + p.vt_view.bytes());
        return bytes;  // no predictor at full density
    }
    method_traits traits() const override {
        method_traits t;
        t.neurons_pre = true;
        t.fused = true;
        return t;
    }

    void select_mlp_inputs(const token_info& t, std::span<const float> x, layer_masks& m) override {
        if (m_k >= m_hidden) return;  // neurons_pre stays all: the dense path, bit for bit
        const predictor& p = m_pred[static_cast<size_t>(t.layer)];
        m_low.resize(static_cast<size_t>(m_rank));
        m_score.resize(static_cast<size_t>(m_hidden));
        kernels::gemv(p.vt_view, x.data(), m_low.data(), 0);     // V_r^T x
        kernels::gemv(p.us_view, m_low.data(), m_score.data(), 0);  // (U_r S_r)(V_r^T x)
        for (float& s : m_score) s = std::fabs(s);
        top_k_mask(m_score, m_k, m.neurons_pre);
    }
    std::vector<std::pair<std::string, std::vector<float>>> per_layer_values() const override {
        const float keep = m_hidden > 0 ? static_cast<float>(static_cast<double>(m_k) / static_cast<double>(m_hidden)) : 1.0f;
        return {{"keep", std::vector<float>(m_layers, keep)},
                {"rank", std::vector<float>(m_layers, static_cast<float>(m_rank))}};
    }

private:
    struct predictor {
        std::vector<float> us;  // U_r S_r [hidden, r], row-major
        std::vector<float> vt;  // V_r^T [r, dim], row-major
        tensor_view us_view, vt_view;
    };
    int64_t m_k, m_hidden, m_dim, m_rank = 1;
    size_t m_layers;
    std::vector<predictor> m_pred;
    std::vector<float> m_low, m_score;
};

}  // namespace

std::unique_ptr<sparsity_method> make_sparsellm(const model& m, float density, int32_t rank) {
    return std::make_unique<sparsellm_method>(m, density, rank);
}

}  // namespace sl

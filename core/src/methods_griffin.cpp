// GRIFFIN (paper section 4.2): prompt statistics pick per-sequence expert neurons used for all generation.
#include <algorithm>
#include <cmath>

#include "methods_internal.h"

namespace sl {

namespace {

// With fewer prompt tokens than this the statistic is one token's own top-k, not the sequence's
// flocking pattern GRIFFIN relies on (a BOS-only prompt would pick the experts from BOS): generation
// then stays dense.
constexpr int64_t k_min_prompt_tokens = 2;

class griffin_method final : public sparsity_method {
public:
    griffin_method(const model_hparams& hp, float density)
        : m_k(density_to_k(density, hp.hidden_dim)),
          m_hidden(hp.hidden_dim),
          m_sq(static_cast<size_t>(hp.n_layers) * hp.hidden_dim, 0.0),
          m_experts(static_cast<size_t>(hp.n_layers)) {}

    std::string name() const override { return "griffin"; }
    method_traits traits() const override {
        method_traits t;
        t.neurons_pre = true;  // generation: the experts
        t.down_in = true;      // prompt: read the dense GLU (down_in is left all)
        t.down_observe_only = true;
        t.fused = true;        // the experts' bundles stay in the compact buffer: copied once, then reused
        t.fused_fixed = true;  // and the rest of gate/up may leave memory until the next prompt
        return t;
    }

    void begin_sequence() override {
        std::fill(m_sq.begin(), m_sq.end(), 0.0);
        m_prompt_tokens = 0;
        m_fixed = false;
    }

    // Eq. 6: s_j = ||Zbar[:, j]||_2; the top-k of s are the experts E. Prompt tokens after a generation
    // (a continued conversation) keep accumulating, and the experts are re-chosen from all of them.
    void end_prompt(int32_t) override {
        m_fixed = m_prompt_tokens >= k_min_prompt_tokens;
        if (!m_fixed) return;
        for (size_t l = 0; l < m_experts.size(); ++l) {
            m_score.resize(static_cast<size_t>(m_hidden));
            for (int64_t j = 0; j < m_hidden; ++j)
                m_score[static_cast<size_t>(j)] = static_cast<float>(std::sqrt(m_sq[l * m_hidden + j]));
            top_k_mask(m_score, m_k, m_experts[l]);
        }
    }

    // The expert count; the experts themselves are chosen per sequence.
    std::vector<std::pair<std::string, std::vector<float>>> per_layer_values() const override {
        const float keep = m_hidden > 0 ? static_cast<float>(static_cast<double>(m_k) / static_cast<double>(m_hidden)) : 1.0f;
        return {{"keep", std::vector<float>(m_experts.size(), keep)}};
    }

    void select_mlp_inputs(const token_info& t, std::span<const float>, layer_masks& m) override {
        if (!t.in_prompt && m_fixed) m.neurons_pre = m_experts[static_cast<size_t>(t.layer)];
    }

    const index_mask* planned_neurons(int32_t layer) const override {
        if (!m_fixed || layer < 0 || static_cast<size_t>(layer) >= m_experts.size()) return nullptr;
        return &m_experts[static_cast<size_t>(layer)];
    }

    // Prompt tokens run densely; each GLU row z is normalised to unit length (the relative activations
    // Zbar) and its squares summed per neuron. A zero or non-finite row carries no relative information
    // and is skipped.
    void select_down(const token_info& t, std::span<const float> glu, layer_masks&) override {
        if (!t.in_prompt) return;
        if (t.layer == 0) ++m_prompt_tokens;
        double norm2 = 0.0;
        for (float v : glu) norm2 += static_cast<double>(v) * v;
        if (!(norm2 > 0.0) || !std::isfinite(norm2)) return;
        double* sq = m_sq.data() + static_cast<size_t>(t.layer) * m_hidden;
        for (size_t j = 0; j < glu.size(); ++j) sq[j] += static_cast<double>(glu[j]) * glu[j] / norm2;
    }

private:
    int64_t m_k;
    int64_t m_hidden;
    std::vector<double> m_sq;  // [layer][hidden]: sum over prompt tokens of Zbar[t, j]^2
    std::vector<index_mask> m_experts;
    int64_t m_prompt_tokens = 0;
    bool m_fixed = false;
    std::vector<float> m_score;
};

}  // namespace

std::unique_ptr<sparsity_method> make_griffin(const model_hparams& hp, float density) {
    return std::make_unique<griffin_method>(hp, density);
}

}  // namespace sl

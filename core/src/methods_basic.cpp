// Dense, GLU / gate / up pruning and DIP / DIP-CA: the top-k methods of the DIP paper (sections 3-5).
#include "glu_act.h"
#include "methods_internal.h"

#include <algorithm>
#include <cmath>

namespace sl {

namespace {

// The share k / n a top-k method reads, the same for every layer.
std::vector<float> uniform_share(int32_t n_layers, int64_t k, int64_t n) {
    return std::vector<float>(static_cast<size_t>(std::max(0, n_layers)),
                              n > 0 ? static_cast<float>(static_cast<double>(k) / static_cast<double>(n)) : 1.0f);
}

class dense_method final : public sparsity_method {
public:
    std::string name() const override { return "dense"; }
    method_traits traits() const override { return {}; }
};

class glu_pruning final : public sparsity_method {
public:
    glu_pruning(const model_hparams& hp, float keep) : m_hp(hp), m_k(density_to_k(keep, hp.hidden_dim)) {}
    std::string name() const override { return "glu"; }
    method_traits traits() const override {
        method_traits t;
        t.down_in = true;
        return t;
    }
    float planned_input_density(int32_t, proj p) const override {  // exactly k GLU entries on every token
        return p == proj::down ? static_cast<float>(m_k) / static_cast<float>(m_hp.hidden_dim) : 1.0f;
    }
    void select_down(const token_info&, std::span<const float> glu, layer_masks& m) override {
        m_abs.assign(glu.begin(), glu.end());
        for (float& v : m_abs) v = std::fabs(v);
        top_k_mask(m_abs, m_k, m.down_in);
    }
    std::vector<std::pair<std::string, std::vector<float>>> per_layer_values() const override {
        return {{"down_keep", uniform_share(m_hp.n_layers, m_k, m_hp.hidden_dim)}};
    }

private:
    model_hparams m_hp;
    int64_t m_k;
    std::vector<float> m_abs;
};

class gate_pruning final : public sparsity_method {
public:
    gate_pruning(const model_hparams& hp, float keep, bool up_first, glu_activation act)
        : m_hp(hp), m_k(density_to_k(keep, hp.hidden_dim)), m_up_first(up_first), m_act(act) {}
    std::string name() const override { return m_up_first ? "up" : "gate"; }
    method_traits traits() const override {
        method_traits t;
        t.up_first = m_up_first;
        t.neurons_post = true;
        return t;
    }
    void select_after_first(const token_info&, std::span<const float> first, layer_masks& m) override {
        m_score.resize(first.size());
        const auto n = static_cast<int64_t>(first.size());
        if (m_up_first)  // |up|
            for (int64_t i = 0; i < n; ++i) m_score[static_cast<size_t>(i)] = std::fabs(first[static_cast<size_t>(i)]);
        else  // |act(gate)|
            glu_act_abs(m_act, first.data(), m_score.data(), n);
        top_k_mask(m_score, m_k, m.neurons_post);
    }
    std::vector<std::pair<std::string, std::vector<float>>> per_layer_values() const override {
        return {{"keep", uniform_share(m_hp.n_layers, m_k, m_hp.hidden_dim)}};
    }

private:
    model_hparams m_hp;
    int64_t m_k;
    bool m_up_first;
    glu_activation m_act;
    std::vector<float> m_score;
};

// Eq. 10 of the DIP paper, s = |v| (c + gamma (1 - c)) / ||v||_inf, without the normalisation: a
// positive factor common to all units cannot change a top-k ranking, but rounding the quotients could
// make ties that |v| does not have (and cost two more passes). So gamma = 1, and DIP (no residency:
// c = 1), rank exactly |v|.
void cache_aware_scores(std::span<const float> v, const uint8_t* resident, float gamma, std::vector<float>& s) {
    s.resize(v.size());
    if (!resident) {
        for (size_t i = 0; i < v.size(); ++i) s[i] = std::fabs(v[i]);
        return;
    }
    for (size_t i = 0; i < v.size(); ++i) {
        const float c = static_cast<float>(resident[i] != 0);
        s[i] = std::fabs(v[i]) * (c + gamma * (1.0f - c));
    }
}

class dip_method final : public sparsity_method {
public:
    dip_method(const model_hparams& hp, float d_in, float d_down, float gamma, bool cache_aware)
        : m_hp(hp),
          m_k_in(density_to_k(d_in, hp.dim)),
          m_k_down(density_to_k(d_down, hp.hidden_dim)),
          m_gamma(gamma),
          m_cache_aware(cache_aware) {}
    std::string name() const override { return m_cache_aware ? "dip-ca" : "dip"; }
    method_traits traits() const override {
        method_traits t;
        t.mlp_inputs = true;
        t.mlp_inputs_shared = true;
        t.down_in = true;
        return t;
    }
    // Exactly k of the inputs of gate/up and of down on every token.
    float planned_input_density(int32_t, proj p) const override {
        if (p == proj::gate || p == proj::up) return static_cast<float>(m_k_in) / static_cast<float>(m_hp.dim);
        if (p == proj::down) return static_cast<float>(m_k_down) / static_cast<float>(m_hp.hidden_dim);
        return 1.0f;
    }
    void select_mlp_inputs(const token_info& t, std::span<const float> x, layer_masks& m) override {
        cache_aware_scores(x, m_cache_aware ? t.resident_inputs : nullptr, m_gamma, m_score);
        top_k_mask(m_score, m_k_in, m.gate_in);
        m.up_in = m.gate_in;  // one unit = the same input column of both matrices
    }
    void select_down(const token_info& t, std::span<const float> glu, layer_masks& m) override {
        cache_aware_scores(glu, m_cache_aware ? t.resident_neurons : nullptr, m_gamma, m_score);
        top_k_mask(m_score, m_k_down, m.down_in);
    }
    std::vector<std::pair<std::string, std::vector<float>>> per_layer_values() const override {
        return {{"d_in", uniform_share(m_hp.n_layers, m_k_in, m_hp.dim)},
                {"d_down", uniform_share(m_hp.n_layers, m_k_down, m_hp.hidden_dim)}};
    }

private:
    model_hparams m_hp;
    int64_t m_k_in, m_k_down;
    float m_gamma;
    bool m_cache_aware;
    std::vector<float> m_score;
};

}  // namespace

std::unique_ptr<sparsity_method> make_dense_method() { return std::make_unique<dense_method>(); }
std::unique_ptr<sparsity_method> make_glu_pruning(const model_hparams& hp, float keep) {
    return std::make_unique<glu_pruning>(hp, keep);
}
std::unique_ptr<sparsity_method> make_gate_pruning(const model_hparams& hp, float keep, bool up_first, glu_activation act) {
    return std::make_unique<gate_pruning>(hp, keep, up_first, act);
}
std::unique_ptr<sparsity_method> make_dip(const model_hparams& hp, float d_in, float d_down, float gamma,
                                          bool cache_aware) {
    return std::make_unique<dip_method>(hp, d_in, d_down, gamma, cache_aware);
}

}  // namespace sl

// Calibrated threshold methods CATS and CHESS (w/o and w/ attention), their selection rules and the
// registry rows of every threshold method (TEAL lives in methods_teal.cpp, pinning in methods_pinning.cpp).
#include <algorithm>
#include <cassert>
#include <cmath>
#include <iterator>
#include <string>

#include "glu_act.h"
#include "methods_threshold_internal.h"

namespace sl {

// ---- selection rules ----------------------------------------------------------------------------

float silu_abs(float a) {
    return std::fabs(a / (1.0f + std::exp(-a)));
}

void threshold_mask_strict(std::span<const float> values, float t, index_mask& out) {
    out.all = false;
    abs_threshold_indices(values, t, nullptr, true, out.idx);
    if (out.idx.size() == values.size()) out.set_all();
}

void channel_threshold_mask(std::span<const float> values, std::span<const float> t, index_mask& out) {
    assert(values.size() == t.size());
    out.all = false;
    abs_threshold_indices(values.first(std::min(values.size(), t.size())), 0.0f, t.data(), true, out.idx);
    if (out.idx.size() == values.size()) out.set_all();
}

void union_mask(const index_mask& a, std::span<const int32_t> b, int64_t n, index_mask& out) {
    if (a.all) {
        out.set_all();
        return;
    }
    std::vector<int32_t> merged;
    merged.reserve(a.idx.size() + b.size());
    std::set_union(a.idx.begin(), a.idx.end(), b.begin(), b.end(), std::back_inserter(merged));
    out.all = false;
    out.idx = std::move(merged);
    if (static_cast<int64_t>(out.idx.size()) >= n) out.set_all();
}

float dense_gate_keep(float mlp_density) {
    if (!(mlp_density > 1.0f / 3.0f)) return 0.0f;  // also NaN
    return std::clamp((3.0f * mlp_density - 1.0f) / 2.0f, 0.0f, 1.0f);
}

outcome check_threshold_calibration(const std::string& method, const model& m, const calibration* cal) {
    if (!cal) return error{method + ": needs a calibration file (run `sparselens calibrate MODEL TEXT` first)"};
    if (outcome o = calibration_matches(*cal, m); !o.ok()) return error{method + ": " + o.message()};
    const auto hidden = static_cast<size_t>(m.hp.hidden_dim);
    for (size_t l = 0; l < cal->layers.size(); ++l) {
        const layer_calibration& lc = cal->layers[l];
        bool ok = lc.mean_abs_up.size() == hidden && lc.heavy_hitter.size() == hidden &&
                  lc.down_col_norm.size() == hidden && lc.mean_sq_glu.size() == hidden;
        for (const auto& f : lc.topk_freq) ok = ok && f.size() == hidden;
        if (!ok)
            return error{method + ": calibration layer " + std::to_string(l) + " lacks per-neuron statistics for " +
                         std::to_string(hidden) + " neurons"};
    }
    return outcome::success();
}

namespace {

// CATS (Lee et al. 2024): the gate is computed densely; a neuron's up row and down column are used when
// |silu(gate_i)| reaches the layer's threshold, calibrated so that a `keep` share of entries pass.
class cats_method final : public sparsity_method {
public:
    cats_method(std::vector<float> keep, std::vector<float> t, glu_activation act)
        : m_keep(std::move(keep)), m_t(std::move(t)), m_act(act) {}
    std::string name() const override { return "cats"; }
    method_traits traits() const override {
        method_traits tr;
        tr.neurons_post = std::any_of(m_keep.begin(), m_keep.end(), [](float k) { return k < 1.0f; });
        return tr;
    }
    void select_after_first(const token_info& t, std::span<const float> first, layer_masks& m) override {
        const auto l = static_cast<size_t>(t.layer);
        if (m_keep[l] >= 1.0f) return;  // exactly dense: the engine keeps the dense kernels
        if (m_keep[l] <= 0.0f) {
            m.neurons_post.set_none();
            return;
        }
        m_score.resize(first.size());
        glu_act_abs(m_act, first.data(), m_score.data(), static_cast<int64_t>(first.size()));
        threshold_mask(m_score, m_t[l], m.neurons_post);
    }
    std::vector<std::pair<std::string, std::vector<float>>> per_layer_values() const override {
        return {{"keep", m_keep}, {"threshold", m_t}};
    }

private:
    std::vector<float> m_keep, m_t;
    glu_activation m_act;
    std::vector<float> m_score;
};

// CHESS (Zhang et al. 2024, section 3): channel-wise thresholds t_i = T / E|a_up_i| on |silu(gate_i)|
// (eq. 9-10, strict: |a| <= t_i is pruned); with attention, CATS-style tensor thresholds on the inputs
// of q and o only (selective sparsification, eq. 21).
class chess_method final : public sparsity_method {
public:
    chess_method(std::vector<float> keep, std::vector<float> score_t, std::vector<std::vector<float>> channel_t,
                 bool attention, float attn_keep, std::vector<float> q_t, std::vector<float> o_t, glu_activation act)
        : m_act(act),
          m_keep(std::move(keep)),
          m_score_t(std::move(score_t)),
          m_channel_t(std::move(channel_t)),
          m_attention(attention),
          m_attn_keep(attn_keep),
          m_q_t(std::move(q_t)),
          m_o_t(std::move(o_t)) {}
    std::string name() const override { return m_attention ? "chess-attn" : "chess"; }
    method_traits traits() const override {
        method_traits tr;
        tr.neurons_post = std::any_of(m_keep.begin(), m_keep.end(), [](float k) { return k < 1.0f; });
        tr.attn_inputs = tr.o_input = m_attention && m_attn_keep < 1.0f;
        return tr;
    }
    // q and o at the calibrated attention keep; k, v (and gate/up, down: neurons, not inputs) dense.
    float planned_input_density(int32_t, proj p) const override {
        if (p == proj::q || p == proj::o) return m_attention ? std::clamp(m_attn_keep, 0.0f, 1.0f) : 1.0f;
        return p == proj::down ? -1.0f : 1.0f;
    }
    void select_attn_inputs(const token_info& t, std::span<const float> x, layer_masks& m) override {
        attn_rule(m_q_t[static_cast<size_t>(t.layer)], x, m.q_in);  // k_in, v_in stay dense (eq. 21)
    }
    void select_o_input(const token_info& t, std::span<const float> x, layer_masks& m) override {
        attn_rule(m_o_t[static_cast<size_t>(t.layer)], x, m.o_in);
    }
    void select_after_first(const token_info& t, std::span<const float> first, layer_masks& m) override {
        const auto l = static_cast<size_t>(t.layer);
        if (m_keep[l] >= 1.0f) return;
        if (m_keep[l] <= 0.0f) {
            m.neurons_post.set_none();
            return;
        }
        m_score.resize(first.size());
        glu_act_abs(m_act, first.data(), m_score.data(), static_cast<int64_t>(first.size()));
        channel_threshold_mask(m_score, m_channel_t[l], m.neurons_post);
    }
    // The channel thresholds are T_l / E|a_up_i| with E|a_up| from the calibration, so T_l pins them down.
    std::vector<std::pair<std::string, std::vector<float>>> per_layer_values() const override {
        std::vector<std::pair<std::string, std::vector<float>>> v{{"keep", m_keep}, {"score_threshold", m_score_t}};
        if (m_attention) {
            v.emplace_back("attn_keep", std::vector<float>(m_keep.size(), m_attn_keep));
            v.emplace_back("q_threshold", m_q_t);
            v.emplace_back("o_threshold", m_o_t);
        }
        return v;
    }

private:
    void attn_rule(float t, std::span<const float> x, index_mask& out) const {
        if (m_attn_keep >= 1.0f) return;
        if (m_attn_keep <= 0.0f)
            out.set_none();
        else
            threshold_mask_strict(x, t, out);
    }

    glu_activation m_act;
    std::vector<float> m_keep;
    std::vector<float> m_score_t;  // T_l (eq. 9)
    std::vector<std::vector<float>> m_channel_t;
    bool m_attention;
    float m_attn_keep;
    std::vector<float> m_q_t, m_o_t;
    std::vector<float> m_score;
};

}  // namespace

std::unique_ptr<sparsity_method> make_cats(const model& m, const calibration& cal, const std::vector<float>& keep) {
    std::vector<float> t(keep.size());
    for (size_t l = 0; l < keep.size(); ++l)
        t[l] = cal.threshold_for_density(static_cast<int32_t>(l), site::gate_act, keep[l]);
    return std::make_unique<cats_method>(keep, std::move(t), m.arch.act);
}

std::unique_ptr<sparsity_method> make_chess(const model& m, const calibration& cal, const std::vector<float>& keep,
                                            bool attention, float attn_keep) {
    const auto n_layers = static_cast<size_t>(m.hp.n_layers);
    std::vector<std::vector<float>> channel_t(n_layers);
    std::vector<float> score_t(n_layers), q_t(n_layers, 0.0f), o_t(n_layers, 0.0f);
    for (size_t l = 0; l < n_layers; ++l) {
        const auto li = static_cast<int32_t>(l);
        channel_t[l] = cal.chess_channel_thresholds(li, keep[l]);
        score_t[l] = cal.threshold_for_density(li, site::chess_score, keep[l]);
        if (attention) {
            q_t[l] = cal.threshold_for_density(li, site::q_in, attn_keep);
            o_t[l] = cal.threshold_for_density(li, site::o_in, attn_keep);
        }
    }
    return std::make_unique<chess_method>(keep, std::move(score_t), std::move(channel_t), attention, attn_keep,
                                          std::move(q_t), std::move(o_t), m.arch.act);
}

namespace {

using built = result<std::unique_ptr<sparsity_method>>;

built build_cats_entry(const method_config& c, const model& m, const calibration* cal) {
    if (outcome o = check_threshold_calibration("cats", m, cal); !o.ok()) return error{o.message()};
    return make_cats(m, *cal, std::vector<float>(static_cast<size_t>(m.hp.n_layers), dense_gate_keep(c.density)));
}

built build_chess_entry(const method_config& c, const model& m, const calibration* cal, bool attention) {
    const char* name = attention ? "chess-attn" : "chess";
    if (outcome o = check_threshold_calibration(name, m, cal); !o.ok()) return error{o.message()};
    if (!(c.attn_density >= 0.0f && c.attn_density <= 1.0f))
        return error{std::string(name) + ": attention density " + std::to_string(c.attn_density) +
                     " is outside [0, 1]"};
    const float keep = dense_gate_keep(c.density);
    // The paper applies one sparsity level to the FFN and the attention inputs; attn_density < 1 overrides it.
    const float attn_keep = c.attn_density < 1.0f ? c.attn_density : keep;
    return make_chess(m, *cal, std::vector<float>(static_cast<size_t>(m.hp.n_layers), keep), attention, attn_keep);
}

built build_teal_entry(const method_config& c, const model& m, const calibration* cal, teal_proxy proxy) {
    const char* name = proxy == teal_proxy::uniform ? "teal-uniform" : "teal";
    if (outcome o = check_threshold_calibration(name, m, cal); !o.ok()) return error{o.message()};
    if (!(c.attn_density >= 0.0f && c.attn_density <= 1.0f))
        return error{std::string(name) + ": attention density " + std::to_string(c.attn_density) +
                     " is outside [0, 1]"};
    teal_params p = teal_default_params();
    p.proxy = proxy;
    // attn_density 1 (the default) keeps the paper's single whole-layer budget; below 1 the attention
    // projections get their own and `density` covers the MLP.
    if (c.attn_density < 1.0f) p.attn_density = c.attn_density;
    auto plan = teal_make_plan(m, *cal, c.density, p);
    if (!plan.ok()) return error{std::string(name) + ": " + plan.message()};
    return make_teal_method(std::move(plan).value());
}

}  // namespace

std::vector<method_entry> threshold_method_entries() {
    return {
        {"cats",
         "CATS: dense gate; |silu(W_g x)| above a per-layer calibrated threshold selects up rows and down columns",
         true,
         [](const method_config& c, const model& m, const calibration* cal) { return build_cats_entry(c, m, cal); }},
        {"chess", "CHESS w/o: channel-wise thresholds T / E|a_up_i| on |silu(gate_i)|; attention dense", true,
         [](const method_config& c, const model& m, const calibration* cal) {
             return build_chess_entry(c, m, cal, false);
         }},
        {"chess-attn", "CHESS w/: channel-wise MLP thresholds plus thresholds on the q and o projection inputs", true,
         [](const method_config& c, const model& m, const calibration* cal) {
             return build_chess_entry(c, m, cal, true);
         }},
        {"teal",
         "TEAL: magnitude thresholds on the inputs of all seven projections, greedy per-layer allocation "
         "(density = whole layer; with an attention density: MLP and attention budgets apart)",
         true,
         [](const method_config& c, const model& m, const calibration* cal) {
             return build_teal_entry(c, m, cal, teal_default_params().proxy);
         }},
        {"teal-uniform", "TEAL with one density for all seven projections (no greedy allocation; attention density "
                         "sets q/k/v/o apart)",
         true,
         [](const method_config& c, const model& m, const calibration* cal) {
             return build_teal_entry(c, m, cal, teal_proxy::uniform);
         }},
    };
}

}  // namespace sl

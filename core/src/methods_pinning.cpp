// Heavy-hitter pinning: an always-active neuron set composed with DIP, DIP-CA, CATS and CHESS, with the
// pinned neurons counted inside the method's density budget.
#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "methods_threshold_internal.h"

namespace sl {

double expected_pinned_overlap(const layer_calibration& lc, std::span<const int32_t> pinned, float d) {
    // Membership frequency of neuron j in the per-token top-(d · hidden) by |glu| is known at the
    // recorded densities; it is 0 at d = 0 and 1 at d = 1, linear in between.
    constexpr size_t n_pts = calibration_topk_densities.size() + 2;
    std::array<double, n_pts> xs{};
    xs[0] = 0.0;
    for (size_t i = 0; i < calibration_topk_densities.size(); ++i) xs[i + 1] = calibration_topk_densities[i];
    xs[n_pts - 1] = 1.0;
    const double x = std::clamp(static_cast<double>(d), 0.0, 1.0);
    size_t seg = 0;
    while (seg + 2 < n_pts && x > xs[seg + 1]) ++seg;
    const double w = xs[seg + 1] > xs[seg] ? (x - xs[seg]) / (xs[seg + 1] - xs[seg]) : 0.0;
    double sum = 0.0;
    for (int32_t j : pinned) {
        auto y = [&](size_t i) -> double {
            if (i == 0) return 0.0;
            if (i == n_pts - 1) return 1.0;
            const std::vector<float>& f = lc.topk_freq[i - 1];
            return static_cast<size_t>(j) < f.size() ? f[static_cast<size_t>(j)] : 0.0;
        };
        sum += (1.0 - w) * y(seg) + w * y(seg + 1);
    }
    return sum;
}

float pinned_inner_keep(const layer_calibration& lc, std::span<const int32_t> pinned, int64_t hidden, float keep) {
    if (keep >= 1.0f) return 1.0f;
    const double n = static_cast<double>(hidden);
    const double goal = n * static_cast<double>(keep) - static_cast<double>(pinned.size());
    if (goal < -1e-6 * n) return -1.0f;
    if (goal <= 0.0) return 0.0f;
    // Expected non-pinned neurons above the threshold at density d: n d - overlap(d), rising in d.
    double lo = 0.0, hi = 1.0;
    for (int it = 0; it < 60; ++it) {
        const double mid = 0.5 * (lo + hi);
        const double got = n * mid - expected_pinned_overlap(lc, pinned, static_cast<float>(mid));
        (got >= goal ? hi : lo) = mid;
    }
    return static_cast<float>(hi);
}

namespace {

// Runs the inner method on activations whose pinned entries are zeroed (so the inner spends its reduced
// budget on the other neurons), then adds the pinned neurons to the mask it chose.
class pinned_method final : public sparsity_method {
public:
    pinned_method(std::unique_ptr<sparsity_method> inner, std::vector<std::vector<int32_t>> pinned, bool post,
                  int64_t hidden)
        : m_inner(std::move(inner)), m_pinned(std::move(pinned)), m_post(post), m_hidden(hidden) {}
    std::string name() const override { return m_inner->name() + "+pin"; }
    method_traits traits() const override {
        method_traits t = m_inner->traits();
        (m_post ? t.neurons_post : t.down_in) = true;
        return t;
    }
    void begin_sequence() override { m_inner->begin_sequence(); }
    void end_prompt(int32_t n_prompt) override { m_inner->end_prompt(n_prompt); }
    void select_attn_inputs(const token_info& t, std::span<const float> x, layer_masks& m) override {
        m_inner->select_attn_inputs(t, x, m);
    }
    void select_o_input(const token_info& t, std::span<const float> x, layer_masks& m) override {
        m_inner->select_o_input(t, x, m);
    }
    void select_mlp_inputs(const token_info& t, std::span<const float> x, layer_masks& m) override {
        m_inner->select_mlp_inputs(t, x, m);
    }
    void select_after_first(const token_info& t, std::span<const float> first, layer_masks& m) override {
        if (!m_post) {
            m_inner->select_after_first(t, first, m);
            return;
        }
        if (m_inner->traits().neurons_post) m_inner->select_after_first(t, masked(t.layer, first), m);
        union_mask(m.neurons_post, m_pinned[static_cast<size_t>(t.layer)], m_hidden, m.neurons_post);
    }
    void select_down(const token_info& t, std::span<const float> glu, layer_masks& m) override {
        if (m_post) {
            m_inner->select_down(t, glu, m);
            return;
        }
        if (m_inner->traits().down_in) m_inner->select_down(t, masked(t.layer, glu), m);
        union_mask(m.down_in, m_pinned[static_cast<size_t>(t.layer)], m_hidden, m.down_in);
    }
    // The inner method's values (its budget already reduced by the pinned set) and the pinned share.
    std::vector<std::pair<std::string, std::vector<float>>> per_layer_values() const override {
        auto v = m_inner->per_layer_values();
        std::vector<float> share;
        for (const auto& p : m_pinned)
            share.push_back(static_cast<float>(static_cast<double>(p.size()) / static_cast<double>(m_hidden)));
        v.emplace_back("pinned", std::move(share));
        return v;
    }

private:
    std::span<const float> masked(int32_t layer, std::span<const float> v) {
        m_scratch.assign(v.begin(), v.end());
        for (int32_t j : m_pinned[static_cast<size_t>(layer)])
            if (static_cast<size_t>(j) < m_scratch.size()) m_scratch[static_cast<size_t>(j)] = 0.0f;
        return m_scratch;
    }

    std::unique_ptr<sparsity_method> m_inner;
    std::vector<std::vector<int32_t>> m_pinned;  // per layer, sorted
    bool m_post;                                 // pin into neurons_post (cats, chess) or down_in (dip)
    int64_t m_hidden;
    std::vector<float> m_scratch;
};

}  // namespace

result<std::unique_ptr<sparsity_method>> build_pinned(const method_entry& e, const method_config& cfg, const model& m,
                                                      const calibration* cal) {
    const std::string& name = e.name;
    const bool is_dip = name == "dip" || name == "dip-ca";
    if (!method_knobs_read(name).pin)
        return error{name + ": heavy-hitter pinning (pin_fraction " + std::to_string(cfg.pin_fraction) +
                     ") is supported only by dip, dip-ca, cats, chess and chess-attn"};
    if (outcome o = check_threshold_calibration(name + " with pinning", m, cal); !o.ok()) return error{o.message()};

    const int64_t hidden = m.hp.hidden_dim;
    const auto n_layers = static_cast<size_t>(m.hp.n_layers);
    std::vector<std::vector<int32_t>> pinned(n_layers);
    for (size_t l = 0; l < n_layers; ++l) {
        pinned[l] = cal->heavy_hitters(static_cast<int32_t>(l), cfg.pin_fraction);
        std::sort(pinned[l].begin(), pinned[l].end());
    }
    const double pinned_share =
        static_cast<double>(pinned.empty() ? 0 : pinned[0].size()) / static_cast<double>(hidden);

    std::unique_ptr<sparsity_method> inner;
    if (is_dip) {
        // The pinned neurons take their places out of the down-column budget: k_down' = k_down - |P|.
        const float d_down = std::clamp(cfg.d_down >= 0.0f ? cfg.d_down : cfg.density, 0.0f, 1.0f);
        const double rest = static_cast<double>(d_down) - pinned_share;
        if (rest < -1e-6)
            return error{name + ": pinned share " + std::to_string(pinned_share) + " exceeds the down-column density " +
                         std::to_string(d_down)};
        method_config inner_cfg = cfg;
        inner_cfg.d_down = static_cast<float>(std::max(0.0, rest));
        inner_cfg.pin_fraction = 0.0f;
        auto r = e.build(inner_cfg, m, cal);
        if (!r.ok()) return error{r.message()};
        inner = std::move(r).value();
    } else {
        // Threshold methods: lower the all-neuron keep until pinned ∪ {above threshold} has the budget in
        // expectation (pinned neurons that would have passed anyway are not paid twice).
        const float keep = dense_gate_keep(cfg.density);
        std::vector<float> inner_keep(n_layers);
        for (size_t l = 0; l < n_layers; ++l) {
            inner_keep[l] = pinned_inner_keep(cal->layers[l], pinned[l], hidden, keep);
            if (inner_keep[l] < 0.0f)
                return error{name + ": pinned share " + std::to_string(pinned_share) + " exceeds the neuron keep " +
                             std::to_string(keep) + " implied by MLP density " + std::to_string(cfg.density)};
        }
        if (name == "cats") {
            inner = make_cats(m, *cal, inner_keep);
        } else {
            const bool attention = name == "chess-attn";
            if (!(cfg.attn_density >= 0.0f && cfg.attn_density <= 1.0f))
                return error{name + ": attention density " + std::to_string(cfg.attn_density) + " is outside [0, 1]"};
            inner = make_chess(m, *cal, inner_keep, attention, cfg.attn_density < 1.0f ? cfg.attn_density : keep);
        }
    }
    return std::unique_ptr<sparsity_method>(
        std::make_unique<pinned_method>(std::move(inner), std::move(pinned), !is_dip, hidden));
}

}  // namespace sl

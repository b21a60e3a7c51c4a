// TEAL: magnitude thresholds on the inputs of all seven projections, with its greedy per-layer
// allocation of sparsity across projections (error proxy from calibration histograms).
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "methods_threshold_internal.h"
#include "sparselens/kernels/kernels.h"

namespace sl {

teal_params teal_default_params() {
    return {};
}

const char* teal_proxy_name(teal_proxy p) {
    switch (p) {
        case teal_proxy::block_error:
            return "block_error";
        case teal_proxy::relative_error:
            return "relative_error";
        case teal_proxy::output_error:
            return "output_error";
        case teal_proxy::uniform:
            return "uniform";
    }
    return "?";
}

double histogram_energy_below(const magnitude_histogram& h, float t) {
    if (h.count() == 0 || !(t > 0.0f)) return 0.0;
    const int shift = 23 - h.octave_bits();
    const uint32_t limit = 0x7f800000u >> shift;
    const std::vector<uint64_t>& counts = h.counts();
    double e = 0.0;
    for (size_t i = 0; i < counts.size(); ++i) {
        if (counts[i] == 0) continue;
        const uint32_t bin = h.first_bin() + static_cast<uint32_t>(i);
        const double lo = std::bit_cast<float>(bin << shift);
        if (lo >= t) break;  // bins ascend: nothing below t from here on
        const double up =
            bin + 1 < limit ? std::bit_cast<float>((bin + 1) << shift) : std::numeric_limits<float>::max();
        const double hi = std::min<double>(up, h.max_abs());
        const double c = static_cast<double>(counts[i]);
        if (hi > lo) {
            const double cut = std::min<double>(hi, t);
            e += c * (cut * cut * cut - lo * lo * lo) / (3.0 * (hi - lo));  // values uniform on [lo, hi]
        } else {
            e += c * lo * lo;  // a point mass (the maximum sits at the bin's lower edge)
        }
    }
    return e / static_cast<double>(h.count());
}

std::array<float, proj_count> teal_greedy(const std::array<double, proj_count>& bytes,
                                          const std::function<double(int, float)>& error, float target_density,
                                          float step) {
    std::array<double, proj_count> keep;
    keep.fill(1.0);
    std::array<float, proj_count> out;
    out.fill(1.0f);
    double total = 0.0;
    for (double b : bytes) total += std::max(0.0, b);
    const double target = std::clamp(static_cast<double>(target_density), 0.0, 1.0);
    if (!(total > 0.0) || std::isnan(target_density) || target >= 1.0) return out;

    std::array<double, proj_count> err;
    for (int p = 0; p < proj_count; ++p) err[static_cast<size_t>(p)] = error(p, 1.0f);
    const double goal = (1.0 - target) * total;  // bytes to shed
    const double step_bytes = (step > 0.0f ? std::max(static_cast<double>(step), 1e-4) : 0.005) * total;
    double shed = 0.0;
    // Each step sheds step_bytes (or reaches the goal), so this bounds the loop even if rounding stalls.
    const int64_t max_steps = static_cast<int64_t>(std::ceil(total / step_bytes)) + 4 * proj_count;
    for (int64_t s = 0; s < max_steps && goal - shed > 1e-9 * total; ++s) {
        const double want = std::min(step_bytes, goal - shed);
        int best = -1;
        double best_rate = std::numeric_limits<double>::infinity(), best_keep = 0.0, best_err = 0.0;
        for (int p = 0; p < proj_count; ++p) {
            const auto i = static_cast<size_t>(p);
            if (!(bytes[i] > 0.0) || keep[i] <= 0.0) continue;
            const double dk = std::min(want / bytes[i], keep[i]);
            const double nk = keep[i] - dk <= 1e-9 ? 0.0 : keep[i] - dk;
            const double e = error(p, static_cast<float>(nk));
            const double rate = (e - err[i]) / ((keep[i] - nk) * bytes[i]);
            if (rate < best_rate || (best < 0 && !std::isnan(rate))) {
                best = p;
                best_rate = rate;
                best_keep = nk;
                best_err = e;
            }
        }
        if (best < 0) break;  // every projection fully pruned
        const auto b = static_cast<size_t>(best);
        shed += (keep[b] - best_keep) * bytes[b];
        keep[b] = best_keep;
        err[b] = best_err;
    }
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(keep[i]);
    return out;
}

namespace {

const tensor_view& proj_weights(const layer_weights& lw, proj p) {
    switch (p) {
        case proj::q:
            return lw.wq;
        case proj::k:
            return lw.wk;
        case proj::v:
            return lw.wv;
        case proj::o:
            return lw.wo;
        case proj::gate:
            return lw.w_gate;
        case proj::up:
            return lw.w_up;
        case proj::down:
            return lw.w_down;
    }
    return lw.wq;
}

// The calibration site whose histogram is each projection's input distribution.
constexpr site proj_site[proj_count] = {site::q_in,    site::k_in,  site::v_in,   site::o_in,
                                        site::gate_in, site::up_in, site::down_in};

double frobenius_sq(const tensor_view& w) {
    std::vector<float> row(static_cast<size_t>(w.cols));
    double s = 0.0;
    for (int64_t r = 0; r < w.rows; ++r) {
        kernels::dequantize_row(w.type, w.row(r), row.data(), w.cols);
        for (float v : row) s += static_cast<double>(v) * v;
    }
    return s;
}

}  // namespace

result<teal_plan> teal_make_plan(const model& m, const calibration& cal, float target_density,
                                 const teal_params& params) {
    if (!(target_density >= 0.0f && target_density <= 1.0f))
        return error{"target density " + std::to_string(target_density) + " is outside [0, 1]"};
    const bool separate_attention = !(params.attn_density < 0.0f);
    if (separate_attention && !(params.attn_density <= 1.0f))
        return error{"attention density " + std::to_string(params.attn_density) + " is outside [0, 1]"};
    if (outcome o = calibration_matches(cal, m); !o.ok()) return error{o.message()};
    if (m.layers.size() != cal.layers.size())
        return error{"model " + m.path + " has " + std::to_string(m.layers.size()) + " layers, calibration " +
                     std::to_string(cal.layers.size())};
    teal_plan plan;
    plan.proxy = params.proxy;
    const size_t n_layers = m.layers.size();
    plan.keep.resize(n_layers);
    plan.threshold.resize(n_layers);
    plan.bytes.resize(n_layers);
    const auto inf = std::numeric_limits<float>::infinity();
    for (size_t l = 0; l < n_layers; ++l) {
        const auto li = static_cast<int32_t>(l);
        const layer_weights& lw = m.layers[l];
        const layer_calibration& lc = cal.layers[l];
        std::array<double, proj_count>& bytes = plan.bytes[l];
        for (int p = 0; p < proj_count; ++p)
            bytes[static_cast<size_t>(p)] = static_cast<double>(proj_weights(lw, static_cast<proj>(p)).bytes());

        // Energy of the two residual branches of the block (diagonal approximation): E||W_o a||^2 and
        // E||W_down g||^2 = sum_j ||W_down[:, j]||^2 E[g_j^2] (the latter straight from the calibration).
        double attn_branch = 1.0, mlp_branch = 1.0;
        if (params.proxy == teal_proxy::block_error) {
            if (!lw.wo.data) return error{"layer " + std::to_string(l) + ": weights of o are not loaded"};
            attn_branch = frobenius_sq(lw.wo) * histogram_energy_below(cal.histogram(li, site::o_in), inf);
            mlp_branch = 0.0;
            for (size_t j = 0; j < lc.down_col_norm.size() && j < lc.mean_sq_glu.size(); ++j)
                mlp_branch += static_cast<double>(lc.down_col_norm[j]) * lc.down_col_norm[j] * lc.mean_sq_glu[j];
        }
        std::array<double, proj_count> scale{};  // error(p, keep) = scale_p · E[x^2 1{|x| < t_p(keep)}]
        for (int p = 0; p < proj_count; ++p) {
            const auto i = static_cast<size_t>(p);
            const double e2 = histogram_energy_below(cal.histogram(li, proj_site[i]), inf);
            const double rel = e2 > 0.0 ? 1.0 / e2 : 0.0;
            switch (params.proxy) {
                case teal_proxy::block_error:
                    scale[i] = rel * (p <= static_cast<int>(proj::o) ? attn_branch : mlp_branch);
                    break;
                case teal_proxy::relative_error:
                    scale[i] = rel;
                    break;
                case teal_proxy::output_error: {
                    const tensor_view& w = proj_weights(lw, static_cast<proj>(p));
                    if (!w.data)
                        return error{"layer " + std::to_string(l) + ": weights of " + proj_name(static_cast<proj>(p)) +
                                     " are not loaded"};
                    scale[i] = frobenius_sq(w);
                    break;
                }
                case teal_proxy::uniform:
                    break;
            }
        }
        std::array<float, proj_count>& keep = plan.keep[l];
        auto error_of = [&](int p, float k) {
            if (k >= 1.0f) return 0.0;
            const magnitude_histogram& h = cal.histogram(li, proj_site[static_cast<size_t>(p)]);
            return scale[static_cast<size_t>(p)] * histogram_energy_below(h, h.threshold_for_density(k));
        };
        const auto attention = [](int p) { return p <= static_cast<int>(proj::o); };
        if (params.proxy == teal_proxy::uniform) {
            for (int p = 0; p < proj_count; ++p)
                keep[static_cast<size_t>(p)] =
                    std::clamp(separate_attention && attention(p) ? params.attn_density : target_density, 0.0f, 1.0f);
        } else if (!separate_attention) {
            keep = teal_greedy(bytes, error_of, target_density, params.step);
        } else {
            // One greedy per group, each seeing only its group's bytes (the others' 0 bytes keep them at 1).
            std::array<double, proj_count> attn_bytes{}, mlp_bytes{};
            for (int p = 0; p < proj_count; ++p)
                (attention(p) ? attn_bytes : mlp_bytes)[static_cast<size_t>(p)] = bytes[static_cast<size_t>(p)];
            const std::array<float, proj_count> ka = teal_greedy(attn_bytes, error_of, params.attn_density, params.step);
            const std::array<float, proj_count> km = teal_greedy(mlp_bytes, error_of, target_density, params.step);
            for (int p = 0; p < proj_count; ++p)
                keep[static_cast<size_t>(p)] = (attention(p) ? ka : km)[static_cast<size_t>(p)];
        }
        for (size_t i = 0; i < keep.size(); ++i)
            plan.threshold[l][i] = cal.threshold_for_density(li, proj_site[i], keep[i]);
    }
    return plan;
}

namespace {

// Inputs with |x| >= t_{l,p} take part (TEAL's magnitude rule; the same rule as threshold_mask and the
// calibration's density definition). A projection with keep 1 is left exactly dense.
class teal_method final : public sparsity_method {
public:
    explicit teal_method(teal_plan plan) : m_plan(std::move(plan)) {}
    std::string name() const override { return m_plan.proxy == teal_proxy::uniform ? "teal-uniform" : "teal"; }
    method_traits traits() const override {
        auto sparse = [&](proj p) {
            return std::any_of(m_plan.keep.begin(), m_plan.keep.end(),
                               [p](const auto& k) { return k[static_cast<size_t>(p)] < 1.0f; });
        };
        method_traits t;
        t.attn_inputs = sparse(proj::q) || sparse(proj::k) || sparse(proj::v);
        t.o_input = sparse(proj::o);
        t.mlp_inputs = sparse(proj::gate) || sparse(proj::up);
        t.down_in = sparse(proj::down);
        return t;
    }
    // The greedy's keep fraction (the calibration's density of |x| >= the threshold).
    float planned_input_density(int32_t layer, proj p) const override {
        const auto l = static_cast<size_t>(layer);
        return l < m_plan.keep.size() ? std::clamp(m_plan.keep[l][static_cast<size_t>(p)], 0.0f, 1.0f) : -1.0f;
    }
    void select_attn_inputs(const token_info& t, std::span<const float> x, layer_masks& m) override {
        apply(t.layer, proj::q, x, m.q_in);
        apply(t.layer, proj::k, x, m.k_in);
        apply(t.layer, proj::v, x, m.v_in);
    }
    void select_o_input(const token_info& t, std::span<const float> x, layer_masks& m) override {
        apply(t.layer, proj::o, x, m.o_in);
    }
    void select_mlp_inputs(const token_info& t, std::span<const float> x, layer_masks& m) override {
        apply(t.layer, proj::gate, x, m.gate_in);
        apply(t.layer, proj::up, x, m.up_in);
    }
    void select_down(const token_info& t, std::span<const float> glu, layer_masks& m) override {
        apply(t.layer, proj::down, glu, m.down_in);
    }
    // The greedy's outcome: per projection, the keep fraction and the |x| threshold it maps to.
    std::vector<std::pair<std::string, std::vector<float>>> per_layer_values() const override {
        std::vector<std::pair<std::string, std::vector<float>>> v;
        for (const char* what : {"keep", "threshold"})
            for (int p = 0; p < proj_count; ++p) {
                std::vector<float> col;
                for (size_t l = 0; l < m_plan.keep.size(); ++l)
                    col.push_back(what[0] == 'k' ? m_plan.keep[l][static_cast<size_t>(p)]
                                                 : m_plan.threshold[l][static_cast<size_t>(p)]);
                v.emplace_back(std::string(what) + "_" + proj_name(static_cast<proj>(p)), std::move(col));
            }
        return v;
    }

private:
    void apply(int32_t layer, proj p, std::span<const float> x, index_mask& out) const {
        const auto l = static_cast<size_t>(layer);
        const auto i = static_cast<size_t>(p);
        const float keep = m_plan.keep[l][i];
        if (keep >= 1.0f) return;
        if (keep <= 0.0f)
            out.set_none();
        else
            threshold_mask(x, m_plan.threshold[l][i], out);
    }

    teal_plan m_plan;
};

}  // namespace

std::unique_ptr<sparsity_method> make_teal_method(teal_plan plan) {
    return std::make_unique<teal_method>(std::move(plan));
}

}  // namespace sl

// Calibration queries: thresholds per site (gate_act through the GLU activation's inverse), CHESS, heavy hitters, matching.
#include <bit>
#include <cassert>
#include <cmath>
#include <limits>
#include <string>

#include "calibration_internal.h"
#include "glu_act.h"

namespace sl {

namespace {

// act(g) = g * s(g) with s a sigmoid-like gate (silu: 1 / (1 + e^-g); GELU: its tanh approximation of
// Phi). For g < 0 write u = -g: |act| = h(u) = u * s(-u), which rises from 0 to a single peak h(u_peak)
// (silu: 0.27846 at 1.27846; GELU-tanh: 0.170 at 0.752) and then decays to 0.
double h_neg(glu_activation a, double u) { return -glu_act(a, -u); }

// The peak of h, found once per activation by golden-section search (h is unimodal on [0, 4]).
double u_peak_of(glu_activation a) {
    double lo = 0.0, hi = 4.0;
    const double r = 0.6180339887498949;
    for (int i = 0; i < 200; ++i) {
        const double m1 = hi - r * (hi - lo), m2 = lo + r * (hi - lo);
        if (h_neg(a, m1) < h_neg(a, m2)) lo = m1;
        else hi = m2;
    }
    return 0.5 * (lo + hi);
}

double u_peak(glu_activation a) {
    static const double silu = u_peak_of(glu_activation::silu), gelu = u_peak_of(glu_activation::gelu_tanh);
    return a == glu_activation::gelu_tanh ? gelu : silu;
}

// Root of a monotone f on [lo, hi] with f(lo) and f(hi) on either side of `target`.
template <class F>
double bisect(F f, double lo, double hi, double target, bool increasing) {
    for (int i = 0; i < 80 && lo < hi; ++i) {
        const double mid = 0.5 * (lo + hi);
        if ((f(mid) < target) == increasing) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

// Entries of a magnitude histogram with |v| >= x (x > 0), interpolated like density_at_threshold.
double count_at_least(const magnitude_histogram& h, double x) {
    return static_cast<double>(h.density_at_threshold(static_cast<float>(x))) * static_cast<double>(h.count());
}

}  // namespace

// Fraction of gate entries with |act(g)| >= t, from the signed pre-activation histograms: g >= g+(t)
// on the positive branch, u = -g in [u_a(t), u_b(t)] around the peak on the negative one.
double gate_act_density(const layer_calibration& c, float t, glu_activation a) {
    const magnitude_histogram& pos = c.hist[static_cast<size_t>(hist_slot::gate_pre_pos)];
    const magnitude_histogram& neg = c.hist[static_cast<size_t>(hist_slot::gate_pre_neg)];
    const double n = static_cast<double>(pos.count() + neg.count());
    if (!(t > 0.0f)) return 1.0;
    if (n == 0.0) return 0.0;
    const double td = t;
    auto pos_act = [a](double g) { return glu_act(a, g); };
    auto h = [a](double u) { return h_neg(a, u); };
    const double peak = u_peak(a);
    // act(g) lies in [g/2, g] for g >= 0, which brackets the root.
    double kept = count_at_least(pos, bisect(pos_act, td, 2.0 * td, td, true));
    if (td <= h(peak)) {
        // h(u) lies in [u s(-u_peak), u / 2] below the peak (s(-u_peak) = 0.218 for silu, 0.226 for GELU):
        // a relative bracket, so tiny t stay exact.
        const double ua = bisect(h, 2.0 * td, std::min(peak, 4.6 * td), td, true);
        const double ub = bisect(h, peak, 200.0, td, false);  // h(200) is below every float for both
        kept += std::max(0.0, count_at_least(neg, ua) - count_at_least(neg, ub));
    }
    return std::clamp(kept / n, 0.0, 1.0);
}

float gate_act_threshold(const layer_calibration& c, float density, glu_activation a) {
    if (!(density < 1.0f)) return 0.0f;
    if (!(density > 0.0f)) return std::numeric_limits<float>::infinity();
    const float tiny = std::numeric_limits<float>::denorm_min();
    if (gate_act_density(c, tiny, a) < density) return tiny;  // more than the non-zero share: keep all non-zero
    // The density falls with t; bisect over the ordered bit patterns of positive floats.
    const double top = std::max(glu_act(a, c.hist[static_cast<size_t>(hist_slot::gate_pre_pos)].max_abs()), h_neg(a, u_peak(a)));
    uint32_t lo = std::bit_cast<uint32_t>(tiny), hi = std::bit_cast<uint32_t>(static_cast<float>(top * 1.001) + 1e-30f);
    while (hi - lo > 1) {
        const uint32_t mid = lo + (hi - lo) / 2;
        if (gate_act_density(c, std::bit_cast<float>(mid), a) >= density) lo = mid;
        else hi = mid;
    }
    return std::bit_cast<float>(lo);
}

const magnitude_histogram& calibration::histogram(int32_t layer, site s) const {
    assert(layer >= 0 && static_cast<size_t>(layer) < layers.size());
    return layers[static_cast<size_t>(layer)].hist[static_cast<size_t>(site_slot(s))];
}

float calibration::threshold_for_density(int32_t layer, site s, float density) const {
    if (s == site::gate_act) return gate_act_threshold(layers[static_cast<size_t>(layer)], density, act);
    return histogram(layer, s).threshold_for_density(density);
}

float calibration::density_at_threshold(int32_t layer, site s, float t) const {
    if (s == site::gate_act) return static_cast<float>(gate_act_density(layers[static_cast<size_t>(layer)], t, act));
    return histogram(layer, s).density_at_threshold(t);
}

std::vector<float> calibration::chess_channel_thresholds(int32_t layer, float density) const {
    const float big_t = threshold_for_density(layer, site::chess_score, density);
    const std::vector<float>& e = layers[static_cast<size_t>(layer)].mean_abs_up;
    std::vector<float> t(e.size());
    for (size_t i = 0; i < e.size(); ++i) {
        if (big_t == 0.0f) t[i] = 0.0f;  // keep everything
        else t[i] = e[i] > 0.0f ? big_t / e[i] : std::numeric_limits<float>::infinity();
    }
    return t;
}

std::vector<int32_t> calibration::heavy_hitters(int32_t layer, float fraction) const {
    const std::vector<float>& hh = layers[static_cast<size_t>(layer)].heavy_hitter;
    std::vector<int32_t> order;
    rank_desc(hh, order);
    const auto n = static_cast<int32_t>(hh.size());
    const int32_t k = std::clamp(static_cast<int32_t>(std::lround(static_cast<double>(fraction) * n)), 0, n);
    order.resize(static_cast<size_t>(k));
    return order;
}

float calibration::heavy_hitter_share(int32_t layer, float fraction) const {
    const std::vector<float>& hh = layers[static_cast<size_t>(layer)].heavy_hitter;
    double total = 0.0, top = 0.0;
    for (float v : hh) total += v;
    for (int32_t j : heavy_hitters(layer, fraction)) top += hh[static_cast<size_t>(j)];
    return total > 0.0 ? static_cast<float>(top / total) : 0.0f;
}

outcome calibration_matches(const calibration& cal, const model& m) {
    const calibration_fingerprint& f = cal.model;
    const struct {
        const char* what;
        int64_t cal, model;
    } checks[] = {{"dim", f.dim, m.hp.dim},
                  {"hidden_dim", f.hidden_dim, m.hp.hidden_dim},
                  {"n_layers", f.n_layers, m.hp.n_layers},
                  {"n_heads", f.n_heads, m.hp.n_heads},
                  {"n_kv_heads", f.n_kv_heads, m.hp.n_kv_heads},
                  {"vocab_size", f.vocab_size, m.hp.vocab_size}};
    for (const auto& c : checks)
        if (c.cal != c.model)
            return error{"calibration (from " + f.model_path + ") is for " + c.what + " " + std::to_string(c.cal) + ", model " + m.path +
                         " has " + std::to_string(c.model)};
    if (cal.act != m.arch.act)
        return error{"calibration (from " + f.model_path + ") was made for a different GLU activation than model " + m.path +
                     " uses (" + m.arch.name + ")"};
    if (cal.layers.size() != static_cast<size_t>(m.hp.n_layers))
        return error{"calibration (from " + f.model_path + ") holds " + std::to_string(static_cast<int64_t>(cal.layers.size())) +
                     " layers, model " + m.path + " has " + std::to_string(m.hp.n_layers)};
    return outcome::success();
}

}  // namespace sl

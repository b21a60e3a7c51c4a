// Synthetic traces: per unit a two-state Markov chain (keep the previous state with probability
// `persistence`, else redraw with the unit's popularity), popularities log-normal around `density`.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sparselens/sim/synthetic.h"

namespace sl::sim {

namespace {

struct rng64 {
    uint64_t s;
    uint64_t next() {  // splitmix64
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
    double normal() {  // Box-Muller, one value per call is plenty here
        const double u1 = std::max(uniform(), 1e-300), u2 = uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }
};

}  // namespace

result<trace> trace_synthetic(const model_shape& shape, const mlp_layout& layout, const synthetic_params& p) {
    if (!(p.density >= 0 && p.density <= 1)) return error{"synthetic trace: density must be in [0, 1]"};
    if (!(p.persistence >= 0 && p.persistence < 1)) return error{"synthetic trace: persistence must be in [0, 1)"};
    if (!(p.skew >= 0 && p.skew <= 10)) return error{"synthetic trace: skew must be in [0, 10]"};
    char label[160];
    std::snprintf(label, sizeof label, "synthetic: density %g, persistence %g, skew %g, seed %llu", p.density,
                  p.persistence, p.skew, static_cast<unsigned long long>(p.seed));
    auto tr = trace_create(shape, layout, label);
    if (!tr) return tr.err();
    trace t = std::move(tr).value();
    const uint32_t S = t.n_streams();
    rng64 rng{p.seed * 0x2545F4914F6CDD1Dull + 1};

    // Per stream: 32-bit thresholds for "active" and the current state of every unit.
    std::vector<std::vector<uint32_t>> thr(S);
    std::vector<std::vector<uint8_t>> state(S);
    for (uint32_t s = 0; s < S; ++s) {
        const uint32_t n = t.stream_units(s);
        std::vector<double> pop(n, p.density);
        if (p.skew > 0 && p.density > 0) {
            double sum = 0;
            for (double& x : pop) sum += (x = std::exp(p.skew * rng.normal()));
            const double scale = p.density * n / sum;
            for (double& x : pop) x = std::min(1.0, x * scale);
        }
        thr[s].resize(n);
        for (uint32_t i = 0; i < n; ++i)
            thr[s][i] = static_cast<uint32_t>(std::min(4294967295.0, pop[i] * 4294967296.0));
        state[s].resize(n);
        for (uint32_t i = 0; i < n; ++i) state[s][i] = static_cast<uint32_t>(rng.next()) < thr[s][i];
    }
    const uint32_t keep = static_cast<uint32_t>(std::min(4294967295.0, p.persistence * 4294967296.0));
    uint64_t expect = 0;
    for (uint32_t s = 0; s < S; ++s) expect += static_cast<uint64_t>(p.density * t.stream_units(s)) + 16;
    t.ids.reserve(expect * p.n_tokens);
    t.offsets.reserve(size_t{p.n_tokens} * S + 1);
    for (uint32_t tok = 0; tok < p.n_tokens; ++tok) {
        for (uint32_t s = 0; s < S; ++s) {
            const uint32_t n = t.stream_units(s);
            uint8_t* st = state[s].data();
            const uint32_t* th = thr[s].data();
            if (tok > 0) {
                for (uint32_t i = 0; i < n; ++i) {
                    const uint64_t r = rng.next();
                    if (static_cast<uint32_t>(r >> 32) >= keep) st[i] = static_cast<uint32_t>(r) < th[i];
                }
            }
            for (uint32_t i = 0; i < n; ++i)
                if (st[i]) t.ids.push_back(i);
            t.offsets.push_back(t.ids.size());
        }
        ++t.n_tokens;
    }
    return t;
}

}  // namespace sl::sim

// Analytic mode: steady state of dense / statically pruned models from shapes alone. Every token
// activates the same k units per stream, so a warm cache holds min(C, k) of them and the other
// k - min(C, k) stream from flash as one contiguous read.
#include <cmath>

#include "sim_internal.h"

namespace sl::sim {

result<run_report> analytic(const model_shape& shape, const mlp_layout& layout, const sim_params& p,
                            const std::string& method, double density) {
    if (method != "dense" && method != "static")
        return error{"analytic mode covers the dense and static methods only (got '" + method +
                     "'); sparse methods need a trace or the online simulator"};
    if (method == "dense") density = 1.0;
    if (!(density >= 0.0 && density <= 1.0)) return error{"density must be in [0, 1]"};
    if (!p.pinned.empty()) return error{"analytic mode has no pinned sets (they need a trace)"};
    auto su_r = detail::setup_build(shape, layout, p, true);
    if (!su_r) return su_r.err();
    const detail::sim_setup& su = *su_r;

    const uint32_t S = su.n_streams();
    std::vector<stream_token_stats> row(S);
    for (uint32_t s = 0; s < S; ++s) {
        const uint32_t n = su.units[s];
        const uint32_t k = static_cast<uint32_t>(std::llround(density * n));
        const uint32_t cap = p.policy == cache_policy::none ? 0 : su.configs[s].capacity;
        stream_token_stats& x = row[s];
        x.hits = std::min(cap, k);
        x.misses = k - x.hits;
        x.n_resident = x.hits;
        x.reads = x.misses > 0 ? 1 : 0;
        x.flash_bytes = flash_run_bytes(x.hits, x.misses, su.unit_bytes[s], p.device.flash_page_bytes);
    }
    std::vector<token_report> tokens{detail::token_total(su, 0, row)};
    std::vector<stream_report> sums = detail::stream_sums_init(su);
    for (uint32_t s = 0; s < S; ++s) detail::stream_sum_add(sums[s], row[s], su.unit_bytes[s]);
    detail::sim_setup su1 = su;
    su1.p.warmup_tokens = 0;
    run_report r = detail::report_build(su1, "analytic", std::move(tokens), std::move(sums));
    r.label = method == "dense" ? "dense" : "static density " + std::to_string(density);
    return r;
}

}  // namespace sl::sim

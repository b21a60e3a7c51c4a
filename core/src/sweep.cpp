// Sweeps over methods and densities, Pareto marking, and the DIP allocation search.
#include "sparselens/core/sweep.h"

#include <algorithm>
#include <memory>
#include <string>

#include "sparselens/core/calibration.h"
#include "sparselens/core/residency.h"

namespace sl {

sweep_params sweep_default_params() { return {}; }

namespace {

struct evaluated {
    eval_result r;
    double hit_rate = -1.0;
};

result<evaluated> evaluate_config(context& ctx, const dense_reference& ref, const calibration* calib,
                                  const method_config& cfg, float cache_fraction, const eval_params& eval) {
    auto method = make_method(cfg, ctx.get_model(), calib);
    if (!method.ok()) return error{method.message()};
    const std::unique_ptr<lfu_residency> cache = standin_cache(cfg.name, ctx.get_model().hp, cache_fraction);
    auto r = eval_method(ctx, ref, **method, cache.get(), eval);
    if (!r.ok()) return error{r.message(), r.cancelled()};
    evaluated e{std::move(r).value()};
    if (cache && cache->hits() + cache->misses() > 0) e.hit_rate = cache->hit_rate();
    return e;
}

}  // namespace

result<std::vector<sweep_point>> sweep_run(context& ctx, const dense_reference& ref, const calibration* calib,
                                           const sweep_params& params, const eval_params& eval) {
    std::vector<method_config> grid;
    for (const std::string& name : params.methods) {
        if (std::find(method_names().begin(), method_names().end(), name) == method_names().end())
            return error{"sweep: unknown method '" + name + "'"};
        method_config named = params.base;
        named.name = name;
        if (method_config_needs_calibration(named) && !calib)
            return error{"sweep: method '" + name + "' needs a calibration file (sparselens calibrate MODEL TEXT)"};
        for (float d : params.densities) {
            const std::vector<float> gammas = name == "dip-ca" ? params.gammas : std::vector<float>{params.base.gamma};
            for (float g : gammas) {
                method_config c = params.base;
                c.name = name;
                c.density = d;
                c.gamma = g;
                grid.push_back(c);
            }
        }
    }

    eval_params quiet = eval;
    quiet.progress = nullptr;
    std::vector<sweep_point> points;
    for (size_t i = 0; i < grid.size(); ++i) {
        method_config cfg = grid[i];
        if (params.dip_allocate && (cfg.name == "dip" || cfg.name == "dip-ca")) {
            auto alloc = dip_allocate(ctx, ref, cfg.density, quiet);
            if (!alloc.ok()) return error{alloc.message(), alloc.cancelled()};
            cfg.d_in = alloc->d_in;
            cfg.d_down = alloc->d_down;
        }
        auto e = evaluate_config(ctx, ref, calib, cfg, params.cache_fraction, quiet);
        if (!e.ok()) return error{e.message(), e.cancelled()};
        points.push_back({cfg, e->r, false, e->hit_rate});
        if (params.progress && !params.progress(static_cast<float>(i + 1) / static_cast<float>(grid.size())))
            return error{"sweep: cancelled", true};
    }
    mark_pareto(points);
    return points;
}

void mark_pareto(std::vector<sweep_point>& points) {
    for (sweep_point& p : points) {
        p.pareto = true;
        for (const sweep_point& q : points) {
            if (&q == &p || q.config.name != p.config.name) continue;
            const bool no_worse = q.result.mlp_density <= p.result.mlp_density && q.result.kld_mean <= p.result.kld_mean;
            const bool better = q.result.mlp_density < p.result.mlp_density || q.result.kld_mean < p.result.kld_mean;
            if (no_worse && better) {
                p.pareto = false;
                break;
            }
        }
    }
}

result<dip_allocation> dip_allocate(context& ctx, const dense_reference& ref, float density,
                                    const eval_params& eval, int32_t grid_points) {
    if (!(density > 0.0f && density <= 1.0f))
        return error{"dip allocation: density " + std::to_string(density) + " is outside (0, 1]"};
    // (2 d_in + d_down) / 3 = density with both in [0, 1]  =>  d_in in [max(0, (3d - 1) / 2), min(1, 3d / 2)].
    const float lo = std::max(0.0f, (3.0f * density - 1.0f) / 2.0f);
    const float hi = std::min(1.0f, 1.5f * density);
    dip_allocation best;
    best.kld = -1.0;
    const int32_t n = std::max(2, grid_points);
    for (int32_t i = 0; i < n; ++i) {
        method_config c = method_default_config();
        c.name = "dip";
        c.d_in = lo + (hi - lo) * static_cast<float>(i) / static_cast<float>(n - 1);
        c.d_down = std::clamp(3.0f * density - 2.0f * c.d_in, 0.0f, 1.0f);
        auto e = evaluate_config(ctx, ref, nullptr, c, 0.0f, eval);
        if (!e.ok()) return error{e.message(), e.cancelled()};
        best.tried.emplace_back(c.d_in, e->r.kld_mean);
        if (best.kld < 0 || e->r.kld_mean < best.kld) {
            best.kld = e->r.kld_mean;
            best.d_in = c.d_in;
            best.d_down = c.d_down;
        }
    }
    return best;
}

}  // namespace sl

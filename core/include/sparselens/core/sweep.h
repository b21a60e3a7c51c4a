// Grids of method settings evaluated on equal terms, Pareto fronts, and DIP's density allocation search.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparselens/core/eval.h"
#include "sparselens/core/methods.h"

namespace sl {

struct sweep_params {
    std::vector<std::string> methods = {"dip", "dip-ca", "glu", "gate", "up"};
    std::vector<float> densities = {0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f};
    std::vector<float> gammas = {0.2f};  // DIP-CA only
    method_config base = method_default_config();  // other knobs (attn_density, rank, pin_fraction, ...)
    bool dip_allocate = false;   // search DIP's (d_in, d_down) split per density instead of d_in = d_down
    float cache_fraction = 0.5f; // DIP-CA: share of units the LFU stand-in cache holds per layer
    progress_fn progress;        // fraction of grid points done; false cancels
};

sweep_params sweep_default_params();

struct sweep_point {
    method_config config;
    eval_result result;
    bool pareto = false;  // on its method's front of (MLP density, KL)
    double cache_hit_rate = -1.0;  // LFU stand-in, cache-aware methods only
};

// Evaluates every (method, density[, gamma]) on `ref`; methods needing calibration are skipped with
// an error unless `calib` is given.
result<std::vector<sweep_point>> sweep_run(context& ctx, const dense_reference& ref, const calibration* calib,
                                           const sweep_params& params, const eval_params& eval);

// Marks each method's Pareto-optimal points: no other point of the method has lower-or-equal MLP
// density and lower-or-equal KL with one of them strictly lower.
void mark_pareto(std::vector<sweep_point>& points);

struct dip_allocation {
    float d_in = 0.0f;
    float d_down = 0.0f;
    double kld = 0.0;
    std::vector<std::pair<float, double>> tried;  // (d_in, KL)
};

// DIP paper appendix B.1: for a target MLP density d, try splits with (2 d_in + d_down) / 3 = d over a
// grid of d_in and keep the one with the lowest KL to dense on `ref`.
result<dip_allocation> dip_allocate(context& ctx, const dense_reference& ref, float density,
                                    const eval_params& eval, int32_t grid_points = 9);

}  // namespace sl

// Selection rules and allocation of the calibrated threshold methods (CATS, CHESS, TEAL, pinning).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "sparselens/core/calibration.h"
#include "sparselens/core/result.h"
#include "sparselens/core/sparsity.h"

namespace sl {

// ---- selection rules (the methods call exactly these; tests check them on hand-made vectors) ----

// |silu(a)| = |a / (1 + e^-a)|; NaN stays NaN.
float silu_abs(float a);
// CHESS eq. 10 / 19: keep i when |v_i| > t (strict: a value equal to the threshold is pruned). NaN never
// passes. set_all when every entry passes.
void threshold_mask_strict(std::span<const float> values, float t, index_mask& out);
// CHESS channel-wise rule (eq. 9-10): keep i when |v_i| > t_i. Sizes must match (asserted).
void channel_threshold_mask(std::span<const float> values, std::span<const float> t, index_mask& out);
// out = a ∪ b over [0, n) (set_all when the union covers everything). `b` must be sorted and unique.
void union_mask(const index_mask& a, std::span<const int32_t> b, int64_t n, index_mask& out);

// ---- histogram energy (TEAL's error proxy) ----

// E[x^2 · 1{|x| < t}] per entry of a magnitude histogram (values spread uniformly inside a bin, as the
// histogram's own inversion assumes). 0 for an empty histogram; t = +inf gives E[x^2].
double histogram_energy_below(const magnitude_histogram& h, float t);

// ---- activation-keep fractions from a target MLP density ----

// CATS / CHESS keep the gate dense and select up rows + down columns: MLP density = (1 + 2 keep) / 3.
// Returns keep clamped to [0, 1] (so densities below 1/3 give keep 0: the floor of dense-gate methods).
float dense_gate_keep(float mlp_density);

// ---- TEAL greedy allocation ----

// What the greedy minimises in place of TEAL's measured block-output error (docs/methods.md, TEAL).
// r_p(t) = E[x^2 1{|x| < t}] / E[x^2] over projection p's input histogram is, under the diagonal
// approximation (CHESS eq. 16), the relative error E||W(x - x_masked)||^2 / E||W x||^2 of p's output.
enum class teal_proxy : uint8_t {
    block_error = 0,     // r_p scaled by the energy of the residual branch p feeds: E||W_o a||^2 for
                         // q/k/v/o, E||W_down g||^2 for gate/up/down (a linearised block-output error)
    relative_error = 1,  // r_p alone: every projection's relative output error counts the same
    output_error = 2,    // ||W_p||_F^2 · E[x^2 1{|x| < t}]: absolute ||W x - W x_masked||^2 per projection
    uniform = 3,         // no search: every projection gets the target density (TEAL's "uniform")
};
const char* teal_proxy_name(teal_proxy p);

struct teal_params {
    float step = 0.005f;  // block-sparsity increment per greedy step (fraction of the layer's bytes)
    teal_proxy proxy = teal_proxy::block_error;
    // Attention share: < 0 (default) gives one budget over all seven projections, the target density, as
    // in the paper's experiments. In [0, 1], the attention projections (q, k, v, o inputs) get their own
    // budget at this density and the target density covers the MLP's three alone; each is allocated by
    // the greedy (or set uniformly) within its group.
    float attn_density = -1.0f;
};
teal_params teal_default_params();

// The greedy of TEAL (Liu et al. 2024, block-wise): start dense; at each step every projection p may
// lower its keep fraction so that the layer sheds `step` of its bytes (keep_p -= step · total / bytes_p,
// the last step shortened to land on the target); the one whose proxy error grows least per byte shed
// takes the step (ties: lower index). `error(p, keep)` must be nondecreasing as keep falls, error(p, 1)
// is the zero point. Returns the keep fraction of each projection; sum_p keep_p bytes_p / total = target.
std::array<float, proj_count> teal_greedy(const std::array<double, proj_count>& bytes,
                                          const std::function<double(int, float)>& error, float target_density,
                                          float step);

// Per-layer keep fractions for a model and calibration at a target layer density (by weight bytes), or
// with params.attn_density in [0, 1] at a target MLP density plus that attention density.
struct teal_plan {
    teal_proxy proxy = teal_proxy::block_error;
    std::vector<std::array<float, proj_count>> keep;       // [layer][proj] input keep fractions
    std::vector<std::array<float, proj_count>> threshold;  // [layer][proj] |x| thresholds (0: dense)
    std::vector<std::array<double, proj_count>> bytes;     // [layer][proj] weight bytes
};
result<teal_plan> teal_make_plan(const model& m, const calibration& cal, float target_density,
                                 const teal_params& params = teal_default_params());
// The TEAL method executing a plan: per layer and projection, inputs with |x| >= threshold take part
// (a projection with keep 1 stays exactly dense). Named "teal", or "teal-uniform" for that proxy.
std::unique_ptr<sparsity_method> make_teal_method(teal_plan plan);

// ---- heavy-hitter pinning budget ----

// Expected number of neurons of `pinned` that a per-token selection at all-neuron density d would have
// picked anyway, from the calibration's top-k membership frequencies (piecewise linear in d through
// (0, 0), the recorded densities, and (1, 1)).
double expected_pinned_overlap(const layer_calibration& lc, std::span<const int32_t> pinned, float d);
// The all-neuron keep fraction d for the threshold of a pinned threshold method: pinned ∪ {above t(d)}
// has `keep` · hidden members in expectation, i.e. hidden · d - overlap(d) = hidden · keep - |pinned|.
// Returns a negative value when |pinned| > keep · hidden (the pinned set alone exceeds the budget).
float pinned_inner_keep(const layer_calibration& lc, std::span<const int32_t> pinned, int64_t hidden, float keep);

}  // namespace sl

// The tuner: searches each method's parameters for the highest simulated (or measured CPU) tokens/s within
// accuracy budgets such as "ppl+0.2", replaying every evaluation's recorded masks under the device's cache
// policies (one engine run, several simulated settings). Strategy and outputs: docs/tuner.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sparselens/core/calibration.h"
#include "sparselens/core/eval.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/result.h"
#include "sparselens/sim/memory_map.h"
#include "sparselens/sim/simulator.h"

namespace sl::sim {

// An accuracy budget on the evaluation text, relative to the dense model on the same windows.
enum class budget_metric : uint8_t {
    ppl_delta,  // "ppl+0.2":   ppl <= ppl_dense + 0.2
    ppl_ratio,  // "ppl*1.05":  ppl <= ppl_dense * 1.05
    ppl_max,    // "ppl<3.5":   ppl <= 3.5
    kld_max,    // "kld<0.05":  mean KL(dense || method) <= 0.05
    top1_min,   // "top1>0.9":  top-1 agreement with dense >= 0.9
};

struct accuracy_budget {
    std::string text;  // canonical form, e.g. "ppl+0.2"
    budget_metric metric = budget_metric::ppl_delta;
    double limit = 0.0;
};

// Parses "ppl+X", "ppl*X", "ppl<X", "kld<X", "top1>X" ("<=" / ">=" accepted; spaces ignored); X >= 0
// (ppl*: >= 1, top1: <= 1). Errors quote the text.
result<accuracy_budget> budget_parse(const std::string& text);
// Whether `r` (evaluated against a dense reference whose perplexity is r.ppl_dense) meets the budget.
bool budget_met(const accuracy_budget& b, const eval_result& r);

enum class tune_objective : uint8_t { sim, cpu };

struct tune_params {
    std::vector<std::string> methods = {"dip", "dip-ca", "cats", "chess", "teal"};
    std::vector<float> densities = {0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f};  // stage 1 grid (target density)
    std::vector<float> gammas = {0.2f, 0.5f};  // DIP-CA: stage 1 grid; refinement keeps the best per budget
    int32_t coarse_windows = 4;     // windows per stage-1 evaluation (the reference's first ones; <= all)
    int32_t refine_steps = 3;       // stage 2: bisection steps on density per (method, budget)
    int32_t dip_split_points = 3;   // DIP: (d_in, d_down) splits tried at each boundary density (< 2: none)
    std::vector<accuracy_budget> budgets;  // tune_default_params(): ppl+0.2, ppl+0.5
    tune_objective objective = tune_objective::sim;
    sim_params sim;  // device, quantization, context; `policy` is ignored (see below)
    // Policies a recommendation may use (each candidate takes its best). Belady is replayed as an upper
    // bound when `belady_bound` is set but is never recommended: it needs the future.
    std::vector<cache_policy> policies = {cache_policy::lru, cache_policy::lfu};
    bool belady_bound = true;
    // The device cache DIP-CA reads while it runs: its masks depend on it, so for DIP-CA only this policy
    // is recommendable (the others are replayed for information). Belady is refused (online).
    cache_policy online_policy = cache_policy::lfu;
    method_config base = method_default_config();  // other knobs (attn_density, rank, pin_fraction, ...)
    progress_fn progress;  // fraction of the planned evaluations done; false cancels
};

tune_params tune_default_params();

// One simulated setting of a candidate's recorded masks.
struct sim_summary {
    cache_policy policy = cache_policy::none;
    double tokens_per_s = 0.0;
    double hit_rate = 0.0;
    double flash_bytes_per_token = 0.0;
    double dram_bytes_per_token = 0.0;
    bool recommendable = true;  // false for Belady, and for DIP-CA under a policy it did not run with
};

struct tune_candidate {
    method_config config;
    eval_result eval;
    std::string stage;      // "dense", "coarse", "refine", "split"
    int32_t windows = 0;    // windows evaluated
    bool full = false;      // on every window of the reference: only these enter fronts and recommendations
    std::string layout;     // the simulator's unit layout for the method (method_layout())
    std::vector<sim_summary> sims;  // one per replayed policy; empty when not simulated (objective cpu)
    int32_t best_sim = -1;  // index into sims of the best recommendable policy
    double objective = 0.0; // sims[best_sim].tokens_per_s, or the measured CPU decode tokens/s
    bool pareto = false;    // on its method's front: no full candidate has >= objective and <= ppl, one strictly
    double seconds = 0.0;   // wall time of the evaluation and its replays
};

struct tune_budget_result {
    accuracy_budget budget;
    std::vector<std::string> methods;      // = tune_params::methods
    std::vector<int32_t> best;             // per method: candidate index with the highest objective in budget, or -1
    int32_t recommended = -1;              // over all methods; -1 when nothing but dense meets it
};

struct tune_result {
    tune_candidate dense;                  // the baseline: dense method on every window, same simulator settings
    std::vector<tune_candidate> candidates;
    std::vector<tune_budget_result> budgets;  // one per tune_params::budgets, in order
    int32_t evaluations = 0;               // engine evaluations run (the dense one included)
    double seconds = 0.0;
};

// The simulator's unit layout for a method's masks: DIP, DIP-CA and TEAL load input-column pairs and
// down columns ("dip"); methods with a dense gate (CATS, CHESS, gate) load up rows + down columns
// ("cats"); `up` loads gate rows + down columns; `glu` only down columns; the rest whole neuron bundles.
std::string method_layout(const std::string& method);
// The layout of a built method: FFSplit's split (heavy count, rank, q4, one for every layer) from the
// method's own weights, else method_layout(name).
result<std::string> method_layout_of(const std::string& name, const sparsity_method& m, int32_t n_layers);

// Marks each method's Pareto-optimal full candidates (objective up, perplexity down); of several equal
// points only the first is marked.
void tune_mark_pareto(std::vector<tune_candidate>& candidates);

// Called after each evaluation (e.g. to record it in a session); not called for memoised repeats.
using tune_candidate_fn = std::function<void(const tune_candidate&)>;

// Stage 1: every method on the density (x gamma) grid with `coarse_windows` windows. Stage 2, per method
// and budget: bisection on density between the coarse grid's boundary points, every step on all windows of
// `ref`; DIP additionally tries (d_in, d_down) splits at the final boundary. Each evaluation records the
// masks (per window: eval_method resets the residency) and replays them under `policies` (+ Belady).
// `eval` supplies n_ctx and bos (as for eval_method); its progress is ignored.
result<tune_result> tune(context& ctx, const dense_reference& ref, const calibration* calib, const tune_params& p,
                         const eval_params& eval, const tune_candidate_fn& on_candidate = {});

}  // namespace sl::sim

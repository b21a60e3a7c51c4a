// What a sparse decode's stages would take if it read its weights at dense's speed: the "ideal" that
// `sparselens bench --stages` and the GUI's time-per-token bars set a method's measured time against.
#pragma once

#include <vector>

#include "sparselens/core/context.h"

namespace sl {

// Weight bytes per token each stage read (out[stage_count]): every layer's projection scaled by its mean
// read density over `tokens` (read_sum: context::read_density_sum(); null or tokens <= 0: every weight),
// q/k/v to qkv, o, gate/up to mlp_in, down, the classifier to logits and `selection_bytes` (what a
// method's selection reads, e.g. SparseLLM's predictor) to select. `fused`: the method computes its MLP
// fused (GRIFFIN, SparseLLM), so the MLP bytes go to the fused stage; otherwise a method that ran the rest
// of its MLP over pair layouts after one whole projection (`up_first`: that projection is up) keeps that
// projection in mlp_in and the pairs' in mlp_fused. `st` says which stages ran; tokens that mixed fused
// and unfused MLPs leave the stages concerned without a byte count.
struct stage_bytes_input {
    const model* m = nullptr;
    const std::vector<layer_density>* read_sum = nullptr;
    double tokens = 0.0;
    double selection_bytes = 0.0;
    bool fused = false;
    bool up_first = false;
};
void stage_weight_bytes(const stage_bytes_input& in, const stage_times& st, double* out);

// The same for what ctx decoded since its densities were last reset (its method's traits and selection
// bytes; every weight without a method).
void stage_weight_bytes(const context& ctx, const stage_times& st, double* out);

// Weight bytes one decoded token read: the projections at the densities ctx reported (every weight
// without a method), one embedding row, the classifier and what the method's selection reads.
double read_bytes_per_token(const context& ctx);

// ms per token of each stage (ideal[stage_count]) for a method that read method_bytes per stage, against
// dense's stage times and dense_bytes: a weight stage at dense's ms per byte of that stage on the method's
// bytes; selection at dense's MLP ms per byte on what it reads (0 for activations only); flash fetches 0;
// a fused or pair MLP at dense's whole-MLP rate (its GLU included) on its bytes, the GLU stage then 0 when
// the MLP was fused; every other stage in dense's time.
void stage_ideal_ms(const stage_times& dense, const double* dense_bytes, const double* method_bytes, double* ideal);

}  // namespace sl

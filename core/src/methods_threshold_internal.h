// Private: constructors of the calibrated threshold methods and the heavy-hitter pinning wrapper.
#pragma once

#include <memory>
#include <vector>

#include "methods_internal.h"
#include "sparselens/core/threshold_methods.h"

namespace sl {

// Checks that `cal` fits `m` (shape and the per-neuron vectors the threshold methods read).
outcome check_threshold_calibration(const std::string& method, const model& m, const calibration* cal);

// CATS: per layer, neurons with |silu(gate_i)| >= t_l (t_l from the gate_act histogram at keep[l]).
std::unique_ptr<sparsity_method> make_cats(const model& m, const calibration& cal, const std::vector<float>& keep);
// CHESS: per layer, neurons with |silu(gate_i)| > T_l / E|a_up_i| (T_l from the chess_score histogram
// at keep[l]); with attention (CHESS w/), q and o inputs with |x| > t (q_in / o_in histograms at
// attn_keep); k and v stay dense (eq. 21).
std::unique_ptr<sparsity_method> make_chess(const model& m, const calibration& cal, const std::vector<float>& keep,
                                            bool attention, float attn_keep);

// Heavy-hitter pinning around `e` (dip, dip-ca, cats, chess, chess-attn): builds the inner method with
// its budget reduced by the pinned neurons and wraps it so those neurons are always executed.
result<std::unique_ptr<sparsity_method>> build_pinned(const method_entry& e, const method_config& cfg, const model& m,
                                                      const calibration* cal);

}  // namespace sl

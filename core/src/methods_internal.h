// Private: the method registry's parts and the constructors of the individual methods.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sparselens/core/calibration.h"
#include "sparselens/core/methods.h"

namespace sl {

using method_builder = std::function<result<std::unique_ptr<sparsity_method>>(const method_config&, const model&,
                                                                               const calibration*)>;

// Builders of methods whose construction is long (FFSplit's SVDs): fraction done, false cancels.
using method_builder_progress = std::function<result<std::unique_ptr<sparsity_method>>(
    const method_config&, const model&, const calibration*, const progress_fn&)>;

struct method_entry {
    std::string name;
    std::string description;
    bool needs_calibration;
    method_builder build;
    method_builder_progress build_with_progress = {};  // optional: make_method's progress goes here
};

// Registry parts, one per source file, concatenated by methods.cpp in display order.
std::vector<method_entry> basic_method_entries();      // methods.cpp: dense, glu, gate, up, dip, dip-ca
std::vector<method_entry> threshold_method_entries();  // methods_threshold.cpp: cats, chess, teal, ...
std::vector<method_entry> expert_method_entries();     // methods_expert.cpp: griffin, ffsplit, sparsellm, ...

std::unique_ptr<sparsity_method> make_dense_method();
// GLU pruning (oracle): top-k of |GLU(x)| selects down columns; gate and up stay dense.
std::unique_ptr<sparsity_method> make_glu_pruning(const model_hparams& hp, float keep);
// Gate (or up, with up_first) pruning: the first matrix is dense; top-k of |silu(gate)| (or |up|)
// selects rows of the other matrix and columns of down.
std::unique_ptr<sparsity_method> make_gate_pruning(const model_hparams& hp, float keep, bool up_first,
                                                   glu_activation act);
// DIP / DIP-CA: top-k of |x| (re-weighted by cache state when gamma < 1) selects gate/up input columns,
// top-k of the resulting |GLU~| (re-weighted likewise) selects down columns.
std::unique_ptr<sparsity_method> make_dip(const model_hparams& hp, float d_in, float d_down, float gamma,
                                          bool cache_aware);
// GRIFFIN (methods_griffin.cpp): dense prompt; the top-k neurons by s_j = ||Zbar[:, j]||_2 over the
// prompt's row-normalised GLU rows become the sequence's experts for generation (fused execution).
std::unique_ptr<sparsity_method> make_griffin(const model_hparams& hp, float density);
// SparseLLM-style (methods_sparsellm.cpp): a rank-r truncated SVD of W_gate predicts |W_gate x|; its
// top-k neurons run in the fused MLP. rank <= 0: dim / 8. Costs one SVD per layer at construction.
std::unique_ptr<sparsity_method> make_sparsellm(const model& m, float density, int32_t rank);
// FFSplit (ffsplit_weights.cpp): builds the compact split from the calibration's heavy hitters
// (ffsplit_params_from_config) and runs it through the engine's split-MLP path.
result<std::unique_ptr<sparsity_method>> make_ffsplit(const method_config& cfg, const model& m, const calibration& cal,
                                                      const progress_fn& progress = {});

}  // namespace sl

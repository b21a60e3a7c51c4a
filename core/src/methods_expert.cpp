// Registry entries of the neuron-set methods: GRIFFIN and the SparseLLM-style fused sparse MLP.
// FFSplit is a model transformation, not a per-token method: see sparselens/core/ffsplit.h.
#include <string>

#include "methods_internal.h"

namespace sl {

std::vector<method_entry> expert_method_entries() {
    return {
        {"griffin",
         "GRIFFIN: dense prompt; the top-k neurons by ||Zbar[:, j]||2 over the prompt's row-normalised GLU "
         "are the sequence's experts for generation",
         false,
         [](const method_config& c, const model& m, const calibration*) -> result<std::unique_ptr<sparsity_method>> {
             // Gate rows, up rows and down columns of the experts: MLP density = k / hidden.
             return make_griffin(m.hp, c.density);
         }},
        {"sparsellm",
         "SparseLLM-style: a rank-r SVD of W_gate predicts |W_gate x|; the top-k neurons run in a fused MLP "
         "over a differentially updated compact buffer",
         false,
         [](const method_config& c, const model& m, const calibration*) -> result<std::unique_ptr<sparsity_method>> {
             if (c.rank < 0) return error{"sparsellm: rank " + std::to_string(c.rank) + " is negative (0: dim / 8)"};
             return make_sparsellm(m, c.density, c.rank);
         }},
    };
}

}  // namespace sl

// Registry entries of the neuron-set methods: GRIFFIN, the SparseLLM-style fused sparse MLP and FFSplit.
#include <string>

#include "methods_internal.h"

namespace sl {

namespace {

result<std::unique_ptr<sparsity_method>> build_ffsplit(const method_config& c, const model& m, const calibration* cal,
                                                       const progress_fn& progress) {
    // svd: rank c.rank, or (rank 0) the largest rank whose MLP bytes fit c.density.
    if (c.rank < 0) return error{"ffsplit: rank " + std::to_string(c.rank) + " is negative (0: from density)"};
    return make_ffsplit(c, m, *cal, progress);
}

}  // namespace

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
        {"ffsplit",
         "FFSplit: calibration heavy-hitter neurons kept exact; the light rest as a rank-r SVD (a low-rank GEMV "
         "pair per matrix) or Q4_0 rows",
         true,
         [](const method_config& c, const model& m, const calibration* cal) { return build_ffsplit(c, m, cal, {}); },
         build_ffsplit},
    };
}

}  // namespace sl

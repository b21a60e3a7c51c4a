// Byte accounting of a loaded model by component (attention / MLP / embeddings / norms).
#pragma once

#include <cstdint>

#include "sparselens/core/model.h"

namespace sl {

struct model_bytes {
    uint64_t attention = 0;   // wq, wk, wv, wo of every layer
    uint64_t mlp = 0;         // gate, up, down of every layer
    uint64_t embeddings = 0;  // token embedding + classifier (once when tied)
    uint64_t norms = 0;       // RMSNorm weights
    uint64_t total() const { return attention + mlp + embeddings + norms; }
};

model_bytes model_count_bytes(const model& m);

// Parameters (elements) of the same components, independent of storage type.
uint64_t model_count_params(const model& m);

}  // namespace sl

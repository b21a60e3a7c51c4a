// Synthetic activation traces (random or temporally clustered masks) for benchmarks, tests and demos
// before real method traces exist.
#pragma once

#include <cstdint>

#include "sparselens/core/result.h"
#include "sparselens/sim/trace.h"

namespace sl::sim {

struct synthetic_params {
    uint32_t n_tokens = 256;
    double density = 0.3;      // mean fraction of active units per stream and token
    double persistence = 0.0;  // probability a unit keeps its previous on/off state (temporal clustering)
    double skew = 0.0;         // log-normal sigma of per-unit popularity; 0 = every unit equally likely
    uint64_t seed = 1;
};

// Each unit is a two-state Markov chain whose stationary probability is its popularity (mean =
// density): persistence 0 and skew 0 give i.i.d. uniform masks.
result<trace> trace_synthetic(const model_shape& shape, const mlp_layout& layout, const synthetic_params& p);

}  // namespace sl::sim

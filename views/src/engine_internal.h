// Pieces shared by the engine's job files (engine thread only).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "activation_recorder.h"
#include "engine.h"
#include "sparselens/sim/simulator.h"

namespace sl::views::detail {

// What the Activations view may ask about after a generation: its tokens and how they were produced.
struct engine::last_run {
    std::vector<int32_t> tokens;
    int32_t n_prompt = 0;
    method_config method;
    sim::sim_params sim;
    uint64_t budget = activation_budget_bytes;
    std::unique_ptr<activation_recorder> recorded;  // the run itself
    std::unique_ptr<activation_recorder> rerun;     // the last on-demand re-run (another selection)
};

// Worker threads of every engine context: one core is left to the GUI thread, which must never wait
// behind a busy engine (on 2 cores the GUI loop stalled for 100s of ms with both taken).
int32_t engine_threads();
context_params engine_context_params(int32_t n_ctx);

}  // namespace sl::views::detail

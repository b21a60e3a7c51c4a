// The generation loop shared by `generate`, `logits` and `run --config`: prompt, sampling, streamed text.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "cli_common.h"
#include "sparselens/core/context.h"
#include "sparselens/core/generate.h"

namespace sl::cli {

struct generation_request {
    std::string prompt;
    int32_t steps = 256;
    float temperature = 1.0f;  // 0: greedy
    float top_p = 0.9f;
    uint64_t seed = 0;
    bool prompt_logits = false;  // also hand prompt positions' logits to on_step
    bool stream = true;          // print each printable piece to stdout as it is generated
    bool chat = false;           // wrap the prompt in the model's chat format (--chat)
    std::string system;          // system message for --chat
};

struct generation_output {
    std::string text;  // printable pieces, prompt included
    generate_result r;
    std::string stop;  // why it ended: stop_reason_text()
    double decode_tokens_per_second = 0.0;
};

// -i/--prompt, -n/--steps and --threads (every generating command).
void add_prompt_options(CLI::App* c, generation_request& q, int32_t& threads);
// -t/--temp, -p/--top-p and -s/--seed (commands that sample).
void add_sampling_options(CLI::App* c, generation_request& q);

// Runs generate() on `ctx` (with whatever method and residency it has attached); `on_step`, when set,
// sees every position after the text was collected.
generation_output run_generation(const loaded_model& lm, context& ctx, const generation_request& q,
                                 const std::function<void(const generate_step&)>& on_step = {});

}  // namespace sl::cli

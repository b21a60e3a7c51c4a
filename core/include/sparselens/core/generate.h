// The generation loop with llama2.c run.c semantics (N positions in total, prompt forced, BOS stops).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "sparselens/core/context.h"
#include "sparselens/core/result.h"
#include "sparselens/core/sampler.h"

namespace sl {

struct generate_params {
    int32_t steps = 256;           // positions in total, counting BOS and the prompt (clamped to n_ctx)
    sampler_params sampling = sampler_default_params();
    bool prompt_logits = false;    // also report logits for prompt positions (prefill computes them all)
    bool stop_at_bos = true;       // run.c: a sampled BOS delimits sequences
    int32_t bos_id = 1;
};

generate_params generate_default_params();

// One processed position: `input` was fed at `pos`, `next` follows it (forced inside the prompt, sampled
// after). `logits` is null for prompt positions unless prompt_logits is set; valid only during the call.
struct generate_step {
    int32_t pos;
    int32_t input;
    int32_t next;
    bool sampled;
    const float* logits;
};

struct generate_result {
    std::vector<int32_t> tokens;  // prompt followed by every emitted token
    int32_t n_prompt = 0;
    double prefill_seconds = 0.0;
    double decode_seconds = 0.0;
    int32_t n_decoded = 0;        // positions run one at a time (after the prompt)
};

// Calls on_step for each position in order; returning false stops early (reported as cancelled).
result<generate_result> generate(context& ctx, std::span<const int32_t> prompt, const generate_params& params,
                                 const std::function<bool(const generate_step&)>& on_step);

}  // namespace sl

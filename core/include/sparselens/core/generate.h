// The generation loop with llama2.c run.c semantics (N positions in total, prompt forced, BOS stops).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "sparselens/core/context.h"
#include "sparselens/core/result.h"
#include "sparselens/core/sampler.h"

namespace sl {

class tokenizer;

struct generate_params {
    int32_t steps = 256;           // positions in total, counting BOS and the prompt (clamped to n_ctx)
    sampler_params sampling = sampler_default_params();
    bool prompt_logits = false;    // also report logits for prompt positions (prefill computes them all)
    bool stop_at_bos = true;       // run.c: a sampled BOS delimits sequences
    int32_t bos_id = 1;
    std::vector<int32_t> stop_ids; // a sampled one ends the generation, not emitted (EOS, EOT: generation_stop_ids)
};

// Why the loop ended.
enum class stop_reason : uint8_t { length, bos, end_token };

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
    stop_reason stopped = stop_reason::length;
    int32_t stop_token = -1;      // the sampled BOS or end token that ended it
};

// The end-of-generation tokens: the vocabulary's EOS and EOT (metadata; none for plain SentencePiece
// vocabularies without EOT, which keep run.c's BOS-only rule), and with `chat` the end-of-turn
// marker of the chat template's family (<|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>) when the
// vocabulary has it as one token.
std::vector<int32_t> generation_stop_ids(const tokenizer& tok, bool chat);

// "reached 256 positions", "end token <|eot_id|> (128009)", "sampled BOS (1)".
std::string stop_reason_text(const generate_result& r, const tokenizer& tok, int32_t steps);

// Calls on_step for each position in order; returning false stops early (reported as cancelled).
result<generate_result> generate(context& ctx, std::span<const int32_t> prompt, const generate_params& params,
                                 const std::function<bool(const generate_step&)>& on_step);

}  // namespace sl

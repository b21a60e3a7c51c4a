// Perplexity of a token stream with llama.cpp's methodology (windows of n_ctx, score the second half).
#pragma once

#include <cstdint>
#include <span>

#include "sparselens/core/context.h"
#include "sparselens/core/result.h"

namespace sl {

struct perplexity_params {
    int32_t n_ctx = 128;      // window length; each window starts with BOS
    int32_t max_chunks = 0;   // 0: every full window in the text
    int32_t bos_id = 1;
    progress_fn progress;     // fraction of windows done; return false to cancel
};

perplexity_params perplexity_default_params();

struct perplexity_result {
    double ppl = 0.0;
    double ppl_stderr = 0.0;  // delta method: ppl * stderr(mean NLL)
    double mean_nll = 0.0;
    int64_t n_scored = 0;     // tokens whose NLL entered the mean
    int32_t n_chunks = 0;
    double seconds = 0.0;
    double tokens_per_second = 0.0;  // evaluated (not only scored) tokens per second
};

// `tokens` is the tokenized text (a leading BOS is allowed and is overwritten per window anyway).
// Needs at least one full window; ctx.n_ctx() must be >= n_ctx.
result<perplexity_result> perplexity_evaluate(context& ctx, std::span<const int32_t> tokens,
                                              const perplexity_params& params = perplexity_default_params());

// -log softmax(logits)[target], computed in double.
double token_nll(std::span<const float> logits, int32_t target);

}  // namespace sl

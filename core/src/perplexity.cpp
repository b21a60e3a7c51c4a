// Windowed perplexity (llama.cpp `perplexity` methodology) with progress and cancellation.
#include "sparselens/core/perplexity.h"

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

namespace sl {

perplexity_params perplexity_default_params() { return {}; }

double token_nll(std::span<const float> logits, int32_t target) {
    double max_val = logits[0];
    for (float v : logits) max_val = std::max(max_val, static_cast<double>(v));
    double sum = 0.0;
    for (float v : logits) sum += std::exp(static_cast<double>(v) - max_val);
    return std::log(sum) + max_val - static_cast<double>(logits[static_cast<size_t>(target)]);
}

result<perplexity_result> perplexity_evaluate(context& ctx, std::span<const int32_t> tokens,
                                              const perplexity_params& params) {
    const int32_t n_ctx = params.n_ctx;
    if (n_ctx < 4) return error{"perplexity: context " + std::to_string(n_ctx) + " is too short (need >= 4)"};
    if (n_ctx > ctx.n_ctx())
        return error{"perplexity: context " + std::to_string(n_ctx) + " exceeds the model's " + std::to_string(ctx.n_ctx())};
    int64_t n_chunks = static_cast<int64_t>(tokens.size()) / n_ctx;
    if (params.max_chunks > 0) n_chunks = std::min<int64_t>(n_chunks, params.max_chunks);
    if (n_chunks == 0)
        return error{"perplexity: text has " + std::to_string(tokens.size()) + " tokens, fewer than one window of " +
                     std::to_string(n_ctx)};

    const size_t vocab = static_cast<size_t>(ctx.vocab_size());
    std::vector<float> logits(static_cast<size_t>(n_ctx) * vocab);
    std::vector<int32_t> window(static_cast<size_t>(n_ctx));
    const int32_t first = n_ctx / 2;
    double sum = 0.0, sum_sq = 0.0;
    int64_t count = 0;

    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t c = 0; c < n_chunks; ++c) {
        const size_t start = static_cast<size_t>(c) * n_ctx;
        window.assign(tokens.begin() + static_cast<std::ptrdiff_t>(start),
                      tokens.begin() + static_cast<std::ptrdiff_t>(start + n_ctx));
        window[0] = params.bos_id;
        ctx.prefill(window, 0, logits.data());
        for (int32_t j = first; j < n_ctx - 1; ++j) {
            const double nll = token_nll({logits.data() + static_cast<size_t>(j) * vocab, vocab},
                                         tokens[start + static_cast<size_t>(j) + 1]);
            sum += nll;
            sum_sq += nll * nll;
            ++count;
        }
        if (params.progress && !params.progress(static_cast<float>(c + 1) / static_cast<float>(n_chunks)))
            return error{"perplexity: cancelled", true};
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    perplexity_result r;
    r.mean_nll = sum / static_cast<double>(count);
    r.ppl = std::exp(r.mean_nll);
    const double var = sum_sq / static_cast<double>(count) - r.mean_nll * r.mean_nll;
    r.ppl_stderr = count > 1 ? r.ppl * std::sqrt(std::max(0.0, var) / static_cast<double>(count - 1)) : 0.0;
    r.n_scored = count;
    r.n_chunks = static_cast<int32_t>(n_chunks);
    r.seconds = seconds;
    r.tokens_per_second = seconds > 0 ? static_cast<double>(n_chunks * n_ctx) / seconds : 0.0;
    return r;
}

}  // namespace sl

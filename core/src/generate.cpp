// Prompt prefill then token-by-token decode, reporting every position to the caller.
#include "sparselens/core/generate.h"

#include <algorithm>
#include <chrono>
#include <string>

namespace sl {

generate_params generate_default_params() { return {}; }

result<generate_result> generate(context& ctx, std::span<const int32_t> prompt, const generate_params& params,
                                 const std::function<bool(const generate_step&)>& on_step) {
    if (prompt.empty()) return error{"generate: the prompt must contain at least the BOS token"};
    const int32_t vocab = ctx.vocab_size();
    for (int32_t id : prompt)
        if (id < 0 || id >= vocab) return error{"generate: prompt token " + std::to_string(id) + " is out of range"};
    const int32_t steps = std::min(params.steps, ctx.n_ctx());
    const int32_t n_prompt = static_cast<int32_t>(prompt.size());
    using clock = std::chrono::steady_clock;

    generate_result out;
    out.n_prompt = n_prompt;
    out.tokens.assign(prompt.begin(), prompt.end());
    if (steps <= 0) return out;

    // Positions whose successor is forced by the prompt are run as one batched prefill.
    const int32_t n_forced = std::min(n_prompt - 1, steps);
    const int32_t n_prefill = std::min(n_prompt, steps);
    std::vector<float> prompt_logits;
    if (params.prompt_logits) prompt_logits.resize(static_cast<size_t>(n_prefill) * vocab);
    const auto t0 = clock::now();
    const float* logits = ctx.prefill(prompt.first(static_cast<size_t>(n_prefill)), 0,
                                      params.prompt_logits ? prompt_logits.data() : nullptr);
    out.prefill_seconds = std::chrono::duration<double>(clock::now() - t0).count();

    for (int32_t pos = 0; pos < n_forced; ++pos) {
        const float* row = params.prompt_logits ? prompt_logits.data() + static_cast<size_t>(pos) * vocab : nullptr;
        if (!on_step({pos, prompt[static_cast<size_t>(pos)], prompt[static_cast<size_t>(pos) + 1], false, row}))
            return error{"generate: cancelled", true};
    }
    if (n_forced == steps) return out;

    sampler smp(vocab, params.sampling);
    std::vector<float> work(static_cast<size_t>(vocab));
    int32_t token = prompt[static_cast<size_t>(n_prompt) - 1];
    const auto t1 = clock::now();
    for (int32_t pos = n_prompt - 1; pos < steps; ++pos) {
        if (pos > n_prompt - 1) {
            logits = ctx.decode(token, pos);
            ++out.n_decoded;
        }
        std::copy(logits, logits + vocab, work.begin());
        const int32_t next = smp.sample(work.data());
        if (params.stop_at_bos && next == params.bos_id) break;
        out.tokens.push_back(next);
        if (!on_step({pos, token, next, true, logits})) return error{"generate: cancelled", true};
        token = next;
    }
    out.decode_seconds = std::chrono::duration<double>(clock::now() - t1).count();
    return out;
}

}  // namespace sl

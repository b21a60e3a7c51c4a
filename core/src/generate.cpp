// Prompt prefill then token-by-token decode, reporting every position to the caller.
#include "sparselens/core/generate.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "sparselens/core/chat_format.h"
#include "sparselens/core/tokenizer.h"

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
        const bool at_bos = params.stop_at_bos && next == params.bos_id;
        if (at_bos || std::find(params.stop_ids.begin(), params.stop_ids.end(), next) != params.stop_ids.end()) {
            out.stopped = at_bos ? stop_reason::bos : stop_reason::end_token;
            out.stop_token = next;
            break;
        }
        out.tokens.push_back(next);
        if (!on_step({pos, token, next, true, logits})) return error{"generate: cancelled", true};
        token = next;
    }
    out.decode_seconds = std::chrono::duration<double>(clock::now() - t1).count();
    return out;
}

std::vector<int32_t> generation_stop_ids(const tokenizer& tok, bool chat) {
    std::vector<int32_t> ids;
    // Plain SentencePiece vocabularies without an end-of-turn token (llama2.c, Llama-2) keep run.c's
    // semantics, where only a sampled BOS ends a sequence (stories260K matches run.c byte for byte).
    if (!chat && tok.kind() == tokenizer_kind::sentencepiece && tok.eot_id() < 0) return ids;
    auto add = [&](int32_t id) {
        if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    };
    add(tok.eos_id());
    add(tok.eot_id());
    if (chat) {
        auto fam = chat_family_of(tok.chat_template(), {});
        const char* marker = fam ? chat_end_of_turn(*fam) : nullptr;
        // Parsed as a special token (find_piece sees only pieces text can produce, not control tokens).
        const std::vector<int32_t> one = marker ? tok.tokenize(marker, false, true) : std::vector<int32_t>{};
        if (one.size() == 1) add(one[0]);
    }
    return ids;
}

std::string stop_reason_text(const generate_result& r, const tokenizer& tok, int32_t steps) {
    switch (r.stopped) {
        case stop_reason::bos: return "sampled BOS (" + std::to_string(r.stop_token) + ")";
        case stop_reason::end_token:
            return "end token " + std::string(tok.piece(r.stop_token)) + " (" + std::to_string(r.stop_token) + ")";
        case stop_reason::length: break;
    }
    return "reached " + std::to_string(steps) + " positions";
}

}  // namespace sl

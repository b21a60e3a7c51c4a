// Engine jobs around a generation: streaming tokens with per-token metrics, recording activations and
// cache frames, neuron statistics, and re-running the last tokens for another Activations selection.
//
// KL to dense: when a method is active and the model is small enough, a second, dense context runs in
// lockstep on the same tokens (prefill of the prompt with all logits, then one decode per generated
// token). That doubles the compute but gives the exact per-token KL(dense || method) of the text the
// user sees; the alternative, the method run alone, cannot know the dense distribution. Above
// dense_shadow_max_bytes of weights the shadow is skipped and kld_to_dense stays -1.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "activation_recorder.h"
#include "cache_recorder.h"
#include "engine.h"
#include "engine_internal.h"
#include "sparselens/core/chat_format.h"
#include "sparselens/core/eval.h"
#include "sparselens/core/generate.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/model_stats.h"
#include "sparselens/core/utf8_stream.h"

namespace sl::views::detail {

namespace {

constexpr uint64_t dense_shadow_max_bytes = uint64_t{2} << 30;
constexpr double live_activation_interval_s = 0.25;

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
    return std::chrono::duration<double>(clock_type::now() - t).count();
}

// Indices sorted by decreasing score, ties towards the lower index.
std::vector<int32_t> order_desc(const std::vector<double>& score) {
    std::vector<int32_t> idx(score.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return score[size_t(a)] > score[size_t(b)]; });
    return idx;
}

}  // namespace

result<engine::generated> engine::generate(const generate_request& req, const std::shared_ptr<const eval_text>& text,
                                           generation_id gen, const job_hooks& hooks) {
    if (auto ok = require_model(); !ok) return ok.err();
    if (auto c = ensure_calibration(req.method, text, hooks); !c) return c.err();
    const model& m = *m_model;
    const model_hparams& hp = m.hp;
    const int32_t vocab = hp.vocab_size;
    if (req.steps < 1) return error{"generate: steps must be at least 1"};

    std::vector<int32_t> prompt;
    if (req.chat) {
        // The chat format spells its control tokens (<|im_start|> ...), so they are parsed.
        auto wrapped = chat_apply(m_tok->chat_template(), m.path, req.prompt, "");
        if (!wrapped) return wrapped.err();
        prompt = m_tok->tokenize(wrapped.value(), true, true);
    } else {
        prompt = m_tok->encode(req.prompt, true, false);
    }
    for (int32_t id : prompt)
        if (id < 0 || id >= vocab) return error{"generate: prompt token " + std::to_string(id) + " is outside the vocabulary"};

    // Always run through a method (dense included) so masks, densities and the simulator see every token.
    auto method = make_method(req.method, m, m_calib ? &*m_calib : nullptr,
                              [&](float f) { return hooks.progress("Building " + req.method.name, f); });
    if (!method) return method.err();
    auto sp = sim_params_for(req.device);
    if (!sp) return sp.err();

    // +1: the last emitted token is run too (its activations).
    const context_params cp = engine_context_params(std::min(hp.seq_len, req.steps + 1));
    auto ctx_r = context::create(m, cp);
    if (!ctx_r) return ctx_r.err();
    context ctx = std::move(ctx_r).value();
    ctx.set_method(method.value().get());

    auto cache = cache_recorder::create(m, req.method.name, sp.value(), true, method.value().get());
    if (!cache) return cache.err();
    ctx.set_residency(cache.value().get());
    auto rec = std::make_unique<activation_recorder>(hp, ctx.n_ctx(), req.layer, req.where, req.activation_budget_bytes);
    const int32_t n_prompt = static_cast<int32_t>(prompt.size());
    rec->set_prompt_length(n_prompt);
    ctx.set_observer(rec.get());

    const uint64_t weight_bytes = model_count_bytes(m).total();
    const bool shadow_on = req.method.name != "dense" && weight_bytes <= dense_shadow_max_bytes;
    std::optional<context> shadow;
    std::vector<float> shadow_prompt;  // dense logits of the prompt positions
    const int32_t n_prefill = std::min(n_prompt, std::min(req.steps, ctx.n_ctx()));
    if (shadow_on) {
        auto s = context::create(m, cp);
        if (!s) return s.err();
        shadow.emplace(std::move(s).value());
        shadow_prompt.resize(static_cast<size_t>(n_prefill) * vocab);
        shadow->prefill(std::span<const int32_t>(prompt.data(), static_cast<size_t>(n_prefill)), 0, shadow_prompt.data());
    }

    generate_params gp = generate_default_params();
    gp.steps = std::min(req.steps, ctx.n_ctx());
    gp.sampling.temperature = req.temperature;
    gp.sampling.top_p = req.top_p;
    gp.sampling.seed = req.seed;
    gp.prompt_logits = true;
    gp.bos_id = m_tok->bos_id();
    gp.stop_ids = generation_stop_ids(*m_tok, req.chat);

    std::vector<int32_t> tokens;  // every position run so far, then the last emitted token
    std::vector<token_event> pending;
    std::vector<float> lp(static_cast<size_t>(vocab)), ld(static_cast<size_t>(vocab));
    float prev_logprob = std::numeric_limits<float>::quiet_NaN();
    double kld_sum = 0, decode_seconds = 0, prefill_seconds = 0;
    int32_t kld_n = 0, n_decoded = 0, last_next = -1;
    bool stopped = false, first_sampled = true;
    auto last_return = clock_type::now();
    double residency_mark = ctx.residency_seconds();  // the simulator's bookkeeping is not the CPU's decode
    const auto t_start = clock_type::now();
    auto last_live = t_start;

    // A character split across tokens (byte tokens, byte-level BPE pieces) shows on the token that
    // completes it; the tokens before it show nothing rather than replacement characters.
    utf8_stream utf8;

    // The event of the token at `pos` (the input of that forward pass), given that pass's logits.
    auto make_event = [&](int32_t pos, int32_t input, const float* logits, const float* dense_logits) {
        token_event ev;
        ev.generation = gen;
        ev.pos = pos;
        ev.id = input;
        if (pos > 0) {
            const std::string_view piece = m_tok->decode(tokens[size_t(pos) - 1], input);
            if (m_tok->shown_in_text(input, piece)) ev.piece = utf8.push(piece);
        }
        ev.in_prompt = pos < n_prompt;
        ev.logprob = prev_logprob;
        if (logits) {
            log_softmax(logits, vocab, lp.data());
            if (dense_logits) {
                log_softmax(dense_logits, vocab, ld.data());
                ev.kld_to_dense = static_cast<float>(kl_divergence(ld.data(), lp.data(), vocab));
                if (pos >= n_prompt - 1) {
                    kld_sum += ev.kld_to_dense;
                    ++kld_n;
                }
            }
        }
        ev.mlp_density = rec->mlp_density(pos);
        ev.attn_density = rec->attn_density(pos);
        return ev;
    };
    // Tokens go to the GUI's buffer at once; the selected activations at most every 250 ms.
    auto flush_live = [&](bool final_flush) {
        std::shared_ptr<activation_snapshot> live;
        if (!final_flush && seconds_since(last_live) >= live_activation_interval_s) {
            const auto [layer, where] = hooks.selection();
            live = rec->snapshot(layer, where, rec->tokens(), gen);
            last_live = clock_type::now();
        }
        if (!pending.empty() || live) hooks.stream(std::move(pending), std::move(live));
        pending.clear();
    };

    auto on_step = [&](const generate_step& s) {
        if (s.sampled) {
            if (first_sampled) prefill_seconds = seconds_since(t_start);
            else {
                decode_seconds += std::chrono::duration<double>(clock_type::now() - last_return).count() -
                                  (ctx.residency_seconds() - residency_mark);
                ++n_decoded;
            }
            first_sampled = false;
        }
        tokens.push_back(s.input);
        const float* dense_logits = nullptr;
        if (shadow) {
            dense_logits = s.pos < n_prefill ? shadow_prompt.data() + static_cast<size_t>(s.pos) * vocab
                                             : shadow->decode(s.input, s.pos);
        }
        pending.push_back(make_event(s.pos, s.input, s.logits, dense_logits));
        prev_logprob = s.logits ? lp[static_cast<size_t>(s.next)] : std::numeric_limits<float>::quiet_NaN();
        last_next = s.next;
        flush_live(false);
        if (hooks.stop_requested()) {
            stopped = true;
            return false;
        }
        last_return = clock_type::now();
        residency_mark = ctx.residency_seconds();
        return hooks.progress("", -1.0f);  // cancellation check only
    };

    auto r = sl::generate(ctx, prompt, gp, on_step);
    if (!r && !(r.cancelled() && stopped)) return r.err();
    if (!cache.value()->last_error().empty()) return error{"simulator: " + cache.value()->last_error()};

    // The last emitted token: run it too (when it fits) so it has activations, densities and a KL.
    // When a sampled BOS ended the loop, generate() has already run that position.
    if (last_next >= 0 && (!r || r->tokens.size() > tokens.size())) {
        const int32_t pos = static_cast<int32_t>(tokens.size());
        const bool run = rec->tokens() <= pos && pos < ctx.n_ctx();
        const float* logits = run ? ctx.decode(last_next, pos) : nullptr;
        const float* dense_logits = run && shadow ? shadow->decode(last_next, pos) : nullptr;
        tokens.push_back(last_next);
        pending.push_back(make_event(pos, last_next, logits, dense_logits));
    }
    flush_live(true);

    generated out;
    generation_stats& st = out.stats;
    st.generation = gen;
    st.n_prompt = n_prompt;
    st.n_tokens = static_cast<int32_t>(tokens.size());
    st.prefill_seconds = prefill_seconds;
    st.decode_tokens_per_s = decode_seconds > 0 ? n_decoded / decode_seconds : 0.0;
    st.sim_tokens_per_s = cache.value()->tokens_per_s();
    st.sim_hit_rate = cache.value()->hit_rate();
    st.mean_kld = kld_n > 0 ? kld_sum / kld_n : -1.0;
    st.weights_in_ram = ctx.resident_weight_bytes();
    st.model_weights = model_count_bytes(ctx.get_model()).total();
    st.stopped = stopped;
    if (r) st.stop_reason = stop_reason_text(*r, *m_tok, gp.steps);
    st.text = m_tok->decode_all(tokens);
    const auto [layer, where] = hooks.selection();
    out.activations = rec->snapshot(layer, where, st.n_tokens, gen);
    out.neurons = neuron_stats(*rec, req.method, gen);
    out.cache = cache.value()->series(gen);

    ctx.set_observer(nullptr);
    ctx.set_residency(nullptr);
    m_last = std::make_unique<last_run>();
    m_last->tokens = std::move(tokens);
    m_last->n_prompt = n_prompt;
    m_last->method = req.method;
    m_last->sim = sp.value();
    m_last->budget = req.activation_budget_bytes;
    m_last->recorded = std::move(rec);
    return out;
}

result<std::shared_ptr<activation_snapshot>> engine::activations(int32_t layer, probe where, generation_id gen,
                                                                 const job_hooks& hooks) {
    if (!m_model || !m_last) return error{"activations: generate some text first"};
    const model_hparams& hp = m_model->hp;
    if (layer < 0 || layer >= hp.n_layers)
        return error{"activations: layer " + std::to_string(layer) + " is outside 0.." + std::to_string(hp.n_layers - 1)};
    const int32_t n = static_cast<int32_t>(m_last->tokens.size());
    for (const activation_recorder* rec : {m_last->recorded.get(), m_last->rerun.get()})
        if (rec && rec->has(layer, where))
            if (auto s = rec->snapshot(layer, where, n, gen)) return s;

    // Not recorded (a big model records only the selection): run the same tokens again with the same
    // method and simulator settings, so the masks (DIP-CA reads the cache) are the ones of the run.
    auto method = make_method(m_last->method, *m_model, m_calib ? &*m_calib : nullptr,
                              [&](float f) { return hooks.progress("Building " + m_last->method.name, f); });
    if (!method) return method.err();
    auto c = context::create(*m_model, engine_context_params(std::min(hp.seq_len, n)));
    if (!c) return c.err();
    context ctx = std::move(c).value();
    ctx.set_method(method.value().get());
    auto cache = cache_recorder::create(*m_model, m_last->method.name, m_last->sim, false, method.value().get());
    if (!cache) return cache.err();
    ctx.set_residency(cache.value().get());
    auto rec = std::make_unique<activation_recorder>(hp, ctx.n_ctx(), layer, where, m_last->budget);
    rec->set_prompt_length(m_last->n_prompt);
    ctx.set_observer(rec.get());
    const int32_t total = std::min(n, ctx.n_ctx());
    constexpr int32_t chunk = 16;
    for (int32_t done = 0; done < total; done += chunk) {
        const int32_t k = std::min(chunk, total - done);
        ctx.prefill(std::span<const int32_t>(m_last->tokens.data() + done, static_cast<size_t>(k)), done);
        if (!hooks.progress("Re-running for layer " + std::to_string(layer) + " " + std::string(probe_name(where)),
                            static_cast<float>(done + k) / static_cast<float>(total)))
            return error{"activations: cancelled", true};
    }
    ctx.set_observer(nullptr);
    ctx.set_residency(nullptr);
    auto s = rec->snapshot(layer, where, total, gen);
    m_last->rerun = std::move(rec);
    if (!s) return error{"activations: layer " + std::to_string(layer) + " " + std::string(probe_name(where)) +
                         " does not fit the memory budget"};
    return s;
}

std::shared_ptr<neuron_snapshot> engine::neuron_stats(const activation_recorder& rec, const method_config& cfg,
                                                      generation_id gen) {
    const model_hparams& hp = m_model->hp;
    const size_t hidden = static_cast<size_t>(hp.hidden_dim);
    auto out = std::make_shared<neuron_snapshot>();
    out->generation = gen;
    const auto& glu = rec.neuron_stats();
    const bool from_calib = m_calib && m_calib->layers.size() == size_t(hp.n_layers);
    const std::vector<std::vector<float>>* norms = from_calib ? nullptr : &down_column_norms();
    const float flock_fraction = calibration_flock_fractions[calibration_flock_headline];
    for (int32_t l = 0; l < hp.n_layers; ++l) {
        const auto& g = glu[static_cast<size_t>(l)];
        neuron_layer_stats s;
        // Heavy-hitter importance as FFSplit scores it: RMS of the GLU output times ||W_down[:, j]||.
        std::vector<double> imp(hidden, 0.0);
        for (size_t j = 0; j < hidden; ++j) {
            if (from_calib && j < m_calib->layers[size_t(l)].heavy_hitter.size())
                imp[j] = m_calib->layers[size_t(l)].heavy_hitter[j];
            else if (norms && g.n > 0)
                imp[j] = std::sqrt(g.sumsq[j] / double(g.n)) * (*norms)[size_t(l)][j];
        }
        s.order_by_importance = order_desc(imp);
        double total = 0;
        for (double v : imp) total += v;
        s.importance_sorted.reserve(hidden);
        for (int32_t j : s.order_by_importance) s.importance_sorted.push_back(static_cast<float>(imp[size_t(j)]));
        auto share = [&](double frac) {
            const size_t k = std::max<size_t>(1, static_cast<size_t>(std::ceil(frac * double(hidden))));
            double sum = 0;
            for (size_t i = 0; i < k && i < hidden; ++i) sum += s.importance_sorted[i];
            return total > 0 ? static_cast<float>(sum / total) : 0.0f;
        };
        s.top_share_1 = share(0.01);
        s.top_share_10 = share(0.10);
        s.order_by_griffin = order_desc(g.griffin_prompt);
        s.ffsplit_split = static_cast<int32_t>(density_to_k(cfg.ffsplit_heavy, static_cast<int64_t>(hidden)));
        s.pinned = static_cast<int32_t>(density_to_k(cfg.pin_fraction, static_cast<int64_t>(hidden)));
        // Flocking: the prompt's and the generation's top-k neurons by GRIFFIN's statistic.
        const size_t k = static_cast<size_t>(density_to_k(flock_fraction, static_cast<int64_t>(hidden)));
        const bool have_gen = std::any_of(g.griffin_gen.begin(), g.griffin_gen.end(), [](double v) { return v > 0; });
        if (k > 0 && have_gen) {
            std::vector<int32_t> a(s.order_by_griffin.begin(), s.order_by_griffin.begin() + static_cast<ptrdiff_t>(k));
            std::vector<int32_t> b = order_desc(g.griffin_gen);
            b.resize(k);
            std::sort(a.begin(), a.end());
            std::sort(b.begin(), b.end());
            std::vector<int32_t> both;
            std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
            s.flock_jaccard = static_cast<float>(double(both.size()) / double(2 * k - both.size()));
        }
        out->layers.push_back(std::move(s));
    }
    return out;
}

}  // namespace sl::views::detail

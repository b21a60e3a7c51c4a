// Method-vs-dense evaluation: perplexity, KL divergence, top-1 agreement, density and decode speed.
#include "sparselens/core/eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "methods_internal.h"
#include "sparselens/core/perplexity.h"
#include "sparselens/core/stage_ideal.h"

namespace sl {

eval_params eval_default_params() { return {}; }

namespace {

using clock_type = std::chrono::steady_clock;

// Runs one window: prefill the first half, decode the rest; calls on_scored(j, logits) for scored j.
// The decoded tokens' stage times are added to `stages`.
template <class F>
double run_window(context& ctx, const int32_t* window, int32_t n_ctx, stage_times& stages, F&& on_scored) {
    const int32_t first = n_ctx / 2;
    ctx.prefill({window, static_cast<size_t>(first)}, 0);
    double decode_seconds = 0.0;
    ctx.set_stage_timing(true);
    for (int32_t j = first; j < n_ctx - 1; ++j) {
        const double outside = ctx.residency_seconds();
        const auto t0 = clock_type::now();
        const float* logits = ctx.decode(window[j], j);
        // Without the residency source's bookkeeping (a device simulator in the GUI, the stand-in cache of
        // DIP-CA): the dense reference it is compared with ran without one.
        decode_seconds += std::chrono::duration<double>(clock_type::now() - t0).count() -
                          (ctx.residency_seconds() - outside);
        on_scored(j, logits);
    }
    stages += ctx.stage_timing();
    ctx.set_stage_timing(false);
    return decode_seconds;
}

// Untimed decoding of the first window until k_warm_up_seconds have gone by: its prompt, then its tokens
// one by one, from the start again if the window ends first. The first ~80 ms of decoding in a fresh
// process ran up to 6x slower than the rest on the Xeon VM of stop 47 (stories260K, 2 threads: dense
// windows of 19-20 ms, then 3.1-3.3), whatever the window; timed, they made dense look slower than any
// method measured after it (DIP: 2.6x the dense tokens/s in total, 0.97x per window). A large model's
// window takes seconds: it stops mid-window rather than paying for a whole one. Every later timing (each
// method's windows) follows the reference, so one warm-up serves all.
constexpr double k_warm_up_seconds = 0.15;

void warm_up(context& ctx, const int32_t* window, int32_t n_ctx) {
    const auto t0 = clock_type::now();
    auto elapsed = [&] { return std::chrono::duration<double>(clock_type::now() - t0).count(); };
    const int32_t first = n_ctx / 2;
    do {
        ctx.prefill({window, static_cast<size_t>(first)}, 0);
        for (int32_t j = first; j < n_ctx - 1 && elapsed() < k_warm_up_seconds; ++j) ctx.decode(window[j], j);
    } while (elapsed() < k_warm_up_seconds);
}

}  // namespace

result<dense_reference> eval_dense_reference(context& ctx, std::span<const int32_t> tokens, const eval_params& params) {
    const int32_t n_ctx = params.n_ctx;
    if (n_ctx < 4 || n_ctx > ctx.n_ctx())
        return error{"eval: window " + std::to_string(n_ctx) + " must be in [4, " + std::to_string(ctx.n_ctx()) + "]"};
    int64_t n_windows = static_cast<int64_t>(tokens.size()) / n_ctx;
    if (params.max_windows > 0) n_windows = std::min<int64_t>(n_windows, params.max_windows);
    if (n_windows == 0)
        return error{"eval: text has " + std::to_string(tokens.size()) + " tokens, fewer than one window of " +
                     std::to_string(n_ctx)};

    dense_reference ref;
    ref.n_ctx = n_ctx;
    ref.n_windows = static_cast<int32_t>(n_windows);
    ref.vocab = ctx.vocab_size();
    ref.tokens.assign(tokens.begin(), tokens.begin() + n_windows * n_ctx);
    for (int64_t w = 0; w < n_windows; ++w) ref.tokens[static_cast<size_t>(w * n_ctx)] = params.bos_id;
    const size_t vocab = static_cast<size_t>(ref.vocab);
    ref.logprobs.resize(static_cast<size_t>(n_windows) * ref.scored_per_window() * vocab);

    sparsity_method* previous = ctx.method();
    std::unique_ptr<sparsity_method> dense = make_dense_method();
    ctx.set_method(dense.get());
    ctx.prepare();  // its copies are not timed
    warm_up(ctx, ref.tokens.data(), n_ctx);
    double nll = 0.0, seconds = 0.0;
    int64_t count = 0;
    for (int64_t w = 0; w < n_windows; ++w) {
        const int32_t* window = ref.tokens.data() + w * n_ctx;
        float* out = ref.logprobs.data() + static_cast<size_t>(w) * ref.scored_per_window() * vocab;
        const double ws = run_window(ctx, window, n_ctx, ref.stages, [&](int32_t j, const float* logits) {
            float* lp = out + static_cast<size_t>(j - ref.first_scored()) * vocab;
            log_softmax(logits, ref.vocab, lp);
            const int32_t target = tokens[static_cast<size_t>(w * n_ctx + j + 1)];
            nll -= lp[target];
            ++count;
        });
        seconds += ws;
        ref.window_seconds.push_back(ws);
        if (params.progress && !params.progress(static_cast<float>(w + 1) / static_cast<float>(n_windows))) {
            ctx.set_method(previous);
            return error{"eval: cancelled", true};
        }
    }
    ctx.set_method(previous);
    ref.ppl = std::exp(nll / static_cast<double>(count));
    ref.decode_tokens_per_second = seconds > 0 ? static_cast<double>(count) / seconds : 0.0;
    return ref;
}

result<eval_result> eval_method(context& ctx, const dense_reference& ref, sparsity_method& method,
                                residency_source* residency, const eval_params& params) {
    const int32_t n_ctx = ref.n_ctx;
    const size_t vocab = static_cast<size_t>(ref.vocab);
    sparsity_method* previous = ctx.method();
    ctx.set_method(&method);
    ctx.prepare();  // its copies are not timed
    ctx.set_residency(residency);

    std::vector<float> lp(vocab);
    std::vector<double> klds;
    klds.reserve(static_cast<size_t>(ref.n_windows) * ref.scored_per_window());
    double nll = 0.0, seconds = 0.0;
    int64_t agree = 0;
    std::vector<double> ratios;
    stage_times stages;
    for (int32_t w = 0; w < ref.n_windows; ++w) {
        if (residency) residency->reset();
        const int32_t* window = ref.tokens.data() + static_cast<size_t>(w) * n_ctx;
        const float* dense_lp = ref.logprobs.data() + static_cast<size_t>(w) * ref.scored_per_window() * vocab;
        const double ws = run_window(ctx, window, n_ctx, stages, [&](int32_t j, const float* logits) {
            log_softmax(logits, ref.vocab, lp.data());
            const float* d = dense_lp + static_cast<size_t>(j - ref.first_scored()) * vocab;
            klds.push_back(kl_divergence(d, lp.data(), ref.vocab));
            nll -= lp[static_cast<size_t>(window[j + 1])];
            const auto dense_top = std::max_element(d, d + vocab) - d;
            const auto top = std::max_element(lp.begin(), lp.end()) - lp.begin();
            agree += dense_top == top;
        });
        seconds += ws;
        if (ws > 0 && static_cast<size_t>(w) < ref.window_seconds.size()) ratios.push_back(ref.window_seconds[static_cast<size_t>(w)] / ws);
        if (params.progress && !params.progress(static_cast<float>(w + 1) / static_cast<float>(ref.n_windows))) {
            ctx.set_method(previous);
            ctx.set_residency(nullptr);
            return error{"eval: cancelled", true};
        }
    }

    eval_result r;
    r.n_scored = static_cast<int64_t>(klds.size());
    r.ppl = std::exp(nll / static_cast<double>(r.n_scored));
    r.ppl_dense = ref.ppl;
    double kl_sum = 0.0;
    for (double k : klds) kl_sum += k;
    r.kld_mean = kl_sum / static_cast<double>(r.n_scored);
    std::vector<double> sorted = klds;
    const size_t p99 = std::min(sorted.size() - 1, static_cast<size_t>(std::ceil(0.99 * static_cast<double>(sorted.size()))) - 1);
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(p99), sorted.end());
    r.kld_p99 = sorted[p99];
    r.top1_agreement = static_cast<double>(agree) / static_cast<double>(r.n_scored);

    // Densities are averaged over every token the method saw (prompt and generated).
    const model_hparams& hp = ctx.get_model().hp;
    const double tokens = static_cast<double>(std::max<int64_t>(1, ctx.density_tokens()));
    double mlp = 0.0, attn = 0.0;
    for (const layer_density& sum : ctx.density_sum()) {
        layer_density mean;
        for (int p = 0; p < proj_count; ++p) mean.d[p] = static_cast<float>(sum.d[p] / tokens);
        r.per_layer.push_back(mean);
        mlp += mean.mlp();
        attn += mean.attention(hp.q_dim(), hp.kv_dim());
    }
    r.mlp_density = mlp / static_cast<double>(r.per_layer.size());
    r.attn_density = attn / static_cast<double>(r.per_layer.size());
    r.decode_tokens_per_second = seconds > 0 ? static_cast<double>(r.n_scored) / seconds : 0.0;
    r.dense_decode_tokens_per_second = ref.decode_tokens_per_second;
    r.stages = stages;
    r.dense_stages = ref.stages;
    stage_bytes_input dense_in;
    dense_in.m = &ctx.get_model();
    stage_weight_bytes(dense_in, ref.stages, r.dense_stage_bytes);
    stage_weight_bytes(ctx, stages, r.stage_bytes);
    if (method.name() == "dense") {
        // The same computation as the reference: one measurement, shown as the baseline it is.
        r.decode_tokens_per_second = ref.decode_tokens_per_second;
        r.stages = ref.stages;
        std::copy(std::begin(r.dense_stage_bytes), std::end(r.dense_stage_bytes), r.stage_bytes);
        ratios.assign(1, 1.0);
    }
    if (!ratios.empty()) {
        std::sort(ratios.begin(), ratios.end());
        auto quantile = [&](double q) {
            const double at = q * static_cast<double>(ratios.size() - 1);
            const size_t i = static_cast<size_t>(at);
            const double f = at - static_cast<double>(i);
            return i + 1 < ratios.size() ? ratios[i] * (1 - f) + ratios[i + 1] * f : ratios[i];
        };
        r.speed_ratio_median = quantile(0.5);
        r.speed_ratio_p25 = quantile(0.25);
        r.speed_ratio_p75 = quantile(0.75);
    }
    ctx.set_method(previous);
    ctx.set_residency(nullptr);
    return r;
}

void log_softmax(const float* logits, int32_t n, float* out) {
    double mx = logits[0];
    for (int32_t i = 1; i < n; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
    double sum = 0.0;
    for (int32_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
    const double lse = mx + std::log(sum);
    for (int32_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<double>(logits[i]) - lse);
}

double kl_divergence(const float* log_p, const float* log_q, int32_t n) {
    double kl = 0.0;
    for (int32_t i = 0; i < n; ++i) kl += std::exp(static_cast<double>(log_p[i])) * (log_p[i] - log_q[i]);
    return std::max(0.0, kl);
}

}  // namespace sl

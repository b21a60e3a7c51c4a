// Running a deployment config: building its method and residency, and measuring its expectations
// (accuracy against dense like `sparselens eval`, throughput on the device like `sparselens sim MODEL TEXT`).
#include <algorithm>

#include "sparselens/core/context.h"
#include "sparselens/sim/deploy_config.h"
#include "sparselens/sim/residency.h"

namespace sl::sim {

sim_params deploy_sim_params(const deploy_config& c) {
    sim_params p = sim_default_params();
    p.device = c.device;
    p.quant.bits = c.bits;
    p.quant.group_size = c.group_size;
    p.quant.scale_bits = c.scale_bits;
    p.quant.embedding_bits = c.embedding_bits;
    p.context_tokens = c.context_tokens;
    p.policy = c.policy;
    p.window_tokens = c.window_tokens;
    return p;
}

void deploy_set_sim(deploy_config& c, const sim_params& p) {
    c.device = p.device;
    c.bits = p.quant.bits;
    c.group_size = p.quant.group_size;
    c.scale_bits = p.quant.scale_bits;
    c.embedding_bits = p.quant.embedding_bits;
    c.context_tokens = p.context_tokens;
    c.policy = p.policy;
    c.window_tokens = p.window_tokens;
}

namespace {

result<deploy_runtime> build_runtime(const deploy_config& c, const model& m, const calibration* calib,
                                     const std::string& origin, bool check_per_layer) {
    deploy_runtime rt;
    auto method = make_method(c.method, m, calib);
    if (!method) return error{origin + ": " + method.message()};
    rt.method = std::move(method).value();
    if (check_per_layer)
        if (outcome o = deploy_check_per_layer(c, rt.method->per_layer_values()); !o)
            return error{origin + ": " + o.message()};
    if (c.has_device()) {
        if (outcome o = device_validate(c.device, origin + ": device"); !o) return o.err();
        rt.params = deploy_sim_params(c);
        auto layout = layout_parse(c.layout.empty() ? deploy_default_layout(c.method.name) : c.layout);
        if (!layout) return error{origin + ": " + layout.message()};
        auto sim = sim_residency::create(shape_from_model(m), *layout, rt.params);
        if (!sim) return error{origin + ": simulator: " + sim.message()};
        rt.sim = sim->get();
        rt.residency = std::move(sim).value();
    } else if (std::unique_ptr<lfu_residency> lfu = standin_cache(c.method.name, m.hp, c.cache_fraction)) {
        rt.lfu = lfu.get();
        rt.residency = std::move(lfu);
    }
    return rt;
}

}  // namespace

result<deploy_runtime> deploy_instantiate(const deploy_config& c, const model& m, const calibration* calib,
                                          const std::string& origin) {
    return build_runtime(c, m, calib, origin, true);
}

deploy_measure_params deploy_measure_default_params() { return {}; }

result<deploy_measurement> measure_expectations(const model& m, const deploy_config& c, const calibration* calib,
                                                std::span<const int32_t> tokens, const deploy_measure_params& p) {
    // A config being made has no per-layer values yet; one being re-measured must resolve its own.
    auto rt = build_runtime(c, m, calib, "measure", !c.per_layer.empty());
    if (!rt) return rt.err();
    if (p.offset < 0 || p.offset >= static_cast<int64_t>(tokens.size()))
        return error{(p.text_name.empty() ? std::string("eval text") : p.text_name) + ": offset " +
                     std::to_string(p.offset) + " skips all " + std::to_string(tokens.size()) + " tokens"};
    const std::span<const int32_t> text = tokens.subspan(static_cast<size_t>(p.offset));

    auto stage = [&](float lo, float hi) -> progress_fn {
        if (!p.progress) return {};
        return [&p, lo, hi](float f) { return p.progress(lo + (hi - lo) * f); };
    };
    const bool simulate = c.has_device();
    const float eval_end = simulate ? 0.9f : 1.0f;

    context_params cp = context_default_params();
    cp.n_threads = p.threads;
    cp.n_ctx = p.n_ctx;
    auto ctx = context::create(m, cp);
    if (!ctx) return ctx.err();
    eval_params ep = eval_default_params();
    ep.n_ctx = p.n_ctx;
    ep.max_windows = p.windows;
    ep.bos_id = p.bos_id;
    ep.progress = stage(0.0f, eval_end / 2);
    auto ref = eval_dense_reference(*ctx, text, ep);
    if (!ref) return ref.err();
    ep.progress = stage(eval_end / 2, eval_end);
    // Only DIP-CA reads the cache; other methods are evaluated without one, exactly as `sparselens eval`.
    residency_source* eval_residency = method_reads_cache(c.method.name) ? rt->residency.get() : nullptr;
    auto ev = eval_method(*ctx, *ref, *rt->method, eval_residency, ep);
    if (!ev) return ev.err();

    deploy_measurement out;
    out.eval = std::move(ev).value();
    out.per_layer = rt->method->per_layer_values();
    deploy_expectations& x = out.expected;
    x.eval_text = p.text_name;
    x.eval_text_sha256 = p.text_sha256;
    x.n_ctx = p.n_ctx;
    x.windows = ref->n_windows;
    x.offset = p.offset;
    x.scored_tokens = out.eval.n_scored;
    x.ppl_dense = out.eval.ppl_dense;
    x.ppl = out.eval.ppl;
    x.kld_mean = out.eval.kld_mean;
    x.kld_p99 = out.eval.kld_p99;
    x.top1_agreement = out.eval.top1_agreement;
    x.mlp_density = out.eval.mlp_density;
    x.attn_density = out.eval.attn_density;
    x.cpu_tokens_per_s = out.eval.decode_tokens_per_second;
    x.cpu_dense_tokens_per_s = out.eval.dense_decode_tokens_per_second;
    if (!simulate) return out;

    // The device pass: windows of the model's context, each from BOS, the device cache persisting.
    rt->sim->reset();
    std::vector<int32_t> run(text.begin(), text.begin() + std::min<size_t>(text.size(), p.sim_tokens));
    context_params sp = context_default_params();
    sp.n_threads = p.threads;
    auto sctx = context::create(m, sp);
    if (!sctx) return sctx.err();
    sctx->set_method(rt->method.get());
    sctx->set_residency(rt->sim);
    const auto n = static_cast<size_t>(sctx->n_ctx());
    for (size_t start = 0; start < run.size(); start += n) {
        std::vector<int32_t> window(run.begin() + static_cast<std::ptrdiff_t>(start),
                                    run.begin() + static_cast<std::ptrdiff_t>(std::min(run.size(), start + n)));
        window[0] = p.bos_id;
        sctx->prefill(window, 0);
        if (!rt->sim->last_error().empty()) return error{"measure: simulator: " + rt->sim->last_error()};
        if (p.progress && !p.progress(eval_end + (1.0f - eval_end) * static_cast<float>(start + window.size()) /
                                                   static_cast<float>(run.size())))
            return error{"measure: cancelled", true};
    }
    out.sim = rt->sim->sim().report();
    x.sim_tokens = static_cast<uint32_t>(run.size());
    x.sim_tokens_per_s = out.sim->tokens_per_s;
    x.sim_hit_rate = out.sim->hit_rate;
    return out;
}

}  // namespace sl::sim

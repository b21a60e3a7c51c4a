// `sparselens eval --method M MODEL TEXT`: one method against dense on the same windows.
#include <cstdio>
#include <unistd.h>

#include "cli_methods.h"
#include "sparselens/core/context.h"
#include "sparselens/core/residency.h"

namespace sl::cli {

namespace {

struct eval_opts {
    std::string model_path, text_path, tokenizer_path;
    method_opts m;
    float cache_fraction = 0.5f;
    bool json = false;
};

int run_eval(eval_opts o) {
    loaded_model lm = load_model(o.model_path, o.tokenizer_path, true);
    const std::optional<calibration> cal = load_calibration(o.m, *lm.m, method_needs_calibration(o.m.cfg.name));
    auto method = take(make_method(o.m.cfg, *lm.m, cal ? &*cal : nullptr));
    const std::vector<int32_t> tokens = eval_tokens(lm, o.text_path, o.m);

    context ctx = make_eval_context(lm, o.m);
    eval_params ep = make_eval_params(lm, o.m);
    const bool tty = !o.json && isatty(STDERR_FILENO);
    if (tty) ep.progress = [](float f) { std::fprintf(stderr, "\rdense reference: %5.1f%%", 100.0 * f); return true; };
    const dense_reference ref = take(eval_dense_reference(ctx, tokens, ep));
    if (tty) ep.progress = [](float f) { std::fprintf(stderr, "\r%-16s %5.1f%%", "method:", 100.0 * f); return true; };

    std::unique_ptr<lfu_residency> cache;
    if (o.m.cfg.name == "dip-ca")
        cache = std::make_unique<lfu_residency>(lm.m->hp.n_layers, lm.m->hp.dim, lm.m->hp.hidden_dim, o.cache_fraction);
    const eval_result r = take(eval_method(ctx, ref, *method, cache.get(), ep));
    if (tty) std::fprintf(stderr, "\r%40s\r", "");

    if (o.json) {
        nlohmann::json j = eval_to_json(r);
        j["method"] = o.m.cfg.name;
        j["density_target"] = o.m.cfg.density;
        j["gamma"] = o.m.cfg.gamma;
        j["layout_bytes"] = ctx.layout_bytes();
        if (cache) j["cache_hit_rate"] = double(cache->hits()) / double(std::max<uint64_t>(1, cache->hits() + cache->misses()));
        print_json(j);
        return 0;
    }
    std::printf("method       %s — %s\n", o.m.cfg.name.c_str(), method_description(o.m.cfg.name).c_str());
    std::printf("perplexity   %.4f (dense %.4f, %+.4f) over %lld scored tokens\n", r.ppl, r.ppl_dense,
                r.ppl - r.ppl_dense, static_cast<long long>(r.n_scored));
    std::printf("KL to dense  mean %.5f, p99 %.5f; same top token %.1f%%\n", r.kld_mean, r.kld_p99, 100 * r.top1_agreement);
    std::printf("density      MLP %.1f%%, attention %.1f%%\n", 100 * r.mlp_density, 100 * r.attn_density);
    std::printf("decode       %.1f tok/s (dense %.1f tok/s, this CPU)\n", r.decode_tokens_per_second,
                r.dense_decode_tokens_per_second);
    if (cache)
        std::printf("cache        LFU stand-in at %.0f%% of units: hit rate %.1f%%\n", 100 * o.cache_fraction,
                    100.0 * double(cache->hits()) / double(std::max<uint64_t>(1, cache->hits() + cache->misses())));
    return 0;
}

}  // namespace

void register_eval(CLI::App& app, command_fn& run) {
    auto o = std::make_shared<eval_opts>();
    CLI::App* c = app.add_subcommand("eval", "Accuracy (PPL, KL, top-1) and density of a sparsity method vs dense");
    c->add_option("model", o->model_path, "Model file")->required();
    c->add_option("text", o->text_path, "Evaluation text")->required();
    c->add_option("-m,--method", o->m.cfg.name, "Method")->check(CLI::IsMember(method_names()));
    c->add_option("-z,--tokenizer", o->tokenizer_path, "llama2.c tokenizer.bin (default: embedded or beside the model)");
    c->add_option("--cache-fraction", o->cache_fraction, "DIP-CA: share of units the stand-in LFU cache holds")
        ->check(CLI::Range(0.0, 1.0));
    add_method_options(c, o->m);
    c->add_flag("--json", o->json, "Machine-readable output");
    c->callback([o, &run] { run = [o] { return run_eval(*o); }; });
}

}  // namespace sl::cli

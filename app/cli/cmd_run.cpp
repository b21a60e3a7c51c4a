// `sparselens run MODEL --config tuned.json --prompt ...`: generation with exactly the configuration a
// deployment config describes (method, calibration, resolved per-layer values, device cache).
#include <cstdio>

#include "cli_config.h"
#include "cli_generate.h"
#include "cli_offload.h"
#include "sparselens/sim/residency.h"

namespace sl::cli {

namespace {

struct run_opts {
    std::string model_path, config_path, tokenizer_path;
    generation_request gen;
    int32_t threads = 0;
    bool allow_other_weights = false;
    bool json = false;
    bool offload = false;
    run_opts_offload off;
};

int run_run(const run_opts& o) {
    if (o.offload)
        return run_offloaded(o.model_path, o.config_path, o.tokenizer_path, o.gen, o.threads, o.allow_other_weights,
                             o.json, o.off);
    loaded_model lm = load_model(o.model_path, o.tokenizer_path, true);
    const sim::loaded_deploy_config lc = load_config_for_model(o.config_path, o.model_path, *lm.m, o.allow_other_weights);
    const sim::deploy_config& c = lc.config;
    sim::deploy_runtime rt =
        take(sim::deploy_instantiate(c, *lm.m, lc.calib ? &*lc.calib : nullptr, o.config_path));

    context_params cp = context_default_params();
    cp.n_threads = o.threads;
    context ctx = take(context::create(*lm.m, cp));
    ctx.set_method(rt.method.get());
    ctx.prepare();  // before the prompt's timing starts
    ctx.set_residency(rt.residency.get());
    generation_request q = o.gen;
    q.stream = !o.json;
    const generation_output g = run_generation(lm, ctx, q);
    if (rt.sim && !rt.sim->last_error().empty()) throw cli_error("simulator: " + rt.sim->last_error());

    // Densities over every position run (prompt and generated), as eval reports them.
    const model_hparams& hp = lm.m->hp;
    const double n = static_cast<double>(std::max<int64_t>(1, ctx.density_tokens()));
    double mlp = 0, attn = 0;
    for (const layer_density& sum : ctx.density_sum()) {
        layer_density mean;
        for (int p = 0; p < proj_count; ++p) mean.d[p] = static_cast<float>(sum.d[p] / n);
        mlp += mean.mlp();
        attn += mean.attention(hp.q_dim(), hp.kv_dim());
    }
    const double layers = static_cast<double>(std::max<size_t>(1, ctx.density_sum().size()));
    mlp /= layers;
    attn /= layers;
    std::optional<sim::run_report> sr;
    if (rt.sim) sr = rt.sim->sim().report();

    if (o.json) {
        nlohmann::json j{{"config", o.config_path},
                         {"method", c.method.name},
                         {"text", g.text},
                         {"tokens", g.r.tokens},
                         {"n_prompt", g.r.n_prompt},
                         {"n_decoded", g.r.n_decoded},
                         {"stopped", g.stop},
                         {"decode_tokens_per_second", g.decode_tokens_per_second},
                         {"mlp_density", mlp},
                         {"attn_density", attn}};
        if (sr)
            j["sim"] = {{"device", c.device.name},
                        {"tokens", sr->n_tokens},
                        {"tokens_per_s", sr->tokens_per_s},
                        {"hit_rate", sr->hit_rate}};
        print_json(j);
        return 0;
    }
    std::printf("\n");
    std::fflush(stdout);  // the text's last line before the stderr summary
    std::fprintf(stderr, "achieved tok/s: %.1f (decode, %d tokens); %s; density MLP %.1f%%, attention %.1f%%",
                 g.decode_tokens_per_second, g.r.n_decoded, config_method_summary(c).c_str(), 100 * mlp, 100 * attn);
    if (sr)
        std::fprintf(stderr, "; simulated on %s: %.2f tok/s, cache hit rate %.1f%%", c.device.name.c_str(),
                     sr->tokens_per_s, 100 * sr->hit_rate);
    std::fprintf(stderr, "\nstopped: %s\n", g.stop.c_str());
    return 0;
}

}  // namespace

void register_run(CLI::App& app, command_fn& run) {
    auto o = std::make_shared<run_opts>();
    CLI::App* c = app.add_subcommand("run", "Generate text with a deployment config (sparselens config export / tune --export)");
    c->add_option("model", o->model_path, "Model file the config was tuned for")->required();
    c->add_option("--config", o->config_path, "Deployment config (JSON)")->required();
    c->add_option("-z,--tokenizer", o->tokenizer_path, "llama2.c tokenizer.bin (default: embedded or beside the model)");
    add_prompt_options(c, o->gen, o->threads);
    add_sampling_options(c, o->gen);
    c->add_flag("--allow-other-weights", o->allow_other_weights,
                "Run on a model file whose SHA-256 differs from the tuned one (same shape, e.g. its Q8_0 form)");
    c->add_flag("--json", o->json, "Machine-readable output");
    add_offload_options(c, o->offload, o->off);
    c->callback([o, &run] {
        check_offload_options(o->offload, o->off);
        run = [o] { return run_run(*o); };
    });
}

}  // namespace sl::cli

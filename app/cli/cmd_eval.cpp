// `sparselens eval --method M MODEL TEXT`: one method against dense on the same windows.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <unistd.h>

#include "cli_config.h"
#include "cli_methods.h"
#include "cli_offload.h"
#include "cli_session.h"
#include "sparselens/core/context.h"
#include "sparselens/core/fingerprint.h"
#include "sparselens/core/residency.h"

namespace sl::cli {

namespace {

struct eval_opts {
    std::string model_path, text_path, tokenizer_path;
    method_opts m;
    float cache_fraction = 0.5f;
    bool json = false;
    std::string config_path;        // --config: method, calibration and windows come from the config
    bool allow_other_weights = false;
    std::string config_conflict;    // an option --config overrides that was given anyway
    session_record_opts session;    // --session FILE, --label: record the run
    bool offload = false;           // --offload: run the config from storage, measured vs simulated
    run_opts_offload off;
    int32_t steps = 48;             // positions of the offloaded run
};

// `eval --config`: re-measures a deployment config on its windows and reports drift against its expectations.
int run_eval_config(const eval_opts& o) {
    if (!o.config_conflict.empty())
        throw cli_error(o.config_conflict + " cannot be combined with --config: the config sets the method, its "
                        "calibration and the evaluation windows");
    loaded_model lm = load_model(o.model_path, o.tokenizer_path, true);
    const sim::loaded_deploy_config lc = load_config_for_model(o.config_path, o.model_path, *lm.m, o.allow_other_weights);
    const sim::deploy_config& c = lc.config;
    const sim::deploy_expectations& e = c.expected;
    if (e.n_ctx == 0) throw cli_error(o.config_path + ": holds no measured expectations to compare with (expected.n_ctx is 0)");

    sim::deploy_measure_params mp = sim::deploy_measure_default_params();
    mp.n_ctx = e.n_ctx;
    mp.windows = e.windows;
    mp.offset = e.offset;
    mp.threads = o.m.threads;
    mp.bos_id = lm.tok->bos_id();
    if (e.sim_tokens > 0) mp.sim_tokens = e.sim_tokens;
    mp.text_name = std::filesystem::path(o.text_path).filename().string();
    mp.text_sha256 = take(sha256_file(o.text_path));
    if (mp.text_sha256 != e.eval_text_sha256)
        std::fprintf(stderr, "warning: %s is not the text %s was measured on (%s): the drift compares different windows\n",
                     o.text_path.c_str(), o.config_path.c_str(), e.eval_text.c_str());
    const bool tty = !o.json && isatty(STDERR_FILENO);
    if (tty) mp.progress = [](float f) { std::fprintf(stderr, "\rmeasuring: %5.1f%%", 100.0 * f); return true; };
    const std::vector<int32_t> tokens = encode_prompt(lm, read_text(o.text_path));
    const sim::deploy_measurement meas =
        take(sim::measure_expectations(*lm.m, c, lc.calib ? &*lc.calib : nullptr, tokens, mp));
    if (tty) std::fprintf(stderr, "\r%30s\r", "");
    if (outcome same = sim::deploy_check_per_layer(c, meas.per_layer); !same) throw cli_error(o.config_path + ": " + same.message());
    const sim::deploy_expectations& m = meas.expected;
    const nlohmann::json drift = config_drift_json(e, m);

    if (o.json) {
        nlohmann::json j = eval_to_json(meas.eval);
        j["config"] = o.config_path;
        j["method"] = c.method.name;
        j["expected"] = expectations_json(e);
        j["measured"] = expectations_json(m);
        j["drift"] = drift;
        print_json(j);
        return 0;
    }
    const eval_result& r = meas.eval;
    std::printf("config       %s: %s\n", o.config_path.c_str(), config_method_summary(c).c_str());
    std::printf("perplexity   %.4f (dense %.4f, %+.4f) over %lld scored tokens\n", r.ppl, r.ppl_dense, r.ppl - r.ppl_dense,
                static_cast<long long>(r.n_scored));
    std::printf("KL to dense  mean %.5f, p99 %.5f; same top token %.1f%%\n", r.kld_mean, r.kld_p99, 100 * r.top1_agreement);
    std::printf("density      MLP %.1f%%, attention %.1f%%\n", 100 * r.mlp_density, 100 * r.attn_density);
    std::printf("decode       %.1f tok/s (dense %.1f tok/s, this CPU; %.1f where tuned)\n", r.decode_tokens_per_second,
                r.dense_decode_tokens_per_second, e.cpu_tokens_per_s);
    if (meas.sim)
        std::printf("simulated    %.2f tok/s on %s, cache hit rate %.1f%%\n", m.sim_tokens_per_s, c.device.name.c_str(),
                    100 * m.sim_hit_rate);
    std::printf("drift        ppl %+.4g, KL %+.4g, top-1 %+.4g, MLP density %+.4g, attention %+.4g",
                drift["ppl"].get<double>(), drift["kld_mean"].get<double>(), drift["top1_agreement"].get<double>(),
                drift["mlp_density"].get<double>(), drift["attn_density"].get<double>());
    if (drift.contains("sim_tokens_per_s"))
        std::printf(", sim tok/s %+.4g, hit rate %+.4g", drift["sim_tokens_per_s"].get<double>(),
                    drift["sim_hit_rate"].get<double>());
    std::printf(" (measured - expected)\n");
    return 0;
}

int run_eval(eval_opts o) {
    if (!o.config_path.empty() && !o.session.session_path.empty())
        throw cli_error("--session records plain evaluations; it cannot be combined with --config");
    if (o.offload) {
        if (o.config_path.empty()) throw cli_error("eval --offload needs --config (the method, budget and device to verify)");
        if (!o.config_conflict.empty()) throw cli_error(o.config_conflict + " cannot be combined with --config");
        return eval_offloaded(o.model_path, o.config_path, o.tokenizer_path, o.text_path, o.steps, o.m.threads,
                              o.allow_other_weights, o.json, o.off);
    }
    if (!o.config_path.empty()) return run_eval_config(o);
    const auto t0 = std::chrono::steady_clock::now();
    loaded_model lm = load_model(o.model_path, o.tokenizer_path, true);
    const bool needs_calib = method_config_needs_calibration(o.m.cfg);
    const std::optional<calibration> cal = load_calibration(o.m, *lm.m, needs_calib);
    auto method = build_method(o.m.cfg, *lm.m, cal ? &*cal : nullptr, o.json);
    const std::vector<int32_t> tokens = eval_tokens(lm, o.text_path, o.m);

    context ctx = make_eval_context(lm, o.m);
    eval_params ep = make_eval_params(lm, o.m);
    const bool tty = !o.json && isatty(STDERR_FILENO);
    if (tty) ep.progress = [](float f) { std::fprintf(stderr, "\rdense reference: %5.1f%%", 100.0 * f); return true; };
    const dense_reference ref = take(eval_dense_reference(ctx, tokens, ep));
    if (tty) ep.progress = [](float f) { std::fprintf(stderr, "\r%-16s %5.1f%%", "method:", 100.0 * f); return true; };

    const std::unique_ptr<lfu_residency> cache = standin_cache(o.m.cfg.name, lm.m->hp, o.cache_fraction);
    const eval_result r = take(eval_method(ctx, ref, *method, cache.get(), ep));
    if (tty) std::fprintf(stderr, "\r%40s\r", "");
    int64_t run_id = 0;
    if (!o.session.session_path.empty())
        run_id = record_eval_in_session(o.session, lm, o.text_path, o.m, needs_calib && cal ? &*cal : nullptr, r,
                                        cache.get(), o.cache_fraction,
                                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

    if (o.json) {
        nlohmann::json j = eval_to_json(r);
        if (run_id > 0) j["session"] = {{"path", o.session.session_path}, {"run_id", run_id}};
        add_method_json(j, o.m.cfg);
        j["layout_bytes"] = ctx.layout_bytes();
        if (cache) j["cache_hit_rate"] = cache->hit_rate();
        print_json(j);
        return 0;
    }
    std::printf("method       %s — %s\n", o.m.cfg.name.c_str(), method_description(o.m.cfg.name).c_str());
    std::printf("perplexity   %.4f (dense %.4f, %+.4f) over %lld scored tokens\n", r.ppl, r.ppl_dense,
                r.ppl - r.ppl_dense, static_cast<long long>(r.n_scored));
    std::printf("KL to dense  mean %.5f, p99 %.5f; same top token %.1f%%\n", r.kld_mean, r.kld_p99, 100 * r.top1_agreement);
    std::printf("density      MLP %.1f%%, attention %.1f%%\n", 100 * r.mlp_density, 100 * r.attn_density);
    if (o.m.cfg.name == "dense")
        std::printf("decode       %.1f tok/s (the dense baseline, measured once, this CPU)\n", r.dense_decode_tokens_per_second);
    else
        std::printf("decode       %.1f tok/s (dense %.1f tok/s, this CPU); per window x%.2f vs dense (quartiles %.2f-%.2f)\n",
                    r.decode_tokens_per_second, r.dense_decode_tokens_per_second, r.speed_ratio_median,
                    r.speed_ratio_p25, r.speed_ratio_p75);
    if (cache && o.m.cfg.name != "dense")
        std::printf("cache        LFU stand-in at %.0f%% of units: hit rate %.1f%%\n", 100 * o.cache_fraction,
                    100.0 * cache->hit_rate());
    if (run_id > 0) std::printf("session      recorded as run %lld in %s\n", static_cast<long long>(run_id), o.session.session_path.c_str());
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
    c->add_option("--config", o->config_path, "Deployment config: re-measure it and report drift against its expectations");
    c->add_flag("--allow-other-weights", o->allow_other_weights,
                "With --config: accept a model file whose SHA-256 differs from the tuned one (same shape)");
    c->add_option("--session", o->session.session_path, "Record the run (model, text, calibration, metrics) in this session file (created when missing)");
    c->add_option("--label", o->session.label, "With --session: a label for the run");
    c->add_flag("--json", o->json, "Machine-readable output");
    add_offload_options(c, o->offload, o->off);
    c->add_option("-n,--steps", o->steps, "With --offload: positions to run (greedy, from the text's opening words)")
        ->check(CLI::Range(2, 100000));
    c->callback([o, c, &run] {
        check_offload_options(o->offload, o->off);
        for (const char* opt : {"--method", "--density", "--d-in", "--d-down", "--gamma", "--attn-density", "--rank",
                                "--pin", "--split", "--compress", "--calib", "--ctx", "--windows", "--offset", "--cache-fraction"})
            if (c->count(opt) > 0 && o->config_conflict.empty()) o->config_conflict = opt;
        run = [o] { return run_eval(*o); };
    });
}

}  // namespace sl::cli

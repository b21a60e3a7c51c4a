// `sparselens tune MODEL TEXT`: per method, the highest simulated (or CPU) tokens/s within accuracy budgets
// ("ppl+0.2"), the Pareto fronts and a recommended configuration (docs/tuner.md); --export writes it as a
// deployment config, --session records every evaluated run.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <unistd.h>

#include "cli_device.h"
#include "cli_methods.h"
#include "cli_session.h"
#include "cli_tune.h"
#include "sparselens/core/context.h"
#include "sparselens/sessions/jobs.h"
#include "sparselens/sim/tuner.h"

namespace sl::cli {

namespace {

namespace ss = sl::sim;

volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_sigint(int) { g_interrupted = 1; }

// Ctrl-C cancels through the progress callback (the search stops after the current window) instead
// of killing the process; the previous handler is restored on exit.
struct sigint_guard {
    using handler = void (*)(int);
    handler previous;
    sigint_guard() : previous(std::signal(SIGINT, on_sigint)) { g_interrupted = 0; }
    ~sigint_guard() { std::signal(SIGINT, previous == SIG_ERR ? SIG_DFL : previous); }
};

void apply_grid(tune_opts& o, ss::tune_params& p) {
    if (o.grid == "fine") {
        p.densities = {0.3f, 0.35f, 0.4f, 0.45f, 0.5f, 0.55f, 0.6f, 0.65f, 0.7f, 0.75f, 0.8f, 0.85f, 0.9f, 0.95f};
        p.gammas = {0.1f, 0.2f, 0.5f};
        p.refine_steps = 5;
        p.dip_split_points = 5;
        p.coarse_windows = 8;
    } else if (o.grid != "coarse") {
        throw cli_error("--grid: '" + o.grid + "' (coarse or fine)");
    }
    if (!o.densities.empty()) p.densities = o.densities;
    if (!o.gammas.empty()) p.gammas = o.gammas;
    if (o.refine_steps >= 0) p.refine_steps = o.refine_steps;
    if (o.dip_splits >= 0) p.dip_split_points = o.dip_splits;
    if (o.coarse_windows >= 0) p.coarse_windows = o.coarse_windows;
}

ss::tune_params build_tune_params(tune_opts& o) {
    ss::tune_params p = ss::tune_default_params();
    p.methods = o.methods;
    apply_grid(o, p);
    if (!o.budgets.empty()) {
        p.budgets.clear();
        for (const std::string& b : o.budgets) p.budgets.push_back(take(ss::budget_parse(b)));
    }
    if (o.objective == "cpu")
        p.objective = ss::tune_objective::cpu;
    else if (o.objective != "sim")
        throw cli_error("--objective: '" + o.objective + "' (sim or cpu)");
    p.sim = device_sim_params(o.dev);
    if (o.policy != "auto") {
        ss::cache_policy pol;
        if (!ss::cache_policy_parse(o.policy, pol) || pol == ss::cache_policy::belady)
            throw cli_error("--policy: '" + o.policy + "' (auto, lru, lfu, window, none; belady is only a bound)");
        p.policies = {pol};
        if (pol != ss::cache_policy::none) p.online_policy = pol;
    }
    if (!o.online_policy.empty()) {
        if (!ss::cache_policy_parse(o.online_policy, p.online_policy) || p.online_policy == ss::cache_policy::belady)
            throw cli_error("--online-policy: '" + o.online_policy + "' (lru, lfu, window, none)");
    }
    p.belady_bound = !o.no_belady;
    p.base.pin_fraction = o.pin;
    p.base.attn_density = o.attn_density;
    return p;
}

std::string cell(const ss::tune_result& r, int32_t i, bool sim) {
    if (i < 0) return "-";
    const ss::tune_candidate& c = r.candidates[static_cast<size_t>(i)];
    char b[96];
    std::snprintf(b, sizeof b, "%.2f @ %.3f (+%.3f)", c.objective, c.eval.mlp_density, c.eval.ppl - c.eval.ppl_dense);
    std::string s = b;
    if (sim && c.best_sim >= 0) s += std::string(" ") + ss::cache_policy_name(c.sims[static_cast<size_t>(c.best_sim)].policy);
    return s;
}

void print_table(const ss::tune_result& r, const ss::tune_params& p, const tune_opts& o, int32_t windows) {
    const bool sim = p.objective == ss::tune_objective::sim;
    const char* unit = sim ? "simulated tok/s" : "CPU tok/s";
    std::printf("dense: ppl %.4f on %d windows of %d tokens, %.2f %s", r.dense.eval.ppl_dense, windows, o.m.n_ctx,
                r.dense.objective, unit);
    if (sim)
        for (const ss::sim_summary& s : r.dense.sims)
            std::printf("%s%s %.2f", &s == &r.dense.sims.front() ? " (" : ", ", ss::cache_policy_name(s.policy),
                        s.tokens_per_s);
    std::printf("%s\n", sim && !r.dense.sims.empty() ? ")" : "");
    std::printf("cell: highest %s within the budget @ measured MLP density (+ delta ppl)%s\n\n", unit,
                sim ? " and cache policy" : "");
    std::printf("%-12s", "method");
    for (const ss::tune_budget_result& b : r.budgets) std::printf(" | %-34s", b.budget.text.c_str());
    std::printf("\n");
    for (size_t m = 0; m < p.methods.size(); ++m) {
        std::printf("%-12s", p.methods[m].c_str());
        for (const ss::tune_budget_result& b : r.budgets) std::printf(" | %-34s", cell(r, b.best[m], sim).c_str());
        std::printf("\n");
    }
    std::printf("\n");
    for (const ss::tune_budget_result& b : r.budgets) {
        if (b.recommended < 0) {
            std::printf("recommended for %s: dense (no method beats it within the budget)\n", b.budget.text.c_str());
            continue;
        }
        const ss::tune_candidate& c = r.candidates[static_cast<size_t>(b.recommended)];
        std::printf("recommended for %s: %s\n", b.budget.text.c_str(), candidate_summary(c, sim).c_str());
    }
    std::printf("\nPareto fronts (%s vs perplexity, every window):\n", unit);
    for (const std::string& name : p.methods) {
        std::printf("  %-10s", name.c_str());
        std::vector<const ss::tune_candidate*> front;
        for (const ss::tune_candidate& c : r.candidates)
            if (c.pareto && c.config.name == name) front.push_back(&c);
        std::sort(front.begin(), front.end(), [](auto* a, auto* b) { return a->eval.ppl < b->eval.ppl; });
        for (const ss::tune_candidate* c : front)
            std::printf(" %.2f@%.3f/+%.3f", c->objective, c->eval.mlp_density, c->eval.ppl - c->eval.ppl_dense);
        std::printf("\n");
    }
    std::printf("\n%d evaluations in %.1f s\n", r.evaluations, r.seconds);
}

int run_tune(tune_opts o) {
    loaded_model lm = load_model(o.model_path, o.tokenizer_path, true);
    ss::tune_params p = build_tune_params(o);
    bool need_cal = false;
    for (const std::string& n : p.methods) {
        method_config c = p.base;
        c.name = n;
        if (method_config_needs_calibration(c)) {
            need_cal = true;
            o.m.cfg.name = n;  // names the method in load_calibration's error
        }
    }
    const std::optional<calibration> cal = load_calibration(o.m, *lm.m, need_cal);
    const std::vector<int32_t> all_tokens = encode_prompt(lm, read_text(o.text_path));
    if (!o.offset_given && cal && cal->n_tokens > 0 && static_cast<size_t>(cal->n_tokens) < all_tokens.size() &&
        fnv1a64(all_tokens.data(), static_cast<size_t>(cal->n_tokens) * sizeof(int32_t)) == cal->text_hash) {
        // The calibration saw the first n_tokens of this text: evaluate on the text after it.
        o.m.offset = cal->n_tokens;
        if (!o.json) std::fprintf(stderr, "tune: the calibration covers the first %lld tokens of %s: --offset %lld\n",
                                  static_cast<long long>(cal->n_tokens), o.text_path.c_str(),
                                  static_cast<long long>(cal->n_tokens));
    }
    const std::vector<int32_t> tokens = eval_tokens(lm, o.text_path, o.m);
    context ctx = make_eval_context(lm, o.m);
    eval_params ep = make_eval_params(lm, o.m);
    const dense_reference ref = take(eval_dense_reference(ctx, tokens, ep));

    const bool tty = !o.json && isatty(STDERR_FILENO);
    sigint_guard guard;
    p.progress = [tty](float f) {
        if (tty) {
            const int filled = static_cast<int>(f * 30.0f);
            std::fprintf(stderr, "\rtune: [%s%s] %5.1f%%", std::string(static_cast<size_t>(filled), '#').c_str(),
                         std::string(static_cast<size_t>(30 - filled), '.').c_str(), 100.0 * f);
        }
        return g_interrupted == 0;
    };
    // --session: every evaluation becomes a run of one sweep, in the form `session export` turns into a config.
    std::optional<sessions::session_store> store;
    std::string text;  // the eval text's bytes, which the session stores
    result<sessions::tune_job_result> tuned = error{""};
    if (!o.session_path.empty()) {
        store.emplace(take(sessions::open_or_create_session(o.session_path)));
        text = read_text(o.text_path);
        tuned = sessions::tune_into_session(*store, ctx, ref, p, ep,
                                            session_run_inputs(lm, o.text_path, text, o.m, cal ? &*cal : nullptr));
    } else if (result<ss::tune_result> t = ss::tune(ctx, ref, cal ? &*cal : nullptr, p, ep); t.ok()) {
        sessions::tune_job_result plain;
        plain.tune = std::move(*t);
        tuned = std::move(plain);
    } else {
        tuned = t.err();
    }
    if (tty) std::fprintf(stderr, "\n");
    if (!tuned.ok()) {
        if (tuned.cancelled()) {
            std::fprintf(stderr, "sparselens: %s\n", store ? tuned.message().c_str() : "tune cancelled");
            return 130;
        }
        throw cli_error(tuned.message());
    }
    const ss::tune_result& r = tuned->tune;

    nlohmann::json j = tune_to_json(r, p, o, ref);
    if (store) j["session"] = {{"path", o.session_path}, {"sweep_id", tuned->sweep_id}};
    if (!o.export_path.empty()) {
        j["export"] = export_recommended(o, lm, cal ? &*cal : nullptr, p, r, ref);
        if (store) take(sessions::record_export(*store, tuned->recommended_run_ids.front(), o.export_path));
    }
    if (!o.out_json.empty()) {
        std::ofstream f(o.out_json, std::ios::trunc);
        if (!f || !(f << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n') || !f.flush()) throw cli_error(o.out_json + ": write failed");
    }
    if (o.json) {
        print_json(j);
        return 0;
    }
    print_table(r, p, o, ref.n_windows);
    if (!o.export_path.empty()) std::printf("exported %s\n", o.export_path.c_str());
    return 0;
}

}  // namespace

std::string candidate_summary(const ss::tune_candidate& c, bool sim) {
    char b[256];
    std::snprintf(b, sizeof b, "%s density %.3f", c.config.name.c_str(), c.config.density);
    std::string s = b;
    if (c.config.d_in >= 0) {
        std::snprintf(b, sizeof b, " (d_in %.3f, d_down %.3f)", c.config.d_in, c.config.d_down);
        s += b;
    }
    if (c.config.name == "dip-ca") {
        std::snprintf(b, sizeof b, " gamma %.2f", c.config.gamma);
        s += b;
    }
    std::snprintf(b, sizeof b, ": ppl %.4f (+%.4f), KL %.4f, MLP density %.3f, %.2f %s", c.eval.ppl,
                  c.eval.ppl - c.eval.ppl_dense, c.eval.kld_mean, c.eval.mlp_density, c.objective,
                  sim ? "simulated tok/s" : "CPU tok/s");
    s += b;
    if (c.best_sim >= 0) {
        const ss::sim_summary& x = c.sims[static_cast<size_t>(c.best_sim)];
        std::snprintf(b, sizeof b, " (%s, hit rate %.3f, flash %.1f KB/token)", ss::cache_policy_name(x.policy),
                      x.hit_rate, x.flash_bytes_per_token / 1e3);
        s += b;
    }
    return s;
}

nlohmann::json candidate_to_json(const ss::tune_candidate& c) {
    nlohmann::json e = eval_to_json(c.eval);
    e.erase("layers");
    add_method_json(e, c.config);
    e["stage"] = c.stage;
    e["windows"] = c.windows;
    e["full"] = c.full;
    e["layout"] = c.layout;
    e["objective"] = c.objective;
    e["pareto"] = c.pareto;
    e["seconds"] = c.seconds;
    nlohmann::json sims = nlohmann::json::array();
    for (const ss::sim_summary& s : c.sims)
        sims.push_back({{"policy", ss::cache_policy_name(s.policy)},
                        {"tokens_per_s", s.tokens_per_s},
                        {"hit_rate", s.hit_rate},
                        {"flash_bytes_per_token", s.flash_bytes_per_token},
                        {"dram_bytes_per_token", s.dram_bytes_per_token},
                        {"recommendable", s.recommendable}});
    e["sims"] = sims;
    if (c.best_sim >= 0) e["policy"] = ss::cache_policy_name(c.sims[static_cast<size_t>(c.best_sim)].policy);
    return e;
}

nlohmann::json tune_to_json(const ss::tune_result& r, const ss::tune_params& p, const tune_opts& o,
                            const dense_reference& ref) {
    nlohmann::json j;
    j["model"] = o.model_path;
    j["text"] = o.text_path;
    j["n_ctx"] = o.m.n_ctx;
    j["windows"] = ref.n_windows;
    j["offset"] = o.m.offset;
    j["objective"] = p.objective == ss::tune_objective::sim ? "sim" : "cpu";
    j["grid"] = o.grid;
    j["device"] = {{"name", p.sim.device.name},
                   {"dram_bytes", p.sim.device.dram_bytes},
                   {"dram_bandwidth", p.sim.device.dram_bandwidth},
                   {"flash_bandwidth", p.sim.device.flash_bandwidth},
                   {"bits", p.sim.quant.bits},
                   {"context_tokens", p.sim.context_tokens}};
    nlohmann::json pols = nlohmann::json::array();
    for (ss::cache_policy pol : p.policies) pols.push_back(ss::cache_policy_name(pol));
    j["policies"] = pols;
    j["online_policy"] = ss::cache_policy_name(p.online_policy);
    j["ppl_dense"] = ref.ppl;
    j["dense"] = candidate_to_json(r.dense);
    nlohmann::json cands = nlohmann::json::array();
    for (const ss::tune_candidate& c : r.candidates) cands.push_back(candidate_to_json(c));
    j["candidates"] = cands;
    nlohmann::json fronts = nlohmann::json::object();
    for (const std::string& name : p.methods) {
        nlohmann::json f = nlohmann::json::array();
        for (size_t i = 0; i < r.candidates.size(); ++i)
            if (r.candidates[i].pareto && r.candidates[i].config.name == name) f.push_back(i);
        fronts[name] = f;
    }
    j["pareto_fronts"] = fronts;
    nlohmann::json budgets = nlohmann::json::array();
    for (const ss::tune_budget_result& b : r.budgets) {
        nlohmann::json per = nlohmann::json::object();
        for (size_t m = 0; m < b.methods.size(); ++m)
            per[b.methods[m]] = b.best[m] >= 0 ? nlohmann::json(b.best[m]) : nlohmann::json(nullptr);
        budgets.push_back({{"budget", b.budget.text},
                           {"best", per},
                           {"recommended", b.recommended >= 0 ? nlohmann::json(b.recommended) : nlohmann::json(nullptr)}});
    }
    j["budgets"] = budgets;
    j["evaluations"] = r.evaluations;
    j["seconds"] = r.seconds;
    return j;
}

void register_tune(CLI::App& app, command_fn& run) {
    auto o = std::make_shared<tune_opts>();
    CLI::App* c = app.add_subcommand(
        "tune", "Search each method's parameters for the highest simulated tokens/s within accuracy budgets");
    c->add_option("model", o->model_path, "Model file")->required();
    c->add_option("text", o->text_path, "Evaluation text (held out from the calibration: see --offset)")->required();
    c->add_option("-z,--tokenizer", o->tokenizer_path, "llama2.c tokenizer.bin (default: embedded or beside the model)");
    c->add_option("--methods", o->methods, "Methods to tune (comma-separated)")
        ->delimiter(',')
        ->check(CLI::IsMember(method_names()));
    c->add_option("--budget", o->budgets, "Accuracy budget, repeatable: ppl+X, ppl*X, ppl<X, kld<X, top1>X "
                                          "(default ppl+0.2 and ppl+0.5)");
    c->add_option("--objective", o->objective, "sim (simulated device tokens/s, default) or cpu (measured here)");
    c->add_option("--policy", o->policy, "Cache policy: auto (best of lru and lfu), lru, lfu, window, none");
    c->add_option("--online-policy", o->online_policy, "Cache DIP-CA reads while it runs (default lfu, or --policy)");
    c->add_flag("--no-belady", o->no_belady, "Do not replay Belady (the offline upper bound)");
    c->add_option("--grid", o->grid, "Search grid: coarse (default) or fine");
    c->add_option("--densities", o->densities, "Stage-1 target densities (comma-separated; overrides --grid)")
        ->delimiter(',')
        ->check(CLI::Range(0.0, 1.0));
    c->add_option("--gammas", o->gammas, "DIP-CA gammas (comma-separated; overrides --grid)")
        ->delimiter(',')
        ->check(CLI::Range(0.0, 1.0));
    c->add_option("--coarse-windows", o->coarse_windows, "Windows per stage-1 evaluation")->check(CLI::NonNegativeNumber);
    c->add_option("--refine-steps", o->refine_steps, "Bisection steps per method and budget")->check(CLI::Range(0, 20));
    c->add_option("--dip-splits", o->dip_splits, "DIP (d_in, d_down) splits tried per boundary density (0: none)")
        ->check(CLI::Range(0, 20));
    c->add_option("--pin", o->pin, "Heavy-hitter neurons always active (fraction), for every method that supports it")
        ->check(CLI::Range(0.0, 1.0));
    c->add_option("--attn-density", o->attn_density,
                  "Attention input density held fixed while the MLP density is tuned (chess-attn, teal, teal-uniform; "
                  "default: the method's own rule)")
        ->check(CLI::Range(0.0, 1.0));
    c->add_option("--calib", o->m.calib_path, "Calibration file (default: MODEL.calib when present)");
    c->add_option("-c,--ctx", o->m.n_ctx, "Eval window length: first half prompt, second half scored")
        ->check(CLI::Range(8, 1 << 16));
    c->add_option("--windows", o->m.windows, "Eval windows of the refinement stage (0: all)")->check(CLI::NonNegativeNumber);
    c->add_option("--threads", o->m.threads, "Worker threads (0: all cores)")->check(CLI::NonNegativeNumber);
    c->add_option("--offset", o->m.offset, "Skip this many text tokens first (default: past the calibration's tokens "
                                          "when it was made from this text)")
        ->check(CLI::NonNegativeNumber)
        ->each([o](const std::string&) { o->offset_given = true; });
    add_device_options(c, o->dev);
    c->add_option("-o,--out", o->out_json, "Write the full results as JSON");
    c->add_option("--export", o->export_path, "Write the recommendation for the first budget as a deployment config");
    c->add_option("--session", o->session_path, "Record every evaluated run in this session file (created if missing)");
    c->add_flag("--json", o->json, "Machine-readable output on stdout");
    c->callback([o, &run] { run = [o] { return run_tune(*o); }; });
}

}  // namespace sl::cli

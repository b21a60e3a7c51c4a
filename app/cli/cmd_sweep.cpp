// `sparselens sweep MODEL TEXT`: a grid of methods x densities (x gamma) with Pareto fronts, CSV/JSON.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "cli_methods.h"
#include "cli_session.h"
#include "sparselens/core/context.h"
#include "sparselens/core/fingerprint.h"
#include "sparselens/core/sweep.h"

namespace sl::cli {

namespace {

struct sweep_opts {
    std::string model_path, text_path, tokenizer_path, out_json, out_csv;
    method_opts m;
    std::vector<std::string> methods = {"dip", "dip-ca", "glu", "gate", "up"};
    std::vector<float> densities = {0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f};
    std::vector<float> gammas = {0.2f};
    bool dip_allocate = false;
    float cache_fraction = 0.5f;
    bool json = false;
    session_record_opts session;  // --session FILE, --label: record every point as a run of one sweep
};

void write_csv(const std::string& path, const std::vector<sweep_point>& points) {
    std::ofstream f(path, std::ios::trunc);
    if (!f) throw cli_error(path + ": cannot open for writing");
    f << "method,density_target,gamma,d_in,d_down,mlp_density,attn_density,ppl,ppl_dense,kld_mean,kld_p99,"
         "top1_agreement,decode_tokens_per_second,cache_hit_rate,pareto\n";
    for (const sweep_point& p : points) {
        const eval_result& r = p.result;
        f << p.config.name << ',' << p.config.density << ',' << p.config.gamma << ',' << p.config.d_in << ','
          << p.config.d_down << ',' << r.mlp_density << ',' << r.attn_density << ',' << r.ppl << ',' << r.ppl_dense
          << ',' << r.kld_mean << ',' << r.kld_p99 << ',' << r.top1_agreement << ',' << r.decode_tokens_per_second
          << ',' << p.cache_hit_rate << ',' << (p.pareto ? 1 : 0) << '\n';
    }
    if (!f.flush()) throw cli_error(path + ": write failed");
}

// Records the grid as one sweep of the session (created when missing), one run per point; returns its id.
int64_t record_sweep(const sweep_opts& o, const loaded_model& lm, const calibration* cal, const dense_reference& ref,
                     const std::vector<sweep_point>& points) {
    namespace ss = sessions;
    ss::session_store s = take(ss::open_or_create_session(o.session.session_path));
    const std::string text = read_text(o.text_path);
    ss::run_inputs in = session_run_inputs(lm, o.text_path, text, o.m, cal);
    in.model_sha256 = take(sha256_file(lm.m->path));  // once for the whole grid
    const nlohmann::json params = {{"command", "sweep"},          {"methods", o.methods},
                                   {"densities", o.densities},    {"gammas", o.gammas},
                                   {"dip_allocate", o.dip_allocate}, {"cache_fraction", o.cache_fraction},
                                   {"windows", ref.n_windows},    {"n_ctx", ref.n_ctx}};
    const std::string label = o.session.label.empty() ? "sweep" : o.session.label;
    const int64_t sweep_id = take(ss::begin_sweep(s, in, label, params.dump()));
    for (const sweep_point& p : points) {
        ss::evaluation e;
        e.config = p.config;
        e.eval = p.result;
        ss::record_params rp;
        rp.label = label;
        rp.n_ctx = ref.n_ctx;
        rp.windows = ref.n_windows;
        rp.sweep_id = sweep_id;
        if (p.cache_hit_rate >= 0) {
            // DIP-CA read the LFU stand-in: its size is part of the configuration.
            ss::sim_setting st;
            st.cache_fraction = o.cache_fraction;
            rp.setting = st;
            e.hit_rate = p.cache_hit_rate;
        }
        take(ss::record_evaluation(s, e, in, rp));
    }
    return sweep_id;
}

int run_sweep(sweep_opts o) {
    loaded_model lm = load_model(o.model_path, o.tokenizer_path, true);
    bool need_cal = false;
    for (const std::string& n : o.methods) {
        method_config c = o.m.cfg;
        c.name = n;
        need_cal = need_cal || method_config_needs_calibration(c);
    }
    const std::optional<calibration> cal = load_calibration(o.m, *lm.m, need_cal);
    const std::vector<int32_t> tokens = eval_tokens(lm, o.text_path, o.m);

    context ctx = make_eval_context(lm, o.m);
    eval_params ep = make_eval_params(lm, o.m);
    const dense_reference ref = take(eval_dense_reference(ctx, tokens, ep));

    sweep_params sp = sweep_default_params();
    sp.methods = o.methods;
    sp.densities = o.densities;
    sp.gammas = o.gammas;
    sp.base = o.m.cfg;
    sp.dip_allocate = o.dip_allocate;
    sp.cache_fraction = o.cache_fraction;
    const bool tty = !o.json && isatty(STDERR_FILENO);
    if (tty) sp.progress = [](float f) { std::fprintf(stderr, "\rsweep: %5.1f%%", 100.0 * f); return true; };
    std::vector<sweep_point> points = take(sweep_run(ctx, ref, cal ? &*cal : nullptr, sp, ep));
    if (tty) std::fprintf(stderr, "\n");

    int64_t sweep_id = 0;
    if (!o.session.session_path.empty()) sweep_id = record_sweep(o, lm, cal ? &*cal : nullptr, ref, points);

    nlohmann::json j;
    j["model"] = o.model_path;
    j["text"] = o.text_path;
    j["n_ctx"] = o.m.n_ctx;
    j["windows"] = ref.n_windows;
    j["ppl_dense"] = ref.ppl;
    nlohmann::json arr = nlohmann::json::array();
    for (const sweep_point& p : points) {
        nlohmann::json e = eval_to_json(p.result);
        add_method_json(e, p.config);
        e["pareto"] = p.pareto;
        if (p.cache_hit_rate >= 0) e["cache_hit_rate"] = p.cache_hit_rate;
        e.erase("layers");
        arr.push_back(e);
    }
    j["points"] = arr;
    if (sweep_id > 0) j["session"] = {{"path", o.session.session_path}, {"sweep_id", sweep_id}};
    if (!o.out_json.empty()) {
        std::ofstream f(o.out_json, std::ios::trunc);
        if (!f || !(f << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n') || !f.flush()) throw cli_error(o.out_json + ": write failed");
    }
    if (!o.out_csv.empty()) write_csv(o.out_csv, points);
    if (o.json) {
        print_json(j);
        return 0;
    }
    std::printf("dense perplexity %.4f over %d windows of %d tokens\n", ref.ppl, ref.n_windows, o.m.n_ctx);
    std::printf("%-10s %7s %6s %8s %8s %9s %8s %7s %s\n", "method", "target", "gamma", "MLP", "attn", "PPL", "KL", "top-1",
                "pareto");
    for (const sweep_point& p : points)
        std::printf("%-10s %6.0f%% %6.2f %7.1f%% %7.1f%% %9.4f %8.5f %6.1f%% %s\n", p.config.name.c_str(),
                    100 * p.config.density, p.config.gamma, 100 * p.result.mlp_density, 100 * p.result.attn_density,
                    p.result.ppl, p.result.kld_mean, 100 * p.result.top1_agreement, p.pareto ? "*" : "");
    if (sweep_id > 0)
        std::printf("session      recorded as sweep %lld (%zu runs) in %s\n", static_cast<long long>(sweep_id),
                    points.size(), o.session.session_path.c_str());
    return 0;
}

}  // namespace

void register_sweep(CLI::App& app, command_fn& run) {
    auto o = std::make_shared<sweep_opts>();
    CLI::App* c = app.add_subcommand("sweep", "Evaluate methods over a density grid; CSV/JSON with Pareto fronts");
    c->add_option("model", o->model_path, "Model file")->required();
    c->add_option("text", o->text_path, "Evaluation text")->required();
    c->add_option("--methods", o->methods, "Methods (comma-separated)")->delimiter(',')->check(CLI::IsMember(method_names()));
    c->add_option("--densities", o->densities, "Target MLP densities (comma-separated)")->delimiter(',')->check(CLI::Range(0.0, 1.0));
    c->add_option("--gammas", o->gammas, "DIP-CA gammas (comma-separated)")->delimiter(',')->check(CLI::Range(0.0, 1.0));
    c->add_flag("--dip-allocate", o->dip_allocate, "Search DIP's (d_in, d_down) split per density (appendix B.1)");
    c->add_option("--cache-fraction", o->cache_fraction, "DIP-CA: share of units the stand-in LFU cache holds")
        ->check(CLI::Range(0.0, 1.0));
    c->add_option("-z,--tokenizer", o->tokenizer_path, "llama2.c tokenizer.bin (default: embedded or beside the model)");
    c->add_option("-o,--out", o->out_json, "Write the results as JSON");
    c->add_option("--csv", o->out_csv, "Write the results as CSV");
    add_method_options(c, o->m);
    c->add_option("--session", o->session.session_path,
                  "Record every point as a run of one sweep in this session file (created when missing)");
    c->add_option("--label", o->session.label, "With --session: a label for the sweep and its runs");
    c->add_flag("--json", o->json, "Machine-readable output on stdout");
    c->callback([o, &run] { run = [o] { return run_sweep(*o); }; });
}

}  // namespace sl::cli

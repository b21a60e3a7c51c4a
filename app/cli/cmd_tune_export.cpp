// `sparselens tune --export`: the recommendation as a deployment config, measured as `eval --config` will.
#include <cstdio>
#include <filesystem>

#include "cli_tune.h"
#include "sparselens/core/fingerprint.h"
#include "sparselens/core/residency.h"
#include "sparselens/sim/deploy_config.h"

namespace sl::cli {

namespace {

namespace ss = sl::sim;

// The cache policy a candidate is deployed with: its best recommendable replay (DIP-CA: the one it ran with).
ss::cache_policy deployed_policy(const ss::tune_candidate& c, const ss::tune_params& p) {
    if (method_reads_cache(c.config.name)) return p.online_policy;
    if (c.best_sim >= 0) return c.sims[static_cast<size_t>(c.best_sim)].policy;
    return p.policies.empty() ? ss::cache_policy::lfu : p.policies.front();
}

}  // namespace

nlohmann::json export_recommended(const tune_opts& o, const loaded_model& lm, const calibration* calib,
                                  const ss::tune_params& p, const ss::tune_result& r, const dense_reference& ref) {
    const ss::tune_budget_result& b = r.budgets.front();
    if (b.recommended < 0)
        throw cli_error("--export: no method beats dense within " + b.budget.text + "; nothing to export");
    const ss::tune_candidate& c = r.candidates[static_cast<size_t>(b.recommended)];
    const bool sim = p.objective == ss::tune_objective::sim;

    ss::deploy_config cfg;
    cfg.tool = tool_version;
    cfg.note = "tuned: " + b.budget.text + ", highest " + (sim ? "simulated" : "CPU") + " tokens/s";
    cfg.model = take(ss::deploy_model_identity(o.model_path, *lm.m));
    cfg.method = c.config;
    ss::sim_params sp = p.sim;
    sp.policy = deployed_policy(c, p);
    ss::deploy_set_sim(cfg, sp);
    cfg.layout = c.layout;

    // Measure the config exactly as `eval --config` will, so its expectations are what a re-run checks.
    ss::deploy_measure_params mp = ss::deploy_measure_default_params();
    mp.n_ctx = ref.n_ctx;
    mp.windows = ref.n_windows;
    mp.offset = o.m.offset;
    mp.threads = o.m.threads;
    mp.bos_id = lm.tok->bos_id();
    mp.text_name = std::filesystem::path(o.text_path).filename().string();
    mp.text_sha256 = take(sha256_file(o.text_path));
    const std::vector<int32_t> tokens = encode_prompt(lm, read_text(o.text_path));
    ss::deploy_measurement m = take(ss::measure_expectations(*lm.m, cfg, calib, tokens, mp));
    cfg.expected = m.expected;
    cfg.per_layer = m.per_layer;
    if (m.eval.ppl != c.eval.ppl || m.eval.kld_mean != c.eval.kld_mean)
        std::fprintf(stderr, "tune: warning: the exported config measures ppl %.6f / KL %.6f, the tuner saw %.6f / %.6f\n",
                     m.eval.ppl, m.eval.kld_mean, c.eval.ppl, c.eval.kld_mean);
    const bool needs_calib = method_config_needs_calibration(c.config);
    if (outcome w = ss::deploy_config_write(o.export_path, cfg, needs_calib ? calib : nullptr); !w)
        throw cli_error(w.message());
    nlohmann::json j = candidate_to_json(c);
    j["path"] = o.export_path;
    j["budget"] = b.budget.text;
    j["policy"] = ss::cache_policy_name(sp.policy);
    j["measured"] = {{"ppl", m.eval.ppl}, {"kld_mean", m.eval.kld_mean}, {"sim_tokens_per_s", m.expected.sim_tokens_per_s}};
    return j;
}

}  // namespace sl::cli

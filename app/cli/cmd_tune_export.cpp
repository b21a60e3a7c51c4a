// `sparselens tune`: --export (the recommendation as a deployment config) and --session (every run recorded).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "cli_tune.h"
#include "sparselens/core/fingerprint.h"
#include "sparselens/sessions/session_store.h"
#include "sparselens/sim/deploy_config.h"

namespace sl::cli {

namespace {

namespace ss = sl::sim;
namespace se = sl::sessions;

nlohmann::json method_json(const method_config& c) {
    return {{"name", c.name},          {"density", c.density},       {"d_in", c.d_in},
            {"d_down", c.d_down},      {"gamma", c.gamma},           {"attn_density", c.attn_density},
            {"rank", c.rank},          {"pin_fraction", c.pin_fraction}, {"ffsplit_mode", c.ffsplit_mode},
            {"ffsplit_heavy", c.ffsplit_heavy}};
}

// The cache policy a candidate is deployed with: its best recommendable replay (DIP-CA: the one it ran with).
ss::cache_policy deployed_policy(const ss::tune_candidate& c, const ss::tune_params& p) {
    if (c.config.name == "dip-ca") return p.online_policy;
    if (c.best_sim >= 0) return c.sims[static_cast<size_t>(c.best_sim)].policy;
    return p.policies.empty() ? ss::cache_policy::lfu : p.policies.front();
}

class session_recorder final : public tune_session {
public:
    session_recorder(se::session_store store, int64_t model_id, std::optional<int64_t> text_id,
                     std::optional<int64_t> calib_id, int64_t sweep_id, const tune_opts& o, const ss::tune_params& p)
        : m_store(std::move(store)), m_model(model_id), m_text(text_id), m_calib(calib_id), m_sweep(sweep_id), m_o(o),
          m_p(p) {}

    void record(const ss::tune_candidate& c, const dense_reference& ref) override {
        se::run_record r;
        r.label = "tune " + c.stage + (c.full ? "" : " (" + std::to_string(c.windows) + " windows)");
        r.method = c.config.name;
        r.params_json = method_json(c.config).dump();
        r.model_id = m_model;
        r.text_id = m_text;
        if (method_needs_calibration(c.config.name)) r.calibration_id = m_calib;
        r.sweep_id = m_sweep;
        r.n_ctx = ref.n_ctx;
        r.windows = c.windows;
        r.offset = m_o.m.offset;
        r.ppl = c.eval.ppl;
        r.ppl_dense = c.eval.ppl_dense;
        r.kld_mean = c.eval.kld_mean;
        r.kld_p99 = c.eval.kld_p99;
        r.top1 = c.eval.top1_agreement;
        r.mlp_density = c.eval.mlp_density;
        r.attn_density = c.eval.attn_density;
        r.n_scored = c.eval.n_scored;
        nlohmann::json layers = eval_to_json(c.eval)["layers"];
        r.per_layer_json = layers.dump();
        r.cpu_tok_s = c.eval.decode_tokens_per_second;
        r.cpu_tok_s_dense = c.eval.dense_decode_tokens_per_second;
        r.duration_s = c.seconds;
        if (c.best_sim >= 0) {
            const ss::sim_summary& s = c.sims[static_cast<size_t>(c.best_sim)];
            r.device_name = m_p.sim.device.name;
            r.device_json = nlohmann::json{{"device", m_p.sim.device.name},
                                           {"dram_bytes", m_p.sim.device.dram_bytes},
                                           {"policy", ss::cache_policy_name(s.policy)},
                                           {"bits", m_p.sim.quant.bits},
                                           {"context_tokens", m_p.sim.context_tokens},
                                           {"layout", c.layout}}
                                .dump();
            r.sim_tok_s = s.tokens_per_s;
            r.hit_rate = s.hit_rate;
        }
        auto id = m_store.add_run(r);
        if (!id) throw cli_error(m_store.path() + ": " + id.message());
        m_last_key[key(c)] = *id;
    }

    void record_export(const ss::tune_candidate& c, const std::string& path) override {
        const auto it = m_last_key.find(key(c));
        if (it == m_last_key.end()) return;
        const std::string text = read_text(path);
        se::export_record e;
        e.run_id = it->second;
        e.path = std::filesystem::absolute(path).string();
        e.sha256 = sha256_hex(std::string_view(text));
        e.config_json = text;
        if (auto id = m_store.add_export(e); !id) throw cli_error(m_store.path() + ": " + id.message());
    }

private:
    static std::string key(const ss::tune_candidate& c) {
        return method_json(c.config).dump() + "|" + std::to_string(c.windows);
    }

    se::session_store m_store;
    int64_t m_model;
    std::optional<int64_t> m_text, m_calib;
    int64_t m_sweep;
    const tune_opts& m_o;
    const ss::tune_params& m_p;
    std::map<std::string, int64_t> m_last_key;
};

}  // namespace

std::unique_ptr<tune_session> open_tune_session(const tune_opts& o, const loaded_model& lm, const calibration* calib,
                                                const ss::tune_params& p) {
    auto store = std::filesystem::exists(o.session_path)
                     ? se::session_store::open(o.session_path)
                     : se::session_store::create(o.session_path, std::filesystem::path(o.session_path).stem().string());
    se::session_store s = take(std::move(store));
    const model& m = *lm.m;
    se::model_record mr;
    mr.sha256 = take(sha256_file(o.model_path));
    mr.path = std::filesystem::absolute(o.model_path).string();
    mr.format = m.format;
    mr.name = std::filesystem::path(o.model_path).filename().string();
    mr.file_bytes = std::filesystem::file_size(o.model_path);
    mr.dim = m.hp.dim;
    mr.hidden_dim = m.hp.hidden_dim;
    mr.n_layers = m.hp.n_layers;
    mr.n_heads = m.hp.n_heads;
    mr.n_kv_heads = m.hp.n_kv_heads;
    mr.vocab_size = m.hp.vocab_size;
    mr.seq_len = m.hp.seq_len;
    const int64_t model_id = take(s.add_model(mr));
    const std::string text = read_text(o.text_path);
    const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
    const int64_t text_id = take(s.add_text(std::filesystem::path(o.text_path).filename().string(),
                                            std::span<const uint8_t>(bytes, text.size()), "eval"));
    std::optional<int64_t> calib_id;
    if (calib) {
        const std::string path = o.m.calib_path.empty() ? o.model_path + ".calib" : o.m.calib_path;
        se::calibration_record cr;
        cr.sha256 = take(sha256_file(path));
        cr.path = std::filesystem::absolute(path).string();
        cr.model_id = model_id;
        cr.params_json = nlohmann::json{{"n_ctx", calib->n_ctx}, {"tokens", calib->n_tokens}}.dump();
        calib_id = take(s.add_calibration(cr));
    }
    se::sweep_record sw;
    sw.label = "tune";
    nlohmann::json budgets = nlohmann::json::array();
    for (const ss::accuracy_budget& b : p.budgets) budgets.push_back(b.text);
    sw.params_json = nlohmann::json{{"methods", p.methods},
                                    {"densities", p.densities},
                                    {"gammas", p.gammas},
                                    {"budgets", budgets},
                                    {"objective", o.objective},
                                    {"grid", o.grid},
                                    {"device", p.sim.device.name},
                                    {"dram_bytes", p.sim.device.dram_bytes},
                                    {"bits", p.sim.quant.bits}}
                         .dump();
    sw.model_id = model_id;
    sw.text_id = text_id;
    const int64_t sweep_id = take(s.add_sweep(sw));
    return std::make_unique<session_recorder>(std::move(s), model_id, text_id, calib_id, sweep_id, o, p);
}

nlohmann::json export_recommended(const tune_opts& o, const loaded_model& lm, const calibration* calib,
                                  const ss::tune_params& p, const ss::tune_result& r, const dense_reference& ref,
                                  tune_session* session) {
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
    const bool needs_calib = method_needs_calibration(c.config.name);
    if (outcome w = ss::deploy_config_write(o.export_path, cfg, needs_calib ? calib : nullptr); !w)
        throw cli_error(w.message());
    if (session) session->record_export(c, o.export_path);
    nlohmann::json j = candidate_to_json(c);
    j["path"] = o.export_path;
    j["budget"] = b.budget.text;
    j["policy"] = ss::cache_policy_name(sp.policy);
    j["measured"] = {{"ppl", m.eval.ppl}, {"kld_mean", m.eval.kld_mean}, {"sim_tokens_per_s", m.expected.sim_tokens_per_s}};
    return j;
}

}  // namespace sl::cli

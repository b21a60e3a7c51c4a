// `sparselens config export MODEL --text TEXT --method M ... --out tuned.json` (evaluate, simulate, write a
// deployment config + calibration sidecar) and `sparselens config show tuned.json` (validate and print).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <unistd.h>

#include "cli_config.h"
#include "cli_device.h"
#include "cli_methods.h"
#include "sparselens/core/fingerprint.h"
#include "sparselens/sim/memory_map.h"

namespace sl::cli {

namespace ss = sl::sim;

sim::loaded_deploy_config load_config_for_model(const std::string& config_path, const std::string& model_path,
                                                const model& m, bool allow_other_weights) {
    ss::loaded_deploy_config lc = take(ss::deploy_config_read(config_path));
    const ss::deploy_model id = take(ss::deploy_model_identity(model_path, m));
    if (outcome o = ss::deploy_config_matches(lc.config, id, allow_other_weights); !o)
        throw cli_error(config_path + ": " + o.message());
    return lc;
}

std::string config_method_summary(const ss::deploy_config& c) {
    const method_config& m = c.method;
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s at %.4g%% %s density", m.name.c_str(), 100.0 * m.density,
                  m.name.rfind("teal", 0) == 0 && m.attn_density >= 1 ? "layer" : "MLP");
    std::string s = buf;
    auto add = [&](const char* what, double v) {
        std::snprintf(buf, sizeof buf, ", %s %.4g", what, v);
        s += buf;
    };
    if (m.d_in >= 0) add("d_in", m.d_in);
    if (m.d_down >= 0) add("d_down", m.d_down);
    if (m.name == "dip-ca") add("gamma", m.gamma);
    if (m.attn_density < 1) add("attn_density", m.attn_density);
    if (m.pin_fraction > 0) add("pin", m.pin_fraction);
    if (m.name == "sparsellm") add("rank", m.rank);
    return s;
}

nlohmann::json expectations_json(const ss::deploy_expectations& e) {
    ss::deploy_config c;
    c.expected = e;
    return nlohmann::json::parse(ss::deploy_config_to_json(c))["expected"];
}

nlohmann::json config_drift_json(const ss::deploy_expectations& e, const ss::deploy_expectations& m) {
    nlohmann::json d{{"same_text", e.eval_text_sha256 == m.eval_text_sha256},
                     {"ppl", m.ppl - e.ppl},
                     {"ppl_dense", m.ppl_dense - e.ppl_dense},
                     {"kld_mean", m.kld_mean - e.kld_mean},
                     {"kld_p99", m.kld_p99 - e.kld_p99},
                     {"top1_agreement", m.top1_agreement - e.top1_agreement},
                     {"mlp_density", m.mlp_density - e.mlp_density},
                     {"attn_density", m.attn_density - e.attn_density},
                     {"cpu_tokens_per_s_ratio", e.cpu_tokens_per_s > 0 ? m.cpu_tokens_per_s / e.cpu_tokens_per_s : 0.0}};
    if (e.sim_tokens > 0 || m.sim_tokens > 0) {
        d["sim_tokens_per_s"] = m.sim_tokens_per_s - e.sim_tokens_per_s;
        d["sim_hit_rate"] = m.sim_hit_rate - e.sim_hit_rate;
    }
    return d;
}

namespace {

std::string human_bytes(double b) {
    char buf[32];
    if (b >= 1e9)
        std::snprintf(buf, sizeof buf, "%.3g GB", b / 1e9);
    else if (b >= 1e6)
        std::snprintf(buf, sizeof buf, "%.3g MB", b / 1e6);
    else
        std::snprintf(buf, sizeof buf, "%.4g KB", b / 1e3);
    return buf;
}

void print_expectations(const ss::deploy_expectations& e) {
    if (e.n_ctx == 0) {
        std::printf("expected     (not measured)\n");
        return;
    }
    std::printf("eval text    %s, %d windows of %d tokens from token %lld (%lld scored)\n", e.eval_text.c_str(),
                e.windows, e.n_ctx, static_cast<long long>(e.offset), static_cast<long long>(e.scored_tokens));
    std::printf("accuracy     ppl %.4f (dense %.4f, %+.4f), KL mean %.5f, p99 %.5f, same top token %.1f%%\n", e.ppl,
                e.ppl_dense, e.ppl - e.ppl_dense, e.kld_mean, e.kld_p99, 100 * e.top1_agreement);
    std::printf("density      MLP %.1f%%, attention %.1f%% (measured)\n", 100 * e.mlp_density, 100 * e.attn_density);
    std::printf("cpu          %.1f tok/s decode (dense %.1f) where it was measured\n", e.cpu_tokens_per_s,
                e.cpu_dense_tokens_per_s);
    if (e.sim_tokens > 0)
        std::printf("simulated    %.2f tok/s, cache hit rate %.1f%% over %u tokens\n", e.sim_tokens_per_s,
                    100 * e.sim_hit_rate, e.sim_tokens);
}

void print_config(const std::string& path, const ss::deploy_config& c) {
    const ss::deploy_model& m = c.model;
    std::printf("config       %s (version %d, %s, %s)\n", path.c_str(), c.version, c.created.c_str(), c.tool.c_str());
    if (!c.note.empty()) std::printf("note         %s\n", c.note.c_str());
    std::printf("model        %s (%s, %s), dim %d, hidden %d, %d layers, %d/%d heads, vocab %d, ctx %d\n",
                m.file_name.c_str(), m.format.c_str(), human_bytes(static_cast<double>(m.file_bytes)).c_str(), m.dim,
                m.hidden_dim, m.n_layers, m.n_heads, m.n_kv_heads, m.vocab_size, m.seq_len);
    std::printf("sha256       %s\n", m.sha256.c_str());
    std::printf("method       %s\n", config_method_summary(c).c_str());
    for (const auto& [name, values] : c.per_layer) {
        std::printf("  %-16s", name.c_str());
        for (size_t l = 0; l < values.size() && l < 12; ++l) std::printf(" %.4g", static_cast<double>(values[l]));
        std::printf("%s\n", values.size() > 12 ? " ..." : "");
    }
    if (!c.calibration_file.empty())
        std::printf("calibration  %s (sha256 %.12s…, verified)\n", c.calibration_file.c_str(), c.calibration_sha256.c_str());
    if (c.has_device()) {
        const ss::device_profile& d = c.device;
        std::printf("device       %s: DRAM %s at %.3g GB/s, flash %.3g GB/s, page %u B\n", d.name.c_str(),
                    human_bytes(static_cast<double>(d.dram_bytes)).c_str(), d.dram_bandwidth / 1e9,
                    d.flash_bandwidth / 1e9, d.flash_page_bytes);
        std::printf("simulation   policy %s, %u-bit weights (groups of %u), context %u, layout %s\n",
                    ss::cache_policy_name(c.policy), c.bits, c.group_size, c.context_tokens, c.layout.c_str());
    } else {
        std::printf("device       none%s\n", c.method.name == "dip-ca" ? " (DIP-CA reads an LFU stand-in cache)" : "");
    }
    print_expectations(c.expected);
}

// The config's own canonical JSON, keys in file order.
nlohmann::ordered_json config_as_json(const ss::deploy_config& c) {
    return nlohmann::ordered_json::parse(ss::deploy_config_to_json(c));
}

void print_ordered(const nlohmann::ordered_json& j) {
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
}

// ---- config export ----

struct export_opts {
    std::string model_path, text_path, tokenizer_path, out_path, note, policy = "lfu", layout;
    method_opts m;
    device_opts dev;
    bool with_device = false;
    std::string device_error;
    float cache_fraction = 0.5f;
    uint32_t window = 5, sim_tokens = 256;
    bool json = false;
};

int run_export(const export_opts& o) {
    if (!o.device_error.empty()) throw cli_error(o.device_error);
    loaded_model lm = load_model(o.model_path, o.tokenizer_path, true);
    const bool needs_calib = method_config_needs_calibration(o.m.cfg);
    // A method without calibration stores none, even when MODEL.calib exists.
    const std::optional<calibration> cal = needs_calib ? load_calibration(o.m, *lm.m, true) : std::nullopt;

    ss::deploy_config c;
    c.tool = tool_version;
    c.note = o.note;
    c.model = take(ss::deploy_model_identity(o.model_path, *lm.m));
    c.method = o.m.cfg;
    c.cache_fraction = o.cache_fraction;
    if (o.with_device) {
        ss::sim_params p = device_sim_params(o.dev);
        if (!ss::cache_policy_parse(o.policy, p.policy))
            throw cli_error("unknown --policy '" + o.policy + "' (none, lru, lfu, window)");
        if (p.policy == ss::cache_policy::belady)
            throw cli_error("--policy belady needs the future and cannot run online: choose none, lru, lfu or window");
        p.window_tokens = o.window;
        ss::deploy_set_sim(c, p);
    }
    c.layout = o.layout.empty() ? ss::deploy_default_layout(c.method.name) : o.layout;
    if (auto l = ss::layout_parse(c.layout); !l) throw cli_error("--layout: " + l.message());

    ss::deploy_measure_params mp = ss::deploy_measure_default_params();
    mp.n_ctx = o.m.n_ctx;
    mp.windows = o.m.windows;
    mp.offset = o.m.offset;
    mp.threads = o.m.threads;
    mp.bos_id = lm.tok->bos_id();
    mp.sim_tokens = o.sim_tokens;
    mp.text_name = std::filesystem::path(o.text_path).filename().string();
    mp.text_sha256 = take(sha256_file(o.text_path));
    if (!o.json && isatty(STDERR_FILENO))
        mp.progress = [](float f) { std::fprintf(stderr, "\rmeasuring: %5.1f%%", 100.0 * f); return true; };
    const std::vector<int32_t> tokens = encode_prompt(lm, read_text(o.text_path));
    const ss::deploy_measurement meas = take(ss::measure_expectations(*lm.m, c, cal ? &*cal : nullptr, tokens, mp));
    if (mp.progress) std::fprintf(stderr, "\r%30s\r", "");
    c.expected = meas.expected;
    c.per_layer = meas.per_layer;

    if (outcome w = ss::deploy_config_write(o.out_path, c, cal ? &*cal : nullptr); !w) throw cli_error(w.message());
    // Report what was written, read back through the validating reader.
    const ss::loaded_deploy_config back = take(ss::deploy_config_read(o.out_path));
    const std::string sidecar = cal ? ss::deploy_sidecar_path(o.out_path) : std::string();
    if (o.json) {
        nlohmann::ordered_json j;
        j["out"] = o.out_path;
        j["sidecar"] = sidecar.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(sidecar);
        j["config"] = config_as_json(back.config);
        print_ordered(j);
        return 0;
    }
    std::printf("wrote        %s%s\n", o.out_path.c_str(), sidecar.empty() ? "" : (" and " + sidecar).c_str());
    print_config(o.out_path, back.config);
    return 0;
}

// ---- config show ----

struct show_opts {
    std::string path;
    bool json = false;
};

int run_show(const show_opts& o) {
    const ss::loaded_deploy_config lc = take(ss::deploy_config_read(o.path));
    if (o.json) {
        nlohmann::ordered_json j;
        j["file"] = o.path;
        j["valid"] = true;
        j["config"] = config_as_json(lc.config);
        print_ordered(j);
        return 0;
    }
    print_config(o.path, lc.config);
    return 0;
}

}  // namespace

void register_config(CLI::App& app, command_fn& run) {
    CLI::App* cfg = app.add_subcommand("config", "Deployment configs: export a tuned setting, show / validate one");
    cfg->require_subcommand(1);

    auto e = std::make_shared<export_opts>();
    CLI::App* c = cfg->add_subcommand("export", "Evaluate (and simulate on a device) a method, write config + calibration sidecar");
    c->add_option("model", e->model_path, "Model file")->required();
    c->add_option("--text", e->text_path, "Evaluation text the expectations are measured on")->required();
    c->add_option("-o,--out", e->out_path, "Config file to write (the sidecar is <stem>.calib beside it)")->required();
    c->add_option("-m,--method", e->m.cfg.name, "Method")->check(CLI::IsMember(method_names()));
    c->add_option("-z,--tokenizer", e->tokenizer_path, "llama2.c tokenizer.bin (default: embedded or beside the model)");
    add_method_options(c, e->m);
    c->add_option("--cache-fraction", e->cache_fraction, "DIP-CA without --device: share of units the stand-in LFU cache holds")
        ->check(CLI::Range(0.0, 1.0));
    add_device_options(c, e->dev);
    c->add_option("--policy", e->policy, "Device cache policy: none, lru, lfu, window");
    c->add_option("--window", e->window, "Tokens kept by the window policy")->check(CLI::Range(1, 1 << 30));
    c->add_option("--layout", e->layout, "MLP units on the device (default: dip for DIP methods, else bundle)");
    c->add_option("--sim-tokens", e->sim_tokens, "Text tokens driven through the device simulator")
        ->check(CLI::Range(1, 1 << 20));
    c->add_option("--note", e->note, "Free text stored in the config");
    c->add_flag("--json", e->json, "Machine-readable output");
    c->callback([e, c, &run] {
        e->with_device = c->count("--device") > 0;
        for (const char* opt : {"--dram", "--dram-bw", "--flash-bw", "--page", "--read-latency", "--iops", "--overlap",
                                "--no-overlap", "--bits", "--group", "--scale-bits", "--embedding-bits", "--context",
                                "--assets", "--policy", "--window", "--layout", "--sim-tokens"})
            if (!e->with_device && c->count(opt) > 0 && e->device_error.empty())
                e->device_error = std::string(opt) + " describes the device simulation: give --device too";
        run = [e] { return run_export(*e); };
    });

    auto s = std::make_shared<show_opts>();
    CLI::App* sh = cfg->add_subcommand("show", "Validate a deployment config (and its sidecar) and print it");
    sh->add_option("config", s->path, "Config file")->required();
    sh->add_flag("--json", s->json, "Machine-readable output");
    sh->callback([s, &run] { run = [s] { return run_show(*s); }; });
}

}  // namespace sl::cli

// Shared method options for the evaluation commands.
#include "cli_methods.h"

#include "cli_offload.h"

#include <cstdlib>
#include <filesystem>

namespace sl::cli {

void parse_ffsplit_compress(const std::string& v, method_config& c) {
    if (v == "q4" || v == "svd") {
        c.ffsplit_mode = v;
        if (v == "svd") c.rank = 0;
        return;
    }
    if (v.rfind("svd:", 0) == 0) {
        const std::string n = v.substr(4);
        char* end = nullptr;
        const long r = n.empty() ? -1 : std::strtol(n.c_str(), &end, 10);
        if (r >= 1 && r <= (1 << 20) && end && *end == '\0') {
            c.ffsplit_mode = "svd";
            c.rank = static_cast<int32_t>(r);
            return;
        }
    }
    throw CLI::ValidationError("--compress", "'" + v + "' is not svd:RANK (RANK >= 1), svd or q4");
}

void add_method_knobs(CLI::App* c, method_config& cfg) {
    c->add_option("--d-in", cfg.d_in, "DIP: gate/up input-column density (default: --density)")->check(CLI::Range(0.0, 1.0));
    c->add_option("--d-down", cfg.d_down, "DIP: down-column density (default: --density)")->check(CLI::Range(0.0, 1.0));
    c->add_option("--attn-density", cfg.attn_density,
                  "Attention input density: chess-attn q/o inputs (default: the MLP's keep); teal, teal-uniform q/k/v/o "
                  "inputs as their own budget, --density then covers the MLP (default: one budget for all seven)")
        ->check(CLI::Range(0.0, 1.0));
    c->add_option("--rank", cfg.rank, "SparseLLM predictor rank (0: dim/8)")->check(CLI::NonNegativeNumber);
    c->add_option("--split", cfg.ffsplit_heavy, "FFSplit: share of neurons kept exact (calibration heavy hitters)")
        ->check(CLI::Range(0.0, 1.0));
    c->add_option_function<std::string>(
         "--compress", [&cfg](const std::string& v) { parse_ffsplit_compress(v, cfg); },
         "FFSplit: the light neurons as svd:RANK (a rank-RANK SVD), svd (the largest rank within --density) or q4 (Q4_0)");
    c->add_option("--pin", cfg.pin_fraction, "Heavy-hitter neurons always active (fraction)")->check(CLI::Range(0.0, 1.0));
}

void add_method_options(CLI::App* c, method_opts& o) {
    c->add_option("--density", o.cfg.density, "Target density: fraction of gate+up+down weights read (TEAL: of all seven projections by bytes, unless --attn-density)")
        ->check(CLI::Range(0.0, 1.0));
    c->add_option("--gamma", o.cfg.gamma, "DIP-CA: weight of units not in DRAM (1 = plain DIP)")->check(CLI::Range(0.0, 1.0));
    add_method_knobs(c, o.cfg);
    c->add_option("--calib", o.calib_path, "Calibration file (default: MODEL.calib when present)");
    c->add_option("-c,--ctx", o.n_ctx, "Window length: first half prompt, second half scored")->check(CLI::Range(8, 1 << 16));
    c->add_option("--windows", o.windows, "Windows of text to evaluate (0: all)")->check(CLI::NonNegativeNumber);
    c->add_option("--threads", o.threads, "Worker threads (0: all cores)")->check(CLI::NonNegativeNumber);
    c->add_option("--offset", o.offset, "Skip this many text tokens first (held-out evaluation after calibration)")
        ->check(CLI::NonNegativeNumber);
}

std::vector<int32_t> eval_tokens(const loaded_model& lm, const std::string& text_path, const method_opts& o) {
    std::vector<int32_t> tokens = encode_prompt(lm, read_text(text_path));
    if (o.offset >= static_cast<int64_t>(tokens.size()))
        throw cli_error(text_path + ": --offset " + std::to_string(o.offset) + " skips all " +
                        std::to_string(tokens.size()) + " tokens");
    tokens.erase(tokens.begin(), tokens.begin() + o.offset);
    return tokens;
}

std::string calibration_path(const method_opts& o, const model& m) {
    return o.calib_path.empty() ? m.path + ".calib" : o.calib_path;
}

std::optional<calibration> load_calibration(const method_opts& o, const model& m, bool required) {
    std::string path = calibration_path(o, m);
    if (o.calib_path.empty() && !std::filesystem::exists(path)) path.clear();
    if (path.empty()) {
        if (required)
            throw cli_error(o.cfg.name + ": needs a calibration: run `sparselens calibrate " + m.path +
                            " TEXT` (writes " + m.path + ".calib) or pass --calib FILE");
        return std::nullopt;
    }
    calibration cal = take(calibration_load(path));
    if (outcome fit = calibration_matches(cal, m); !fit.ok()) throw cli_error(path + ": " + fit.message());
    return cal;
}

context make_eval_context(const loaded_model& lm, const method_opts& o) {
    context_params cp = context_default_params();
    cp.n_threads = o.threads;
    cp.n_ctx = o.n_ctx;
    return take(context::create(*lm.m, cp));
}

eval_params make_eval_params(const loaded_model& lm, const method_opts& o) {
    eval_params ep = eval_default_params();
    ep.n_ctx = o.n_ctx;
    ep.max_windows = o.windows;
    ep.bos_id = lm.tok->bos_id();
    return ep;
}

void add_method_json(nlohmann::json& j, const method_config& c) {
    j["method"] = c.name;
    j["density_target"] = c.density;
    j["d_in"] = c.d_in;
    j["d_down"] = c.d_down;
    j["gamma"] = c.gamma;
    if (c.name == "ffsplit") {
        j["ffsplit_mode"] = c.ffsplit_mode;
        j["ffsplit_heavy"] = c.ffsplit_heavy;
        j["rank"] = c.rank;
    }
}

nlohmann::json eval_to_json(const eval_result& r) {
    nlohmann::json layers = nlohmann::json::array();
    for (const layer_density& d : r.per_layer) {
        nlohmann::json l;
        for (int p = 0; p < proj_count; ++p) l[proj_name(static_cast<proj>(p))] = d.d[p];
        layers.push_back(l);
    }
    return {{"ppl", r.ppl},
            {"ppl_dense", r.ppl_dense},
            {"delta_ppl", r.ppl - r.ppl_dense},
            {"kld_mean", r.kld_mean},
            {"kld_p99", r.kld_p99},
            {"top1_agreement", r.top1_agreement},
            {"mlp_density", r.mlp_density},
            {"attn_density", r.attn_density},
            {"decode_tokens_per_second", r.decode_tokens_per_second},
            {"dense_decode_tokens_per_second", r.dense_decode_tokens_per_second},
            {"speed_ratio", {{"median", r.speed_ratio_median}, {"p25", r.speed_ratio_p25}, {"p75", r.speed_ratio_p75}}},
            {"scored_tokens", r.n_scored},
            {"layers", layers}};
}

std::unique_ptr<sparsity_method> build_method(const method_config& cfg, const model& m, const calibration* cal,
                                              bool quiet) {
    const offload_interrupt ctrl_c;
    auto method = make_method(cfg, m, cal, offload_progress("building " + cfg.name, quiet));
    if (!method) throw cli_error(method.cancelled() ? cfg.name + ": build cancelled" : method.message());
    return std::move(method).value();
}

}  // namespace sl::cli

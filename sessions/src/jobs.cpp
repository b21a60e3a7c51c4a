// Recording evaluations, tunes and sweeps in a session; opening and copying session files; importing
// deployment configs.
#include "sparselens/sessions/jobs.h"

#include <cstdio>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sparselens/core/fingerprint.h"
#include "sparselens/sessions/session_copy.h"
#include "sparselens/sim/cache.h"

namespace sl::sessions {

namespace fs = std::filesystem;
using json = nlohmann::json;

result<sim::per_layer_table> resolve_per_layer(const method_config& cfg, const model& m, const calibration* calib) {
    result<std::unique_ptr<sparsity_method>> method = make_method(cfg, m, calib);
    if (!method.ok()) return method.err();
    return (*method)->per_layer_values();
}

result<std::string> save_calibration_for_session(const std::string& session_path, const calibration& c) {
    const std::vector<uint8_t> bytes = calibration_serialize(c);
    const std::string sha = sha256_hex(std::span<const uint8_t>(bytes));
    const fs::path sp(session_path);
    const std::string path = (sp.parent_path() / (sp.stem().string() + "." + sha.substr(0, 12) + ".calib")).string();
    std::error_code ec;
    if (fs::exists(path, ec)) {
        result<std::string> have = sha256_file(path);
        if (have.ok() && *have == sha) return path;
    }
    if (outcome o = calibration_save(c, path); !o.ok()) return o.err();
    return path;
}

namespace {

// Hashes what run_inputs leaves empty once, so a tune does not re-read a large model per candidate.
struct resolved_inputs {
    run_provenance prov;                // without calibration
    std::string calib_path, calib_sha;  // empty: no calibration available
};

result<resolved_inputs> resolve_inputs(const session_store& s, const run_inputs& in, bool need_calibration) {
    if (!in.m) return error{s.path() + ": cannot record a run without its model"};
    resolved_inputs r;
    r.prov.m = in.m;
    r.prov.model_sha256 = in.model_sha256;
    if (r.prov.model_sha256.empty()) {
        result<std::string> h = sha256_file(in.m->path);
        if (!h.ok()) return h.err();
        r.prov.model_sha256 = std::move(*h);
    }
    r.prov.text_name = in.text_name;
    r.prov.text = in.text;
    if (need_calibration && in.calib) {
        r.calib_path = in.calibration_path;
        r.calib_sha = in.calibration_sha256;
        if (r.calib_path.empty()) {
            result<std::string> p = save_calibration_for_session(s.path(), *in.calib);
            if (!p.ok()) return p.err();
            r.calib_path = std::move(*p);
            r.calib_sha.clear();
        }
        if (r.calib_sha.empty()) {
            result<std::string> h = sha256_file(r.calib_path);
            if (!h.ok()) return h.err();
            r.calib_sha = std::move(*h);
        }
    }
    return r;
}

// Records one evaluation with inputs hashed beforehand; the run references the calibration only when its
// configuration needs one (pinning included), so exporting it writes a sidecar exactly then.
result<int64_t> record_resolved(session_store& s, const evaluation& e, const run_inputs& in,
                                const resolved_inputs& inputs, const record_params& p) {
    result<sim::per_layer_table> resolved = resolve_per_layer(e.config, *in.m, in.calib);
    if (!resolved.ok()) return error{s.path() + ": cannot record " + e.config.name + ": " + resolved.message()};
    run_record run = run_record_from_eval(e.config, e.eval, eval_windows{p.n_ctx, p.windows, in.offset}, *resolved);
    run.label = p.label;
    run.sweep_id = p.sweep_id;
    run.duration_s = e.seconds;
    if (p.setting) {
        run.device_name = p.setting->device.name;
        run.device_json = sim_setting_to_json(*p.setting);
    }
    run.sim_tok_s = e.sim_tokens_per_s;
    run.hit_rate = e.hit_rate;
    run_provenance prov = inputs.prov;
    if (method_config_needs_calibration(e.config)) {
        prov.calibration_path = inputs.calib_path;
        prov.calibration_sha256 = inputs.calib_sha;
    }
    return record_run(s, std::move(run), prov);
}

std::string candidate_label(const std::string& label, const sim::tune_candidate& c) {
    std::string l = label + " " + c.stage;
    if (!c.full) l += " (" + std::to_string(c.windows) + " windows)";
    return l;
}

// The sweep row of a tune, with the search's parameters.
result<int64_t> add_tune_sweep(session_store& s, const sim::tune_params& p, const dense_reference& ref,
                               const run_inputs& in, const std::string& model_sha, const std::string& label) {
    json budgets = json::array(), policies = json::array();
    for (const sim::accuracy_budget& b : p.budgets) budgets.push_back(b.text);
    for (sim::cache_policy pol : p.policies) policies.push_back(sim::cache_policy_name(pol));
    const std::string params = json{{"methods", p.methods},
                                    {"densities", p.densities},
                                    {"gammas", p.gammas},
                                    {"budgets", budgets},
                                    {"objective", p.objective == sim::tune_objective::sim ? "sim" : "cpu"},
                                    {"coarse_windows", p.coarse_windows},
                                    {"refine_steps", p.refine_steps},
                                    {"dip_split_points", p.dip_split_points},
                                    {"windows", ref.n_windows},
                                    {"n_ctx", ref.n_ctx},
                                    {"device", p.sim.device.name},
                                    {"dram_bytes", p.sim.device.dram_bytes},
                                    {"bits", p.sim.quant.bits},
                                    {"policies", policies},
                                    {"online_policy", sim::cache_policy_name(p.online_policy)},
                                    {"params", json::parse(method_config_to_json(p.base))}}
                                   .dump();
    run_inputs hashed = in;
    hashed.model_sha256 = model_sha;
    return begin_sweep(s, hashed, label, params);
}

}  // namespace

result<int64_t> begin_sweep(session_store& s, const run_inputs& in, const std::string& label,
                            const std::string& params_json) {
    if (!in.m) return error{s.path() + ": cannot record a sweep without its model"};
    std::string model_sha = in.model_sha256;
    if (model_sha.empty()) {
        result<std::string> h = sha256_file(in.m->path);
        if (!h.ok()) return h.err();
        model_sha = std::move(*h);
    }
    int64_t sweep_id = 0;
    outcome made = s.in_transaction([&]() -> outcome {
        result<int64_t> model_id = s.add_model(model_record_of(*in.m, model_sha));
        if (!model_id.ok()) return model_id.err();
        sweep_record sw;
        sw.label = label;
        sw.model_id = *model_id;
        sw.params_json = params_json;
        if (!in.text.empty() || !in.text_name.empty()) {
            result<int64_t> text_id = s.add_text(in.text_name, in.text, "eval");
            if (!text_id.ok()) return text_id.err();
            sw.text_id = *text_id;
        }
        result<int64_t> id = s.add_sweep(sw);
        if (!id.ok()) return id.err();
        sweep_id = *id;
        return {};
    });
    if (!made.ok()) return made.err();
    return sweep_id;
}

result<int64_t> record_evaluation(session_store& s, const evaluation& e, const run_inputs& in, const record_params& p) {
    result<resolved_inputs> inputs = resolve_inputs(s, in, method_config_needs_calibration(e.config));
    if (!inputs.ok()) return inputs.err();
    return record_resolved(s, e, in, *inputs, p);
}

result<std::vector<sim::accuracy_budget>> parse_budgets(const std::string& text) {
    std::vector<sim::accuracy_budget> out;
    std::string item;
    std::istringstream in(text);
    while (std::getline(in, item, ',')) {
        if (item.find_first_not_of(" \t") == std::string::npos) continue;
        result<sim::accuracy_budget> b = sim::budget_parse(item);
        if (!b.ok()) return b.err();
        out.push_back(std::move(*b));
    }
    return out;
}

result<std::vector<float>> parse_densities(const std::string& text) {
    std::vector<float> out;
    std::string t = text;
    for (char& ch : t)
        if (ch == ',' || ch == ';' || ch == '\t') ch = ' ';
    std::istringstream in(t);
    std::string item;
    while (in >> item) {
        double v = 0;
        size_t used = 0;
        try {
            v = std::stod(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != item.size()) return error{"density '" + item + "' is not a number"};
        if (!(v > 0.0 && v <= 1.0)) return error{"density " + item + " is outside (0, 1]"};
        out.push_back(static_cast<float>(v));
    }
    if (out.empty()) return error{"no densities given (e.g. 0.3, 0.5, 0.7)"};
    return out;
}

result<tune_job_result> tune_into_session(session_store& s, context& ctx, const dense_reference& ref,
                                          const sim::tune_params& p, const eval_params& ep, const run_inputs& in,
                                          const std::string& label) {
    bool any_calibrated = false;
    for (const std::string& name : p.methods) {
        const method_config c = method_config_for(p.base, name);
        any_calibrated = any_calibrated || method_config_needs_calibration(c);
    }
    result<resolved_inputs> inputs = resolve_inputs(s, in, any_calibrated);
    if (!inputs.ok()) return inputs.err();

    tune_job_result out;
    // The sweep row first, so every candidate can name it as soon as it is evaluated.
    result<int64_t> sweep_id = add_tune_sweep(s, p, ref, in, inputs->prov.model_sha256, label);
    if (!sweep_id.ok()) return sweep_id.err();
    out.sweep_id = *sweep_id;

    // on_candidate cannot fail: the first write error is kept and stops the tune through its progress.
    std::optional<error> write_error;
    std::vector<int64_t> ids;  // in evaluation order: dense, then tune_result::candidates
    auto record = [&](const sim::tune_candidate& c) {
        if (write_error) return;
        evaluation e{c.config, c.eval, c.seconds, std::nullopt, std::nullopt};
        record_params rp;
        rp.label = candidate_label(label, c);
        rp.n_ctx = ref.n_ctx;
        rp.windows = c.windows;
        rp.sweep_id = out.sweep_id;
        if (c.best_sim >= 0) {
            // The policy the candidate is recommended with (DIP-CA: the one it ran with), as `tune --export`.
            const sim::sim_summary& sum = c.sims[static_cast<size_t>(c.best_sim)];
            sim::sim_params sp = p.sim;
            sp.policy = sum.policy;
            rp.setting = sim_setting_of(sp, c.layout);
            e.sim_tokens_per_s = sum.tokens_per_s;
            e.hit_rate = sum.hit_rate;
        }
        result<int64_t> id = record_resolved(s, e, in, *inputs, rp);
        if (!id.ok()) {
            write_error = id.err();
            return;
        }
        ids.push_back(*id);
    };
    sim::tune_params tp = p;
    tp.progress = [&](float f) { return !write_error && (!p.progress || p.progress(f)); };

    result<sim::tune_result> tuned = sim::tune(ctx, ref, in.calib, tp, ep, record);
    if (write_error) return *write_error;
    if (!tuned.ok()) {
        if (!tuned.cancelled()) return tuned.err();
        return error{"tune cancelled after " + std::to_string(ids.size()) + " evaluations; those stay in sweep " +
                         std::to_string(out.sweep_id) + " of " + s.path(),
                     true};
    }
    out.tune = std::move(*tuned);
    if (ids.size() != out.tune.candidates.size() + 1)
        return error{s.path() + ": the tuner reported " + std::to_string(ids.size()) + " evaluations for " +
                     std::to_string(out.tune.candidates.size() + 1) + " results"};
    out.dense_run_id = ids.front();
    out.candidate_run_ids.assign(ids.begin() + 1, ids.end());
    for (const sim::tune_budget_result& b : out.tune.budgets)
        out.recommended_run_ids.push_back(b.recommended >= 0 ? out.candidate_run_ids[static_cast<size_t>(b.recommended)]
                                                             : 0);
    return out;
}

result<tune_job_result> sweep_into_session(session_store& s, context& ctx, const dense_reference& ref,
                                           sim::tune_params p, const eval_params& ep, const run_inputs& in,
                                           const std::string& label) {
    p.coarse_windows = ref.n_windows;  // every grid point on all windows: the refinement finds them memoised
    p.refine_steps = 0;
    p.dip_split_points = 0;
    if (p.budgets.empty()) p.budgets = sim::tune_default_params().budgets;
    return tune_into_session(s, ctx, ref, p, ep, in, label);
}

result<session_store> new_session(const std::string& path) {
    return session_store::create(path, fs::path(path).stem().string());
}

result<session_store> open_or_create_session(const std::string& path) {
    std::error_code ec;
    return fs::exists(path, ec) ? session_store::open(path) : new_session(path);
}

result<session_store> save_session_as(const session_store& current, const std::string& path, bool overwrite) {
    session_copy_params cp;
    cp.overwrite = overwrite;
    cp.name = fs::path(path).stem().string();
    if (outcome o = session_copy(current.path(), path, cp); !o.ok()) return o.err();
    return session_store::open(path);
}

result<imported_config> import_config(const std::string& path, const sim::deploy_model& identity,
                                      bool allow_other_weights) {
    result<sim::loaded_deploy_config> lc = sim::deploy_config_read(path);
    if (!lc.ok()) return lc.err();
    if (outcome o = sim::deploy_config_matches(lc->config, identity, allow_other_weights); !o.ok())
        return error{path + ": " + o.message()};
    imported_config out;
    out.config = std::move(lc->config);
    out.calib = std::move(lc->calib);
    const sim::deploy_config& c = out.config;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s at %.4g%% density", c.method.name.c_str(), 100.0 * c.method.density);
    out.summary = buf;
    if (c.has_device()) {
        result<sim::device_profile> shipped = sim::device_find(c.device.name);
        if (!shipped.ok())
            out.warnings.push_back(path + ": device '" + c.device.name +
                                   "' is not a shipped profile; its DRAM and bandwidths are applied as overrides");
        else if (shipped->flash_page_bytes != c.device.flash_page_bytes ||
                 shipped->flash_read_latency_s != c.device.flash_read_latency_s ||
                 shipped->flash_iops != c.device.flash_iops ||
                 shipped->overlap_io_compute != c.device.overlap_io_compute)
            out.warnings.push_back(path + ": device '" + c.device.name +
                                   "' differs from the shipped profile in flash page size, latency, IOPS or overlap");
        std::snprintf(buf, sizeof buf, " on %s, %u-bit, %s", c.device.name.c_str(), c.bits,
                      sim::cache_policy_name(c.policy));
        out.summary += buf;
    } else {
        out.summary += ", no device";
    }
    return out;
}

}  // namespace sl::sessions

// Engine jobs on the session: the one writable session store, recording Tuning panel results, exporting and
// deleting runs, importing deployment configs (calibration included), and sweeps and tunes into the session.
#include <algorithm>
#include <filesystem>

#include "cache_recorder.h"
#include "engine.h"
#include "engine_internal.h"
#include "session_jobs.h"
#include "sparselens/sim/cache.h"

namespace sl::views::detail {

namespace ss = sl::sessions;

outcome engine::require_session() const {
    if (!m_store) return error{"no session is open: create or open one (File > New Session..., Open Session...)"};
    return {};
}

const std::string& engine::session_path() const {
    static const std::string none;
    return m_store ? m_store->path() : none;
}

result<std::string> engine::open_session(const std::string& path, session_open_mode mode) {
    result<ss::session_store> s = error{""};
    switch (mode) {
    case session_open_mode::create: s = ss::new_session(path); break;
    case session_open_mode::open: s = ss::session_store::open(path); break;
    case session_open_mode::open_or_create: s = ss::open_or_create_session(path); break;
    }
    if (!s) return s.err();
    m_store = std::make_unique<ss::session_store>(std::move(s).value());
    return m_store->path();
}

result<std::string> engine::save_session_as(const std::string& path, bool overwrite) {
    if (auto ok = require_session(); !ok) return ok.err();
    result<ss::session_store> s = ss::save_session_as(*m_store, path, overwrite);
    if (!s) return s.err();
    m_store = std::make_unique<ss::session_store>(std::move(s).value());
    return m_store->path();
}

result<const sim::deploy_model*> engine::model_identity(const job_hooks& hooks) {
    if (auto ok = require_model(); !ok) return ok.err();
    if (!m_identity) {
        const std::string file = std::filesystem::path(m_model->path).filename().string();
        auto id = sim::deploy_model_identity(m_model->path, *m_model,
                                             [&](float f) { return hooks.progress("Hashing " + file, f); });
        if (!id) return id.err();
        m_identity = std::move(id).value();
    }
    return &*m_identity;
}

ss::run_inputs engine::run_inputs_for(const eval_text& text, const sim::deploy_model& identity) const {
    ss::run_inputs in;
    in.m = m_model.get();
    in.model_sha256 = identity.sha256;
    in.text_name = text.name;
    in.text = std::span(reinterpret_cast<const uint8_t*>(text.bytes.data()), text.bytes.size());
    in.calib = m_calib ? &*m_calib : nullptr;
    in.calibration_path = m_calib_path;
    return in;
}

result<int64_t> engine::record_evaluation(generation_id evaluated_gen, const std::string& label, const job_hooks& hooks) {
    if (auto ok = require_session(); !ok) return ok.err();
    const auto it = std::find_if(m_evaluated.begin(), m_evaluated.end(),
                                 [&](const evaluated& e) { return e.generation == evaluated_gen; });
    if (it == m_evaluated.end())
        return error{m_store->path() + ": that result is no longer available (another model or many evaluations "
                                       "since): evaluate again (F5) and save"};
    auto id = model_identity(hooks);
    if (!id) return id.err();
    ss::record_params rp;
    rp.label = label;
    rp.n_ctx = it->n_ctx;
    rp.windows = it->windows;
    rp.setting = it->setting;
    return record_tuning_result(*m_store, *it->result, run_inputs_for(*it->text, *id.value()), rp);
}

result<ss::export_result> engine::export_run(int64_t run_id, const std::string& path) {
    if (auto ok = require_session(); !ok) return ok.err();
    return ss::export_run(*m_store, run_id, path, {});
}

outcome engine::delete_run(int64_t run_id) {
    if (auto ok = require_session(); !ok) return ok.err();
    return m_store->delete_run(run_id);
}

result<imported_settings> engine::import_config(const std::string& path, const job_hooks& hooks) {
    auto id = model_identity(hooks);
    if (!id) return id.err();
    auto ic = ss::import_config(path, *id.value());
    if (!ic) return ic.err();
    imported_settings out;
    out.path = path;
    out.method = ic->config.method;
    out.summary = ic->summary;
    out.warnings = ic->warnings;
    if (ic->config.has_device()) {
        out.has_device = true;
        out.device = device_settings_of(ic->config);
    }
    if (ic->calib) {
        // The method's per-layer values come from this calibration: it replaces the loaded one.
        m_calib = std::move(ic->calib);
        m_calib_path = (std::filesystem::path(path).parent_path() / ic->config.calibration_file).string();
        m_calib_source = m_calib_path;
        out.calibration_installed = true;
    }
    return out;
}

result<ss::tune_job_result> engine::session_job(const session_job_request& req,
                                                const std::shared_ptr<const eval_text>& text, const job_hooks& hooks) {
    if (auto ok = require_model(); !ok) return ok.err();
    if (auto ok = require_session(); !ok) return ok.err();
    if (!text) return error{"no evaluation text"};
    if (req.methods.empty()) return error{"choose at least one method"};
    sim::tune_params p = sim::tune_default_params();
    p.methods = req.methods;
    p.base = req.knobs;
    p.base.d_in = p.base.d_down = -1.0f;  // the job sets the densities; DIP derives its split from them
    if (req.tune) {
        auto b = ss::parse_budgets(req.budgets);
        if (!b) return b.err();
        if (b->empty()) return error{"tune: give at least one accuracy budget (e.g. ppl+0.2)"};
        p.budgets = std::move(b).value();
        p.objective = req.objective == "cpu" ? sim::tune_objective::cpu : sim::tune_objective::sim;
    } else {
        if (req.densities.empty()) return error{"sweep: give at least one density"};
        p.densities = req.densities;
        p.gammas = {p.base.gamma};  // a sweep runs DIP-CA at the panel's gamma, not the tuner's grid
    }
    auto sp = sim_params_for(req.device);
    if (!sp) return sp.err();
    p.sim = sp.value();
    // DIP-CA reads the device cache while it runs: the Tuning panel's policy when it is one it can read.
    if (sp->policy == sim::cache_policy::lru || sp->policy == sim::cache_policy::lfu) p.online_policy = sp->policy;
    for (const std::string& name : p.methods) {
        const method_config c = method_config_for(p.base, name);
        if (auto cal = ensure_calibration(c, text, hooks); !cal) return cal.err();
    }
    auto id = model_identity(hooks);
    if (!id) return id.err();
    auto setup = prepare_eval(text, req.n_ctx, req.windows, hooks);
    if (!setup) return setup.err();
    const std::string what = req.tune ? "Tuning" : "Sweeping";
    p.progress = [&](float f) { return hooks.progress(what + " on " + text->name, f); };
    const ss::run_inputs in = run_inputs_for(*text, *id.value());
    return req.tune ? ss::tune_into_session(*m_store, *m_eval_ctx, *setup->ref, p, setup->ep, in, "tune")
                    : ss::sweep_into_session(*m_store, *m_eval_ctx, *setup->ref, p, setup->ep, in, "sweep");
}

}  // namespace sl::views::detail

// The engine-thread side of EngineController: owns model, tokenizer, calibration, contexts and
// simulator state and runs one job at a time. No Qt here; every call happens on the engine thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sparselens/core/calibration.h"
#include "sparselens/core/context.h"
#include "sparselens/core/eval.h"
#include "sparselens/core/model.h"
#include "sparselens/core/tokenizer.h"
#include "sparselens/sessions/jobs.h"
#include "sparselens/sim/deploy_config.h"
#include "sparselens/sim/simulator.h"
#include "sparselens/views/engine_requests.h"
#include "sparselens/views/snapshots.h"

namespace sl::views::detail {

class activation_recorder;

// How a job reports back while it runs (all called on the engine thread).
struct job_hooks {
    std::function<bool(const std::string& what, float fraction)> progress;  // false: cancel the job
    std::function<bool()> stop_requested;  // generation: stop early and keep what was produced
    std::function<void(std::vector<token_event>&&, std::shared_ptr<activation_snapshot>)> stream;
    std::function<std::pair<int32_t, probe>()> selection;  // the Activations view's (layer, probe)
};

// An evaluation text held by the controller: bytes and a key identifying them.
struct eval_text {
    std::string name;  // file or resource it came from (messages)
    std::string bytes;
    uint64_t hash = 0;
};

class engine {
public:
    engine();
    ~engine();

    result<std::shared_ptr<model_card>> load(const std::string& path, const std::string& tokenizer_path,
                                             generation_id gen, const job_hooks& hooks);

    struct generated {
        generation_stats stats;
        std::shared_ptr<activation_snapshot> activations;
        std::shared_ptr<neuron_snapshot> neurons;
        std::shared_ptr<cache_snapshot_series> cache;
    };
    // `text`: what to calibrate on when the method needs a calibration and none is loaded.
    result<generated> generate(const generate_request& req, const std::shared_ptr<const eval_text>& text,
                               generation_id gen, const job_hooks& hooks);

    // The last run's activations at (layer, where): recorded, or recomputed by re-running its tokens.
    result<std::shared_ptr<activation_snapshot>> activations(int32_t layer, probe where, generation_id gen,
                                                             const job_hooks& hooks);

    result<std::shared_ptr<tuning_result>> evaluate(const evaluate_request& req,
                                                    const std::shared_ptr<const eval_text>& text, generation_id gen,
                                                    const job_hooks& hooks);

    // Calibrates on `text`; returns a one-line description of what was calibrated.
    result<std::string> calibrate(const eval_text& text, const job_hooks& hooks);

    // "Verify on this machine" (engine_offload.cpp): a saved run's config offloaded here, measured next to the
    // simulator with this machine's probed profile.
    result<std::shared_ptr<offload_verify_result>> verify_offload(const offload_verify_request& req,
                                                                  const std::shared_ptr<const eval_text>& text,
                                                                  const job_hooks& hooks);

    bool has_model() const { return m_model != nullptr; }
    bool has_calibration() const { return m_calib.has_value(); }

    // ---- the session (engine_session.cpp); the engine holds the one writable store ----

    // Opens, creates or opens-or-creates `path` and makes it the session runs are recorded in; returns
    // its path. A failure keeps the previous session.
    result<std::string> open_session(const std::string& path, session_open_mode mode);
    // Copies the session to `path` and continues there.
    result<std::string> save_session_as(const std::string& path, bool overwrite);
    const std::string& session_path() const;
    // Records the complete evaluation of generation `evaluated` (one of the last few) as a run.
    result<int64_t> record_evaluation(generation_id evaluated, const std::string& label, const job_hooks& hooks);
    result<sessions::export_result> export_run(int64_t run_id, const std::string& path);
    outcome delete_run(int64_t run_id);
    // Checks a deployment config against the loaded model, installs its calibration and returns what the
    // Tuning panel needs.
    result<imported_settings> import_config(const std::string& path, const job_hooks& hooks);
    // A sweep or a tune on `text`, recorded as a sweep of the session.
    result<sessions::tune_job_result> session_job(const session_job_request& req,
                                                  const std::shared_ptr<const eval_text>& text, const job_hooks& hooks);

private:
    struct last_run;
    // A complete evaluation the user may still save as a run.
    struct evaluated {
        generation_id generation = 0;
        std::shared_ptr<const tuning_result> result;
        std::shared_ptr<const eval_text> text;
        int32_t n_ctx = 0, windows = 0;
        sessions::sim_setting setting;
    };
    struct eval_setup {
        eval_params ep;
        std::shared_ptr<const dense_reference> ref;
    };
    // The evaluation context of n_ctx and the dense reference of (text, n_ctx, windows), cached.
    result<eval_setup> prepare_eval(const std::shared_ptr<const eval_text>& text, int32_t n_ctx, int32_t windows,
                                    const job_hooks& hooks);
    outcome require_session() const;
    // The loaded model's identity (SHA-256 of the file): hashed once per model, on first use.
    result<const sim::deploy_model*> model_identity(const job_hooks& hooks);
    sessions::run_inputs run_inputs_for(const eval_text& text, const sim::deploy_model& identity) const;

    outcome require_model() const;
    outcome ensure_calibration(const method_config& cfg, const std::shared_ptr<const eval_text>& text,
                               const job_hooks& hooks);
    result<sim::sim_params> sim_params_for(const device_settings& d) const;
    const std::vector<int32_t>& text_tokens(const eval_text& text);
    const std::vector<std::vector<float>>& down_column_norms();
    std::shared_ptr<neuron_snapshot> neuron_stats(const activation_recorder& rec, const method_config& cfg,
                                                  generation_id gen);

    std::unique_ptr<model> m_model;  // stable address: contexts keep a pointer to it
    std::optional<tokenizer> m_tok;
    std::optional<calibration> m_calib;
    std::string m_calib_source;
    std::string m_calib_path;  // the file m_calib was read from; empty: made in memory (saved beside the session)
    std::vector<std::vector<float>> m_down_norms;  // per layer ||W_down[:, j]||, computed on first use

    uint64_t m_tokens_key = 0;  // text hash of m_tokens (+1 so 0 means none)
    std::vector<int32_t> m_tokens;
    std::map<std::pair<uint64_t, std::pair<int32_t, int32_t>>, std::shared_ptr<const dense_reference>> m_refs;
    std::optional<context> m_eval_ctx;
    std::unique_ptr<last_run> m_last;

    std::unique_ptr<sessions::session_store> m_store;
    std::optional<sim::deploy_model> m_identity;
    std::deque<evaluated> m_evaluated;  // newest last
};

}  // namespace sl::views::detail

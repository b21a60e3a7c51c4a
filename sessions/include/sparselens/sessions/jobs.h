// Session jobs an engine runs with the model, texts and store it owns: recording evaluations, tunes and
// sweeps as runs, opening and copying session files, importing deployment configs. Shared by the CLI
// (`eval --session`, `tune --session`) and the GUI's engine thread; exporting a run is export_run().
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sparselens/core/calibration.h"
#include "sparselens/core/context.h"
#include "sparselens/core/eval.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/model.h"
#include "sparselens/core/result.h"
#include "sparselens/sessions/run_convert.h"
#include "sparselens/sessions/session_store.h"
#include "sparselens/sim/deploy_config.h"
#include "sparselens/sim/tuner.h"

namespace sl::sessions {

// What the engine knows about the setup its evaluations ran on; shared by every run it records.
struct run_inputs {
    const model* m = nullptr;            // required
    std::string model_sha256;            // keep it per loaded model: empty hashes the whole file on every call
    std::string text_name;               // the eval text's file name
    std::span<const uint8_t> text;       // its bytes (the session stores them once per content)
    int64_t offset = 0;                  // text tokens skipped before the first window
    const calibration* calib = nullptr;  // the loaded calibration: resolves per-layer values
    // The file `calib` is stored in. Empty with a calibration loaded (calibrated in the GUI): a run whose
    // method needs it gets a copy saved beside the session (save_calibration_for_session), so it stays
    // exportable.
    std::string calibration_path;
    std::string calibration_sha256;  // empty: hashed
};

// The per-layer values `cfg` resolves to on `m` (sparsity_method::per_layer_values()), which an exported
// config must carry and a rebuilt method must reproduce.
result<sim::per_layer_table> resolve_per_layer(const method_config& cfg, const model& m, const calibration* calib);

// Writes a calibration that only lives in memory beside the session as `<session stem>.<sha256[:12]>.calib`
// (an identical existing file is reused) and returns its path.
result<std::string> save_calibration_for_session(const std::string& session_path, const calibration& c);

// ---- one evaluation ----

struct evaluation {
    method_config config;
    eval_result eval;
    double seconds = 0;  // wall time
    // The cache the run read or drove (record_params::setting): simulated tokens/s (nullopt for DIP-CA's
    // LFU stand-in, which has no device) and hit rate.
    std::optional<double> sim_tokens_per_s, hit_rate;
};
struct record_params {
    std::string label;
    int32_t n_ctx = 128, windows = 8;  // the window setting evaluated
    // The simulated device setting (sim_setting_of), or for DIP-CA without a device its stand-in cache (no
    // device, cache_fraction); nullopt: nothing device-related shaped the run.
    std::optional<sim_setting> setting;
    std::optional<int64_t> sweep_id;
};
// Records `e` as a run (model, text and calibration rows added or found) in one transaction; returns its id.
result<int64_t> record_evaluation(session_store& s, const evaluation& e, const run_inputs& in, const record_params& p);

// ---- tuner and sweeps ----

// Adds a sweep row (model and text rows added or found) whose runs the caller then records with
// record_params::sweep_id; `params_json` describes the grid. Returns the sweep id.
result<int64_t> begin_sweep(session_store& s, const run_inputs& in, const std::string& label,
                            const std::string& params_json);

// "ppl+0.2, kld<0.05" -> budgets (sim::budget_parse each); errors quote the bad one. Empty text: none.
result<std::vector<sim::accuracy_budget>> parse_budgets(const std::string& text);
// "0.3, 0.5 0.7" -> densities in (0, 1].
result<std::vector<float>> parse_densities(const std::string& text);

struct tune_job_result {
    sim::tune_result tune;
    int64_t sweep_id = 0;
    int64_t dense_run_id = 0;
    std::vector<int64_t> candidate_run_ids;    // aligned with tune.candidates
    std::vector<int64_t> recommended_run_ids;  // per budget; 0 when nothing but dense meets it
};

// Runs the tuner (p.progress reports and cancels) and records the dense baseline and every candidate as
// runs of a new sweep labelled `label`; a simulated candidate's run carries the device setting of its
// best recommendable policy, so export_run() of it gives the config `tune --export` would. A cancelled or
// failed tune keeps the runs recorded so far (each is a complete evaluation) and returns the error,
// cancelled() telling the two apart. A failed write stops the tune and is returned.
result<tune_job_result> tune_into_session(session_store& s, context& ctx, const dense_reference& ref,
                                          const sim::tune_params& p, const eval_params& ep, const run_inputs& in,
                                          const std::string& label = "tune");

// A grid sweep: every method at every density (DIP-CA: x p.gammas) on all windows of `ref`, simulated like
// the tuner's candidates and recorded as one sweep. It is the tuner's first stage with coarse windows = all
// windows and no refinement, so sweeps and tunes share their numbers. `p.budgets` empty: the tuner's
// defaults (they only decide the recommendations in the result).
result<tune_job_result> sweep_into_session(session_store& s, context& ctx, const dense_reference& ref,
                                           sim::tune_params p, const eval_params& ep, const run_inputs& in,
                                           const std::string& label = "sweep");

// ---- session files ----

// Creates `path` (named after its file stem) and opens it for writing.
result<session_store> new_session(const std::string& path);
// Opens `path` for writing, creating it (named after its stem) when it does not exist: `--session FILE`.
result<session_store> open_or_create_session(const std::string& path);
// Save As: copies the open session to `path` (consistent snapshot, named after the new stem) and opens the
// copy for writing; the caller replaces its store with it.
result<session_store> save_session_as(const session_store& current, const std::string& path, bool overwrite);

// ---- importing a deployment config ----

struct imported_config {
    sim::deploy_config config;
    std::optional<calibration> calib;   // the sidecar, when the config names one
    std::vector<std::string> warnings;  // e.g. the device is not a shipped profile (its numbers still apply)
    std::string summary;                // "dip at 50% density on apple-a18, 4-bit, lfu"
};
// Reads and validates `path` (sidecar included) and checks it was made for the loaded model, whose
// identity the caller computed once with sim::deploy_model_identity. A mismatch names the config, the
// field and both values ("tuned.json: config is for a model with hidden_dim 768, this model has 172").
result<imported_config> import_config(const std::string& path, const sim::deploy_model& identity,
                                      bool allow_other_weights = false);

}  // namespace sl::sessions

// Between core/sim values and session rows: recording an evaluation as a run, and exporting a run as a
// deployment config. Lives in sessions/ because core and sim must not depend on the session store.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sparselens/core/eval.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/model.h"
#include "sparselens/core/result.h"
#include "sparselens/sessions/session_store.h"
#include "sparselens/sim/deploy_config.h"

namespace sl::sessions {

// runs.params_json: every field of method_config (unknown keys are refused on reading; missing keys keep
// method_default_config() values, so runs written before a field existed still read).
std::string method_config_to_json(const method_config& c);
result<method_config> method_config_from_json(const std::string& text, const std::string& origin);

// The simulated setting a run's sim_tok_s / hit_rate refer to (runs.device_json): everything of the
// simulator a deployment config stores. As in a deployment config, an empty device.name means "no
// device" (stored as null): DIP-CA then ran against the LFU stand-in holding cache_fraction of the units.
struct sim_setting {
    sim::device_profile device;
    sim::cache_policy policy = sim::cache_policy::lfu;
    uint32_t window_tokens = 5;  // window policy only
    uint32_t bits = 4;           // weight format on the device (sim::quant_format)
    uint32_t group_size = 32;
    uint32_t scale_bits = 16;
    uint32_t embedding_bits = 0;  // 0: same as bits
    uint32_t context_tokens = 1024;
    std::string layout;         // empty: sim::deploy_default_layout(method)
    float cache_fraction = 0.5f;
    uint32_t sim_tokens = 0;    // text tokens driven through the simulator
};
// Reading accepts runs written before the weight-format and window fields existed: missing group and
// scale sizes are sim::quant_default(bits)'s, a missing window is 5.
std::string sim_setting_to_json(const sim_setting& s);
result<sim_setting> sim_setting_from_json(const std::string& text, const std::string& origin);

// The setting of simulator parameters `p` (device, weight format, policy, window, context) and the other way
// round (the rest at sim::sim_default_params()).
sim_setting sim_setting_of(const sim::sim_params& p, const std::string& layout = {}, uint32_t sim_tokens = 0);
sim::sim_params sim_params_of(const sim_setting& s);

// runs.per_layer_json: {"measured": [{"q": d, ..., "down": d} per layer], "resolved": {name: [n_layers values]}}.
// "resolved" is sparsity_method::per_layer_values(), which a deployment config must carry; infinite
// values are written as "inf" / "-inf" (JSON has no infinity).
std::string per_layer_to_json(const std::vector<layer_density>& measured, const sim::per_layer_table& resolved);
result<sim::per_layer_table> per_layer_resolved_from_json(const std::string& text, const std::string& origin);

model_record model_record_of(const model& m, const std::string& sha256);

struct eval_windows {
    int32_t n_ctx = 128;
    int32_t windows = 16;  // as requested (0: all)
    int64_t offset = 0;
};

// A run row for one evaluation: method, its parameters, the window setting, metrics and per-layer
// densities. The caller sets label, sweep_id and the simulated fields; record_run fills the references.
run_record run_record_from_eval(const method_config& cfg, const eval_result& r, const eval_windows& w,
                                const sim::per_layer_table& resolved = {});

// Where a run's inputs came from.
struct run_provenance {
    const model* m = nullptr;       // the evaluated model (path, format, shapes); required
    std::string model_sha256;       // empty: hashes m->path
    std::string text_name;          // usually the eval text's file name
    std::span<const uint8_t> text;  // the eval text's bytes (stored once per content hash)
    std::string calibration_path;   // empty: the run used no calibration
    std::string calibration_sha256; // empty: hashes calibration_path
};

// Records model, text, calibration and run in one transaction; returns the run id.
result<int64_t> record_run(session_store& s, run_record r, const run_provenance& p);

// The deployment config of a run: model identity and shapes, method, resolved per-layer values,
// expectations (metrics, eval text, windows) and the device of the run, or `device` when given (a run
// that was not simulated has none: the config then says "no device"). `calibration_path` receives the
// run's calibration file (empty when none).
result<sim::deploy_config> deploy_config_of_run(const session_store& s, int64_t run_id,
                                                const std::optional<sim_setting>& device, std::string* calibration_path);

struct export_params {
    std::optional<sim_setting> device;  // overrides the run's simulated device
    std::string note;
};
struct export_result {
    sim::deploy_config config;
    std::string path;
    std::string sha256;  // of the written config
    int64_t export_id = 0;
};
// Writes the run's deployment config to `out_path` (and its calibration sidecar, after checking the
// calibration file still has the SHA-256 the run recorded), then records the export in the session.
result<export_result> export_run(session_store& s, int64_t run_id, const std::string& out_path, const export_params& p);

// Records the deployment config written at `config_path` (its absolute path, SHA-256 and text) as an export
// of run `run_id`, e.g. after `tune --export` wrote the recommendation; returns the record with its id.
result<export_record> record_export(session_store& s, int64_t run_id, const std::string& config_path);

}  // namespace sl::sessions

// Deployment configs: a tuned method + device setting as a versioned JSON file (format: docs/config.md,
// schema: assets/schemas/deploy-config.schema.json) with the calibration arrays in a checksummed sidecar.
// Lives in sim/ (not core/) because a config carries a device profile and a cache policy.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sparselens/core/calibration.h"
#include "sparselens/core/eval.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/model.h"
#include "sparselens/core/residency.h"
#include "sparselens/core/result.h"
#include "sparselens/sim/device.h"
#include "sparselens/sim/simulator.h"

namespace sl::sim {

class sim_residency;  // residency.h

// 2: method.attn_density applies to TEAL too (version 1 readers ignored it there; read as 1).
constexpr int32_t deploy_config_version = 2;
inline constexpr const char* deploy_config_schema = "sparselens.deploy-config";

// Which model a config was tuned for: checked before a config is used.
struct deploy_model {
    std::string file_name;  // base name only (paths differ between machines)
    uint64_t file_bytes = 0;
    std::string sha256;     // of the whole model file
    std::string format;     // model::format: "gguf", "llama2c-f32", "llama2c-q8_0"
    int32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0, seq_len = 0;

    bool operator==(const deploy_model&) const = default;
};

// What the config was measured to do on its eval text, for drift checks. n_ctx == 0: never measured.
struct deploy_expectations {
    std::string eval_text;         // base name of the eval text (informational)
    std::string eval_text_sha256;  // of the eval text file's bytes
    int32_t n_ctx = 0, windows = 0;  // window length and windows actually evaluated
    int64_t offset = 0;              // text tokens skipped before the first window
    int64_t scored_tokens = 0;
    double ppl_dense = 0, ppl = 0, kld_mean = 0, kld_p99 = 0, top1_agreement = 0;
    double mlp_density = 1, attn_density = 1;  // measured (what the kernels read), not the targets
    double cpu_tokens_per_s = 0, cpu_dense_tokens_per_s = 0;  // where it was tuned (informational: machines differ)
    uint32_t sim_tokens = 0;                        // text tokens driven through the online simulator
    double sim_tokens_per_s = 0, sim_hit_rate = 0;  // 0 when not simulated

    bool operator==(const deploy_expectations&) const = default;
};

// sparsity_method::per_layer_values(): named vectors of n_layers values, in the method's order.
using per_layer_table = std::vector<std::pair<std::string, std::vector<float>>>;

struct deploy_config {
    int32_t version = deploy_config_version;
    std::string created;    // UTC ISO 8601; deploy_config_write fills it when empty
    std::string tool;       // "sparselens 0.1.0"
    std::string note;       // free text (e.g. "tuned: ppl+0.2, highest sim tok/s")
    deploy_model model;
    method_config method;
    // What the method resolved per layer when the config was made; a rebuilt method must resolve the
    // same values (deploy_check_per_layer), so a config runs exactly what was tuned.
    per_layer_table per_layer;
    std::string calibration_file;  // sidecar, a plain file name in the config's folder; empty when none
    std::string calibration_sha256;
    // Device and simulator setting the throughput numbers refer to. An empty device.name means "no
    // device": nothing is simulated and DIP-CA runs against the LFU stand-in holding cache_fraction.
    device_profile device;
    cache_policy policy = cache_policy::lfu;
    uint32_t window_tokens = 5;  // window policy only
    uint32_t bits = 4;           // weight format on the device (quant_format)
    uint32_t group_size = 32;
    uint32_t scale_bits = 16;
    uint32_t embedding_bits = 0;  // 0: same as bits
    uint32_t context_tokens = 1024;
    std::string layout;  // mlp_layout name ("dip", "bundle", ...); empty: deploy_default_layout(method)
    float cache_fraction = 0.5f;
    deploy_expectations expected;

    bool has_device() const { return !device.name.empty(); }
    bool operator==(const deploy_config&) const = default;
};

// "dip" for dip / dip-ca (input-column pairs + down columns), else "bundle" (as `sparselens sim`).
std::string deploy_default_layout(const std::string& method);

// Identity of a model file (hashes the whole file; progress may cancel).
result<deploy_model> deploy_model_identity(const std::string& model_path, const model& m,
                                           const progress_fn& progress = {});
// Empty outcome when `identity` is the model the config was made for; else names the first mismatch,
// shape before contents ("config is for a model with hidden_dim 768, this model has 172", then "model
// file differs from the one tuned (sha256 ab12… vs cd34…); pass --allow-other-weights ..."). With
// allow_other_weights a different file of the same shape passes (e.g. the Q8_0 form of the network).
// Messages carry no origin: callers prefix the config's name.
outcome deploy_config_matches(const deploy_config& c, const deploy_model& identity, bool allow_other_weights = false);

// Canonical JSON text (fixed key order, shortest round-trip numbers, 2-space indent, final newline), so
// export → import → export is byte-identical.
std::string deploy_config_to_json(const deploy_config& c);
// Parses and validates (schema, version, required fields, types, ranges); errors name `origin`.
result<deploy_config> deploy_config_from_json(const std::string& text, const std::string& origin);

// A device profile as a config stores it (every field, fixed order), and back with the config's checks (all
// fields present, ranges; errors name `origin`). Sessions store a run's device the same way.
std::string deploy_device_to_json(const device_profile& d);
result<device_profile> deploy_device_from_json(const std::string& text, const std::string& origin);

// `<config stem>.calib` beside the config.
std::string deploy_sidecar_path(const std::string& config_path);

// Writes `path` and, when `calib` is non-null, the sidecar `<stem>.calib` beside it (sets
// calibration_file / calibration_sha256 in the written config). A method that needs a calibration
// without one, or a config that would not read back, is an error and nothing is written.
outcome deploy_config_write(const std::string& path, deploy_config c, const calibration* calib);
// Reads and validates the config; if it names a sidecar, checks its SHA-256, loads it and checks it has
// the config's model shape.
struct loaded_deploy_config {
    deploy_config config;
    std::optional<calibration> calib;
};
result<loaded_deploy_config> deploy_config_read(const std::string& path);

// Empty outcome when `resolved` (a rebuilt method's per_layer_values()) equals the config's per_layer
// bit for bit; else names the first differing value.
outcome deploy_check_per_layer(const deploy_config& c, const per_layer_table& resolved);

// What running a config needs: the method and, when the config has a device, the online simulator as
// the method's residency source (DIP-CA reads its cache; every method's masks drive it), or for DIP-CA
// without a device the LFU stand-in.
struct deploy_runtime {
    std::unique_ptr<sparsity_method> method;
    std::unique_ptr<residency_source> residency;  // may be null
    sim_residency* sim = nullptr;                 // == residency when it is the simulator
    lfu_residency* lfu = nullptr;                 // == residency when it is the stand-in
    sim_params params;                            // the simulator's setting (when has_device())
};
// Builds the method from c.method + calib exactly as make_method does and checks its per-layer values
// against the config (deploy_check_per_layer); errors are prefixed with `origin`.
result<deploy_runtime> deploy_instantiate(const deploy_config& c, const model& m, const calibration* calib,
                                          const std::string& origin);
// The simulator setting of a config with a device: its profile, weight format, policy, window, context
// (the rest at sim_default_params()). deploy_set_sim stores those parts of `p` into `c`.
sim_params deploy_sim_params(const deploy_config& c);
void deploy_set_sim(deploy_config& c, const sim_params& p);

// ---- measuring expectations (evaluate + simulate), shared by `config export`, `eval --config` and the tuner ----

struct deploy_measure_params {
    int32_t n_ctx = 128;      // eval window (first half prompt, second half scored)
    int32_t windows = 16;     // 0: every full window
    int64_t offset = 0;       // text tokens skipped first (held-out evaluation)
    int32_t threads = 0;      // 0: default
    int32_t bos_id = 1;
    uint32_t sim_tokens = 256;  // text tokens (after offset) driven through the online simulator
    std::string text_name;      // recorded in the expectations
    std::string text_sha256;
    progress_fn progress;       // fraction done; false cancels
};
deploy_measure_params deploy_measure_default_params();

struct deploy_measurement {
    deploy_expectations expected;  // what a config stores
    eval_result eval;              // the full accuracy result (per-layer densities, ...)
    std::optional<run_report> sim; // when the config has a device
    per_layer_table per_layer;     // the method's resolved values (store in the config)
};
// Evaluates c's method against dense on `tokens` (the whole text, BOS-prefixed; params.offset is applied
// here) exactly like `sparselens eval`, and when c has a device runs the first sim_tokens tokens through
// the online simulator in windows of the model's context with the device cache persisting (as
// `sparselens sim MODEL TEXT`). Deterministic for a given machine and thread count.
result<deploy_measurement> measure_expectations(const model& m, const deploy_config& c, const calibration* calib,
                                                std::span<const int32_t> tokens, const deploy_measure_params& params);

}  // namespace sl::sim

// Deployment configs: a tuned method + device setting as a versioned JSON file (format: docs/config.md,
// schema: assets/schemas/deploy-config.schema.json) with the calibration arrays in a checksummed sidecar.
// Lives in sim/ (not core/) because a config carries a device profile and a cache policy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sparselens/core/calibration.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/model.h"
#include "sparselens/core/result.h"
#include "sparselens/sim/device.h"
#include "sparselens/sim/simulator.h"

namespace sl::sim {

constexpr int32_t deploy_config_version = 1;

// Which model a config was tuned for: checked before a config is used.
struct deploy_model {
    std::string file_name;  // base name only (paths differ between machines)
    uint64_t file_bytes = 0;
    std::string sha256;     // of the whole model file
    std::string format;     // "gguf", "llama2c"
    int32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0, seq_len = 0;
};

// What the config was measured to do on its eval text, for drift checks.
struct deploy_expectations {
    std::string eval_text_sha256;  // of the eval text file's bytes
    int32_t n_ctx = 0, windows = 0;
    int64_t offset = 0;
    double ppl_dense = 0, ppl = 0, kld_mean = 0, top1_agreement = 0;
    double mlp_density = 1, attn_density = 1;
    double cpu_tokens_per_s = 0;   // measured where it was tuned (informational: machines differ)
    double sim_tokens_per_s = 0, sim_hit_rate = 0;  // 0 when not simulated
};

struct deploy_config {
    int32_t version = deploy_config_version;
    std::string created;    // UTC ISO 8601
    std::string tool;       // "sparselens 0.1.0"
    std::string note;       // free text (e.g. "tuned: ppl+0.2, highest sim tok/s")
    deploy_model model;
    method_config method;
    std::vector<float> per_layer_density;  // resolved per-layer MLP density targets (empty: uniform)
    std::string calibration_file;  // sidecar, relative to the config's folder; empty when the method needs none
    std::string calibration_sha256;
    // Device and simulator setting the throughput numbers refer to.
    device_profile device;
    cache_policy policy = cache_policy::lfu;
    uint32_t bits = 4;
    uint32_t context_tokens = 1024;
    std::string layout;  // mlp_layout name ("dip", "bundle", ...)
    deploy_expectations expected;
};

// Identity of a model file (hashes the whole file; progress may cancel).
result<deploy_model> deploy_model_identity(const std::string& model_path, const model& m,
                                           const progress_fn& progress = {});
// Empty outcome when `m`/`identity` is the model the config was made for; else names the first mismatch
// ("config is for hidden_dim 768, model has 172" / "model file differs: sha256 ...").
outcome deploy_config_matches(const deploy_config& c, const deploy_model& identity);

// Canonical JSON text (sorted keys, fixed float formatting) so export → import → export is byte-identical.
std::string deploy_config_to_json(const deploy_config& c);
// Parses and validates (version, required fields, ranges); errors name `origin`.
result<deploy_config> deploy_config_from_json(const std::string& text, const std::string& origin);

// Writes `path` and, when `calib` is non-null, the sidecar `<stem>.calib` beside it (sets
// calibration_file / calibration_sha256 in the written config).
outcome deploy_config_write(const std::string& path, deploy_config c, const calibration* calib);
// Reads and validates the config; if it names a sidecar, checks its SHA-256 and loads it.
struct loaded_deploy_config {
    deploy_config config;
    std::optional<calibration> calib;
};
result<loaded_deploy_config> deploy_config_read(const std::string& path);

}  // namespace sl::sim

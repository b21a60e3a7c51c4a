// Deployment-config helpers shared by `run --config`, `eval --config` and `config export|show`.
#pragma once

#include <string>

#include "cli_common.h"
#include "sparselens/sim/deploy_config.h"

namespace sl::cli {

// Reads and validates `config_path` (sidecar included) and checks that the loaded model is the one it was
// tuned for (shape, then SHA-256 of the file unless allow_other_weights). Throws cli_error naming the config.
sim::loaded_deploy_config load_config_for_model(const std::string& config_path, const std::string& model_path,
                                                const model& m, bool allow_other_weights);

// "dip at 50% (d_in 0.5, d_down 0.5)": the method line of a config.
std::string config_method_summary(const sim::deploy_config& c);

// Measured minus expected for every accuracy, density and simulated figure, plus whether the eval text
// was the same file; "cpu_tokens_per_s" is a ratio (machines differ).
// The "expected" object of the config format.
nlohmann::json expectations_json(const sim::deploy_expectations& e);

nlohmann::json config_drift_json(const sim::deploy_expectations& expected, const sim::deploy_expectations& measured);

}  // namespace sl::cli

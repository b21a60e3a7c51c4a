// Recording a command's evaluation in a session file (`eval --session FILE`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cli_methods.h"
#include "sparselens/core/residency.h"

namespace sl::cli {

struct session_record_opts {
    std::string session_path;  // --session: created when missing
    std::string label;         // --label
};

// Records the model (by SHA-256), the eval text (by content hash), the calibration used and the run;
// `cache` is DIP-CA's LFU stand-in (null for other methods). Returns the run id; throws cli_error.
int64_t record_eval_in_session(const session_record_opts& s, const loaded_model& lm, const std::string& text_path,
                               const method_opts& mo, bool used_calibration, const sparsity_method& method,
                               const eval_result& r, const lfu_residency* cache, float cache_fraction, double duration_s);

}  // namespace sl::cli

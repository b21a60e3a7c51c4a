// Recording a command's evaluation in a session file (`eval --session FILE`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cli_methods.h"
#include "sparselens/core/residency.h"
#include "sparselens/sessions/jobs.h"

namespace sl::cli {

struct session_record_opts {
    std::string session_path;  // --session: created when missing
    std::string label;         // --label
};

// Records the model (by SHA-256), the eval text (by content hash), the calibration used (`calib`: the one
// load_calibration read, null when the method did not need one) and the run; `cache` is DIP-CA's LFU
// stand-in (null for other methods). Returns the run id; throws cli_error.
int64_t record_eval_in_session(const session_record_opts& s, const loaded_model& lm, const std::string& text_path,
                               const method_opts& mo, const calibration* calib, const eval_result& r,
                               const lfu_residency* cache, float cache_fraction, double duration_s);

// What the session jobs record about a command's inputs: the model, the text (`text` holds its bytes and must
// outlive the result), --offset and the calibration with the file load_calibration read it from.
sessions::run_inputs session_run_inputs(const loaded_model& lm, const std::string& text_path, const std::string& text,
                                        const method_opts& mo, const calibration* calib);

}  // namespace sl::cli

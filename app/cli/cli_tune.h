// Pieces of `sparselens tune` shared by its source files: options, JSON and the export.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_device.h"
#include "cli_methods.h"
#include "sparselens/sim/tuner.h"

namespace sl::cli {

struct tune_opts {
    std::string model_path, text_path, tokenizer_path, out_json, export_path, session_path;
    method_opts m;  // calib, ctx, windows, threads, offset
    bool offset_given = false;
    device_opts dev;
    std::vector<std::string> methods = {"dip", "dip-ca", "cats", "chess", "teal"};
    std::vector<std::string> budgets;
    std::string objective = "sim", policy = "auto", online_policy, grid = "coarse";
    std::vector<float> densities, gammas;
    int32_t coarse_windows = -1, refine_steps = -1, dip_splits = -1;
    float pin = 0.0f;
    float attn_density = 1.0f;  // chess-attn, teal: the attention inputs' density (1: the method's default)
    bool no_belady = false, json = false;
};

std::string candidate_summary(const sim::tune_candidate& c, bool sim);
nlohmann::json candidate_to_json(const sim::tune_candidate& c);
nlohmann::json tune_to_json(const sim::tune_result& r, const sim::tune_params& p, const tune_opts& o,
                            const dense_reference& ref);

// Writes the first budget's recommendation as a deployment config (re-measured exactly as
// `eval --config` measures it) and returns what was written, for the JSON output.
nlohmann::json export_recommended(const tune_opts& o, const loaded_model& lm, const calibration* calib,
                                  const sim::tune_params& p, const sim::tune_result& r, const dense_reference& ref);

}  // namespace sl::cli

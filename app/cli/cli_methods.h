// Method options shared by `eval` and `sweep`: parsing into method_config, calibration lookup, JSON.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cli_common.h"
#include "sparselens/core/calibration.h"
#include "sparselens/core/context.h"
#include "sparselens/core/eval.h"
#include "sparselens/core/methods.h"

namespace sl::cli {

struct method_opts {
    method_config cfg = method_default_config();
    std::string calib_path;  // --calib; default MODEL.calib when it exists
    int32_t n_ctx = 128;
    int32_t windows = 16;
    int32_t threads = 0;
    int64_t offset = 0;      // skip this many text tokens (evaluate on text the calibration did not see)
};

// The text's tokens after --offset; an error when nothing is left.
std::vector<int32_t> eval_tokens(const loaded_model& lm, const std::string& text_path, const method_opts& o);

// FFSplit's --compress: "svd:RANK" (rank), "svd" (rank 0: from --density) or "q4"; CLI::ValidationError otherwise.
void parse_ffsplit_compress(const std::string& v, method_config& c);

// The per-method knobs into `cfg`: --d-in, --d-down, --attn-density, --rank, --split, --compress, --pin
// (`sim` and `trace` add these alone: they have their own --density and --gamma).
void add_method_knobs(CLI::App* c, method_config& cfg);
// --density, --gamma, the knobs above, --calib, --ctx, --windows, --threads, --offset.
void add_method_options(CLI::App* c, method_opts& o);

// Loads --calib (or MODEL.calib beside the model when present) and checks it fits the model; nullopt
// when there is none and `required` is false.
std::optional<calibration> load_calibration(const method_opts& o, const model& m, bool required);
// The file load_calibration reads (or would): --calib, else MODEL.calib.
std::string calibration_path(const method_opts& o, const model& m);

// make_method with a "\rbuilding METHOD: 42.0%" line on a terminal for methods whose build is long
// (FFSplit's SVDs); Ctrl-C cancels the build (a one-line error, exit 2). `quiet`: no line (--json).
std::unique_ptr<sparsity_method> build_method(const method_config& cfg, const model& m, const calibration* cal,
                                              bool quiet);

nlohmann::json eval_to_json(const eval_result& r);
// The method's name and density knobs beside its results: "method", "density_target", "d_in", "d_down", "gamma".
void add_method_json(nlohmann::json& j, const method_config& c);

// The evaluation context and parameters `eval` and `sweep` share: windows of --ctx, --threads,
// --windows, the tokenizer's BOS.
context make_eval_context(const loaded_model& lm, const method_opts& o);
eval_params make_eval_params(const loaded_model& lm, const method_opts& o);

}  // namespace sl::cli

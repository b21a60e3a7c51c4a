// Shared pieces of the `sparselens` subcommands: error type, model + tokenizer loading, JSON output.
#pragma once

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "sparselens/core/model.h"
#include "sparselens/core/tokenizer.h"

namespace sl::cli {

// Thrown by commands for anticipated failures; main() prints it as one line and exits with code 2.
struct cli_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Unwraps a result or throws its message.
template <class T>
T take(result<T>&& r) {
    if (!r.ok()) throw cli_error(r.message());
    return std::move(r).value();
}

struct loaded_model {
    std::unique_ptr<model> m;  // stable address: contexts keep a pointer to it
    std::optional<tokenizer> tok;
};

// Loads MODEL, and a tokenizer: --tokenizer if given, else the model's embedded vocabulary, else
// tokenizer.bin / tok512.bin beside the model. `need_tokenizer` makes a missing one an error.
loaded_model load_model(const std::string& model_path, const std::string& tokenizer_path, bool need_tokenizer);

// Encodes a prompt with BOS and checks every id fits the model's vocabulary. With `chat` the prompt is first
// wrapped in the model's chat format (the format's control tokens parsed); an unrecognised template is an error.
std::vector<int32_t> encode_prompt(const loaded_model& lm, const std::string& prompt, bool chat = false,
                                   const std::string& system = {});

void print_json(const nlohmann::json& j);

// The whole file as bytes (UTF-8 text is not validated: the tokenizer falls back to bytes).
std::string read_text(const std::string& path);

// The environment variable's value, or `fallback` when it is unset (e.g. the OpenMP wait settings a
// benchmark ran with).
std::string env_or(const char* name, const char* fallback);

// Registration of each subcommand; `run` is set to the chosen command's body.
using command_fn = std::function<int()>;
void register_info(CLI::App& app, command_fn& run);
void register_generate(CLI::App& app, command_fn& run);
void register_logits(CLI::App& app, command_fn& run);
void register_ppl(CLI::App& app, command_fn& run);
void register_bench(CLI::App& app, command_fn& run);
void register_make_synthetic(CLI::App& app, command_fn& run);
void register_eval(CLI::App& app, command_fn& run);
void register_sweep(CLI::App& app, command_fn& run);
void register_sim(CLI::App& app, command_fn& run);
void register_trace(CLI::App& app, command_fn& run);
void register_calibrate(CLI::App& app, command_fn& run);
void register_tune(CLI::App& app, command_fn& run);      // cmd_tune.cpp: the tuner
void register_run(CLI::App& app, command_fn& run);     // cmd_run.cpp: generation with a deployment config
void register_config(CLI::App& app, command_fn& run);  // cmd_config.cpp: config export / show
void register_session(CLI::App& app, command_fn& run);  // cmd_session.cpp: session files
void register_vocab(CLI::App& app, command_fn& run);    // cmd_vocab.cpp: import-vocab, tokenize

// What configs and reports record as their writer (same as --version).
inline constexpr const char* tool_version = "sparselens 0.1.0";

}  // namespace sl::cli

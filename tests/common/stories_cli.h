// The stories260K command-line arguments the CLI tests share (model + tokenizer, evaluation text).
#pragma once

#include <string>

#include "cli_runner.h"

namespace sl::test::stories_cli {

using sl::test::q;
using sl::test::run_result;
#ifdef SPARSELENS_CLI
using sl::test::run_cli;
#endif

// "MODEL -z TOKENIZER" and the samples text, single-quoted for the shell.
inline const std::string model_arg = q("models/stories260K_f32.bin") + " -z " + q("models/tok512.bin");
inline const std::string text_arg = q("text/stories260K_samples.txt");

}  // namespace sl::test::stories_cli

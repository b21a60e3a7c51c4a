// Model/tokenizer discovery and output helpers shared by the CLI subcommands.
#include "cli_common.h"

#include "sparselens/core/chat_format.h"

#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <iostream>

namespace sl::cli {

loaded_model load_model(const std::string& model_path, const std::string& tokenizer_path, bool need_tokenizer) {
    loaded_model lm;
    lm.m = std::make_unique<model>(take(model_load(model_path)));
    const int32_t vocab = lm.m->hp.vocab_size;
    if (!tokenizer_path.empty()) {
        lm.tok = take(tokenizer::from_llama2c_file(tokenizer_path, vocab));
    } else if (!lm.m->vocab.empty()) {
        // A vocabulary we cannot use does not stop commands that need no text (bench, synthetic prompts).
        auto t = tokenizer::from_embedded_vocab(lm.m->vocab, model_path);
        if (t)
            lm.tok = std::move(t).value();
        else if (need_tokenizer)
            throw cli_error(t.message());
    } else {
        const auto dir = std::filesystem::path(model_path).parent_path();
        for (const char* name : {"tokenizer.bin", "tok512.bin"}) {
            const auto candidate = dir / name;
            if (!std::filesystem::exists(candidate)) continue;
            auto t = tokenizer::from_llama2c_file(candidate.string(), vocab);
            if (t.ok() && t->vocab_size() == vocab) {
                lm.tok = std::move(t).value();
                break;
            }
        }
        if (!lm.tok && need_tokenizer && !lm.m->vocab.model.empty() && lm.m->vocab.model != "llama" && lm.m->vocab.model != "gpt2")
            throw cli_error(model_path + ": its '" + lm.m->vocab.model +
                            "' vocabulary is not supported (SentencePiece 'llama' and byte-level BPE 'gpt2' are); pass --tokenizer FILE");
        if (!lm.tok && need_tokenizer)
            throw cli_error(model_path + ": no tokenizer found beside the model and none embedded; pass --tokenizer FILE");
    }
    if (lm.tok && lm.tok->vocab_size() > vocab)
        throw cli_error(model_path + ": tokenizer has " + std::to_string(lm.tok->vocab_size()) +
                        " tokens but the model only " + std::to_string(vocab));
    return lm;
}

std::vector<int32_t> encode_prompt(const loaded_model& lm, const std::string& prompt, bool chat, const std::string& system) {
    // A chat prompt spells the format's control tokens, so those are parsed; a plain prompt is text.
    std::vector<int32_t> ids = chat ? lm.tok->tokenize(take(chat_apply(lm.tok->chat_template(), lm.m->path, prompt, system)),
                                                       true, true)
                                    : lm.tok->encode(prompt, true, false);
    for (int32_t id : ids)
        if (id < 0 || id >= lm.m->hp.vocab_size)
            throw cli_error("prompt token " + std::to_string(id) + " is outside the model's vocabulary");
    return ids;
}

// Paths and names may hold bytes that are not UTF-8 (Latin-1 file names): shown as U+FFFD, never an exception.
void print_json(const nlohmann::json& j) { std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl; }

std::string read_text(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw cli_error(path + ": cannot open text file");
    std::ostringstream ss;
    ss << f.rdbuf();
    if (f.bad()) throw cli_error(path + ": read failed");
    return ss.str();
}

std::string env_or(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return v ? v : fallback;
}

}  // namespace sl::cli

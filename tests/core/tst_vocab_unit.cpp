// Byte-level BPE and vocabulary import on small hand-made vocabularies: special-token parsing, vocab-only GGUF
// round trip, end-of-generation tokens and the generation loop stopping at them, and one-line errors naming the file for inconsistent merges, unknown pre-tokenizers, bad arrays.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "sparselens/core/context.h"
#include "sparselens/core/generate.h"
#include "sparselens/core/gguf.h"
#include "sparselens/core/synthetic.h"
#include "sparselens/core/tokenizer.h"
#include "sparselens/core/vocab_import.h"
#include "test_support.h"

namespace {

using namespace sl::test;

// GPT-2's stand-in character of a byte (printable Latin-1 for itself, the rest from U+0100 on).
std::string stand_in(int b) {
    int next = 256;
    for (int x = 0; x < 256; ++x) {
        const bool self = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255);
        const int cp = self ? x : next++;
        if (x != b) continue;
        if (cp < 0x80) return std::string(1, static_cast<char>(cp));
        return {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    }
    return {};
}

// 256 byte pieces, merges "h e" -> "he", "he l" -> "hel", "hel l" -> "hell", "hell o" -> "hello",
// "Ġ w" -> "Ġw", and two control tokens.
sl::embedded_vocab tiny_bpe(const std::string& pre = "gpt-2") {
    sl::embedded_vocab v;
    v.model = "gpt2";
    v.pre = pre;
    for (int b = 0; b < 256; ++b) v.tokens.push_back(stand_in(b));
    for (const char* t : {"he", "hel", "hell", "hello", "\xC4\xA0w", "<|im_start|>", "<|im_end|>"}) v.tokens.push_back(t);
    v.types.assign(v.tokens.size(), 1);
    v.types[v.tokens.size() - 2] = v.types[v.tokens.size() - 1] = 3;
    v.scores.assign(v.tokens.size(), 0.0f);
    v.merges = {"h e", "he l", "hel l", "hell o", "\xC4\xA0 w"};
    v.bos_id = v.eos_id = v.unk_id = -1;
    return v;
}

int32_t id_of(const sl::embedded_vocab& v, const std::string& t) {
    for (size_t i = 0; i < v.tokens.size(); ++i)
        if (v.tokens[i] == t) return static_cast<int32_t>(i);
    return -1;
}

TEST(VocabBpe, MergesByRankAndParsesSpecialsOnlyWhenAsked) {
    const sl::embedded_vocab v = tiny_bpe();
    auto t = sl::tokenizer::from_embedded_vocab(v, "tiny.gguf");
    ASSERT_TRUE(t.ok()) << t.message();
    EXPECT_EQ(t->kind(), sl::tokenizer_kind::byte_bpe);
    const std::vector<int32_t> ids = t->tokenize("hello world", false, false);
    // gpt-2 pre-tokenizer: "hello" and " world"; " w" merges, "orld" stays as bytes.
    const std::vector<int32_t> want = {id_of(v, "hello"), id_of(v, "\xC4\xA0w"), 'o', 'r', 'l', 'd'};
    EXPECT_EQ(ids, want);
    EXPECT_EQ(t->decode_all(ids), "hello world");

    const int32_t im_start = id_of(v, "<|im_start|>");
    const auto plain = t->tokenize("<|im_start|>hello", false, false);
    EXPECT_EQ(std::count(plain.begin(), plain.end(), im_start), 0);
    const auto parsed = t->tokenize("<|im_start|>hello", false, true);
    ASSERT_EQ(parsed.size(), 2u);
    EXPECT_EQ(parsed[0], im_start);
    EXPECT_EQ(t->token_text(im_start, true), "<|im_start|>");
    EXPECT_EQ(t->token_text(im_start, false), "");
    // The end-of-turn token is found by its spelling, as llama.cpp does.
    EXPECT_EQ(t->eot_id(), id_of(v, "<|im_end|>"));
}

TEST(VocabBpe, MultiByteCharactersRoundTrip) {
    auto t = sl::tokenizer::from_embedded_vocab(tiny_bpe("llama-bpe"), "tiny.gguf");
    ASSERT_TRUE(t.ok()) << t.message();
    const std::string s = "caf\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80 x\n\n  y";
    const auto ids = t->tokenize(s, false, false);
    EXPECT_EQ(t->decode_all(ids), s);
    std::string joined;
    for (const int32_t id : ids) joined += t->token_text(id, false);
    EXPECT_EQ(joined, s);
}

TEST(VocabBpe, VocabOnlyGgufRoundTrip) {
    sl::embedded_vocab v = tiny_bpe("qwen2");
    v.chat_template = "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}";
    v.add_bos = 0;
    const std::string path = write_temp("tiny_vocab.gguf", {});
    ASSERT_TRUE(sl::vocab_write_gguf(v, path, "tiny").ok());
    auto a = sl::tokenizer::from_gguf_file(path);
    ASSERT_TRUE(a.ok()) << a.message();
    auto b = sl::tokenizer::from_embedded_vocab(v, "mem");
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(a->pre_tokenizer(), "qwen2");
    EXPECT_EQ(a->chat_template(), v.chat_template);
    EXPECT_FALSE(a->adds_bos());
    for (const char* s : {"hello world", "  hello\n\nhello123", "<|im_start|>x"})
        EXPECT_EQ(a->tokenize(s, true, true), b->tokenize(s, true, true)) << s;
}

TEST(VocabErrors, MergesThatDoNotMatchTheVocabulary) {
    sl::embedded_vocab v = tiny_bpe();
    v.merges.push_back("x y");  // "xy" is no token
    auto t = sl::tokenizer::from_embedded_vocab(v, "bad.gguf");
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.message().find("bad.gguf: tokenizer.ggml.merges[5] 'x y' does not match the vocabulary"), std::string::npos)
        << t.message();
    EXPECT_EQ(t.message().find('\n'), std::string::npos);

    v = tiny_bpe();
    v.merges.push_back("xy");
    t = sl::tokenizer::from_embedded_vocab(v, "bad.gguf");
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.message().find("bad.gguf: "), std::string::npos);
    EXPECT_NE(t.message().find("not two pieces"), std::string::npos) << t.message();
}

TEST(VocabErrors, UnknownPreTokenizer) {
    auto t = sl::tokenizer::from_embedded_vocab(tiny_bpe("klingon"), "bad.gguf");
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.message().find("bad.gguf: pre-tokenizer 'klingon'"), std::string::npos) << t.message();
}

// A vocab-only GGUF with one key replaced.
std::string gguf_with(const std::string& name, const std::string& key, sl::gguf_value value) {
    sl::embedded_vocab v = tiny_bpe();
    const std::string path = write_temp(name, {});
    EXPECT_TRUE(sl::vocab_write_gguf(v, path, "tiny").ok());
    auto g = sl::gguf_file::open(path);
    EXPECT_TRUE(g.ok());
    sl::gguf_writer w;
    for (const auto& kv : g->kvs()) w.set(kv.key, kv.key == key ? value : kv.value);
    if (!g->find(key)) w.set(key, value);
    EXPECT_TRUE(w.write(path).ok());
    return path;
}

TEST(VocabErrors, MalformedTokenArraysNameTheFile) {
    struct row {
        const char* key;
        sl::gguf_value value;
        const char* expect;
    };
    const std::vector<row> rows = {
        {"tokenizer.ggml.tokens", sl::gguf_value::array(std::vector<int32_t>{1, 2, 3}), "not an array of strings"},
        {"tokenizer.ggml.token_type", sl::gguf_value::array(std::vector<int32_t>{1, 1}), "integer array of 263"},
        {"tokenizer.ggml.merges", sl::gguf_value::array(std::vector<int32_t>{1}), "merges' is not an array of strings"},
        {"tokenizer.ggml.model", sl::gguf_value::string("wordpiece"), "'wordpiece' is not supported"},
        {"tokenizer.ggml.bos_token_id", sl::gguf_value::scalar<uint32_t>(9999), "is out of range [0, 262]"},
        {"tokenizer.ggml.pre", sl::gguf_value::scalar<uint32_t>(3), "'tokenizer.ggml.pre' is not a string"},
    };
    int k = 0;
    for (const row& r : rows) {
        const std::string path = gguf_with("bad_vocab_" + std::to_string(k++) + ".gguf", r.key, r.value);
        auto t = sl::tokenizer::from_gguf_file(path);
        ASSERT_FALSE(t.ok()) << r.key;
        EXPECT_EQ(t.message().rfind(path + ": ", 0), 0u) << t.message();
        EXPECT_NE(t.message().find(r.expect), std::string::npos) << t.message();
        EXPECT_EQ(t.message().find('\n'), std::string::npos);
    }
}

std::string write_text(const std::string& name, const std::string& text) {
    return write_temp(name, {text.begin(), text.end()});
}

TEST(VocabErrors, BadTokenizerJson) {
    const std::vector<std::pair<std::string, std::string>> rows = {
        {"{not json", "not valid JSON"},
        {"[1, 2]", "expected a JSON object"},
        {"{\"model\": {\"type\": \"WordPiece\"}}", "only BPE"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [3]}}", "malformed entry in model.merges"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -4}, \"merges\": []}}", "invalid id"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"added_tokens\": [{\"id\": 1}]}",
         "malformed entry in added_tokens"},
    };
    int k = 0;
    for (const auto& [text, expect] : rows) {
        sl::vocab_import_params p;
        p.tokenizer_json = write_text("bad_tok_" + std::to_string(k++) + ".json", text);
        auto v = sl::vocab_from_tokenizer_json(p);
        ASSERT_FALSE(v.ok()) << text;
        EXPECT_EQ(v.message().rfind(p.tokenizer_json + ": ", 0), 0u) << v.message();
        EXPECT_NE(v.message().find(expect), std::string::npos) << v.message();
    }
}

TEST(VocabImport, TokenizerJsonTypesAndSpecials) {
    // Byte-level: "<|x|>" added and special -> control; "<tool>" added, not special -> user-defined.
    const std::string json = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},
        "added_tokens": [{"id": 3, "content": "<|x|>", "special": true}, {"id": 5, "content": "<tool>", "special": false}]})";
    const std::string cfg = R"({"bos_token": "<|x|>", "eos_token": {"content": "<|x|>"}, "add_bos_token": false,
        "chat_template": "{{ bos_token }}"})";
    sl::vocab_import_params p;
    p.tokenizer_json = write_text("ok_tok.json", json);
    p.config_json = write_text("ok_cfg.json", cfg);
    p.pre = "qwen2";
    auto v = sl::vocab_from_tokenizer_json(p);
    ASSERT_TRUE(v.ok()) << v.message();
    ASSERT_EQ(v->tokens.size(), 6u);
    EXPECT_EQ(v->tokens[4], "[PAD4]");
    EXPECT_EQ(v->types, (std::vector<int32_t>{1, 1, 1, 3, 5, 4}));
    EXPECT_EQ(v->bos_id, 3);
    EXPECT_EQ(v->eos_id, 3);
    EXPECT_EQ(v->add_bos, 0);
    EXPECT_EQ(v->merges, std::vector<std::string>{"a b"});
    EXPECT_EQ(v->chat_template, "{{ bos_token }}");
}

// EOS and EOT come from metadata; with --chat the template family's end-of-turn marker joins them.
TEST(GenerationStop, StopIdsFromMetadataAndChatTemplate) {
    sl::embedded_vocab v = tiny_bpe("llama-bpe");
    v.tokens.push_back("<|eot_id|>");
    v.types.push_back(3);
    v.scores.push_back(0.0f);
    const int32_t im_end = id_of(v, "<|im_end|>"), eot = id_of(v, "<|eot_id|>"), hello = id_of(v, "hello");
    v.eos_id = hello;  // any id: what matters is that it is reported
    v.eot_id = eot;
    v.chat_template = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}";
    auto t = sl::tokenizer::from_embedded_vocab(v, "tiny.gguf");
    ASSERT_TRUE(t.ok()) << t.message();
    EXPECT_EQ(sl::generation_stop_ids(*t, false), (std::vector<int32_t>{hello, eot}));
    // --chat adds the ChatML end of turn, which is neither EOS nor EOT here.
    EXPECT_EQ(sl::generation_stop_ids(*t, true), (std::vector<int32_t>{hello, eot, im_end}));
    sl::generate_result r;
    r.stopped = sl::stop_reason::end_token;
    r.stop_token = im_end;
    EXPECT_EQ(sl::stop_reason_text(r, *t, 64), "end token <|im_end|> (" + std::to_string(im_end) + ")");
    r.stopped = sl::stop_reason::length;
    EXPECT_EQ(sl::stop_reason_text(r, *t, 64), "reached 64 positions");
}

// The loop itself: a greedy run of a synthetic model, then the same run with one of its sampled tokens
// declared an end token, which must end the generation right before that token.
TEST(GenerationStop, LoopStopsAtAnEndToken) {
    sl::synthetic_params sp = sl::synthetic_default_params();
    sp.path = write_temp("stop_tiny.gguf", {});
    sp.shape = "tiny";
    ASSERT_TRUE(sl::synthetic_write(sp).ok());
    auto m = sl::model_load(sp.path);
    ASSERT_TRUE(m.ok()) << m.message();
    auto ctx = sl::context::create(*m, sl::context_default_params());
    ASSERT_TRUE(ctx.ok()) << ctx.message();
    sl::generate_params gp = sl::generate_default_params();
    gp.steps = 40;
    gp.sampling.temperature = 0.0f;
    gp.stop_at_bos = false;
    const std::vector<int32_t> prompt = {1, 300, 301};
    auto run = [&]() {
        auto r = sl::generate(*ctx, prompt, gp, [](const sl::generate_step&) { return true; });
        EXPECT_TRUE(r.ok()) << r.message();
        return r.ok() ? *r : sl::generate_result{};
    };
    const sl::generate_result full = run();
    ASSERT_EQ(full.tokens.size(), 41u);  // 40 positions and the token after the last
    EXPECT_EQ(full.stopped, sl::stop_reason::length);
    // The first sampled token (after the first two) that did not occur before it.
    size_t at = 0;
    for (size_t i = prompt.size() + 2; i < full.tokens.size() && at == 0; ++i)
        if (std::find(full.tokens.begin(), full.tokens.begin() + static_cast<std::ptrdiff_t>(i), full.tokens[i]) ==
            full.tokens.begin() + static_cast<std::ptrdiff_t>(i))
            at = i;
    ASSERT_GT(at, 0u) << "greedy run repeats itself from the start; pick another prompt";
    gp.stop_ids = {full.tokens[at]};
    const sl::generate_result cut = run();
    EXPECT_EQ(cut.stopped, sl::stop_reason::end_token);
    EXPECT_EQ(cut.stop_token, full.tokens[at]);
    EXPECT_EQ(cut.tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + static_cast<std::ptrdiff_t>(at)));
}

}  // namespace

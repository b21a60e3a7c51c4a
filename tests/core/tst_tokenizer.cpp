// Tokenizer on the real vocabularies: known Llama-2 splits, round trips, GGUF/llama2.c parity, corrupt files, speed.
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "sparselens/core/model.h"
#include "sparselens/core/tokenizer.h"
#include "test_support.h"
#include "tokenizer_reference.h"

namespace {

using ids = std::vector<int32_t>;

const std::vector<std::string> k_eval_texts = {"tinystories_sample.txt", "stories260K_samples.txt",
                                               "wikitext2_test.tokens.txt", "wikitext2_valid.tokens.txt",
                                               "brown_corpus_plain.txt"};

std::string read_text(const std::string& rel) {
    const auto b = sl::test::read_bytes(sl::test::shared_path(rel));
    return {b.begin(), b.end()};
}

// Loaded once per process: the 32k vocabulary takes a few milliseconds, the tests use it many times.
const sl::tokenizer& tok512() {
    static const sl::tokenizer t = [] {
        auto r = sl::tokenizer::from_llama2c_file(sl::test::shared_path("models/tok512.bin"), 512);
        if (!r.ok()) throw std::runtime_error(r.message());
        return std::move(r).value();
    }();
    return t;
}

const sl::tokenizer& tok32k() {
    static const sl::tokenizer t = [] {
        auto r = sl::tokenizer::from_llama2c_file(sl::test::shared_path("models/tokenizer_llama2_32k.bin"), 32000);
        if (!r.ok()) throw std::runtime_error(r.message());
        return std::move(r).value();
    }();
    return t;
}

// The raw pieces of a llama2.c tokenizer file, walked without sl::tokenizer (trusted fixture).
std::vector<std::string> raw_pieces(const std::string& rel) {
    const auto b = sl::test::read_bytes(sl::test::shared_path(rel));
    std::vector<std::string> out;
    for (size_t off = 4; off + 8 <= b.size();) {
        int32_t len;
        std::memcpy(&len, b.data() + off + 4, 4);
        off += 8;
        out.emplace_back(reinterpret_cast<const char*>(b.data() + off), static_cast<size_t>(len));
        off += static_cast<size_t>(len);
    }
    return out;
}

std::vector<std::string> as_pieces(const std::vector<std::string>& raw, const ids& toks) {
    std::vector<std::string> out;
    for (int32_t t : toks) out.push_back(t >= 0 && static_cast<size_t>(t) < raw.size() ? raw[static_cast<size_t>(t)] : "?");
    return out;
}

// Parses the vocabulary out of a ggml reader dump (`  [410] "▁"` string rows with backslash
// escapes, `  [259] -0 (0x80000000)` float rows whose bit pattern we use, `  [3] 6` int rows).
sl::embedded_vocab vocab_from_dump(const std::string& rel) {
    std::ifstream f(sl::test::shared_path(rel));
    sl::embedded_vocab v;
    std::string line, section;
    while (std::getline(f, line)) {
        if (line.rfind("tokenizer.ggml.", 0) == 0) {
            section = line.substr(0, line.find(':'));
            const auto eq = line.find("= ");
            for (auto [key, dst] : {std::pair{"tokenizer.ggml.bos_token_id", &v.bos_id},
                                    std::pair{"tokenizer.ggml.eos_token_id", &v.eos_id},
                                    std::pair{"tokenizer.ggml.unknown_token_id", &v.unk_id}})
                if (section == key && eq != std::string::npos) *dst = std::stoi(line.substr(eq + 2));
            continue;
        }
        if (line.rfind("  [", 0) != 0) {
            section.clear();
            continue;
        }
        const std::string rest = line.substr(line.find("] ") + 2);
        if (section == "tokenizer.ggml.tokens") {
            EXPECT_TRUE(rest.size() >= 2 && rest.front() == '"' && rest.back() == '"') << line;
            std::string s;
            for (size_t i = 1; i + 1 < rest.size(); ++i) {
                if (rest[i] == '\\' && i + 2 < rest.size()) {
                    const char e = rest[++i];
                    s.push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e);
                } else {
                    s.push_back(rest[i]);
                }
            }
            v.tokens.push_back(s);
        } else if (section == "tokenizer.ggml.scores") {
            const auto open = rest.find("(0x");
            const auto bits = static_cast<uint32_t>(std::stoul(rest.substr(open + 3), nullptr, 16));
            float s;
            std::memcpy(&s, &bits, 4);
            v.scores.push_back(s);
        } else if (section == "tokenizer.ggml.token_type") {
            v.types.push_back(std::stoi(rest));
        }
    }
    return v;
}

TEST(tokenizer, loads_both_llama2c_files) {
    const auto& t = tok512();
    EXPECT_EQ(t.vocab_size(), 512);
    EXPECT_EQ(t.max_token_length(), 7);
    EXPECT_EQ(t.bos_id(), 1);
    EXPECT_EQ(t.eos_id(), 2);
    EXPECT_EQ(t.piece(1), "\n<s>\n");
    EXPECT_EQ(t.score(260), -1.0f);
    EXPECT_EQ(t.dummy_prefix_id(), 410);
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        ASSERT_EQ(t.piece(b + 3), name);
        ASSERT_EQ(t.byte_token(static_cast<uint8_t>(b)), b + 3);
    }
    auto eof = sl::tokenizer::from_llama2c_file(sl::test::shared_path("models/tok512.bin"));
    ASSERT_TRUE(eof.ok()) << eof.message();
    EXPECT_EQ(eof->vocab_size(), 512);

    const auto& big = tok32k();
    EXPECT_EQ(big.vocab_size(), 32000);
    EXPECT_EQ(big.max_token_length(), 27);
    auto big_eof = sl::tokenizer::from_llama2c_file(sl::test::shared_path("models/tokenizer_llama2_32k.bin"));
    ASSERT_TRUE(big_eof.ok()) << big_eof.message();
    EXPECT_EQ(big_eof->vocab_size(), 32000);

    auto too_many = sl::tokenizer::from_llama2c_file(sl::test::shared_path("models/tok512.bin"), 513);
    ASSERT_FALSE(too_many.ok());
    EXPECT_EQ(too_many.message().rfind(sl::test::shared_path("models/tok512.bin") + ": ", 0), 0u) << too_many.message();
}

// Encodings published for the Llama-2 tokenizer (SentencePiece / HF), checked against the pieces
// in the file so that a wrong id table and a wrong encoder cannot agree by accident.
TEST(tokenizer, known_llama2_encodings) {
    const auto& t = tok32k();
    const auto raw = raw_pieces("models/tokenizer_llama2_32k.bin");
    ASSERT_EQ(raw.size(), 32000u);
    struct row {
        std::string text;
        ids expected;
        std::vector<std::string> pieces;
    };
    const std::vector<row> rows = {
        {"Hello world", {15043, 3186}, {" Hello", " world"}},
        {"Hello", {15043}, {" Hello"}},
        {"\n", {29871, 13}, {" ", "<0x0A>"}},
        {"Hello, world!", {15043, 29892, 3186, 29991}, {" Hello", ",", " world", "!"}},
        {"The quick brown fox jumps over the lazy dog.",
         {450, 4996, 17354, 1701, 29916, 432, 17204, 975, 278, 17366, 11203, 29889},
         {" The", " quick", " brown", " fo", "x", " j", "umps", " over", " the", " lazy", " dog", "."}},
        // No emoji piece in the vocabulary: byte fallback, id = byte + 3.
        {"\U0001F600", {29871, 243, 162, 155, 131}, {" ", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>"}},
    };
    for (const auto& r : rows) {
        EXPECT_EQ(as_pieces(raw, r.expected), r.pieces) << r.text;  // the table itself is right
        EXPECT_EQ(t.encode(r.text, false, false), r.expected) << r.text;
        ids with_bos = r.expected;
        with_bos.insert(with_bos.begin(), 1);
        with_bos.push_back(2);
        EXPECT_EQ(t.encode(r.text, true, true), with_bos) << r.text;
    }
    EXPECT_EQ(t.find_piece("\U0001F600"), -1);

    // CJK: each character is a piece of its own and no pair of them is, so the split is forced.
    const std::vector<std::string> cjk = {"\u4f60", "\u597d", "\u4e16", "\u754c"};
    std::string text;
    ids expected = {t.find_piece(" ")};
    for (const auto& c : cjk) {
        text += c;
        expected.push_back(t.find_piece(c));
        ASSERT_GE(expected.back(), 0) << c;
        ASSERT_EQ(t.find_piece(" " + c), -1) << c;
    }
    for (size_t i = 0; i + 1 < cjk.size(); ++i) ASSERT_EQ(t.find_piece(cjk[i] + cjk[i + 1]), -1);
    EXPECT_EQ(t.encode(text, false, false), expected);
}

// Repeated letters give equal-score merges at several positions; run.c takes the leftmost.
// tok512 "sooo": [" ", s, o, o, o] -> " s" (score -3) first; then "oo" (-88) beats " so" (-125) and
// is possible at two places: leftmost gives [" s", "oo", "o"], rightmost would end in [" so", "oo"].
TEST(tokenizer, equal_score_merges_take_the_leftmost_pair) {
    const auto& t = tok512();
    ASSERT_GT(t.score(t.find_piece("oo")), t.score(t.find_piece(" so")));
    EXPECT_EQ(t.encode("sooo", false, false), (ids{t.find_piece(" s"), t.find_piece("oo"), t.find_piece("o")}));
    const auto& big = tok32k();
    ASSERT_EQ(big.find_piece("eee"), -1);
    ASSERT_EQ(big.find_piece(" ee"), -1);
    EXPECT_EQ(big.encode("eeee", false, false), (ids{big.find_piece(" e"), big.find_piece("ee"), big.find_piece("e")}));
}

TEST(tokenizer, round_trips) {
    std::vector<std::string> texts = {
        "",
        "a",
        " ",
        "   leading and trailing spaces   ",
        "Once upon a time, there was a little girl named Lily.",
        "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber \u0161\u010d\u017e",
        "\U0001F600\U0001F680 emoji \U0001F1E9\U0001F1EA flags and ZWJ \U0001F468\u200D\U0001F469",
        "\u4f60\u597d\u4e16\u754c\uff0c\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
        "control \x01\x02\x1b[0m \t tab \r\n crlf \x7f del",
        std::string("embedded\0nul", 12),
        "invalid \xff\xfe \x80 stray \xc3 cut \xc0\xaf overlong \xc3\xa9\xa9\xa9\xa9\xa9 long run \xf0\x9f\x98",
        "<0x0A> <s> </s> <unk> literal special spellings",
        "\n\n\n",
    };
    texts.push_back(read_text("text/stories260K_samples.txt"));
    std::mt19937 rng(42);
    for (int i = 0; i < 50; ++i) {
        std::string s(static_cast<size_t>(rng() % 200), '\0');
        for (auto& c : s) c = static_cast<char>(rng());
        texts.push_back(s);
    }
    for (const sl::tokenizer* t : {&tok512(), &tok32k()}) {
        for (size_t i = 0; i < texts.size(); ++i) {
            const auto& s = texts[i];
            for (bool bos : {false, true}) {
                const ids toks = t->encode(s, bos, bos);
                ASSERT_EQ(t->decode_all(toks), s) << "vocab " << t->vocab_size() << " text #" << i;
                // run.c-style streaming: decode(prev, tok) piece by piece gives the same bytes.
                if (bos && !s.empty()) {
                    std::string streamed;
                    for (size_t k = 1; k + 1 < toks.size(); ++k) streamed += t->decode(toks[k - 1], toks[k]);
                    ASSERT_EQ(streamed, s) << "vocab " << t->vocab_size() << " text #" << i;
                }
            }
        }
    }
}

TEST(tokenizer, decode_and_printable_on_tok512) {
    const auto& t = tok512();
    const int32_t once = t.find_piece(" Once");
    ASSERT_EQ(once, 403);
    EXPECT_EQ(t.decode(1, once), "Once");
    EXPECT_EQ(t.decode(2, once), " Once");
    EXPECT_EQ(t.decode(0, 13), "\n");  // <0x0A>
    EXPECT_TRUE(sl::tokenizer::is_printable_piece(t.decode(0, 13)));
    EXPECT_FALSE(sl::tokenizer::is_printable_piece(t.decode(0, 3 + 0xE2)));  // lone UTF-8 lead byte
    EXPECT_TRUE(sl::tokenizer::is_printable_piece(t.decode(0, once)));
}

TEST(tokenizer, heap_merge_equals_naive_loop) {
    std::vector<std::string> words;
    {
        std::istringstream in(read_text("text/tinystories_sample.txt"));
        for (std::string w; in >> w;) words.push_back(w + " ");
    }
    for (const char* extra : {"\u4f60\u597d", "\U0001F600", "  ", "\n", "\t", "caf\u00e9", "\xc3", "\xa9", "ing", "er",
                              "sooo", "aaaa", "Zzzz", "Hmmm", "eeee", "ssss"})
        words.emplace_back(extra);
    const auto story_lines = [] {
        std::vector<std::string> lines;
        std::istringstream in(read_text("text/tinystories_sample.txt"));
        for (std::string l; std::getline(in, l);) lines.push_back(l);
        return lines;
    }();
    for (const sl::tokenizer* t : {&tok512(), &tok32k()}) {
        const sl::test::naive_tokenizer naive(*t);
        std::mt19937 rng(static_cast<uint32_t>(t->vocab_size()));
        for (int iter = 0; iter < 150; ++iter) {
            const std::string s = sl::test::random_text(rng, words, static_cast<size_t>(iter % 80));
            ASSERT_EQ(t->encode(s, true, false), naive.encode(s, true, false)) << "vocab " << t->vocab_size() << " #" << iter;
        }
        for (const auto& l : story_lines) ASSERT_EQ(t->encode(l, false, false), naive.encode(l, false, false)) << l;
        // One long stretch with no barrier token in it (no newline): a single big heap.
        std::string longline;
        for (int k = 0; k < 120; ++k) longline += words[rng() % (words.size() - 16)];
        ASSERT_EQ(t->encode(longline, false, true), naive.encode(longline, false, true));
    }
}

TEST(tokenizer, gguf_vocabulary_matches_tok512) {
    const sl::embedded_vocab v = vocab_from_dump("models/gguf/stories260K-F32.gguf.txt");
    ASSERT_EQ(v.tokens.size(), 512u);
    ASSERT_EQ(v.scores.size(), 512u);
    ASSERT_EQ(v.types.size(), 512u);
    EXPECT_EQ(v.tokens[410], "\u2581");
    auto r = sl::tokenizer::from_embedded_vocab(v, "stories260K-F32.gguf");
    ASSERT_TRUE(r.ok()) << r.message();
    const auto& g = r.value();
    const auto& b = tok512();
    EXPECT_TRUE(g.uses_space_marker());
    EXPECT_EQ(g.bos_id(), 1);
    EXPECT_EQ(g.eos_id(), 2);
    EXPECT_EQ(g.unk_id(), 0);
    EXPECT_EQ(g.dummy_prefix_id(), 410);
    EXPECT_EQ(g.piece(1), "<s>");
    for (int32_t id = 0; id < 512; ++id) {
        EXPECT_EQ(g.source_piece(id), v.tokens[static_cast<size_t>(id)]) << id;
        EXPECT_EQ(std::signbit(g.score(id)), std::signbit(b.score(id))) << id;
        EXPECT_EQ(g.score(id), b.score(id)) << id;
        EXPECT_EQ(g.type(id), b.type(id)) << id;
        if (id != 1 && id != 2) {
            EXPECT_EQ(g.piece(id), b.piece(id)) << id;
        }
    }
    for (const auto& name : k_eval_texts) {
        const std::string text = read_text("text/" + name);
        ASSERT_FALSE(text.empty()) << name;
        const ids from_bin = b.encode(text, true, false);
        ASSERT_EQ(g.encode(text, true, false), from_bin) << name;
        EXPECT_EQ(g.decode_all(from_bin), text) << name;
        std::printf("  %-28s %8zu bytes -> %7zu tokens (tok512 == GGUF vocabulary)\n", name.c_str(), text.size(),
                    from_bin.size());
    }
}

// The same vocabulary read by the project's GGUF model loader, from every quantization of the file.
TEST(tokenizer, gguf_model_loader_vocabulary) {
    const sl::embedded_vocab dump = vocab_from_dump("models/gguf/stories260K-F32.gguf.txt");
    const std::string text = read_text("text/tinystories_sample.txt");
    const ids expected = tok512().encode(text, true, false);
    for (const char* file : {"stories260K-F32.gguf", "stories260K-F16.gguf", "stories260K-Q8_0.gguf",
                             "stories260K-Q4_0.gguf"}) {
        const std::string path = sl::test::shared_path(std::string("models/gguf/") + file);
        auto m = sl::model_load(path);
        ASSERT_TRUE(m.ok()) << m.message();
        const sl::embedded_vocab& v = m->vocab;
        EXPECT_EQ(v.tokens, dump.tokens) << file;
        EXPECT_EQ(v.types, dump.types) << file;
        ASSERT_EQ(v.scores.size(), dump.scores.size()) << file;
        for (size_t i = 0; i < v.scores.size(); ++i)
            ASSERT_EQ(std::bit_cast<uint32_t>(v.scores[i]), std::bit_cast<uint32_t>(dump.scores[i])) << file << " " << i;
        auto t = sl::tokenizer::from_embedded_vocab(v, path);
        ASSERT_TRUE(t.ok()) << t.message();
        EXPECT_EQ(t->encode(text, true, false), expected) << file;
    }
}

TEST(tokenizer, vocabulary_without_byte_tokens_falls_back_to_unk) {
    sl::embedded_vocab v = vocab_from_dump("models/gguf/stories260K-F32.gguf.txt");
    for (int32_t id = 3; id < 259; ++id) {
        v.tokens[static_cast<size_t>(id)] = "<unused" + std::to_string(id) + ">";
        v.types[static_cast<size_t>(id)] = 5;
    }
    auto r = sl::tokenizer::from_embedded_vocab(v, "nobytes.gguf");
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r->byte_token('\n'), -1);
    // " Lily" (317), one <unk> each for the emoji and the newline, then "Tim" split on its own
    // (nothing merges across an <unk>).
    const std::string text = "Lily\U0001F600\nTim";
    const ids toks = r->encode(text, false, false);
    ASSERT_GE(toks.size(), 4u);
    EXPECT_EQ(ids(toks.begin(), toks.begin() + 3), (ids{317, 0, 0}));
    EXPECT_EQ(r->decode_all(ids(toks.begin() + 3, toks.end())), "Tim");
    EXPECT_EQ(toks, sl::test::naive_encode(r.value(), text, false, false));
    EXPECT_EQ(r->encode("Once upon", true, false), tok512().encode("Once upon", true, false));
}

TEST(tokenizer, corrupt_files_never_crash) {
    const auto good = sl::test::read_bytes(sl::test::shared_path("models/tok512.bin"));
    ASSERT_EQ(good.size(), 6227u);
    const std::string sample = "Once upon a time \xe2\x80\x9cLily\xe2\x80\x9d \xff\n";
    size_t loaded = 0;
    const auto exercise = [&](const std::vector<uint8_t>& bytes, int32_t vocab_size) {
        auto r = sl::tokenizer::from_llama2c_bytes(bytes, "bad.bin", vocab_size);
        if (!r.ok()) {
            EXPECT_EQ(r.message().rfind("bad.bin: ", 0), 0u) << r.message();
            EXPECT_EQ(r.message().find('\n'), std::string::npos) << r.message();
            return false;
        }
        ++loaded;
        const ids toks = r->encode(sample, true, true);
        for (int32_t id : toks) EXPECT_TRUE(r->valid_id(id));
        (void)r->decode_all(toks);
        for (int32_t id : toks) (void)r->decode(1, id);
        return true;
    };
    std::vector<size_t> cuts;
    for (size_t n = 0; n <= 200; ++n) cuts.push_back(n);
    for (size_t n = 201; n < good.size(); n += 37) cuts.push_back(n);
    for (size_t n : cuts) {
        const std::vector<uint8_t> part(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
        EXPECT_FALSE(exercise(part, 512)) << "cut at " << n;
        exercise(part, -1);  // may load fewer tokens when cut at a record boundary
    }
    // Lying length fields at a spread of tokens.
    std::vector<size_t> len_offsets;
    for (size_t off = 4, i = 0; off + 8 <= good.size(); ++i) {
        int32_t len;
        std::memcpy(&len, good.data() + off + 4, 4);
        if (i % 23 == 0 || i < 5 || i > 505) len_offsets.push_back(off + 4);
        off += 8 + static_cast<size_t>(len);
    }
    for (size_t at : len_offsets) {
        for (int32_t lie : {-1, 0, 1, 3, 7, 8, 255, 1 << 20, std::numeric_limits<int32_t>::max(),
                            std::numeric_limits<int32_t>::min()}) {
            auto bad = good;
            std::memcpy(bad.data() + at, &lie, 4);
            exercise(bad, 512);
            exercise(bad, -1);
        }
    }
    // Random byte damage, including NaN/inf scores and lying max_token_length.
    std::mt19937 rng(5);
    for (int iter = 0; iter < 300; ++iter) {
        auto bad = good;
        for (int k = 0; k < 1 + iter % 8; ++k) bad[rng() % bad.size()] = static_cast<uint8_t>(rng());
        exercise(bad, 512);
    }
    EXPECT_GT(loaded, 0u);  // some damage (e.g. to scores) leaves a loadable file

    // The file path appears in messages from the file loader.
    const std::vector<uint8_t> truncated(good.begin(), good.begin() + 100);
    const std::string path = sl::test::write_temp("truncated_tok.bin", truncated);
    auto r = sl::tokenizer::from_llama2c_file(path, 512);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.message().rfind(path + ": ", 0), 0u) << r.message();
    std::filesystem::remove(path);
}

TEST(tokenizer, encode_speed) {
    const std::string text = read_text("text/stories260K_samples.txt");
    ASSERT_GT(text.size(), 300000u);
    for (const sl::tokenizer* t : {&tok512(), &tok32k()}) {
        const auto t0 = std::chrono::steady_clock::now();
        const ids toks = t->encode(text, true, false);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("  encode %zu bytes with %d-token vocabulary: %zu tokens in %.1f ms (%.1f MB/s)\n", text.size(),
                    t->vocab_size(), toks.size(), s * 1e3, static_cast<double>(text.size()) / s / 1e6);
        // Guards against a quadratic merge loop (minutes), not a speed target: loose enough for ASan builds
        // on a loaded 2-core CI machine (speed is measured by benchmarks).
        EXPECT_LT(s, 10.0);
        EXPECT_GT(toks.size(), text.size() / 10);  // sanity: a real split, not a handful of tokens
    }
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

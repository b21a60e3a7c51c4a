// Tokenizer on hand-made vocabularies: merge order, ties, byte fallback, decoding and loader validation.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "sparselens/core/tokenizer.h"
#include "tokenizer_reference.h"

namespace {

using ids = std::vector<int32_t>;
const float k_nan = std::numeric_limits<float>::quiet_NaN();
const float k_inf = std::numeric_limits<float>::infinity();

// GGUF-style vocabulary (U+2581 for spaces, explicit types). Scores are chosen so that the expected
// encodings below can be worked out by hand.
sl::embedded_vocab make_vocab_a() {
    sl::embedded_vocab v;
    const std::vector<std::tuple<std::string, float, int32_t>> rows = {
        {"<unk>", 0, 2},  {"<s>", 0, 3},       {"</s>", 0, 3},    {"\u2581", 0, 1},    // 0..3
        {"a", 0, 1},      {"b", 0, 1},         {"c", 0, 1},       {"ab", -1, 1},       // 4..7
        {"bc", -1, 1},    {"\u2581a", -2, 1},  {"abc", -3, 1},    {"ca", -0.5f, 1},    // 8..11
        {"\u00e9", 0, 1}, {"bb", -1e10f, 1},   {"cc", k_nan, 1},  {"<0x0A>", 0, 6},    // 12..15
        {"<0xC2>", 0, 6}, {"<0xC3>", 0, 6},    {"<0xA9>", 0, 6},  {"ab", -0.1f, 1},    // 16..19 (19: duplicate)
    };
    for (const auto& [p, s, t] : rows) {
        v.tokens.push_back(p);
        v.scores.push_back(s);
        v.types.push_back(t);
    }
    return v;
}

sl::tokenizer load_a() {
    auto r = sl::tokenizer::from_embedded_vocab(make_vocab_a(), "a.gguf");
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.message());
    return std::move(r).value();
}

void expect_one_line_error(const std::string& msg, const std::string& prefix) {
    EXPECT_EQ(msg.rfind(prefix + ": ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(tokenizer_unit, merges_by_score_then_leftmost) {
    const auto t = load_a();
    EXPECT_EQ(t.encode("abc", false, false), (ids{3, 10}));  // ab/bc tie -> ab (left) -> abc
    EXPECT_EQ(t.encode("bca", false, false), (ids{3, 5, 11}));  // ca (-0.5) beats bc (-1)
    EXPECT_EQ(t.encode("cab", false, false), (ids{3, 11, 5}));  // ca beats ab; "cab" is no piece
    EXPECT_EQ(t.encode("ab", false, false), (ids{3, 7}));  // ab (-1) beats " a" (-2); first of the duplicate "ab"
    EXPECT_EQ(t.encode("a", false, false), (ids{9}));  // dummy prefix merges with the first word
    EXPECT_EQ(t.encode("a a", false, false), (ids{9, 9}));
}

TEST(tokenizer_unit, scores_at_run_c_floor_and_nan_never_merge) {
    const auto t = load_a();
    EXPECT_EQ(t.encode("bb", false, false), (ids{3, 5, 5}));  // score -1e10 is not > -1e10
    EXPECT_EQ(t.encode("cc", false, false), (ids{3, 6, 6}));  // NaN counts as -inf
    EXPECT_EQ(t.score(14), -k_inf);
}

TEST(tokenizer_unit, byte_fallback_and_unknown) {
    const auto t = load_a();
    EXPECT_EQ(t.encode("\u00a9\n", false, false), (ids{3, 16, 18, 15}));  // (c) = C2 A9, newline = 0A
    // run.c groups a lead byte with up to three following continuation bytes: C3 A9 A9 is one
    // unknown group (all bytes), while A9 before C3 A9 stands alone and "é" is then found.
    EXPECT_EQ(t.encode("\u00e9\xA9", false, false), (ids{3, 17, 18, 18}));
    EXPECT_EQ(t.encode("\xA9\u00e9", false, false), (ids{3, 18, 12}));
    // 'd' has neither a piece nor a byte token: one <unk> for the character.
    EXPECT_EQ(t.encode("d\u00e9", false, false), (ids{3, 0, 12}));
    EXPECT_EQ(t.byte_token(0x0A), 15);
    EXPECT_EQ(t.byte_token('a'), -1);
    EXPECT_EQ(t.token_byte(18), 0xA9);
    EXPECT_EQ(t.token_byte(4), -1);
}

TEST(tokenizer_unit, bos_eos_and_empty_text) {
    const auto t = load_a();
    EXPECT_EQ(t.encode("a", true, true), (ids{1, 9, 2}));
    EXPECT_EQ(t.encode("", true, true), (ids{1, 2}));
    EXPECT_EQ(t.encode("", false, false), ids{});
}

TEST(tokenizer_unit, decode_follows_run_c) {
    const auto t = load_a();
    EXPECT_EQ(t.decode(1, 9), "a");  // leading space dropped after BOS
    EXPECT_EQ(t.decode(4, 9), " a");
    EXPECT_EQ(t.decode(1, 3), "");
    EXPECT_EQ(t.decode(0, 17), "\xC3");
    EXPECT_EQ(t.decode(0, 15), "\n");
    EXPECT_EQ(t.decode(0, 99), "");
    EXPECT_EQ(t.decode(0, -5), "");
    EXPECT_EQ(t.decode_all(ids{1, 9, 7, 16, 18, 15, 2}), "aab\u00a9\n");
    EXPECT_EQ(t.piece(9), " a");
    EXPECT_EQ(t.source_piece(9), "\u2581a");
    EXPECT_EQ(t.type(15), sl::token_type::byte);
    EXPECT_EQ(t.type(1), sl::token_type::control);
    EXPECT_EQ(t.dummy_prefix_id(), 3);
    EXPECT_EQ(t.max_token_length(), 6);  // "<0x0A>"
    EXPECT_EQ(t.find_piece("<s>"), -1);  // control pieces are not matchable
    EXPECT_EQ(t.find_piece("ab"), 7);
}

TEST(tokenizer_unit, printable_piece_mirrors_safe_printf) {
    using sl::tokenizer;
    EXPECT_FALSE(tokenizer::is_printable_piece(""));
    EXPECT_FALSE(tokenizer::is_printable_piece("\xC3"));
    EXPECT_FALSE(tokenizer::is_printable_piece("\x01"));
    EXPECT_FALSE(tokenizer::is_printable_piece("\x7F"));
    EXPECT_TRUE(tokenizer::is_printable_piece("\n"));
    EXPECT_TRUE(tokenizer::is_printable_piece("\t"));
    EXPECT_TRUE(tokenizer::is_printable_piece("a"));
    EXPECT_TRUE(tokenizer::is_printable_piece(" "));
    EXPECT_TRUE(tokenizer::is_printable_piece("\xC3\xA9"));
}

TEST(tokenizer_unit, heap_merge_equals_naive_loop) {
    const auto t = load_a();
    std::mt19937 rng(1234);
    const std::vector<std::string> frags = {"a", "b", "c", "ab", "bc", " ", "\u00e9", "\u00a9", "\n", "bb", "cc", "d"};
    for (int iter = 0; iter < 400; ++iter) {
        const std::string s = sl::test::random_text(rng, frags, static_cast<size_t>(iter % 60));
        ASSERT_EQ(t.encode(s, iter % 2 == 0, iter % 3 == 0), sl::test::naive_encode(t, s, iter % 2 == 0, iter % 3 == 0))
            << "text #" << iter;
    }
}

TEST(tokenizer_unit, round_trip_when_every_character_is_representable) {
    const auto t = load_a();
    std::mt19937 rng(99);
    const std::vector<std::string> frags = {"a", "b", "c", " ", "\u00e9", "\u00a9", "\n", "\u00e9\xA9"};
    for (int iter = 0; iter < 200; ++iter) {
        std::string s;
        for (int k = 0; k < iter % 40; ++k) s += frags[rng() % frags.size()];
        ASSERT_EQ(t.decode_all(t.encode(s, true, true)), s) << "text #" << iter;
    }
}

TEST(tokenizer_unit, vocabulary_without_dummy_prefix_or_specials) {
    sl::embedded_vocab v;
    v.tokens = {"a", "b", "ab", "\u2581b"};
    v.scores = {0, 0, -1, -0.5f};
    v.bos_id = v.eos_id = v.unk_id = -1;  // GGUF's "none"
    auto r = sl::tokenizer::from_embedded_vocab(v, "b.gguf");
    ASSERT_TRUE(r.ok()) << r.message();
    const auto& t = r.value();
    EXPECT_EQ(t.dummy_prefix_id(), -1);
    EXPECT_EQ(t.encode("ab", true, true), (ids{2}));  // no BOS/EOS, no prefix
    EXPECT_EQ(t.encode("axb", false, false), (ids{2}));  // 'x' dropped (no byte token, no <unk>), then a+b merge
    EXPECT_EQ(t.decode_all(ids{3, 2}), " bab");  // nothing to strip without a dummy prefix
}

TEST(tokenizer_unit, inferred_types_and_empty_pieces) {
    // No token types: specials and byte pieces are inferred. An empty <unk> piece would let
    // "" + p == p merge; the encoder must still agree with the naive loop.
    sl::embedded_vocab v;
    v.tokens = {"", "<s>", "</s>", "\u2581", "x", "y", "xy", "\u2581x", "<0x7A>", "yz"};
    v.scores = {0, 0, 0, 0, 0, 0, -1, -2, 0, -0.5f};
    auto r = sl::tokenizer::from_embedded_vocab(v, "c.gguf");
    ASSERT_TRUE(r.ok()) << r.message();
    const auto& t = r.value();
    EXPECT_EQ(t.type(0), sl::token_type::unknown);
    EXPECT_EQ(t.type(2), sl::token_type::control);
    EXPECT_EQ(t.type(8), sl::token_type::byte);
    EXPECT_EQ(t.encode("xyz", false, false), (ids{3, 6, 8}));  // z is the byte token; "yz" is not reachable
    std::mt19937 rng(7);
    const std::vector<std::string> frags = {"x", "y", "z", " ", "q"};
    for (int iter = 0; iter < 300; ++iter) {
        const std::string s = sl::test::random_text(rng, frags, static_cast<size_t>(iter % 30));
        ASSERT_EQ(t.encode(s, false, false), sl::test::naive_encode(t, s, false, false)) << "text #" << iter;
    }
}

TEST(tokenizer_unit, default_constructed_is_empty_and_safe) {
    const sl::tokenizer t;
    EXPECT_EQ(t.vocab_size(), 0);
    EXPECT_EQ(t.encode("abc", true, true), ids{});
    EXPECT_EQ(t.decode(-1, 0), "");
    EXPECT_EQ(t.decode_all(ids{0, 1, 2}), "");
    EXPECT_EQ(t.byte_token('a'), -1);
    EXPECT_EQ(t.bos_id(), -1);
}

TEST(tokenizer_unit, embedded_vocab_validation) {
    auto v = make_vocab_a();
    v.scores.pop_back();
    auto r = sl::tokenizer::from_embedded_vocab(v, "m.gguf");
    ASSERT_FALSE(r.ok());
    expect_one_line_error(r.message(), "m.gguf");

    v = make_vocab_a();
    v.types.resize(3);
    r = sl::tokenizer::from_embedded_vocab(v, "m.gguf");
    ASSERT_FALSE(r.ok());
    expect_one_line_error(r.message(), "m.gguf");

    for (int32_t bad : {20, 600, -2, std::numeric_limits<int32_t>::min()}) {
        v = make_vocab_a();
        v.bos_id = bad;
        r = sl::tokenizer::from_embedded_vocab(v, "m.gguf");
        ASSERT_FALSE(r.ok()) << bad;
        expect_one_line_error(r.message(), "m.gguf");
        v = make_vocab_a();
        v.unk_id = bad;
        ASSERT_FALSE(sl::tokenizer::from_embedded_vocab(v, "m.gguf").ok()) << bad;
    }

    r = sl::tokenizer::from_embedded_vocab(sl::embedded_vocab{}, "m.gguf");
    ASSERT_FALSE(r.ok());
    expect_one_line_error(r.message(), "m.gguf");

    v = make_vocab_a();
    v.types[5] = 77;  // unknown type values are treated as normal pieces
    r = sl::tokenizer::from_embedded_vocab(v, "m.gguf");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->encode("abc", false, false), (ids{3, 10}));
}

// llama2.c tokenizer.bin bytes: int32 max_token_length, then {f32 score, i32 len, bytes}.
struct bin_writer {
    std::vector<uint8_t> bytes;
    void i32(int32_t v) { append(&v, 4); }
    void f32(float v) { append(&v, 4); }
    void str(const std::string& s) { append(s.data(), s.size()); }
    void token(float score, const std::string& s) { f32(score), i32(static_cast<int32_t>(s.size())), str(s); }
    void append(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        bytes.insert(bytes.end(), b, b + n);
    }
};

std::vector<uint8_t> small_bin(float ab_score = -1) {
    bin_writer w;
    w.i32(7);
    for (const auto& [s, p] : std::vector<std::pair<float, std::string>>{
             {0, "<unk>"}, {0, "\n<s>\n"}, {0, "\n</s>\n"}, {0, " "}, {0, "a"}, {0, "b"}, {ab_score, "ab"}, {-2, " ab"}})
        w.token(s, p);
    return w.bytes;
}

TEST(tokenizer_unit, llama2c_bytes_load) {
    const auto bytes = small_bin();
    auto r = sl::tokenizer::from_llama2c_bytes(bytes, "t.bin", -1);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r->vocab_size(), 8);
    EXPECT_EQ(r->max_token_length(), 6);  // longest actual piece ("\n</s>\n"); the header's 7 is only a bound
    EXPECT_EQ(r->bos_id(), 1);
    EXPECT_EQ(r->encode("ab", true, false), (ids{1, 7}));  // [" ", a, b] -> [" ", ab] -> [" ab"]
    EXPECT_EQ(r->decode(1, 7), "ab");
    EXPECT_FALSE(r->uses_space_marker());
    EXPECT_EQ(r->source_piece(7), " ab");

    // An explicit vocab_size smaller than the file reads only that many records (as llama2.c does).
    r = sl::tokenizer::from_llama2c_bytes(bytes, "t.bin", 6);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r->vocab_size(), 6);
    EXPECT_EQ(r->encode("ab", false, false), (ids{3, 4, 5}));

    // NaN scores load, and the piece is never merged into.
    r = sl::tokenizer::from_llama2c_bytes(small_bin(k_nan), "t.bin", 8);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r->score(6), -k_inf);
    EXPECT_EQ(r->encode("ab", false, false), (ids{3, 4, 5}));
}

TEST(tokenizer_unit, llama2c_bytes_rejects_malformed) {
    const auto good = small_bin();
    const auto expect_error = [](const std::vector<uint8_t>& b, int32_t vocab_size, const char* what) {
        auto r = sl::tokenizer::from_llama2c_bytes(b, "t.bin", vocab_size);
        ASSERT_FALSE(r.ok()) << what;
        expect_one_line_error(r.message(), "t.bin");
    };
    expect_error({}, -1, "empty");
    expect_error({1, 0, 0}, -1, "short header");
    expect_error(good, 9, "vocab_size beyond the file");
    expect_error(good, 0, "vocab_size 0");
    expect_error(good, std::numeric_limits<int32_t>::max(), "huge vocab_size");
    for (size_t cut = 0; cut < good.size(); ++cut) {
        const std::vector<uint8_t> part(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut));
        expect_error(part, 8, "truncated");
    }
    auto bad = good;
    const int32_t neg = -1;
    std::memcpy(bad.data(), &neg, 4);
    expect_error(bad, -1, "negative max_token_length");
    for (int32_t len : {-1, -100000, 8, 1 << 30, std::numeric_limits<int32_t>::max()}) {
        bad = good;
        std::memcpy(bad.data() + 4 + 4, &len, 4);  // length of token 0
        expect_error(bad, -1, "lying length");
    }
    bad = good;
    bad.push_back(0);  // a partial trailing record: fine with an explicit vocab_size, an error until EOF
    expect_error(bad, -1, "partial record");
    EXPECT_TRUE(sl::tokenizer::from_llama2c_bytes(bad, "t.bin", 8).ok());
}

TEST(tokenizer_unit, missing_file) {
    auto r = sl::tokenizer::from_llama2c_file("/nonexistent/dir/tok.bin", 32000);
    ASSERT_FALSE(r.ok());
    expect_one_line_error(r.message(), "/nonexistent/dir/tok.bin");
}

}  // namespace

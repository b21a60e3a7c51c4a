// Streaming UTF-8 decoding of token pieces: characters split across byte tokens (Llama-2 32k's <0xE2> ...) and
// across byte-level BPE pieces come out whole, never as replacement characters; malformed bytes become U+FFFD.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sparselens/core/tokenizer.h"
#include "sparselens/core/utf8_stream.h"
#include "stories_fixture.h"

namespace {

using namespace sl::test;

const std::string k_fffd = "\xEF\xBF\xBD";

// Strictly valid UTF-8 (no overlong forms, surrogates or values above U+10FFFF)?
bool valid_utf8(const std::string& s) {
    sl::utf8_stream u;
    return u.push(s) == s && !u.pending();
}

TEST(Utf8Stream, HoldsIncompleteCharactersBack) {
    sl::utf8_stream u;
    EXPECT_EQ(u.push("a\xE2"), "a");
    EXPECT_TRUE(u.pending());
    EXPECT_EQ(u.push("\x82"), "");
    EXPECT_EQ(u.push("\xAC!"), "\xE2\x82\xAC!");
    EXPECT_FALSE(u.pending());
    EXPECT_EQ(u.push("\xF0\x9F"), "");
    EXPECT_EQ(u.flush(), k_fffd);  // cut off for good
    EXPECT_FALSE(u.pending());
}

TEST(Utf8Stream, MalformedBytesBecomeReplacementCharacters) {
    sl::utf8_stream u;
    EXPECT_EQ(u.push("\x80x"), k_fffd + "x");              // stray continuation
    EXPECT_EQ(u.push("\xC0\xAF"), k_fffd + k_fffd);        // overlong lead
    EXPECT_EQ(u.push("\xED\xA0\x80"), k_fffd + k_fffd + k_fffd);  // surrogate: lead's 2nd byte out of range
    EXPECT_EQ(u.push("\xE2\x82" "A"), k_fffd + "A");       // cut short by ASCII
    EXPECT_EQ(u.push("\xF5"), k_fffd);                     // never a lead byte
    EXPECT_FALSE(u.pending());
}

// Pieces of `ids` as generation decodes them, streamed one by one.
std::string stream_pieces(const sl::tokenizer& t, const std::vector<int32_t>& ids, bool& saw_replacement) {
    sl::utf8_stream u;
    std::string out;
    saw_replacement = false;
    for (size_t i = 1; i < ids.size(); ++i) {
        const std::string_view piece = t.decode(ids[i - 1], ids[i]);
        if (!t.shown_in_text(ids[i], piece)) continue;
        const std::string part = u.push(piece);
        EXPECT_TRUE(valid_utf8(part));
        saw_replacement |= part.find(k_fffd) != std::string::npos;
        out += part;
    }
    out += u.flush();
    return out;
}

const std::string k_text =
    "Caf\xC3\xA9 \xE2\x82\xAC" "5 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80\xF0\x9F\x91\x8D \xE1\xB8\x80 "
    "\xEA\xB0\x80\xEB\x82\x98 \xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D";

TEST(Utf8Stream, Llama2VocabularyByteTokens) {
    auto t = sl::tokenizer::from_llama2c_file(shared_path("models/tokenizer_llama2_32k.bin"));
    ASSERT_TRUE(t.ok()) << t.message();
    const std::vector<int32_t> ids = t->encode(k_text, true, false);
    size_t byte_tokens = 0;
    for (const int32_t id : ids) byte_tokens += t->token_byte(id) >= 0x80;
    ASSERT_GE(byte_tokens, 4u) << "the text must split characters across byte tokens";
    bool replaced = false;
    EXPECT_EQ(stream_pieces(t.value(), ids, replaced), k_text);
    EXPECT_FALSE(replaced);
}

TEST(Utf8Stream, ByteLevelBpeVocabulary) {
    // A byte-level BPE vocabulary with only the 256 byte pieces: every multi-byte character spans tokens.
    sl::embedded_vocab v;
    v.model = "gpt2";
    v.pre = "llama-bpe";
    int next = 256;
    for (int b = 0; b < 256; ++b) {
        const bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        const int cp = self ? b : next++;
        v.tokens.push_back(cp < 0x80 ? std::string(1, static_cast<char>(cp))
                                     : std::string{static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))});
    }
    v.tokens.push_back("<|begin_of_text|>");
    v.types.assign(v.tokens.size(), 1);
    v.types.back() = 3;
    v.scores.assign(v.tokens.size(), 0.0f);
    v.bos_id = 256;
    auto t = sl::tokenizer::from_embedded_vocab(v, "bytes.gguf");
    ASSERT_TRUE(t.ok()) << t.message();
    const std::vector<int32_t> ids = t->tokenize(k_text, true, false);
    ASSERT_EQ(ids.front(), 256);
    ASSERT_EQ(ids.size(), k_text.size() + 1);  // one token per byte
    bool replaced = false;
    EXPECT_EQ(stream_pieces(t.value(), ids, replaced), k_text);
    EXPECT_FALSE(replaced);
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

// stories260K's GGUFs (written by ggml) against llama.cpp on the same files: SentencePiece token ids on
// real text and hostile strings, and teacher-forced logits for every weight type the files hold.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "peer.h"
#include "peer_parity.h"
#include "sparselens/core/context.h"
#include "sparselens/core/eval.h"
#include "sparselens/core/model.h"
#include "sparselens/core/tokenizer.h"
#include "stories_fixture.h"

namespace {

using namespace sl::test;

std::string gguf(const std::string& type) { return shared_path("models/gguf/stories260K-" + type + ".gguf"); }

struct loaded {
    sl::model m;
    sl::tokenizer tok;
};

loaded load(const std::string& path) {
    loaded l;
    auto m = sl::model_load(path);
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.message());
    l.m = std::move(m).value();
    auto t = sl::tokenizer::from_embedded_vocab(l.m.vocab, path);
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.message());
    l.tok = std::move(t).value();
    return l;
}

// llama.cpp's ids for `text` (BOS added as the vocabulary says, special tokens not parsed).
std::vector<int32_t> peer_ids(const std::string& model, const std::string& text) {
    const std::string in = write_temp("peer_text.txt", {text.begin(), text.end()});
    const std::string out = write_temp("peer_ids.bin", {});
    const run_result r = run_peer("tokenize '" + model + "' '" + in + "' '" + out + "'");
    EXPECT_EQ(r.code, 0) << r.err;
    return read_array<int32_t>(out);
}

// Index of the first difference, or -1.
long first_difference(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    const size_t n = std::min(a.size(), b.size());
    for (size_t i = 0; i < n; ++i)
        if (a[i] != b[i]) return static_cast<long>(i);
    return a.size() == b.size() ? -1 : static_cast<long>(n);
}

TEST(PeerStories, TokenIdsMatchOnRealText) {
    const loaded l = load(gguf("F32"));
    // >= 200 KB of real text in pieces of about 16 KB (llama.cpp tokenizes each piece as one string).
    size_t total = 0;
    for (const char* rel : {"text/tinystories_sample.txt", "text/stories260K_samples.txt", "text/wikitext2_test.tokens.txt",
                            "text/brown_corpus_plain.txt"}) {
        const std::string all = shared_text(rel);
        const size_t take = std::min<size_t>(all.size(), 72 * 1024);
        for (size_t off = 0; off < take; off += 16 * 1024) {
            const std::string piece = all.substr(off, std::min<size_t>(16 * 1024, take - off));
            const std::vector<int32_t> ours = l.tok.encode(piece, true, false);
            const std::vector<int32_t> theirs = peer_ids(gguf("F32"), piece);
            const long at = first_difference(ours, theirs);
            EXPECT_EQ(at, -1) << rel << " @" << off << ": first difference at token " << at << " of " << ours.size();
            total += piece.size();
        }
    }
    EXPECT_GE(total, 200u * 1024);
}

TEST(PeerStories, TokenIdsMatchOnHostileStrings) {
    const loaded l = load(gguf("F32"));
    const std::vector<std::string> cases = {
        "", " ", "  ", "\n", "\n\n\t  \r\n", "a", " a", "a ", "hello  world", "   leading and trailing   ",
        "123 4567 89012", "3.14159, -2e10", "don't won't they'll I'm", "\xF0\x9F\x98\x80 emoji \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
        "\xE4\xB8\xAD\xE6\x96\x87 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4",
        "e\xCC\x81 n\xCC\x83 combining", "<s> </s> <unk> <0x0A> [INST] <|im_start|>", "tab\there", "ALL CAPS SHOUTING",
        "\xC2\xA0non-breaking\xC2\xA0space", "x\xE2\x80\x8By zero width",
    };
    for (const std::string& s : cases) {
        const std::vector<int32_t> ours = l.tok.encode(s, true, false);
        const std::vector<int32_t> theirs = peer_ids(gguf("F32"), s);
        EXPECT_EQ(ours, theirs) << "text: '" << s << "'";
    }
}

TEST(PeerStories, LogitsMatchForEveryWeightType) {
    const loaded l = load(gguf("F32"));
    std::vector<int32_t> ids = l.tok.encode(shared_text("text/tinystories_sample.txt"), true, false);
    ids.resize(std::min<size_t>(ids.size(), 128));
    ASSERT_GE(ids.size(), 64u);
    std::vector<parity_row> rows;
    for (const char* t : {"F32", "F16", "Q8_0", "Q4_0"})
        rows.push_back({std::string("stories260K ") + t, gguf(t), t[0] == 'F' ? 1e-5 : 1e-3});
    expect_peer_parity(rows, ids);
}

}  // namespace

SL_TEST_MAIN_NEEDS_PEER(true)

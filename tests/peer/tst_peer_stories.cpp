// stories260K's GGUFs (written by ggml) against llama.cpp on the same files: SentencePiece token ids on
// real text and hostile strings, and teacher-forced logits for every weight type the files hold.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "peer.h"
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

struct parity {
    double kl_mean = 0;
    double top1 = 0;
};

// Teacher-forced logits of ours and llama.cpp's on the same tokens: mean KL(llama.cpp || ours), top-1 agreement.
parity compare_logits(const std::string& path, const std::vector<int32_t>& ids) {
    const loaded l = load(path);
    auto ctx = sl::context::create(l.m);
    EXPECT_TRUE(ctx.ok());
    const int32_t vocab = l.m.hp.vocab_size;
    std::vector<float> ours(ids.size() * static_cast<size_t>(vocab));
    ctx.value().prefill(ids, 0, ours.data());

    const std::string in = write_array("peer_logit_ids.bin", ids);
    const std::string out = write_temp("peer_logits.bin", {});
    const run_result r = run_peer("logits '" + path + "' '" + in + "' '" + out + "'");
    EXPECT_EQ(r.code, 0) << r.err;
    const std::vector<float> theirs = read_array<float>(out);
    EXPECT_EQ(theirs.size(), ours.size());
    parity p;
    if (theirs.size() != ours.size()) return p;
    std::vector<float> lp(static_cast<size_t>(vocab)), lq(static_cast<size_t>(vocab));
    int agree = 0;
    for (size_t t = 0; t < ids.size(); ++t) {
        const float* a = theirs.data() + t * vocab;
        const float* b = ours.data() + t * vocab;
        sl::log_softmax(a, vocab, lp.data());
        sl::log_softmax(b, vocab, lq.data());
        p.kl_mean += sl::kl_divergence(lp.data(), lq.data(), vocab);
        agree += std::max_element(a, a + vocab) - a == std::max_element(b, b + vocab) - b;
    }
    p.kl_mean /= static_cast<double>(ids.size());
    p.top1 = static_cast<double>(agree) / static_cast<double>(ids.size());
    return p;
}

TEST(PeerStories, LogitsMatchForEveryWeightType) {
    const loaded l = load(gguf("F32"));
    std::vector<int32_t> ids = l.tok.encode(shared_text("text/tinystories_sample.txt"), true, false);
    ids.resize(std::min<size_t>(ids.size(), 128));
    ASSERT_GE(ids.size(), 64u);
    struct row {
        const char* type;
        double max_kl;
    };
    for (const row& r : {row{"F32", 1e-5}, row{"F16", 1e-5}, row{"Q8_0", 1e-3}, row{"Q4_0", 1e-3}}) {
        const parity p = compare_logits(gguf(r.type), ids);
        std::printf("stories260K %-5s  KL(llama.cpp || ours) %.3g  same top token %.1f%%\n", r.type, p.kl_mean, 100 * p.top1);
        EXPECT_LE(p.kl_mean, r.max_kl) << r.type;
        EXPECT_GE(p.top1, 0.98) << r.type;
    }
}

}  // namespace

SL_TEST_MAIN_NEEDS_PEER(true)

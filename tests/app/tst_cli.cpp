// End-to-end checks of the `sparselens` executable: reference output, JSON, and one-line errors.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace {

using sl::test::q;
using sl::test::run_cli;
using sl::test::run_result;

TEST(Cli, GenerateGreedyMatchesLlama2cReference) {
    const run_result r = run_cli("generate " + q("models/stories260K_f32.bin") + " --tokenizer " + q("models/tok512.bin") +
                                 " --temp 0 --steps 128");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto want = sl::test::read_bytes(sl::test::shared_path("reference/greedy_bos_f32_128.txt"));
    EXPECT_EQ(r.out, std::string(want.begin(), want.end()));
}

TEST(Cli, GgufUsesItsEmbeddedVocabulary) {
    const run_result r = run_cli("generate " + q("models/gguf/stories260K-F32.gguf") + " --temp 0 --steps 128 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    const auto want = sl::test::read_bytes(sl::test::shared_path("reference/greedy_bos_f32_128.txt"));
    EXPECT_EQ(j["text"].get<std::string>() + "\n", std::string(want.begin(), want.end()));
    EXPECT_EQ(j["tokens"].size(), 129u);  // BOS + 128 generated
}

TEST(Cli, LogitsFileMatchesReference) {
    const std::string out = sl::test::write_temp("logits.bin", {});
    const run_result r = run_cli("logits " + q("models/stories260K_f32.bin") + " -z " + q("models/tok512.bin") +
                                 " --steps 128 --out '" + out + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto got = sl::test::read_bytes(out);
    const auto ref = sl::test::read_bytes(sl::test::shared_path("reference/logits_bos_f32.bin"));
    ASSERT_EQ(got.size(), 128u * 512 * 4);
    double max_err = 0;
    for (size_t t = 0; t < 128; ++t)
        for (size_t i = 0; i < 512; ++i) {
            float a, b;
            std::memcpy(&a, got.data() + (t * 512 + i) * 4, 4);
            std::memcpy(&b, ref.data() + t * (4 + 2048) + 4 + i * 4, 4);
            max_err = std::max(max_err, std::fabs(double(a) - double(b)));
        }
    EXPECT_LE(max_err, 1e-4);
}

TEST(Cli, InfoJsonReportsShapesAndBytes) {
    const run_result r = run_cli("info " + q("models/gguf/stories260K-Q8_0.gguf") + " --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["hparams"]["dim"], 64);
    EXPECT_EQ(j["hparams"]["hidden_dim"], 172);
    EXPECT_EQ(j["hparams"]["n_kv_heads"], 4);
    EXPECT_EQ(j["tensor_types"]["Q8_0"], 32);
    const uint64_t total = j["bytes"]["total"];
    EXPECT_EQ(total, j["bytes"]["attention"].get<uint64_t>() + j["bytes"]["mlp"].get<uint64_t>() +
                         j["bytes"]["embeddings"].get<uint64_t>() + j["bytes"]["norms"].get<uint64_t>());
    // The type mix accounts for every stored tensor byte; Q8_0 blocks are 34 bytes per 32 weights.
    uint64_t tensor_bytes = 0, mix_bytes = 0, prev = UINT64_MAX;
    for (const auto& t : j["tensors"]) tensor_bytes += t["bytes"].get<uint64_t>();
    for (const auto& s : j["type_mix"]) {
        mix_bytes += s["bytes"].get<uint64_t>();
        EXPECT_LE(s["bytes"].get<uint64_t>(), prev) << "largest share first";
        prev = s["bytes"].get<uint64_t>();
        if (s["type"] == "Q8_0") {
            EXPECT_DOUBLE_EQ(s["bits_per_weight"].get<double>(), 8.5);
        }
        if (s["type"] == "F32") {
            EXPECT_DOUBLE_EQ(s["bits_per_weight"].get<double>(), 32.0);
        }
    }
    EXPECT_EQ(mix_bytes, tensor_bytes);
    EXPECT_EQ(j["architecture"], "llama");
    EXPECT_EQ(j["tokenizer"]["kind"], "SentencePiece, 512 tokens");
    EXPECT_EQ(j["tokenizer"]["chat_format"], "none");
    EXPECT_EQ(j["context_length"], 512);
    EXPECT_GE(j["type_mix"].size(), 2u);
}

TEST(Cli, PerplexityJson) {
    const run_result r = run_cli("ppl " + q("models/stories260K_f32.bin") + " " + q("text/tinystories_sample.txt") +
                                 " -z " + q("models/tok512.bin") + " --ctx 64 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_GT(j["ppl"].get<double>(), 1.0);
    EXPECT_LT(j["ppl"].get<double>(), 128.0);
    EXPECT_GT(j["scored_tokens"].get<int>(), 100);
}

// Online simulation: the engine's DIP-CA masks step the simulator, whose cache state feeds back.
TEST(Cli, OnlineSimulationCacheAwareRaisesHitRateAndReplaysConsistently) {
    const std::string common = q("models/stories260K_f32.bin") + " " + q("text/stories260K_samples.txt") + " -z " +
                               q("models/tok512.bin") + " --density 0.5 --dram 480KB --bits 8 --context 512" +
                               " --tokens 768 --json";
    auto hit_rate = [&](const std::string& extra) {
        const run_result r = run_cli(extra + " " + common);
        EXPECT_EQ(r.code, 0) << r.err;
        return nlohmann::json::parse(r.out)["summary"]["hit_rate"].get<double>();
    };
    const std::string trace = sl::test::write_temp("dip.sltrace", {});
    const double dip = hit_rate("trace --method dip --out '" + trace + "'");  // records while simulating
    const double ca1 = hit_rate("sim --method dip-ca --gamma 1");
    const double ca02 = hit_rate("sim --method dip-ca --gamma 0.2");
    std::printf("online LFU hit rate at 50%% density: dip %.3f, dip-ca gamma 1 %.3f, gamma 0.2 %.3f\n", dip, ca1, ca02);
    EXPECT_DOUBLE_EQ(ca1, dip);  // gamma 1 is DIP: same masks, same cache
    EXPECT_GT(ca02, ca1 + 0.05);
    // Replaying DIP's recorded masks under the same device and policy gives the online figure back,
    // and Belady (offline) is at least as good.
    const run_result lfu = run_cli("sim --trace '" + trace + "' --policy lfu --dram 480KB --bits 8 --context 512 --json");
    ASSERT_EQ(lfu.code, 0) << lfu.err;
    EXPECT_DOUBLE_EQ(nlohmann::json::parse(lfu.out)["summary"]["hit_rate"].get<double>(), dip);
    const run_result bel = run_cli("sim --trace '" + trace + "' --policy belady --dram 480KB --bits 8 --context 512 --json");
    ASSERT_EQ(bel.code, 0) << bel.err;
    EXPECT_GE(nlohmann::json::parse(bel.out)["summary"]["hit_rate"].get<double>(), dip);
}

// `bench --stages`: per stage of the decode, dense and the method, with the bytes each read. The stages
// of a token add up to its forward pass; DIP (input-sparse gate/up and down, top-k selection) reads
// half the MLP bytes, spends time selecting, and never runs the fused stage; dense never selects.
TEST(Cli, BenchStagesJson) {
    const run_result r = run_cli("bench " + q("models/stories260K_f32.bin") +
                                 " --method dip --density 0.5 --gen 5 --prompt-len 4 --reps 2 --threads 1 --stages --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    const auto& st = j["stages"];
    EXPECT_EQ(st["tokens"], 8) << "each repetition's tokens after its first";
    // Dense and the method alternate repetitions; each repetition's speed-up is reported too.
    const auto& per_rep = j["method"]["speedup_per_repetition"];
    ASSERT_EQ(per_rep.size(), 2u);
    for (const auto& x : per_rep) EXPECT_GT(x.get<double>(), 0.0);
    EXPECT_GT(j["memory"]["peak_rss_bytes"].get<double>(), 0.0);
    EXPECT_GT(j["memory"]["layout_bytes"].get<double>(), 0.0);
    EXPECT_GT(st["dense_first_token_ms"].get<double>(), 0.0);
    EXPECT_GT(st["method_first_token_ms"].get<double>(), 0.0);
    const auto& by = st["by_stage"];
    for (const char* name : {"qkv", "attention", "o", "mlp_in", "glu", "down", "mlp_fused", "select", "fetch", "logits",
                             "other"})
        ASSERT_TRUE(by.contains(name)) << name;
    for (const char* name : {"qkv", "attention", "o", "mlp_in", "glu", "down", "logits"}) {
        EXPECT_GT(by[name]["dense_ms"].get<double>(), 0.0) << name;
        EXPECT_GT(by[name]["method_ms"].get<double>(), 0.0) << name;
    }
    EXPECT_EQ(by["select"]["dense_ms"].get<double>(), 0.0);
    EXPECT_GT(by["select"]["method_ms"].get<double>(), 0.0);
    EXPECT_EQ(by["select"]["ideal_ms"].get<double>(), 0.0);
    EXPECT_EQ(by["mlp_fused"]["method_ms"].get<double>(), 0.0);
    EXPECT_EQ(by["fetch"]["method_ms"].get<double>(), 0.0);
    // Bytes: dense reads every matrix; DIP at 50% about half of gate/up and down, all of q/k/v and o.
    const double dense_in = by["mlp_in"]["dense_weight_bytes"], dip_in = by["mlp_in"]["method_weight_bytes"];
    EXPECT_EQ(dense_in, 2.0 * 5 * 172 * 64 * 4);  // 5 layers of 172 x 64 f32 gate and up
    EXPECT_NEAR(dip_in / dense_in, 0.5, 0.05);
    EXPECT_NEAR(by["down"]["method_weight_bytes"].get<double>() / by["down"]["dense_weight_bytes"].get<double>(), 0.5, 0.05);
    EXPECT_EQ(by["qkv"]["method_weight_bytes"], by["qkv"]["dense_weight_bytes"]);
    EXPECT_EQ(by["logits"]["dense_weight_bytes"], 512.0 * 64 * 4);
    // The ideal of a weight stage scales dense's time by the bytes.
    EXPECT_NEAR(by["mlp_in"]["ideal_ms"].get<double>(), by["mlp_in"]["dense_ms"].get<double>() * dip_in / dense_in, 1e-9);
    // The ideal at the access pattern (the logged rows of 5 tokens replayed): between the ideal and the
    // stage's own time where DIP lists rows, the ideal elsewhere; the speed-up it allows is at most the ideal.
    EXPECT_EQ(st["pattern_tokens"], 5);
    for (const char* name : {"mlp_in", "down"}) {
        const double im = by[name]["ideal_ms"], pm = by[name]["pattern_ms"], sm = by[name]["method_ms"];
        EXPECT_GE(pm, im - 1e-12) << name;
        EXPECT_LE(pm, std::max(im, sm) + 1e-12) << name;
        EXPECT_GT(by[name]["pattern_read_slowdown"].get<double>(), 0.0) << name;
    }
    EXPECT_EQ(by["qkv"]["pattern_ms"], by["qkv"]["ideal_ms"]);
    EXPECT_EQ(by["qkv"]["pattern_read_slowdown"], 1.0);
    const double at_pattern = j["method"]["pattern_ideal_speedup"];
    EXPECT_GT(at_pattern, 0.0);
    EXPECT_LE(at_pattern, j["method"]["ideal_speedup"].get<double>() + 1e-12);
    EXPECT_NEAR(j["method"]["fraction_of_pattern_ideal"].get<double>(),
                j["method"]["speedup"].get<double>() / at_pattern, 1e-12);

    // Pair layouts (gate and up pruning: the projection computed whole, then the other's rows and down
    // columns of the chosen neurons in one fused pass): the whole projection's bytes stay in mlp_in, the
    // pairs' go to mlp_fused, nothing to down.
    for (const char* method : {"gate", "up"}) {
        const run_result p = run_cli("bench " + q("models/stories260K_f32.bin") + " --method " + method +
                                     " --density 0.6 --gen 4 --prompt-len 4 --reps 1 --threads 1 --stages --json");
        ASSERT_EQ(p.code, 0) << p.err;
        const auto pj = nlohmann::json::parse(p.out);
        const auto& b = pj["stages"]["by_stage"];
        SCOPED_TRACE(method);
        EXPECT_EQ(b["mlp_in"]["method_weight_bytes"].get<double>(), 5.0 * 172 * 64 * 4);  // one whole projection
        EXPECT_GT(b["mlp_fused"]["method_ms"].get<double>(), 0.0);
        EXPECT_GT(b["mlp_fused"]["method_weight_bytes"].get<double>(), 0.0);
        EXPECT_LT(b["mlp_fused"]["method_weight_bytes"].get<double>(), 2.0 * 5 * 172 * 64 * 4);
        EXPECT_EQ(b["down"]["method_ms"].get<double>(), 0.0);
        EXPECT_EQ(b["glu"]["method_ms"].get<double>(), 0.0);
        // The pairs' rows are replayed against dense's gate/up + down; the whole projection is not.
        EXPECT_GE(b["mlp_fused"]["pattern_ms"].get<double>(), b["mlp_fused"]["ideal_ms"].get<double>() - 1e-12);
        EXPECT_EQ(b["mlp_in"]["pattern_ms"], b["mlp_in"]["ideal_ms"]);
    }

    const run_result t = run_cli("bench " + q("models/stories260K_f32.bin") + " --gen 3 --prompt-len 4 --reps 1 --stages");
    ASSERT_EQ(t.code, 0) << t.err;
    EXPECT_NE(t.out.find("stages     decode ms per token by stage"), std::string::npos) << t.out;
    EXPECT_NE(t.out.find("  attention "), std::string::npos) << t.out;
    EXPECT_EQ(t.out.find("  select "), std::string::npos) << "dense never selects: no row";
    EXPECT_EQ(t.out.find("at patt."), std::string::npos) << "no method, no pattern";
    const run_result tm = run_cli("bench " + q("models/stories260K_f32.bin") +
                                  " --method glu --density 0.9 --gen 3 --prompt-len 4 --reps 1 --stages");
    ASSERT_EQ(tm.code, 0) << tm.err;
    EXPECT_NE(tm.out.find("at patt."), std::string::npos) << tm.out;
    EXPECT_NE(tm.out.find("glu        at the access pattern of its reads the ideal"), std::string::npos) << tm.out;
}

TEST(Cli, ErrorsAreOneLineWithExitCode2) {
    for (const std::string& args : {std::string("info /nonexistent/model.gguf"),
                                   "generate " + q("text/tinystories_sample.txt") + " --steps 4",
                                   "generate " + q("models/stories260K_f32.bin") + " --tokenizer " +
                                       q("models/stories260K_f32.bin") + " --steps 4",
                                   "bench " + q("models/stories260K_f32.bin") + " --regroup sometimes",
                                   std::string("info")}) {
        const run_result r = run_cli(args);
        EXPECT_EQ(r.code, 2) << args;
        ASSERT_FALSE(r.err.empty()) << args;
        EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
        EXPECT_EQ(r.err.rfind("sparselens: error: ", 0), 0u) << r.err;
    }
}

// import-vocab + tokenize: the Llama-2 vocabulary as a vocab-only GGUF tokenizes like the llama2.c file, and a
// tokenizer.json whose merges name missing pieces or an unknown pre-tokenizer is one line, exit 2.
TEST(Cli, ImportVocabAndTokenize) {
    const std::string gguf = sl::test::write_temp("cli_llama2_vocab.gguf", {});
    run_result r = run_cli("import-vocab " + q("models/tokenizer_llama2_32k.bin") + " -o '" + gguf + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    const run_result a = run_cli("tokenize '" + gguf + "' 'Hello, caf\xc3\xa9 world'");
    const run_result b = run_cli("tokenize " + q("models/tokenizer_llama2_32k.bin") + " 'Hello, caf\xc3\xa9 world'");
    ASSERT_EQ(a.code, 0) << a.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_EQ(a.out.rfind("1 ", 0), 0u) << a.out;  // BOS first

    const std::string bad = sl::test::write_temp("cli_bad_tok.json", {});
    {
        std::ofstream f(bad);
        f << R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})";
    }
    for (const char* pre : {"qwen2", "nope"}) {
        r = run_cli("import-vocab '" + bad + "' --pre " + pre + " -o '" + gguf + ".bad'");
        EXPECT_EQ(r.code, 2);
        EXPECT_NE(r.err.find(bad + ": "), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

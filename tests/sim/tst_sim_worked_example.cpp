// The worked example of docs/simulator.md: dense 4-bit Phi-3-Medium, 4 GB DRAM at 60 GB/s, 1 GB/s flash.
// Recomputes every step from the formulas the doc states, checks the analytic mode against them, and
// checks that the literal figures printed in the doc are the ones computed here.
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "sparselens/sim/simulator.h"

namespace {

using namespace sl::sim;

// Step by step, as in the doc.
constexpr uint64_t d = 5120, h = 17920, L = 40, kv = 128 * 10, V = 32064, ctx = 1024, page = 4096;
constexpr uint64_t dram = 4'000'000'000ull;
constexpr double dram_bw = 60e9, flash_bw = 1e9;
constexpr uint64_t row = d * 4 / 8 + (d / 32) * 2;           // step 1
constexpr uint64_t attention = L * (d + kv + kv + d) * row;  // step 2
constexpr uint64_t embed_and_classifier = 2 * V * row;       // step 3
constexpr uint64_t norms = (2 * L + 1) * d * 2;
constexpr uint64_t kv_cache = 2 * L * kv * ctx * 2;                                 // step 4
constexpr uint64_t resident = attention + embed_and_classifier + norms + kv_cache;  // step 5
constexpr uint64_t bundle = 3 * row;                                                // step 6
constexpr uint64_t cache = dram - resident;                                         // step 7
constexpr uint64_t per_layer_cache = cache / L;
constexpr uint64_t capacity = per_layer_cache / bundle;
constexpr uint64_t run_start = capacity * bundle, run_end = h * bundle;  // step 8
constexpr uint64_t layer_flash = ((run_end - 1) / page - run_start / page + 1) * page;
constexpr uint64_t flash = L * layer_flash;
constexpr uint64_t dram_read = attention + V * row + row + norms + kv_cache + L * capacity * bundle;  // step 9

model_shape phi3_medium() {
    model_shape s;
    s.name = "phi3-medium";
    s.dim = 5120;
    s.hidden_dim = 17920;
    s.n_layers = 40;
    s.n_heads = 40;
    s.n_kv_heads = 10;
    s.vocab_size = 32064;
    return s;
}

sim_params params(bool overlap) {
    sim_params p = sim_default_params();
    p.device.dram_bytes = dram;
    p.device.dram_bandwidth = dram_bw;
    p.device.flash_bandwidth = flash_bw;
    p.device.flash_page_bytes = page;
    p.device.overlap_io_compute = overlap;
    p.quant = quant_default(4);
    p.context_tokens = ctx;
    return p;
}

std::string read_doc() {
    std::ifstream f(std::string(SPARSELENS_SOURCE_DIR) + "/docs/simulator.md");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::string with_commas(uint64_t x) {
    std::string s = std::to_string(x);
    for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
    return s;
}

TEST(SimWorkedExample, AnalyticModeFollowsTheDocSteps) {
    const run_report r = analytic(phi3_medium(), mlp_layout{}, params(true), "dense").value();
    EXPECT_EQ(r.map.attention_bytes, attention);
    EXPECT_EQ(r.map.embedding_bytes + r.map.classifier_bytes, embed_and_classifier);
    EXPECT_EQ(r.map.norm_bytes, norms);
    EXPECT_EQ(r.map.kv_cache_bytes, kv_cache);
    EXPECT_EQ(r.map.resident_bytes(), resident);
    ASSERT_EQ(r.map.groups.size(), 1u);
    EXPECT_EQ(r.map.groups[0].unit_bytes, bundle);
    EXPECT_EQ(r.alloc.cache_bytes, cache);
    for (uint32_t l = 0; l < L; ++l) {
        EXPECT_EQ(r.alloc.layer_cache_bytes[l], per_layer_cache);
        EXPECT_EQ(r.alloc.stream_capacity[l], capacity);
    }
    ASSERT_EQ(r.tokens.size(), 1u);
    EXPECT_EQ(r.tokens[0].flash_bytes, flash);
    EXPECT_EQ(r.tokens[0].flash_reads, L);
    EXPECT_EQ(r.tokens[0].dram_bytes, dram_read);
    const double t_dram = static_cast<double>(dram_read) / dram_bw;  // step 10
    const double t_flash = static_cast<double>(flash) / flash_bw;
    EXPECT_DOUBLE_EQ(r.tokens[0].dram_time_s, t_dram);
    EXPECT_DOUBLE_EQ(r.tokens[0].flash_time_s, t_flash);
    EXPECT_DOUBLE_EQ(r.tokens_per_s, 1.0 / std::max(t_dram, t_flash));  // step 11
    EXPECT_NEAR(r.hit_rate, static_cast<double>(capacity) / h, 1e-12);

    const run_report serial = analytic(phi3_medium(), mlp_layout{}, params(false), "dense").value();
    EXPECT_DOUBLE_EQ(serial.tokens_per_s, 1.0 / (t_dram + t_flash));
}

TEST(SimWorkedExample, DocPrintsTheComputedFigures) {
    const std::string doc = read_doc();
    ASSERT_FALSE(doc.empty()) << "docs/simulator.md not found under " << SPARSELENS_SOURCE_DIR;
    // The literal numbers the doc prints, checked against the computation above.
    const double doc_tokens_per_s = 0.2461, doc_serial_tokens_per_s = 0.2422, doc_t_flash = 4.0632, doc_t_dram = 0.0651;
    const double t_dram = static_cast<double>(dram_read) / dram_bw, t_flash = static_cast<double>(flash) / flash_bw;
    EXPECT_NEAR(doc_tokens_per_s, 1.0 / std::max(t_dram, t_flash), 5e-5);
    EXPECT_NEAR(doc_serial_tokens_per_s, 1.0 / (t_dram + t_flash), 5e-5);
    EXPECT_NEAR(doc_t_flash, t_flash, 5e-5);
    EXPECT_NEAR(doc_t_dram, t_dram, 5e-5);
    for (const std::string& s : {std::string("**0.2461 tokens/s**"), std::string("**0.2422 tokens/s**"),
                                 std::string("4.0632 s"), std::string("0.0651 s")})
        EXPECT_NE(doc.find(s), std::string::npos) << "doc lacks " << s;
    for (uint64_t x : {row, attention / L, attention, embed_and_classifier, norms, kv_cache, resident, bundle, cache,
                       per_layer_cache, layer_flash, flash, dram_read, L * capacity * bundle})
        EXPECT_NE(doc.find(with_commas(x)), std::string::npos) << "doc lacks " << with_commas(x);
    EXPECT_NE(doc.find("/ 8640) = " + std::to_string(capacity)), std::string::npos) << "doc lacks the capacity";
}

TEST(SimWorkedExample, PaperDenseFiguresFollowTheSameRule) {
    // Paper Tables 2, 5, 6: dense 4-bit Phi-3-Medium (7.4 GB) = 1 / ((7.4 GB - DRAM) / flash bandwidth).
    struct row_t {
        double dram_gb, flash_gbs, paper_tok_s;
    };
    for (const row_t& x :
         {row_t{4, 1, 0.29}, row_t{2, 1, 0.19}, row_t{6, 1, 0.71}, row_t{4, 0.5, 0.15}, row_t{4, 2, 0.59}}) {
        device_profile dev = sim_default_params().device;
        dev.flash_bandwidth = x.flash_gbs * 1e9;
        const uint64_t flash_bytes = static_cast<uint64_t>((7.4 - x.dram_gb) * 1e9);
        const token_report t = token_cost(dev, static_cast<uint64_t>(x.dram_gb * 1e9), flash_bytes, 0);
        EXPECT_NEAR(1.0 / t.latency_s, x.paper_tok_s, 0.005) << x.dram_gb << " GB, " << x.flash_gbs << " GB/s";
    }
}

}  // namespace

// Table-driven logit parity against the llama.cpp peer: teacher-forced logits of ours and llama.cpp's on
// the same file and tokens, mean KL(llama.cpp || ours) and top-1 agreement, files quantized by llama.cpp.
// A new weight type or architecture is one more parity_row.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "peer.h"
#include "sparselens/core/context.h"
#include "sparselens/core/eval.h"
#include "sparselens/core/model.h"

namespace sl::test {

// Random-weight models have flat logits: at a few percent of positions llama.cpp's top two tokens are
// within a hair, and the int8 rounding of activations either engine does (each its own way) flips them.
// Top-1 is therefore also counted over the "clear" positions, where llama.cpp's top token leads the
// runner-up by more than this many logits; there the 98% must hold for every type.
inline constexpr float k_parity_clear_margin = 0.1f;

struct parity_result {
    double kl_mean = 0;
    double top1 = 0;
    double top1_clear = 0;  // agreement over the clear positions
    int n_clear = 0;
    double rms_diff = 0;  // rms of ours - llama.cpp over all logits
    bool ok = false;  // both sides produced logits of the same size
};

// Ours (dense prefill, all positions) against `sl-llama-peer logits` on `path`.
inline parity_result peer_logit_parity(const std::string& path, const std::vector<int32_t>& ids) {
    parity_result p;
    auto m = sl::model_load(path);
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.message());
    if (!m.ok()) return p;
    auto ctx = sl::context::create(m.value());
    EXPECT_TRUE(ctx.ok()) << (ctx.ok() ? "" : ctx.message());
    if (!ctx.ok()) return p;
    const int32_t vocab = m->hp.vocab_size;
    std::vector<float> ours(ids.size() * static_cast<size_t>(vocab));
    ctx.value().prefill(ids, 0, ours.data());

    const std::string in = write_array("parity_ids.bin", ids);
    const std::string out = write_temp("parity_logits.bin", {});
    const run_result r = run_peer("logits '" + path + "' '" + in + "' '" + out + "'");
    EXPECT_EQ(r.code, 0) << r.err;
    const std::vector<float> theirs = read_array<float>(out);
    EXPECT_EQ(theirs.size(), ours.size()) << path;
    if (theirs.size() != ours.size() || ids.empty()) return p;
    std::vector<float> lp(static_cast<size_t>(vocab)), lq(static_cast<size_t>(vocab));
    int agree = 0, agree_clear = 0;
    double sq = 0.0;
    for (size_t t = 0; t < ids.size(); ++t) {
        const float* a = theirs.data() + t * vocab;
        const float* b = ours.data() + t * vocab;
        for (int32_t v = 0; v < vocab; ++v) sq += double(a[v] - b[v]) * (a[v] - b[v]);
        sl::log_softmax(a, vocab, lp.data());
        sl::log_softmax(b, vocab, lq.data());
        p.kl_mean += sl::kl_divergence(lp.data(), lq.data(), vocab);
        const float* best = std::max_element(a, a + vocab);
        const bool same = best - a == std::max_element(b, b + vocab) - b;
        float second = -INFINITY;
        for (const float* x = a; x != a + vocab; ++x)
            if (x != best) second = std::max(second, *x);
        agree += same;
        if (*best - second > k_parity_clear_margin) {
            ++p.n_clear;
            agree_clear += same;
        }
    }
    p.kl_mean /= static_cast<double>(ids.size());
    p.rms_diff = std::sqrt(sq / static_cast<double>(ours.size()));
    p.top1 = static_cast<double>(agree) / static_cast<double>(ids.size());
    p.top1_clear = static_cast<double>(agree_clear) / static_cast<double>(std::max(1, p.n_clear));
    p.ok = true;
    return p;
}

// llama.cpp's file quantizer; --pure keeps every matrix at `ftype` (no Q6_K output etc.) unless the
// row asks for the mixed recipe (the K-quant *_M types).
inline bool peer_quantize(const std::string& in, const std::string& out, const std::string& ftype, bool pure = true) {
    const run_result r = run_peer("quantize '" + in + "' '" + out + "' " + ftype + (pure ? " --pure" : ""));
    EXPECT_EQ(r.code, 0) << ftype << ": " << r.err;
    return r.code == 0;
}

struct parity_row {
    std::string label;     // printed, e.g. "qwen3 Q8_0"
    std::string path;      // the GGUF both sides read
    double max_kl = 1e-5;  // mean KL(llama.cpp || ours) bound
    double min_top1 = 0.98;  // share of all positions with the same top token
    double min_top1_clear = 0.98;  // share of the clear positions (k_parity_clear_margin)
    double min_clear_share = 0.5;  // clear positions needed, as a share of all, to judge top1_clear
};

// Checks every row, printing one table line each ("label  KL  top-1").
inline void expect_peer_parity(const std::vector<parity_row>& rows, const std::vector<int32_t>& ids) {
    for (const parity_row& r : rows) {
        const parity_result p = peer_logit_parity(r.path, ids);
        std::printf("%-16s KL(llama.cpp || ours) %9.3g  same top token %6.2f%% of all, %6.2f%% of %d clear; rms logit diff %.3g\n",
                    r.label.c_str(), p.kl_mean, 100 * p.top1, 100 * p.top1_clear, p.n_clear, p.rms_diff);
        EXPECT_TRUE(p.ok) << r.label;
        EXPECT_LE(p.kl_mean, r.max_kl) << r.label;
        EXPECT_GE(p.top1, r.min_top1) << r.label;
        EXPECT_GE(p.top1_clear, r.min_top1_clear) << r.label;
        EXPECT_GE(p.n_clear, static_cast<int>(r.min_clear_share * static_cast<double>(ids.size())))
            << r.label << ": too few clear positions to judge";
    }
}

}  // namespace sl::test

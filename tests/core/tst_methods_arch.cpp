// Every sparsity method on every non-Llama architecture (synthetic qwen3, phi3 and gemma2 models: q/k
// norms, fused qkv and gate||up split into views, GeGLU with post-norms): calibration, the method path
// and its measured density.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "sparselens/core/calibration.h"
#include "sparselens/core/context.h"
#include "sparselens/core/eval.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/model.h"
#include "sparselens/core/synthetic.h"

namespace {

namespace fs = std::filesystem;

std::vector<int32_t> token_ids(int32_t vocab, size_t n) {
    std::vector<int32_t> ids;
    uint64_t s = 777;
    while (ids.size() < n) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids.push_back(3 + static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(vocab - 3)));
    }
    return ids;
}

// The density a method's config controls, read back from eval_result: TEAL's is the whole layer's
// (weights read over weights held), every other method's the MLP's.
double measured(const std::string& name, const sl::eval_result& r, const sl::model_hparams& hp) {
    if (name.rfind("teal", 0) != 0) return r.mlp_density;
    const double attn = 2.0 * hp.dim * hp.q_dim() + 2.0 * hp.dim * hp.kv_dim(), mlp = 3.0 * hp.dim * hp.hidden_dim;
    return (r.mlp_density * mlp + r.attn_density * attn) / (mlp + attn);
}

void run_all_methods(const std::string& arch, const std::string& shape = "small") {
    sl::synthetic_params p = sl::synthetic_default_params();
    p.arch = arch;
    p.shape = shape;
    p.path = (fs::temp_directory_path() / ("sparselens_methods_arch_" + std::to_string(::getpid()) + "_" + arch + "_" + shape + ".gguf")).string();
    ASSERT_TRUE(sl::synthetic_write(p).ok());
    auto m = sl::model_load(p.path);
    ASSERT_TRUE(m.ok()) << m.message();
    EXPECT_EQ(m->arch.name, arch);
    const std::vector<int32_t> tokens = token_ids(m->hp.vocab_size, 256);

    sl::calibration_params cp = sl::calibration_default_params();
    cp.n_ctx = 32;
    cp.n_threads = 1;  // tiny matrices: one thread beats waking a team on a busy machine
    auto cal = sl::calibrate(*m, tokens, cp);
    ASSERT_TRUE(cal.ok()) << cal.message();
    EXPECT_EQ(cal->act, m->arch.act);

    sl::context_params xp = sl::context_default_params();
    xp.n_threads = 1;
    auto ctx = sl::context::create(*m, xp);
    ASSERT_TRUE(ctx.ok());
    sl::eval_params ep = sl::eval_default_params();
    ep.n_ctx = 32;
    ep.max_windows = 1;
    auto ref = sl::eval_dense_reference(*ctx, tokens, ep);
    ASSERT_TRUE(ref.ok()) << ref.message();

    const float want = 0.75f;  // reachable by every method (glu prunes only down: >= 2/3)
    for (const std::string& name : sl::method_names()) {
        sl::method_config c = sl::method_default_config();
        c.name = name;
        c.density = want;
        auto method = sl::make_method(c, *m, &*cal);
        ASSERT_TRUE(method.ok()) << arch << " " << name << ": " << method.message();
        auto r = sl::eval_method(*ctx, *ref, **method, nullptr, ep);
        ASSERT_TRUE(r.ok()) << arch << " " << name << ": " << r.message();
        std::printf("%-7s %-14s mlp density %.3f  attn density %.3f  KL %.4f  top-1 %.2f\n", arch.c_str(), name.c_str(),
                    r->mlp_density, r->attn_density, r->kld_mean, r->top1_agreement);
        EXPECT_TRUE(std::isfinite(r->kld_mean) && std::isfinite(r->ppl)) << arch << " " << name;
        if (name == "dense") {
            EXPECT_EQ(r->kld_mean, 0.0) << arch;
            continue;
        }
        if (name == "griffin") {
            // Dense over the prompt half of each window, its experts (k = want * hidden) after it.
            EXPECT_GT(r->mlp_density, want) << arch;
            EXPECT_LT(r->mlp_density, 1.0) << arch;
        } else {
            // Top-k methods land within a neuron of the target; calibrated thresholds within a few percent
            // (the calibration text and the evaluated text are different draws of the same distribution).
            EXPECT_NEAR(measured(name, *r, m->hp), want, 0.05) << arch << " " << name;
        }
        EXPECT_GT(r->kld_mean, 0.0) << arch << " " << name;
    }
    // Gate pruning's pair layout (up rows beside down columns, one fused pass with the model's own GLU:
    // GeGLU on Gemma) gives the logits of the separate output-sparse up and input-sparse down kernels
    // (a method set that also prunes down's inputs keeps those layouts), bit for bit on these small
    // shapes (down columns under 12 KiB).
    sl::method_config gc = sl::method_default_config();
    gc.name = "gate";
    gc.density = want;
    auto gate = sl::make_method(gc, *m, nullptr);
    ASSERT_TRUE(gate.ok()) << gate.message();
    auto logits = [&](const sl::method_traits& reserved) {
        auto c = sl::context::create(*m, xp);
        EXPECT_TRUE(c.ok());
        c->reserve_layouts(reserved);
        c->set_method(gate->get());
        std::vector<float> all(static_cast<size_t>(32) * static_cast<size_t>(m->hp.vocab_size));
        c->prefill({tokens.data(), 32}, 0, all.data());
        return std::make_pair(all, c->layout_bytes());
    };
    sl::method_traits separate;
    separate.down_in = true;
    const auto [paired, pair_bytes] = logits({});
    const auto [split, split_bytes] = logits(separate);
    EXPECT_EQ(paired, split) << arch;
    EXPECT_GT(pair_bytes, split_bytes) << arch << ": the pairs replace up too";
    fs::remove(p.path);
}

TEST(MethodsArch, Qwen3) { run_all_methods("qwen3"); }
TEST(MethodsArch, Phi3) { run_all_methods("phi3"); }
TEST(MethodsArch, Gemma2) { run_all_methods("gemma2"); }
TEST(MethodsArch, Gemma) { run_all_methods("gemma"); }
// q twice as wide as dim: TEAL's and CHESS's o-input masks, densities and calibration sites at q_dim.
TEST(MethodsArch, Qwen3WideHeads) { run_all_methods("qwen3", "qwen3-0.6b-mini"); }

}  // namespace

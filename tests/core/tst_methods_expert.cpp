// GRIFFIN, the SparseLLM-style fused sparse MLP (differential cache) and FFSplit on the real stories260K.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "sparselens/core/calibration.h"
#include "sparselens/core/context.h"
#include "sparselens/core/eval.h"
#include "sparselens/core/ffsplit.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/model.h"
#include "sparselens/core/synthetic.h"
#include "sparselens/core/tokenizer.h"
#include "sparselens/kernels/kernels.h"
#include "stories_fixture.h"

namespace {

struct fixture {
    sl::model m;
    std::vector<int32_t> held_out;  // evaluation and prompts: text the calibration did not see
    sl::calibration cal;
};

const fixture& fx() {
    static const fixture f = [] {
        const sl::test::stories_model& s = sl::test::stories260k();
        const sl::tokenizer* tok = &s.tok;
        fixture r;
        r.m = s.m;
        const std::string raw = sl::test::shared_text("text/stories260K_samples.txt");
        EXPECT_GT(raw.size(), 300000u);
        const std::vector<int32_t> calib = tok->encode(std::string(raw.begin(), raw.begin() + 20000), true, false);
        r.held_out = tok->encode(std::string(raw.begin() + 200000, raw.begin() + 210000), true, false);
        r.cal = sl::test::stories_calibration(calib, 128, 4096);
        return r;
    }();
    return f;
}

// The model is tiny: one thread, so a loaded machine's OpenMP barriers do not dominate the run time.
sl::context_params one_thread() {
    sl::context_params p = sl::context_default_params();
    p.n_threads = 1;
    return p;
}

int32_t hidden() { return fx().m.hp.hidden_dim; }
int32_t n_layers() { return fx().m.hp.n_layers; }

std::unique_ptr<sl::sparsity_method> make(const std::string& name, float density, int32_t rank = 0) {
    sl::method_config c = sl::method_default_config();
    c.name = name;
    c.density = density;
    c.rank = rank;
    auto r = sl::make_method(c, fx().m, nullptr);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.message());
    return std::move(r).value();
}

// Everything the engine reports per layer and token: masks, densities, GLU rows, MLP inputs and, when a
// context is given, the fused cache's statistics as they stood after that layer.
struct recorder : sl::activation_observer {
    struct entry {
        sl::index_mask pre, down;
        float mlp_density = 1.0f;
        sl::fused_mlp_stats stats;
    };
    const sl::context* ctx = nullptr;
    std::map<std::pair<int32_t, int32_t>, entry> masks;                   // (pos, layer)
    std::map<std::pair<int32_t, int32_t>, std::vector<float>> glu, x;  // (pos, layer)

    void on_activation(int32_t layer, sl::probe where, int32_t pos0, int32_t n, const float* data, int32_t width) override {
        if (where != sl::probe::glu && where != sl::probe::mlp_in) return;
        auto& dst = where == sl::probe::glu ? glu : x;
        for (int32_t t = 0; t < n; ++t)
            dst[{pos0 + t, layer}].assign(data + static_cast<size_t>(t) * width, data + static_cast<size_t>(t + 1) * width);
    }
    void on_masks(int32_t layer, int32_t pos, const sl::layer_masks& m, const sl::layer_density& d) override {
        entry& e = masks[{pos, layer}];
        e.pre = m.neurons_pre;
        e.down = m.down_in;
        e.mlp_density = d.mlp();
        if (ctx) e.stats = ctx->fused_stats();
    }
};

// Teacher-forced logits: prefill `n_prompt` tokens of `tokens` (from `offset`), then decode `n_gen` more.
std::vector<float> run(sl::sparsity_method* method, int32_t n_prompt, int32_t n_gen, recorder* rec = nullptr,
                       size_t offset = 0, sl::context* reuse = nullptr, const sl::model* model = nullptr) {
    auto created = sl::context::create(model ? *model : fx().m, one_thread());
    EXPECT_TRUE(created.ok());
    sl::context& ctx = reuse ? *reuse : *created;
    if (!reuse) ctx.set_method(method);
    if (rec) rec->ctx = &ctx;
    ctx.set_observer(rec);
    const size_t vocab = static_cast<size_t>(fx().m.hp.vocab_size);
    std::vector<float> all(static_cast<size_t>(n_prompt + n_gen) * vocab);
    const int32_t* toks = fx().held_out.data() + offset;
    ctx.prefill({toks, static_cast<size_t>(n_prompt)}, 0, all.data());
    for (int32_t j = n_prompt; j < n_prompt + n_gen; ++j) {
        const float* lg = ctx.decode(toks[j], j);
        std::copy(lg, lg + vocab, all.begin() + static_cast<ptrdiff_t>(j * vocab));
    }
    ctx.set_observer(nullptr);
    return all;
}

// Forwards every hook of `inner` but with the fused trait overridden: the same masks on the other path.
struct fused_override : sl::sparsity_method {
    sl::sparsity_method& inner;
    bool fused;
    fused_override(sl::sparsity_method& m, bool f) : inner(m), fused(f) {}
    std::string name() const override { return inner.name(); }
    sl::method_traits traits() const override {
        sl::method_traits t = inner.traits();
        t.fused = fused;
        return t;
    }
    void begin_sequence() override { inner.begin_sequence(); }
    void end_prompt(int32_t n) override { inner.end_prompt(n); }
    void select_mlp_inputs(const sl::token_info& t, std::span<const float> x, sl::layer_masks& m) override {
        inner.select_mlp_inputs(t, x, m);
    }
    void select_down(const sl::token_info& t, std::span<const float> g, sl::layer_masks& m) override {
        inner.select_down(t, g, m);
    }
};

// Replays recorded neuron sets, so two runs execute identical masks whatever their rounding.
struct replay : sl::sparsity_method {
    const recorder& rec;
    bool fused;
    replay(const recorder& r, bool f) : rec(r), fused(f) {}
    std::string name() const override { return "replay"; }
    sl::method_traits traits() const override {
        sl::method_traits t;
        t.neurons_pre = true;
        t.fused = fused;
        return t;
    }
    void select_mlp_inputs(const sl::token_info& t, std::span<const float>, sl::layer_masks& m) override {
        m.neurons_pre = rec.masks.at({t.pos, t.layer}).pre;
    }
};

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double d = 0.0, scale = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        d = std::max(d, std::fabs(double(a[i]) - b[i]));
        scale = std::max(scale, std::fabs(double(a[i])));
    }
    return d / std::max(scale, 1e-30);
}

// GRIFFIN eq. 6 recomputed from the recorded prompt GLU rows: s_j = sqrt(sum_t z_tj^2 / ||z_t||^2), the
// k largest (ties to the lower index), ascending.
std::vector<int32_t> griffin_reference(const recorder& rec, int32_t layer, int32_t n_prompt, int64_t k) {
    std::vector<double> s(static_cast<size_t>(hidden()), 0.0);
    for (int32_t t = 0; t < n_prompt; ++t) {
        const std::vector<float>& z = rec.glu.at({t, layer});
        double n2 = 0.0;
        for (float v : z) n2 += double(v) * v;
        for (size_t j = 0; j < z.size(); ++j) s[j] += double(z[j]) * z[j] / n2;
    }
    std::vector<int32_t> order(s.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return s[size_t(a)] > s[size_t(b)]; });
    order.resize(static_cast<size_t>(k));
    std::sort(order.begin(), order.end());
    return order;
}

TEST(Griffin, ExpertsAreFixedAfterThePromptFromPromptStatistics) {
    const int32_t P = 24, G = 12;
    const int64_t k = sl::density_to_k(0.5f, hidden());
    auto g = make("griffin", 0.5f);
    auto ctx = sl::context::create(fx().m, one_thread());
    ASSERT_TRUE(ctx.ok());
    ctx->set_method(g.get());

    std::vector<std::vector<int32_t>> first_experts;
    for (size_t offset : {size_t{0}, size_t{300}}) {  // the second sequence must forget the first
        recorder rec;
        run(nullptr, P, G, &rec, offset, &*ctx);
        std::vector<std::vector<int32_t>> experts;
        for (int32_t l = 0; l < n_layers(); ++l) {
            for (int32_t t = 0; t < P; ++t) {
                EXPECT_TRUE(rec.masks.at({t, l}).pre.all) << "prompt token " << t << " runs densely";
                EXPECT_TRUE(rec.masks.at({t, l}).down.all);
            }
            const std::vector<int32_t> want = griffin_reference(rec, l, P, k);
            for (int32_t t = P; t < P + G; ++t) {
                const recorder::entry& e = rec.masks.at({t, l});
                ASSERT_FALSE(e.pre.all);
                EXPECT_EQ(e.pre.idx, want) << "layer " << l << " token " << t;
                EXPECT_EQ(e.down.idx, want) << "down columns = the experts";
                EXPECT_FLOAT_EQ(e.mlp_density, float(k) / hidden());
            }
            experts.push_back(want);
        }
        if (first_experts.empty()) {
            first_experts = experts;
        } else {
            EXPECT_NE(experts, first_experts) << "a different prompt picks different experts";
        }
    }

    // A one-token prompt carries no sequence statistic: generation stays dense.
    recorder rec;
    run(nullptr, 1, 4, &rec, 0, &*ctx);
    for (int32_t t = 1; t < 5; ++t)
        for (int32_t l = 0; l < n_layers(); ++l) EXPECT_TRUE(rec.masks.at({t, l}).pre.all);
}

TEST(ExpertMethods, FullDensityReproducesDenseLogitsExactly) {
    auto dense = make("dense", 1.0f);
    for (const char* name : {"griffin", "sparsellm"}) {
        auto m = make(name, 1.0f);
        // The reference: the dense method on the same layouts (they replace the row-major matrices).
        auto ctx = sl::context::create(fx().m, one_thread());
        ASSERT_TRUE(ctx.ok());
        ctx->reserve_layouts(m->traits());
        ctx->set_method(dense.get());
        const std::vector<float> ref = run(dense.get(), 16, 16, nullptr, 0, &*ctx);
        recorder rec;
        EXPECT_EQ(run(m.get(), 16, 16, &rec), ref) << name;
        EXPECT_EQ(rec.masks.begin()->second.stats.updates, 0) << name << ": full density never takes the fused path";
    }
}

TEST(SparseLLM, HitsItsDensityExactlyOnEveryTokenAndLayer) {
    for (float d : {0.0f, 0.25f, 0.5f, 0.8f}) {  // 0: no neuron, the MLP adds nothing (and must not crash)
        const int64_t k = sl::density_to_k(d, hidden());
        auto m = make("sparsellm", d);
        recorder rec;
        run(m.get(), 8, 16, &rec);
        ASSERT_EQ(rec.masks.size(), size_t(24 * n_layers()));
        for (const auto& [key, e] : rec.masks) {
            ASSERT_FALSE(e.pre.all);
            EXPECT_EQ(int64_t(e.pre.idx.size()), k);
            EXPECT_FLOAT_EQ(e.mlp_density, float(k) / hidden());
        }
        // The predictor U_r S_r [hidden, r] and V_r^T [r, dim] in F32 per layer, read every token; the
        // default rank is dim / 8 (8 on stories260K).
        const uint64_t rank = uint64_t(fx().m.hp.dim) / 8;
        EXPECT_EQ(m->selection_bytes_per_token(),
                  uint64_t(n_layers()) * (uint64_t(hidden()) * rank + rank * uint64_t(fx().m.hp.dim)) * 4);
    }
    EXPECT_EQ(make("sparsellm", 1.0f)->selection_bytes_per_token(), 0u) << "no predictor at full density";
    EXPECT_EQ(make("griffin", 0.5f)->selection_bytes_per_token(), 0u);
}

// At full rank the predictor is |W_gate x| itself: its top-k must be the exact top-k up to near-ties.
// Lower ranks approximate it; recall of the exact top-k must not fall as the rank grows.
TEST(SparseLLM, PredictorApproximatesGatePreActivations) {
    const int64_t k = sl::density_to_k(0.5f, hidden());
    const int32_t dim = fx().m.hp.dim;
    double prev_recall = 0.0;
    for (int32_t rank : {2, 8, 32, dim}) {
        auto m = make("sparsellm", 0.5f, rank);
        recorder rec;
        run(m.get(), 8, 8, &rec);
        double hits = 0.0, total = 0.0;
        for (const auto& [key, e] : rec.masks) {
            const auto [pos, layer] = key;
            const sl::tensor_view& w = fx().m.layers[size_t(layer)].w_gate;
            const std::vector<float>& x = rec.x.at(key);
            std::vector<double> s(static_cast<size_t>(hidden()));
            for (int32_t j = 0; j < hidden(); ++j) {
                const float* row = reinterpret_cast<const float*>(w.row(j));
                double acc = 0.0;
                for (int32_t c = 0; c < dim; ++c) acc += double(row[c]) * x[size_t(c)];
                s[size_t(j)] = std::fabs(acc);
            }
            std::vector<double> sorted = s;
            std::sort(sorted.rbegin(), sorted.rend());
            const double kth = sorted[size_t(k - 1)], tol = 1e-4 * sorted[0];
            for (int32_t j : e.pre.idx) hits += s[size_t(j)] >= kth - tol;
            total += double(k);
            if (rank == dim) {
                for (int32_t j = 0; j < hidden(); ++j)
                    if (!e.pre.contains(j)) {
                        EXPECT_LE(s[size_t(j)], kth + tol) << "pos " << pos << " layer " << layer;
                    }
            }
        }
        const double recall = hits / total;
        std::printf("sparsellm predictor rank %2d: recall of the exact top-%lld of |W_gate x| = %.3f\n", rank,
                    static_cast<long long>(k), recall);
        EXPECT_GE(recall, prev_recall - 0.02);
        prev_recall = recall;
        if (rank == dim) {
            EXPECT_EQ(recall, 1.0);
        }
    }
}

TEST(FusedMlp, SameLogitsAsTheUnfusedPathWithTheSameMasks) {
    auto s = make("sparsellm", 0.4f);
    recorder masks;
    run(s.get(), 12, 20, &masks);
    replay fused(masks, true), unfused(masks, false);
    const std::vector<float> a = run(&fused, 12, 20), b = run(&unfused, 12, 20);
    const double err = max_abs_diff(b, a);
    std::printf("fused vs unfused, identical masks at 40%%: max |logit diff| / max |logit| = %.2e\n", err);
    EXPECT_LE(err, 1e-5);
    EXPECT_GT(err, 0.0) << "the fused path really ran (another summation order)";

    // Q8_0 gate/up with an F32 down (stories260K_q80: hidden 172 is no whole number of Q8_0 blocks, so the
    // down layout is F32): the bundles keep Q8_0 gate/up rows beside F32 down columns, every part a copy
    // of the weights, so the fused path runs here too and matches the unfused kernels.
    auto q8 = sl::model_load(sl::test::shared_path("models/stories260K_q80.bin"));
    ASSERT_TRUE(q8.ok());
    ASSERT_EQ(q8->layers[0].w_gate.type, sl::dtype::q8_0);
    ASSERT_EQ(q8->layers[0].w_down.type, sl::dtype::f32);
    sl::method_config c = sl::method_default_config();
    c.name = "sparsellm";
    c.density = 0.4f;
    auto sq = sl::make_method(c, *q8, nullptr);
    ASSERT_TRUE(sq.ok());
    recorder qmasks;
    run(sq->get(), 12, 20, &qmasks, 0, nullptr, &*q8);
    const sl::fused_mlp_stats& qs = qmasks.masks.rbegin()->second.stats;
    EXPECT_GT(qs.updates, 0) << "the fused cache runs on Q8_0 rows beside an F32 down";
    EXPECT_EQ(qs.bytes_copied, static_cast<uint64_t>(qs.entered) * (2 * sl::dtype_row_bytes(sl::dtype::q8_0, 64) + 64 * 4))
        << "bundles: two Q8_0 rows and an F32 down column";
    EXPECT_LT(qmasks.masks.rbegin()->second.mlp_density, 0.5f) << "the last token ran the method's neurons";
    replay qf(qmasks, true), qu(qmasks, false);
    const std::vector<float> q_unfused = run(&qu, 12, 20, nullptr, 0, nullptr, &*q8);
    EXPECT_LE(max_abs_diff(q_unfused, run(&qf, 12, 20, nullptr, 0, nullptr, &*q8)), 1e-5);

    // GRIFFIN: the prompt is dense on both paths, so its experts and the masks are identical too.
    auto g = make("griffin", 0.5f);
    fused_override gf(*g, true), gu(*g, false);
    EXPECT_LE(max_abs_diff(run(&gu, 20, 16), run(&gf, 20, 16)), 1e-5);
}

// Where the bundles are the weights' own bytes the fused path runs: synthetic llama files whose matrices
// are all Q8_0 or all Q4_0 (dim 256, hidden 768: whole blocks in every layout) fill the cache with bundles
// of the file's type (bytes_copied counts them). The fused kernel's numerics on these types are checked
// against references in tst_kernels_sparse; here only that the engine takes the path.
TEST(FusedMlp, RunsWhereBundlesAreCopiesOfTheWeights) {
    for (sl::dtype t : {sl::dtype::q8_0, sl::dtype::q4_0}) {
        SCOPED_TRACE(std::string(sl::dtype_name(t)));
        sl::synthetic_params p = sl::synthetic_default_params();
        p.shape = "small";
        p.type = t;
        p.path = (std::filesystem::temp_directory_path() /
                  ("sparselens_expert_" + std::to_string(::getpid()) + "_" + std::string(sl::dtype_name(t)) + ".gguf"))
                     .string();
        ASSERT_TRUE(sl::synthetic_write(p).ok());
        auto m = sl::model_load(p.path);
        std::filesystem::remove(p.path);  // mapped: the pages stay readable
        ASSERT_TRUE(m.ok()) << m.message();
        ASSERT_EQ(m->hp.vocab_size, fx().m.hp.vocab_size);  // run() feeds stories260K token ids
        ASSERT_EQ(m->layers[0].w_gate.type, t);
        ASSERT_EQ(m->layers[0].w_down.type, t);
        for (const char* name : {"griffin", "sparsellm"}) {
            SCOPED_TRACE(name);
            sl::method_config c = sl::method_default_config();
            c.name = name;
            c.density = 0.5f;
            auto meth = sl::make_method(c, *m, nullptr);
            ASSERT_TRUE(meth.ok()) << meth.message();
            recorder rec;
            const std::vector<float> fused = run(meth->get(), 16, 8, &rec, 0, nullptr, &*m);
            const sl::fused_mlp_stats& st = rec.masks.rbegin()->second.stats;
            EXPECT_GT(st.updates, 0);
            EXPECT_GT(st.memory_bytes, 0u);
            EXPECT_EQ(st.bytes_copied, static_cast<uint64_t>(st.entered) * 3 * sl::dtype_row_bytes(t, m->hp.dim))
                << "bundles are the file's type";
            EXPECT_FLOAT_EQ(rec.masks.rbegin()->second.mlp_density, 0.5f);
            EXPECT_TRUE(std::all_of(fused.begin(), fused.end(), [](float v) { return std::isfinite(v); }));
        }
    }
}

// GeGLU models (Gemma) take the fused path too: on a synthetic gemma file whose matrices are all Q4_0,
// GRIFFIN fills its cache with Q4_0 bundles and its logits match the unfused kernels' (GELU-tanh on both
// paths: a SiLU in the fused kernel would move them far beyond summation order; here the slices of both
// paths cover the same whole blocks, so they even agree bit for bit).
TEST(FusedMlp, RunsOnGeGluModels) {
    sl::synthetic_params p = sl::synthetic_default_params();
    p.arch = "gemma";
    p.shape = "small";
    p.type = sl::dtype::q4_0;
    p.path = (std::filesystem::temp_directory_path() /
              ("sparselens_expert_" + std::to_string(::getpid()) + "_gemma.gguf"))
                 .string();
    ASSERT_TRUE(sl::synthetic_write(p).ok());
    auto m = sl::model_load(p.path);
    std::filesystem::remove(p.path);
    ASSERT_TRUE(m.ok()) << m.message();
    ASSERT_EQ(m->arch.act, sl::glu_activation::gelu_tanh);
    ASSERT_LE(fx().m.hp.vocab_size, m->hp.vocab_size);  // run() feeds stories260K token ids
    sl::method_config c = sl::method_default_config();
    c.name = "griffin";
    c.density = 0.5f;
    auto g = sl::make_method(c, *m, nullptr);
    ASSERT_TRUE(g.ok()) << g.message();
    fused_override gf(**g, true), gu(**g, false);
    recorder rec;
    const std::vector<float> fused = run(&gf, 16, 8, &rec, 0, nullptr, &*m);
    EXPECT_GT(rec.masks.rbegin()->second.stats.updates, 0) << "the fused cache ran";
    const std::vector<float> unfused = run(&gu, 16, 8, nullptr, 0, nullptr, &*m);
    EXPECT_LE(max_abs_diff(unfused, fused), 1e-5);
}

// Each update copies exactly the neurons that entered the layer's active set since its previous token.
TEST(FusedMlp, DifferentialCacheCopiesOnlyEnteringNeurons) {
    const int64_t bundle_bytes = 3 * int64_t{fx().m.hp.dim} * 4;  // f32 gate row + up row + down column
    for (const char* name : {"sparsellm", "griffin"}) {
        auto m = make(name, 0.5f);
        recorder rec;
        const int32_t P = 16, G = 24;
        run(m.get(), P, G, &rec);
        std::vector<std::set<int32_t>> prev(static_cast<size_t>(n_layers()));
        sl::fused_mlp_stats last;
        int64_t entering_total = 0, active_total = 0;
        for (const auto& [key, e] : rec.masks) {  // ordered by position, then layer: the engine's order
            const auto [pos, layer] = key;
            const sl::fused_mlp_stats& now = e.stats;
            if (e.pre.all) {
                EXPECT_EQ(now.updates, last.updates) << "dense tokens leave the cache alone";
                continue;
            }
            const std::set<int32_t> cur(e.pre.idx.begin(), e.pre.idx.end());
            std::set<int32_t>& before = prev[size_t(layer)];
            int64_t entering = 0, leaving = 0;
            for (int32_t j : cur) entering += !before.count(j);
            for (int32_t j : before) leaving += !cur.count(j);
            EXPECT_EQ(now.updates - last.updates, 1);
            EXPECT_EQ(now.entered - last.entered, entering) << name << " pos " << pos << " layer " << layer;
            EXPECT_EQ(now.left - last.left, leaving);
            EXPECT_EQ(now.active - last.active, int64_t(cur.size()));
            EXPECT_EQ(int64_t(now.bytes_copied - last.bytes_copied), entering * bundle_bytes);
            if (std::string(name) == "griffin" && pos > P) {
                EXPECT_EQ(entering, 0) << "experts are copied once";
            }
            entering_total += entering;
            active_total += int64_t(cur.size());
            before = cur;
            last = now;
        }
        EXPECT_GT(last.updates, 0);
        EXPECT_EQ(last.entered, entering_total);
        EXPECT_DOUBLE_EQ(last.mask_change_rate(), double(entering_total) / double(active_total));
        std::printf("%-9s at 50%%: %lld updates, mask change rate %.1f%% (incl. the first fill), copies avoided "
                    "%lld (%.1f%%), %.2f MB copied, update time %.1f us/update, cache memory %.1f KB\n",
                    name, static_cast<long long>(last.updates), 100 * last.mask_change_rate(),
                    static_cast<long long>(last.copies_avoided()), 100 * last.copies_avoided_share(),
                    last.bytes_copied / 1e6, 1e6 * last.update_seconds / double(last.updates),
                    last.memory_bytes / 1e3);
    }
}

// A fixed set's first token copies every expert bundle, on the context's threads when the copy is large
// (small-512 in F32 at 50%: 768 bundles of 6 KiB, 4.7 MB a layer): the same bytes land in the same slots
// as with one thread, so the logits are identical, and the stage timing puts the cache and kernel in
// the fused stage.
TEST(FusedMlp, ExpertCopiesOnSeveralThreadsMatchOneThread) {
    sl::synthetic_params p = sl::synthetic_default_params();
    p.shape = "small-512";
    p.type = sl::dtype::f32;
    p.path = (std::filesystem::temp_directory_path() / ("sparselens_expert_mt_" + std::to_string(::getpid()) + ".gguf"))
                 .string();
    ASSERT_TRUE(sl::synthetic_write(p).ok());
    auto m = sl::model_load(p.path);
    std::filesystem::remove(p.path);
    ASSERT_TRUE(m.ok()) << m.message();
    sl::method_config c = sl::method_default_config();
    c.name = "griffin";
    c.density = 0.5f;
    std::vector<int32_t> prompt(12);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(3 + 37 * i % 1000);
    std::vector<std::vector<float>> logits;
    for (int threads : {1, 2}) {
        auto meth = sl::make_method(c, *m, nullptr);
        ASSERT_TRUE(meth.ok()) << meth.message();
        sl::context_params cp = sl::context_default_params();
        cp.n_threads = threads;
        cp.n_ctx = 32;
        auto ctx = sl::context::create(*m, cp);
        ASSERT_TRUE(ctx.ok());
        ctx->set_method(meth->get());
        std::vector<float> out;
        for (int round = 0; round < 2; ++round) {  // the second prompt clears and refills the buffer
            const float* lg = ctx->prefill(prompt, 0);
            ctx->set_stage_timing(true);
            for (int32_t pos = 12; pos < 16; ++pos) {
                out.insert(out.end(), lg, lg + m->hp.vocab_size);
                lg = ctx->decode(5 + pos, pos);
            }
            out.insert(out.end(), lg, lg + m->hp.vocab_size);
            const sl::stage_times& st = ctx->stage_timing();
            EXPECT_EQ(st.tokens, 4);
            EXPECT_GT(st.at(sl::stage::mlp_fused), 0.0);
            EXPECT_EQ(st.at(sl::stage::mlp_in), 0.0) << "every decoded token's MLP ran fused";
            EXPECT_EQ(st.at(sl::stage::down), 0.0);
            EXPECT_GT(st.at(sl::stage::qkv), 0.0);
            ctx->set_stage_timing(false);
        }
        const sl::fused_mlp_stats fs = ctx->fused_stats();
        EXPECT_EQ(fs.bytes_copied, 2u * 4 * 768 * 3 * 512 * 4) << "each prompt's first token copies 768 bundles a layer";
        logits.push_back(std::move(out));
    }
    ASSERT_EQ(logits[0].size(), logits[1].size());
    EXPECT_EQ(0, std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)));
}

// GRIFFIN's expert gate and up rows, held as Q4_0x8r groups where the CPU has that kernel (the last
// capacity % 8 slots stay rows), give the logits of the same buffer held as rows (regroup_rows off) bit
// for bit: 0.45 of 1536 neurons is not a whole number of groups, and the second prompt refills the buffer.
TEST(FusedMlp, RegroupedExpertsEqualRows) {
    sl::synthetic_params p = sl::synthetic_default_params();
    p.shape = "small-512";
    p.type = sl::dtype::q4_0;
    p.path = (std::filesystem::temp_directory_path() / ("sparselens_expert_x8_" + std::to_string(::getpid()) + ".gguf"))
                 .string();
    ASSERT_TRUE(sl::synthetic_write(p).ok());
    auto m = sl::model_load(p.path);
    std::filesystem::remove(p.path);
    ASSERT_TRUE(m.ok()) << m.message();
    ASSERT_EQ(m->layers[0].w_gate.type, sl::dtype::q4_0);
    sl::method_config c = sl::method_default_config();
    c.name = "griffin";
    c.density = 0.45f;
    std::vector<int32_t> prompt(10);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(7 + 53 * i % 500);
    std::vector<std::vector<float>> logits;
    for (bool regroup : {false, true}) {
        auto meth = sl::make_method(c, *m, nullptr);
        ASSERT_TRUE(meth.ok()) << meth.message();
        sl::context_params cp = sl::context_default_params();
        cp.n_threads = 2;
        cp.n_ctx = 32;
        cp.regroup_rows = regroup ? sl::context_params::regroup::all : sl::context_params::regroup::off;
        auto ctx = sl::context::create(*m, cp);
        ASSERT_TRUE(ctx.ok());
        ctx->set_method(meth->get());
        std::vector<float> out;
        for (int round = 0; round < 2; ++round) {
            prompt[0] = 11 + round;  // another prompt: other experts
            const float* lg = ctx->prefill(prompt, 0);
            for (int32_t pos = 10; pos < 14; ++pos) {
                out.insert(out.end(), lg, lg + m->hp.vocab_size);
                lg = ctx->decode(9 + pos, pos);
            }
            out.insert(out.end(), lg, lg + m->hp.vocab_size);
        }
        EXPECT_GT(ctx->fused_stats().updates, 0) << "the expert buffer ran";
        logits.push_back(std::move(out));
    }
    ASSERT_EQ(logits[0].size(), logits[1].size());
    EXPECT_EQ(0, std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)));
}

// ---- FFSplit ----------------------------------------------------------------------------------------

sl::ffsplit_model split(const std::string& mode, float heavy, float density, int32_t rank = -1) {
    sl::ffsplit_params p = sl::ffsplit_default_params();
    p.mode = mode;
    p.heavy_fraction = heavy;
    p.density = density;
    p.rank = rank;
    auto r = sl::ffsplit_transform(fx().m, fx().cal, p);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.message());
    return std::move(r).value();
}

struct eval_setup {
    sl::context ctx;
    sl::dense_reference ref;
    sl::eval_params ep;
};

eval_setup& ev() {
    static eval_setup* s = [] {
        sl::eval_params ep = sl::eval_default_params();
        ep.n_ctx = 64;
        ep.max_windows = 6;
        auto ctx = sl::context::create(fx().m, one_thread());
        EXPECT_TRUE(ctx.ok());
        auto ref = sl::eval_dense_reference(*ctx, fx().held_out, ep);
        EXPECT_TRUE(ref.ok());
        return new eval_setup{std::move(ctx).value(), std::move(ref).value(), ep};
    }();
    return *s;
}

sl::eval_result eval_model(const sl::model& m) {
    auto ctx = sl::context::create(m, one_thread());
    EXPECT_TRUE(ctx.ok());
    auto dense = make("dense", 1.0f);
    auto r = sl::eval_method(*ctx, ev().ref, *dense, nullptr, ev().ep);
    EXPECT_TRUE(r.ok());
    return std::move(r).value();
}

TEST(FFSplit, HeavyHittersStayExactAndBytesFollowTheSplit) {
    const int32_t dim = fx().m.hp.dim;
    const sl::ffsplit_model s = split("svd", 0.1f, 0.5f);
    ASSERT_EQ(s.layers.size(), size_t(n_layers()));
    for (int32_t l = 0; l < n_layers(); ++l) {
        const sl::layer_weights& a = fx().m.layers[size_t(l)];
        const sl::layer_weights& b = s.m.layers[size_t(l)];
        std::vector<int32_t> want = fx().cal.heavy_hitters(l, 0.1f);
        std::sort(want.begin(), want.end());
        ASSERT_EQ(s.heavy[size_t(l)], want);
        const int64_t h = int64_t(want.size()), light = hidden() - h;
        const sl::ffsplit_layer_report& rep = s.layers[size_t(l)];
        // f32 source: 4 bytes per element in each of the three matrices.
        EXPECT_EQ(rep.dense_bytes, uint64_t(3) * hidden() * dim * 4);
        EXPECT_EQ(rep.split_bytes, uint64_t(h * dim * 12 + int64_t(rep.rank) * (light + dim) * 12));
        EXPECT_LE(rep.split_bytes, 0.5 * rep.dense_bytes);
        EXPECT_GT(rep.split_bytes + uint64_t((light + dim) * 12), 0.5 * rep.dense_bytes) << "the largest rank that fits";
        std::set<int32_t> heavy(want.begin(), want.end());
        int64_t light_changed = 0;
        for (int32_t j = 0; j < hidden(); ++j) {
            const bool same_gate = std::memcmp(a.w_gate.row(j), b.w_gate.row(j), size_t(a.w_gate.row_bytes())) == 0;
            const bool same_up = std::memcmp(a.w_up.row(j), b.w_up.row(j), size_t(a.w_up.row_bytes())) == 0;
            bool same_down = true;
            for (int32_t i = 0; i < dim; ++i)
                same_down &= std::memcmp(a.w_down.row(i) + 4 * j, b.w_down.row(i) + 4 * j, 4) == 0;
            if (heavy.count(j)) {
                EXPECT_TRUE(same_gate && same_up && same_down) << "heavy neuron " << j << " of layer " << l;
            } else {
                light_changed += !same_gate && !same_up && !same_down;
            }
        }
        EXPECT_EQ(light_changed, light) << "every light neuron is approximated";
        EXPECT_GT(rep.rel_error[0], 0.0f);
        EXPECT_EQ(std::memcmp(a.wq.data, b.wq.data, size_t(a.wq.bytes())), 0) << "attention untouched";
    }
    EXPECT_NEAR(s.mlp_density(), 0.5, 0.03);
    EXPECT_EQ(s.model_dense_bytes - s.model_split_bytes, s.mlp_dense_bytes - s.mlp_split_bytes);
}

// Eckart-Young: the light part's approximation error falls strictly with the rank, and the model's
// KL with it once the rank carries information. Rank 0 (light neurons dropped) is reported, not
// ordered: a rank-4 gate and up can be worse than none, since silu(gate~) * up~ multiplies both errors.
TEST(FFSplit, AccuracyImprovesMonotonicallyWithRankAndQ4KeepsLightNeuronsUsable) {
    double prev_kl = 1e30;
    std::vector<std::array<float, 3>> prev_err(static_cast<size_t>(n_layers()), {2.0f, 2.0f, 2.0f});
    double kl_rank0 = 0.0;
    const int32_t full = fx().m.hp.dim;  // min(n_light, dim) for stories260K
    for (int32_t rank : {0, 4, 16, 32, full}) {
        const sl::ffsplit_model s = split("svd", 0.1f, 0.5f, rank);
        const sl::eval_result r = eval_model(s.m);
        std::printf("ffsplit svd heavy 10%% rank %2d: MLP bytes %5.1f%%, rel. error gate/up/down of layer 0 "
                    "%.3f/%.3f/%.3f, ppl %.3f (dense %.3f), KL %.5f, top-1 %.1f%%\n",
                    rank, 100 * s.mlp_density(), s.layers[0].rel_error[0], s.layers[0].rel_error[1],
                    s.layers[0].rel_error[2], r.ppl, r.ppl_dense, r.kld_mean, 100 * r.top1_agreement);
        for (size_t l = 0; l < s.layers.size(); ++l) {
            EXPECT_EQ(s.layers[l].rank, rank);
            for (int i = 0; i < 3; ++i) {
                EXPECT_LT(s.layers[l].rel_error[i], prev_err[l][i]) << "layer " << l << " rank " << rank;
                prev_err[l][i] = s.layers[l].rel_error[i];
            }
        }
        if (rank == 0) {
            kl_rank0 = r.kld_mean;
        } else {
            EXPECT_LT(r.kld_mean, prev_kl) << "rank " << rank;
            prev_kl = r.kld_mean;
        }
        if (rank == full) {
            EXPECT_LT(r.kld_mean, 1e-6) << "full rank reconstructs the light part";
            EXPECT_LT(s.layers[0].rel_error[0], 1e-5f);
        }
    }

    const sl::ffsplit_model q = split("q4", 0.1f, 0.5f);
    const sl::eval_result rq = eval_model(q.m);
    std::printf("ffsplit q4 heavy 10%%: MLP bytes %5.1f%%, ppl %.3f, KL %.5f, top-1 %.1f%%\n", 100 * q.mlp_density(),
                rq.ppl, rq.kld_mean, 100 * rq.top1_agreement);
    EXPECT_LT(rq.kld_mean, kl_rank0) << "4-bit light neurons beat dropping them";
    // Light rows are exactly their Q4_0 round trip; heavy rows are untouched.
    const int32_t dim = fx().m.hp.dim;
    std::vector<uint8_t> blocks(size_t(sl::dtype_row_bytes(sl::dtype::q4_0, dim)));
    std::vector<float> rt(static_cast<size_t>(dim));
    const std::set<int32_t> heavy(q.heavy[0].begin(), q.heavy[0].end());
    for (int32_t j = 0; j < hidden(); ++j) {
        const float* src = reinterpret_cast<const float*>(fx().m.layers[0].w_up.row(j));
        const float* got = reinterpret_cast<const float*>(q.m.layers[0].w_up.row(j));
        if (heavy.count(j)) {
            EXPECT_EQ(std::memcmp(src, got, size_t(dim) * 4), 0);
            continue;
        }
        sl::kernels::quantize_row(sl::dtype::q4_0, src, blocks.data(), dim);
        sl::kernels::dequantize_row(sl::dtype::q4_0, blocks.data(), rt.data(), dim);
        EXPECT_EQ(std::memcmp(rt.data(), got, size_t(dim) * 4), 0) << "neuron " << j;
    }
    const int64_t h = int64_t(q.heavy[0].size());
    EXPECT_EQ(q.layers[0].split_bytes, uint64_t(h * dim * 12 + (hidden() - h) * dim * 3 * 18 / 32));
}

// A Q8_0 source: bytes use each matrix's own element size; heavy neurons keep their dequantized values.
TEST(FFSplit, QuantizedSourceModel) {
    auto q8 = sl::model_load(sl::test::shared_path("models/stories260K_q80.bin"));
    ASSERT_TRUE(q8.ok()) << q8.message();
    const int32_t dim = q8->hp.dim;
    ASSERT_EQ(q8->layers[0].w_gate.type, sl::dtype::q8_0);
    for (const char* mode : {"svd", "q4"}) {
        sl::ffsplit_params p = sl::ffsplit_default_params();
        p.mode = mode;
        auto s = sl::ffsplit_transform(*q8, fx().cal, p);
        ASSERT_TRUE(s.ok()) << s.message();
        const sl::ffsplit_layer_report& rep = s->layers[1];
        const int64_t h = rep.n_heavy, light = hidden() - h;
        // The loader keeps down ([64, 172]) in F32: its rows are not whole Q8_0 blocks.
        const sl::layer_weights& lw = q8->layers[1];
        auto eb = [](sl::dtype t) { return double(sl::dtype_block_bytes(t)) / double(sl::dtype_block_elems(t)); };
        EXPECT_EQ(rep.dense_bytes, uint64_t(lw.w_gate.bytes() + lw.w_up.bytes() + lw.w_down.bytes()));
        const double e = eb(lw.w_gate.type) + eb(lw.w_up.type) + eb(lw.w_down.type);
        EXPECT_DOUBLE_EQ(e, 2 * 34.0 / 32.0 + 4.0);
        const double want = std::string(mode) == "svd" ? (h * dim + double(rep.rank) * (light + dim)) * e
                                                       : h * dim * e + light * dim * 3 * 18.0 / 32.0;
        EXPECT_EQ(rep.split_bytes, uint64_t(std::llround(want))) << mode;
        std::vector<float> src(static_cast<size_t>(dim));
        for (int32_t j : s->heavy[1]) {
            sl::kernels::dequantize_row(sl::dtype::q8_0, q8->layers[1].w_gate.row(j), src.data(), dim);
            EXPECT_EQ(std::memcmp(src.data(), s->m.layers[1].w_gate.row(j), size_t(dim) * 4), 0) << mode << " neuron " << j;
        }
        // The split model still runs (and its storage outlives the source model object's scope here).
        auto ctx = sl::context::create(s->m, one_thread());
        ASSERT_TRUE(ctx.ok());
        const float* logits = ctx->decode(1, 0);
        EXPECT_TRUE(std::isfinite(logits[0]));
    }
}

TEST(FFSplit, Errors) {
    sl::ffsplit_params p = sl::ffsplit_default_params();
    p.mode = "zip";
    auto r = sl::ffsplit_transform(fx().m, fx().cal, p);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find("unknown mode"), std::string::npos) << r.message();
    p.mode = "svd";
    p.heavy_fraction = 1.5f;
    EXPECT_FALSE(sl::ffsplit_transform(fx().m, fx().cal, p).ok());
    p.heavy_fraction = 0.1f;
    sl::calibration other = fx().cal;
    other.model.hidden_dim += 1;
    auto m = sl::ffsplit_transform(fx().m, other, p);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.message().find("hidden_dim"), std::string::npos) << m.message();
    p.progress = [](float) { return false; };
    auto c = sl::ffsplit_transform(fx().m, fx().cal, p);
    ASSERT_FALSE(c.ok());
    EXPECT_TRUE(c.cancelled());
}

// ---- The table for docs/methods.md ---------------------------------------------------------------------

// Mean MLP density of the decoded (scored) tokens only: GRIFFIN's prompt is dense by design, which
// eval's all-token average mixes in.
struct decode_density : sl::activation_observer {
    int32_t first = 0;
    double sum = 0.0;
    int64_t n = 0;
    void on_activation(int32_t, sl::probe, int32_t, int32_t, const float*, int32_t) override {}
    void on_masks(int32_t, int32_t pos, const sl::layer_masks&, const sl::layer_density& d) override {
        if (pos >= first) sum += d.mlp(), ++n;
    }
};

TEST(ExpertMethods, AccuracyTable) {
    eval_setup& e = ev();
    std::printf("\nstories260K f32, calibrated on 4096 tokens; %d held-out windows of %d tokens (first half prompt)\n",
                e.ref.n_windows, e.ref.n_ctx);
    std::printf("dense ppl %.3f\n", e.ref.ppl);
    std::printf("| method | target | MLP density (all tokens) | MLP density (decode) | ppl | KL mean | KL p99 | top-1 |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    for (const char* name : {"griffin", "sparsellm"}) {
        std::vector<double> kls;
        for (float d : {0.9f, 0.7f, 0.5f, 0.3f}) {
            auto m = make(name, d);
            decode_density dd;
            dd.first = e.ref.first_scored();
            e.ctx.set_observer(&dd);
            auto r = sl::eval_method(e.ctx, e.ref, *m, nullptr, e.ep);
            e.ctx.set_observer(nullptr);
            ASSERT_TRUE(r.ok());
            const double dec = dd.sum / double(dd.n);
            std::printf("| %s | %.0f%% | %.1f%% | %.1f%% | %.3f | %.4f | %.4f | %.1f%% |\n", name, 100 * d,
                        100 * r->mlp_density, 100 * dec, r->ppl, r->kld_mean, r->kld_p99, 100 * r->top1_agreement);
            EXPECT_NEAR(dec, double(sl::density_to_k(d, hidden())) / hidden(), 1e-6) << name;
            kls.push_back(r->kld_mean);
        }
        EXPECT_GT(kls.back(), kls.front()) << name << ": 30% density is less accurate than 90%";
    }
    // The predictor at full rank is |W_gate x| itself: the ceiling of the selection rule.
    for (float d : {0.7f, 0.5f}) {
        auto m = make("sparsellm", d, fx().m.hp.dim);
        auto r = sl::eval_method(e.ctx, e.ref, *m, nullptr, e.ep);
        ASSERT_TRUE(r.ok());
        std::printf("| sparsellm, rank %d (exact scores) | %.0f%% | %.1f%% | %.1f%% | %.3f | %.4f | %.4f | %.1f%% |\n",
                    fx().m.hp.dim, 100 * d, 100 * r->mlp_density, 100 * r->mlp_density, r->ppl, r->kld_mean,
                    r->kld_p99, 100 * r->top1_agreement);
    }
    for (float d : {0.9f, 0.7f, 0.5f, 0.3f}) {
        for (float heavy : {0.1f, 0.0f}) {
            const sl::ffsplit_model s = split("svd", heavy, d);
            const sl::eval_result r = eval_model(s.m);
            std::printf("| ffsplit svd, heavy %.0f%% (rank %d) | %.0f%% | %.1f%% (bytes) | %.1f%% (bytes) | %.3f | %.4f | %.4f | %.1f%% |\n",
                        100 * heavy, s.layers[0].rank, 100 * d, 100 * s.mlp_density(), 100 * s.mlp_density(), r.ppl,
                        r.kld_mean, r.kld_p99, 100 * r.top1_agreement);
            EXPECT_LE(s.mlp_density(), d + 1e-6);
        }
    }
    for (float heavy : {0.1f, 0.0f}) {
        const sl::ffsplit_model q = split("q4", heavy, 1.0f);
        const sl::eval_result rq = eval_model(q.m);
        std::printf("| ffsplit q4, heavy %.0f%% | - | %.1f%% (bytes) | %.1f%% (bytes) | %.3f | %.4f | %.4f | %.1f%% |\n",
                    100 * heavy, 100 * q.mlp_density(), 100 * q.mlp_density(), rq.ppl, rq.kld_mean, rq.kld_p99,
                    100 * rq.top1_agreement);
    }
    // GRIFFIN's premise, from the calibration: top-50% neuron sets by ||Zbar[:, j]|| agree more within a
    // window (prompt half vs generation half) than between windows.
    std::printf("flocking (Jaccard of top-50%% sets) per layer, within / between windows:");
    for (const sl::layer_calibration& lc : fx().cal.layers)
        std::printf(" %.2f/%.2f", lc.flock_within[sl::calibration_flock_headline], lc.flock_between[sl::calibration_flock_headline]);
    std::printf("\n");
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

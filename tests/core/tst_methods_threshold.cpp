// CATS, CHESS (w/o, w/), TEAL (with its attention share) and heavy-hitter pinning: selection rules on
// hand-made activations and a fake calibration, full-density exactness, and densities on held-out text.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "sparselens/core/calibration.h"
#include "sparselens/core/context.h"
#include "sparselens/core/eval.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/model.h"
#include "sparselens/core/threshold_methods.h"
#include "sparselens/core/tokenizer.h"
#include "stories_fixture.h"

namespace {

using v32 = std::vector<int32_t>;

// ---- rules on hand-made vectors ---------------------------------------------------------------------

TEST(ThresholdRules, StrictRulePrunesTiesNaNAndZeros) {
    sl::index_mask m;
    sl::threshold_mask_strict(std::vector<float>{-2.0f, 1.0f, NAN, 1.5f, -1.0f, 0.0f}, 1.0f, m);
    EXPECT_FALSE(m.all);
    EXPECT_EQ(m.idx, (v32{0, 3}));  // |v| == t is pruned (CHESS eq. 10 / 19)
    sl::threshold_mask_strict(std::vector<float>{0.0f, 0.0f, 0.0f}, 0.0f, m);
    EXPECT_FALSE(m.all);  // all-zero input: nothing exceeds 0
    EXPECT_TRUE(m.idx.empty());
    sl::threshold_mask_strict(std::vector<float>{3.0f, -2.0f}, 1.0f, m);
    EXPECT_TRUE(m.all);
}

TEST(ThresholdRules, ChannelRule) {
    sl::index_mask m;
    const std::vector<float> t = {1.0f, 0.5f, INFINITY, 0.0f, 2.0f};
    sl::channel_threshold_mask(std::vector<float>{1.0f, -0.6f, 1e30f, 0.0f, NAN}, t, m);
    EXPECT_EQ(m.idx, (v32{1}));  // tie pruned, inf threshold never passes, 0 > 0 fails, NaN fails
    sl::channel_threshold_mask(std::vector<float>{0, 0, 0, 0, 0}, t, m);
    EXPECT_FALSE(m.all);
    EXPECT_TRUE(m.idx.empty());
    sl::channel_threshold_mask(std::vector<float>{2, 1, 0, 0, 0}, std::vector<float>{1, 0.5f, -1, -1, -1}, m);
    EXPECT_TRUE(m.all);
}

TEST(ThresholdRules, UnionSiluAndKeepMapping) {
    sl::index_mask a, out;
    a.all = false;
    a.idx = {1, 4};
    sl::union_mask(a, v32{0, 4, 5}, 8, out);
    EXPECT_EQ(out.idx, (v32{0, 1, 4, 5}));
    sl::union_mask(a, v32{0, 2, 3, 5}, 6, out);
    EXPECT_TRUE(out.all);
    a.set_all();
    sl::union_mask(a, v32{2}, 6, out);
    EXPECT_TRUE(out.all);

    EXPECT_FLOAT_EQ(sl::silu_abs(2.0f), 2.0f / (1.0f + std::exp(-2.0f)));
    EXPECT_FLOAT_EQ(sl::silu_abs(-2.0f), 2.0f / (1.0f + std::exp(2.0f)));
    EXPECT_TRUE(std::isnan(sl::silu_abs(NAN)));

    EXPECT_FLOAT_EQ(sl::dense_gate_keep(1.0f), 1.0f);
    EXPECT_FLOAT_EQ(sl::dense_gate_keep(0.5f), 0.25f);
    EXPECT_FLOAT_EQ(sl::dense_gate_keep(0.3f), 0.0f);  // below the 1/3 floor of dense-gate methods
    EXPECT_FLOAT_EQ(sl::dense_gate_keep(NAN), 0.0f);
}

TEST(ThresholdRules, HistogramEnergyMatchesSortedValues) {
    sl::magnitude_histogram h(7);
    std::vector<float> v;
    for (int i = 0; i < 20000; ++i) v.push_back(std::exp(-4.0f + 8.0f * float(i) / 20000));  // log-uniform
    for (int i = 0; i < 5000; ++i) v.push_back(0.0f);
    h.add_abs(v);
    for (float t : {0.05f, 0.3f, 1.0f, 7.0f, 100.0f}) {
        double exact = 0;
        for (float x : v) exact += x < t ? double(x) * x : 0.0;
        exact /= double(v.size());
        EXPECT_NEAR(sl::histogram_energy_below(h, t), exact, 0.01 * exact + 1e-12) << t;
    }
    EXPECT_EQ(sl::histogram_energy_below(h, 0.0f), 0.0);
    EXPECT_EQ(sl::histogram_energy_below(sl::magnitude_histogram(7), 1.0f), 0.0);
}

// Greedy on hand-made error curves: it hits the byte target exactly and spends sparsity where it is cheap.
TEST(TealGreedy, SpendsSparsityWhereTheProxyIsCheapest) {
    const std::array<double, sl::proj_count> bytes = {100, 50, 50, 100, 200, 200, 200};
    auto density = [&](const std::array<float, sl::proj_count>& k) {
        double s = 0, t = 0;
        for (int p = 0; p < sl::proj_count; ++p) s += k[p] * bytes[p], t += bytes[p];
        return s / t;
    };
    // Projection 6 (down) costs nothing: it is emptied before anything else is touched.
    auto free_down = [](int p, float keep) { return p == 6 ? 0.0 : std::pow(1.0 - keep, 3.0); };
    auto k = sl::teal_greedy(bytes, free_down, 0.8f, 0.005f);
    EXPECT_NEAR(density(k), 0.8, 1e-6);
    EXPECT_NEAR(k[6], 1.0 - 0.2 * 900 / 200, 1e-5);
    for (int p = 0; p < 6; ++p) EXPECT_EQ(k[p], 1.0f) << p;

    // Equal curves e(s) = s^3 per projection: the optimum equalises the marginal error per byte,
    // 3 s_p^2 / bytes_p, so the sparsity s_p = 1 - keep_p grows as sqrt(bytes_p).
    auto same = [](int, float keep) { return std::pow(1.0 - keep, 3.0); };
    k = sl::teal_greedy(bytes, same, 0.5f, 0.001f);
    EXPECT_NEAR(density(k), 0.5, 1e-6);
    const double c = (1.0 - k[4]) / std::sqrt(bytes[4]);
    for (int p = 0; p < sl::proj_count; ++p) EXPECT_NEAR((1.0 - k[p]) / std::sqrt(bytes[p]), c, 0.1 * c) << p;

    // A projection whose error is 10x steeper keeps more.
    auto steep_q = [](int p, float keep) { return (p == 0 ? 10.0 : 1.0) * std::pow(1.0 - keep, 2.0); };
    k = sl::teal_greedy(bytes, steep_q, 0.5f, 0.002f);
    EXPECT_GT(k[0], k[3] + 0.2);

    k = sl::teal_greedy(bytes, same, 1.0f, 0.005f);
    for (float x : k) EXPECT_EQ(x, 1.0f);
    k = sl::teal_greedy(bytes, same, 0.0f, 0.005f);
    for (float x : k) EXPECT_NEAR(x, 0.0f, 1e-6);
}

TEST(Pinning, InnerKeepAccountsForOverlap) {
    sl::layer_calibration lc;
    const int64_t hidden = 100;
    for (auto& f : lc.topk_freq) f.assign(hidden, 0.0f);
    const v32 pinned = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    // Pinned neurons never reach the top-k: the inner pays for them fully.
    EXPECT_NEAR(sl::pinned_inner_keep(lc, pinned, hidden, 0.5f), 0.40, 1e-4);
    // Always in the top 10%: they would have passed anyway, so the inner keeps its full budget.
    for (auto& f : lc.topk_freq)
        for (int32_t j : pinned) f[j] = 1.0f;
    EXPECT_NEAR(sl::pinned_inner_keep(lc, pinned, hidden, 0.5f), 0.5, 1e-4);
    EXPECT_NEAR(sl::expected_pinned_overlap(lc, pinned, 0.05f), 5.0, 1e-4);  // linear from (0, 0)
    EXPECT_LT(sl::pinned_inner_keep(lc, pinned, hidden, 0.05f), 0.0f);       // budget below |pinned|
    EXPECT_EQ(sl::pinned_inner_keep(lc, pinned, hidden, 1.0f), 1.0f);
}

// ---- methods on a tiny hand-made model and calibration -----------------------------------------------

struct fake {
    sl::model m;
    sl::calibration cal;
};

// dim 8, hidden 6, one layer; histograms of known values, E|a_up| chosen per neuron.
fake make_fake() {
    fake f;
    sl::model_hparams& hp = f.m.hp;
    hp.dim = 8;
    hp.hidden_dim = 6;
    hp.n_layers = 1;
    hp.n_heads = 2;
    hp.n_kv_heads = 1;
    hp.vocab_size = 16;
    hp.seq_len = 32;
    sl::layer_weights lw;
    static const std::vector<float> w(64, 0.25f);  // only read by TEAL's branch energies
    auto view = [](int64_t rows, int64_t cols) {
        sl::tensor_view v;
        v.rows = rows;
        v.cols = cols;
        v.data = w.data();
        return v;
    };
    lw.wq = view(8, 8), lw.wk = view(4, 8), lw.wv = view(4, 8), lw.wo = view(8, 8);
    lw.w_gate = view(6, 8), lw.w_up = view(6, 8), lw.w_down = view(8, 6);
    f.m.layers.push_back(lw);
    f.cal.model.dim = 8, f.cal.model.hidden_dim = 6, f.cal.model.n_layers = 1;
    f.cal.model.n_heads = 2, f.cal.model.n_kv_heads = 1, f.cal.model.vocab_size = 16;
    sl::layer_calibration lc;
    for (auto& h : lc.hist) h = sl::magnitude_histogram(7);
    for (int i = 1; i <= 1000; ++i) {
        const float x = 0.004f * i;  // uniform on (0, 4]
        for (auto& h : lc.hist) h.add(x);
        lc.hist[size_t(sl::hist_slot::glu)].add(x * x);  // heavier tail for the down input
    }
    lc.mean_abs_up = {1.0f, 2.0f, 0.5f, 0.0f, 1.0f, 4.0f};
    lc.mean_sq_glu.assign(6, 1.0f);
    lc.down_col_norm.assign(6, 1.0f);
    lc.heavy_hitter = {0.1f, 5.0f, 0.2f, 0.3f, 4.0f, 0.4f};
    for (auto& fq : lc.topk_freq) fq.assign(6, 0.5f);
    f.cal.layers.push_back(lc);
    return f;
}

std::unique_ptr<sl::sparsity_method> build(const fake& f, const std::string& name, float density, float pin = 0) {
    sl::method_config c;
    c.name = name;
    c.density = density;
    c.pin_fraction = pin;
    auto r = sl::make_method(c, f.m, &f.cal);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.message());
    return r.ok() ? std::move(r).value() : nullptr;
}

v32 selected(const sl::index_mask& m, int n) {
    v32 out;
    for (int i = 0; i < n; ++i)
        if (m.contains(i)) out.push_back(i);
    return out;
}

TEST(FakeCalibration, CatsAndChessFollowTheirRules) {
    const fake f = make_fake();
    const float keep = sl::dense_gate_keep(0.6f);
    const std::vector<float> gate = {3.0f, -0.2f, 0.7f, NAN, 1.2f, -4.0f};
    sl::token_info ti;

    auto cats = build(f, "cats", 0.6f);
    ASSERT_TRUE(cats);
    EXPECT_TRUE(cats->traits().neurons_post);
    EXPECT_FALSE(cats->traits().attn_inputs);
    sl::layer_masks m;
    m.reset();
    cats->select_after_first(ti, gate, m);
    const float t = f.cal.threshold_for_density(0, sl::site::gate_act, keep);
    v32 want;
    for (int i = 0; i < 6; ++i)
        if (std::fabs(gate[i] / (1 + std::exp(-gate[i]))) >= t) want.push_back(i);
    EXPECT_EQ(selected(m.neurons_post, 6), want);
    m.reset();
    cats->select_after_first(ti, std::vector<float>(6, 0.0f), m);  // all-zero gate: nothing
    EXPECT_EQ(m.neurons_post.count(6), 0);

    auto chess = build(f, "chess", 0.6f);
    ASSERT_TRUE(chess);
    m.reset();
    chess->select_after_first(ti, gate, m);
    const std::vector<float> ct = f.cal.chess_channel_thresholds(0, keep);
    want.clear();
    for (int i = 0; i < 6; ++i)
        if (f.cal.layers[0].mean_abs_up[i] > 0 && std::fabs(gate[i] / (1 + std::exp(-gate[i]))) > ct[i])
            want.push_back(i);
    EXPECT_EQ(selected(m.neurons_post, 6), want);
    EXPECT_FALSE(m.neurons_post.contains(3));   // NaN, and E|a_up| = 0
    EXPECT_FALSE(chess->traits().attn_inputs);  // CHESS w/o: attention untouched

    auto chess_attn = build(f, "chess-attn", 0.6f);
    ASSERT_TRUE(chess_attn);
    EXPECT_TRUE(chess_attn->traits().attn_inputs && chess_attn->traits().o_input);
    const std::vector<float> x = {0.1f, -3.9f, 2.0f, 0.0f, NAN, 1.0f, -2.5f, 3.0f};
    m.reset();
    chess_attn->select_attn_inputs(ti, x, m);
    const float tq = f.cal.threshold_for_density(0, sl::site::q_in, keep);
    want.clear();
    for (int i = 0; i < 8; ++i)
        if (std::fabs(x[i]) > tq) want.push_back(i);
    EXPECT_EQ(selected(m.q_in, 8), want);
    EXPECT_TRUE(m.k_in.all && m.v_in.all);  // eq. 21: k and v stay dense

    // At full density every mask stays "all", NaN included.
    for (const char* name : {"cats", "chess", "chess-attn", "teal"}) {
        auto full = build(f, name, 1.0f);
        ASSERT_TRUE(full);
        m.reset();
        full->select_attn_inputs(ti, x, m);
        full->select_o_input(ti, x, m);
        full->select_mlp_inputs(ti, x, m);
        full->select_after_first(ti, gate, m);
        full->select_down(ti, gate, m);
        for (const sl::index_mask* k :
             {&m.q_in, &m.k_in, &m.v_in, &m.o_in, &m.gate_in, &m.up_in, &m.neurons_post, &m.down_in})
            EXPECT_TRUE(k->all) << name;
    }
}

TEST(FakeCalibration, TealThresholdsEveryProjection) {
    const fake f = make_fake();
    auto plan = sl::teal_make_plan(f.m, f.cal, 0.5f);
    ASSERT_TRUE(plan.ok()) << plan.message();
    auto teal = build(f, "teal", 0.5f);
    ASSERT_TRUE(teal);
    const std::vector<float> x = {0.1f, -3.9f, 2.0f, 0.0f, NAN, 1.0f, -2.5f, 3.0f};
    sl::token_info ti;
    sl::layer_masks m;
    m.reset();
    teal->select_attn_inputs(ti, x, m);
    teal->select_o_input(ti, x, m);
    teal->select_mlp_inputs(ti, x, m);
    const sl::index_mask* masks[] = {&m.q_in, &m.k_in, &m.v_in, &m.o_in, &m.gate_in, &m.up_in};
    for (int p = 0; p < 6; ++p) {
        v32 want;
        for (int i = 0; i < 8; ++i)
            if (std::fabs(x[i]) >= plan->threshold[0][p]) want.push_back(i);
        EXPECT_EQ(selected(*masks[p], 8), want) << sl::proj_name(sl::proj(p));
    }
    double kept = 0, total = 0;
    for (int p = 0; p < sl::proj_count; ++p) kept += plan->keep[0][p] * plan->bytes[0][p], total += plan->bytes[0][p];
    EXPECT_NEAR(kept / total, 0.5, 1e-5);
    // The down input (squared values: most of the mass near 0) is the cheapest to prune.
    for (int p = 0; p < 6; ++p) EXPECT_LE(plan->keep[0][6], plan->keep[0][p]);
}

TEST(FakeCalibration, PinningUnionsHeavyHittersAndChecksSupport) {
    const fake f = make_fake();
    auto pinned = build(f, "cats", 0.7f, 0.34f);  // round(0.34 * 6) = 2: neurons 1 and 4
    ASSERT_TRUE(pinned);
    sl::token_info ti;
    sl::layer_masks m;
    m.reset();
    pinned->select_after_first(ti, std::vector<float>(6, 0.0f), m);  // nothing passes: only the pinned
    EXPECT_EQ(selected(m.neurons_post, 6), (v32{1, 4}));
    m.reset();
    pinned->select_after_first(ti, std::vector<float>{4, -0.1f, 4, 0, 0, 0}, m);
    EXPECT_EQ(selected(m.neurons_post, 6), (v32{0, 1, 2, 4}));

    sl::method_config c;
    c.name = "teal";
    c.density = 0.5f;
    c.pin_fraction = 0.1f;
    auto r = sl::make_method(c, f.m, &f.cal);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find("pinning"), std::string::npos);
    c.name = "cats";
    c.density = 0.4f;  // keep 0.1 < pinned share 0.5
    c.pin_fraction = 0.5f;
    EXPECT_FALSE(sl::make_method(c, f.m, &f.cal).ok());
    c.name = "dip";
    c.density = 0.5f;
    c.pin_fraction = 0.2f;
    EXPECT_FALSE(sl::make_method(c, f.m, nullptr).ok());  // heavy hitters need a calibration
    sl::calibration other = f.cal;
    other.model.dim = 16;
    c.name = "chess";
    c.pin_fraction = 0.0f;
    r = sl::make_method(c, f.m, &other);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find("dim"), std::string::npos) << r.message();
}

// ---- the real model: calibrate on one part of the text, evaluate on another ---------------------------

struct fixture {
    sl::model m;
    std::vector<int32_t> held_out;
    std::vector<int32_t> prompt;  // for the exactness runs
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
        // Calibration: the first ~20 KB (4096 tokens); evaluation: text from 200 KB on.
        const std::vector<int32_t> calib = tok->encode(std::string(raw.begin(), raw.begin() + 20000), true, false);
        r.held_out = tok->encode(std::string(raw.begin() + 200000, raw.begin() + 210000), true, false);
        r.prompt.assign(r.held_out.begin(), r.held_out.begin() + 40);
        sl::calibration_params cp = sl::calibration_default_params();
        cp.n_ctx = 128;
        cp.max_tokens = 4096;
        cp.n_threads = 1;
        auto cal = sl::calibrate(r.m, calib, cp);
        EXPECT_TRUE(cal.ok()) << (cal.ok() ? "" : cal.message());
        if (cal.ok()) r.cal = std::move(cal).value();
        EXPECT_EQ(r.cal.n_tokens, 4096);
        return r;
    }();
    return f;
}

std::unique_ptr<sl::sparsity_method> make(const std::string& name, float density, float pin = 0.0f) {
    sl::method_config c = sl::method_default_config();
    c.name = name;
    c.density = density;
    c.pin_fraction = pin;
    auto r = sl::make_method(c, fx().m, &fx().cal);
    EXPECT_TRUE(r.ok()) << name << ": " << (r.ok() ? "" : r.message());
    return r.ok() ? std::move(r).value() : nullptr;
}

// The model is tiny: one thread avoids OpenMP overhead on a busy machine.
sl::context_params one_thread() {
    sl::context_params p = sl::context_default_params();
    p.n_threads = 1;
    return p;
}

// `layouts`: the method set whose layouts the context holds (reserve_layouts).
std::vector<float> run(sl::sparsity_method* method, const sl::method_traits& layouts = {}) {
    auto ctx = sl::context::create(fx().m, one_thread());
    EXPECT_TRUE(ctx.ok());
    ctx->reserve_layouts(layouts);
    ctx->set_method(method);
    std::vector<float> all(fx().prompt.size() * size_t(fx().m.hp.vocab_size));
    ctx->prefill(fx().prompt, 0, all.data());
    return all;
}

const char* const threshold_methods[] = {"cats", "chess", "chess-attn", "teal", "teal-uniform"};

// Density 1 equals the dense method on the same layouts bit for bit (a method's input-major layouts
// replace the row-major matrices, dense tokens included).
TEST(ThresholdMethods, FullDensityReproducesDenseLogitsExactly) {
    auto dense = make("dense", 1.0f);
    for (const char* name : threshold_methods) {
        auto m = make(name, 1.0f);
        ASSERT_TRUE(m);
        EXPECT_EQ(run(m.get()), run(dense.get(), m->traits())) << name;
    }
    for (const char* name : {"cats", "chess", "chess-attn", "dip", "dip-ca"}) {
        auto m = make(name, 1.0f, 0.1f);
        ASSERT_TRUE(m);
        EXPECT_EQ(run(m.get()), run(dense.get(), m->traits())) << name << " pinned";
    }
}

// Records every activation an observer sees (probe, layer, position and values, in order) and the
// masks the kernels executed.
struct recording_probe : sl::activation_observer {
    std::vector<float> values;
    std::vector<int32_t> tags;
    void on_activation(int32_t layer, sl::probe p, int32_t pos0, int32_t n, const float* data, int32_t width) override {
        tags.insert(tags.end(), {layer, static_cast<int32_t>(p), pos0, n, width});
        values.insert(values.end(), data, data + int64_t{n} * width);
    }
    void on_masks(int32_t layer, int32_t pos, const sl::layer_masks& m, const sl::layer_density&) override {
        tags.insert(tags.end(), {layer, pos, m.down_in.all ? -1 : static_cast<int32_t>(m.down_in.idx.size())});
        tags.insert(tags.end(), m.down_in.idx.begin(), m.down_in.idx.end());
    }
};

// CATS/CHESS/gate pruning alone get up|down pair layouts (one read per chosen neuron) that replace
// both matrices, up pruning gate|down pairs; with a method set that also prunes down's inputs (GLU
// pruning) they run the
// separate output-sparse up and input-sparse down kernels. On stories260K (down columns far below
// the kernels' 12 KiB split) the two are the same arithmetic: logits, every observed activation (the
// full up pre-activations and GLU, 0 where not computed) and the executed masks agree bit for bit, and
// the pairs hold no more bytes than the layouts they replace.
TEST(ThresholdMethods, UpDownPairsEqualTheSeparateKernels) {
    sl::method_traits separate;
    separate.down_in = true;  // GLU pruning's: gate/up row-major, down input-major
    for (const char* name : {"cats", "chess", "gate", "up"}) {
        for (float d : {0.5f, 0.8f, 1.0f}) {
            const bool basic = std::string(name) == "gate" || std::string(name) == "up";
            auto m = make(name, d, basic ? 0.0f : 0.1f);
            ASSERT_TRUE(m);
            auto run_with = [&](const sl::method_traits& layouts, recording_probe& probe, uint64_t& layout_bytes) {
                auto ctx = sl::context::create(fx().m, one_thread());
                EXPECT_TRUE(ctx.ok());
                ctx->reserve_layouts(layouts);
                ctx->set_method(m.get());
                ctx->set_observer(&probe);
                std::vector<float> all(fx().prompt.size() * size_t(fx().m.hp.vocab_size));
                ctx->prefill(fx().prompt, 0, all.data());
                layout_bytes = ctx->layout_bytes();
                // Every projection runs on a layout, the pairs or its rows by output: the bytes read are
                // what the masks keep (no row-major projection on a masked input).
                for (size_t l = 0; l < ctx->density_sum().size(); ++l)
                    for (int p = 0; p < sl::proj_count; ++p)
                        EXPECT_EQ(ctx->read_density_sum()[l].d[p], ctx->density_sum()[l].d[p])
                            << "layer " << l << " " << sl::proj_name(sl::proj(p));
                return all;
            };
            recording_probe a, b;
            uint64_t pair_bytes = 0, split_bytes = 0;
            const std::vector<float> paired = run_with({}, a, pair_bytes);
            const std::vector<float> split = run_with(separate, b, split_bytes);
            SCOPED_TRACE(::testing::Message() << name << " density " << d);
            EXPECT_EQ(paired, split);
            EXPECT_EQ(a.values, b.values);
            EXPECT_EQ(a.tags, b.tags);
            EXPECT_FALSE(a.values.empty());
            const sl::model& mod = fx().m;
            uint64_t up_down = 0;
            for (const sl::layer_weights& lw : mod.layers)
                up_down += uint64_t((m->traits().up_first ? lw.w_gate : lw.w_up).bytes() + lw.w_down.bytes());
            if (m->traits().neurons_post) {
                EXPECT_LE(pair_bytes, up_down + 128 * mod.layers.size());
                EXPECT_GE(pair_bytes, up_down);
            }
        }
    }
}

// The read log (`bench --stages` replays it as plain reads) lists exactly the bytes the read densities
// count, stage by stage, with each listed row inside its matrix: input-sparse layouts (DIP, TEAL with
// its attention inputs), input-sparse down after whole gate/up (GLU pruning: at 90% MLP density 70% of
// down's columns; at 50% none, and nothing is logged for them) and pair layouts (CATS, CHESS).
TEST(ThresholdMethods, ReadLogMatchesTheReadDensities) {
    for (const std::string name : {"dip", "teal", "chess-attn", "glu", "cats"}) {
        SCOPED_TRACE(name);
        auto m = make(name, name == "glu" ? 0.9f : 0.5f);
        ASSERT_TRUE(m);
        auto ctx = sl::context::create(fx().m, one_thread());
        ASSERT_TRUE(ctx.ok());
        ctx->set_method(m.get());
        std::vector<sl::weight_read> log;
        ctx->set_read_log(&log);
        for (int32_t pos = 0; pos < 4; ++pos) ctx->decode(fx().prompt[static_cast<size_t>(pos)], pos);
        ctx->set_read_log(nullptr);
        const size_t n_logged = log.size();
        ctx->decode(fx().prompt[4], 4);
        EXPECT_EQ(log.size(), n_logged);  // detached: nothing more
        ctx->reset_density();  // the same tokens again (the same masks), for their read densities
        for (int32_t pos = 0; pos < 4; ++pos) ctx->decode(fx().prompt[static_cast<size_t>(pos)], pos);
        ASSERT_EQ(ctx->density_tokens(), 4);

        double logged[sl::stage_count] = {}, listed = 0;
        for (const sl::weight_read& r : log) {
            logged[static_cast<int>(r.at)] += static_cast<double>(r.bytes());
            for (int32_t i : r.idx) ASSERT_TRUE(i >= 0 && i < r.rows) << i;
            listed += r.idx.empty() ? 0 : 1;
        }
        EXPECT_GT(listed, 0);
        double want_qkv = 0, want_o = 0, want_mlp = 0, dense_mlp = 0;
        for (size_t l = 0; l < fx().m.layers.size(); ++l) {
            const sl::layer_weights& lw = fx().m.layers[l];
            const float* d = ctx->read_density_sum()[l].d;
            want_qkv += d[0] * double(lw.wq.bytes()) + d[1] * double(lw.wk.bytes()) + d[2] * double(lw.wv.bytes());
            want_o += d[3] * double(lw.wo.bytes());
            want_mlp += d[4] * double(lw.w_gate.bytes()) + d[5] * double(lw.w_up.bytes()) +
                        d[6] * double(lw.w_down.bytes());
            dense_mlp += 4.0 * double(lw.w_gate.bytes() + lw.w_up.bytes() + lw.w_down.bytes());
        }
        const auto at = [&](sl::stage s) { return logged[static_cast<int>(s)]; };
        EXPECT_NEAR(at(sl::stage::qkv), want_qkv, 1e-5 * want_qkv);
        EXPECT_NEAR(at(sl::stage::o), want_o, 1e-5 * want_o);
        EXPECT_NEAR(at(sl::stage::mlp_in) + at(sl::stage::down) + at(sl::stage::mlp_fused), want_mlp, 1e-5 * want_mlp);
        EXPECT_EQ(at(sl::stage::mlp_fused) > 0, name == "cats" || name == "chess-attn");  // the pairs
        EXPECT_LT(want_mlp, 0.95 * dense_mlp);  // the MLP was pruned
    }
}

// TEAL with its planned input densities replaced: `planned` for every projection it prunes (at or above
// every layout's break-even: none gets an input-major layout; < 0: unknown, all get one).
class replanned final : public sl::sparsity_method {
public:
    replanned(sl::sparsity_method& inner, float planned) : m_in(inner), m_planned(planned) {}
    std::string name() const override { return m_in.name(); }
    sl::method_traits traits() const override { return m_in.traits(); }
    void select_attn_inputs(const sl::token_info& t, std::span<const float> x, sl::layer_masks& m) override {
        m_in.select_attn_inputs(t, x, m);
    }
    void select_o_input(const sl::token_info& t, std::span<const float> x, sl::layer_masks& m) override {
        m_in.select_o_input(t, x, m);
    }
    void select_mlp_inputs(const sl::token_info& t, std::span<const float> x, sl::layer_masks& m) override {
        m_in.select_mlp_inputs(t, x, m);
    }
    void select_down(const sl::token_info& t, std::span<const float> glu, sl::layer_masks& m) override {
        m_in.select_down(t, glu, m);
    }
    float planned_input_density(int32_t, sl::proj) const override { return m_planned; }

private:
    sl::sparsity_method& m_in;
    float m_planned;
};

// A projection planned at or above its layout's break-even keeps its row-major matrix and runs the dense
// gemv on x with the pruned inputs zeroed: the same masked products as the input-sparse kernels on the
// layouts (F32: only the order of the sums differs), no layout bytes, and the engine reports every
// weight of it read while the masks' density stays the method's.
TEST(ThresholdMethods, PlannedDenseProjectionsRunRowMajorOnTheMaskedInput) {
    auto teal = make("teal", 0.5f);
    ASSERT_TRUE(teal);
    struct outcome {
        std::vector<float> logits;
        uint64_t layout_bytes = 0;
        std::vector<sl::layer_density> mask, read;
        int64_t tokens = 0;
    };
    auto run_planned = [&](float planned) {
        replanned m(*teal, planned);
        auto ctx = sl::context::create(fx().m, one_thread());
        EXPECT_TRUE(ctx.ok());
        ctx->set_method(&m);
        outcome o;
        o.logits.resize(fx().prompt.size() * size_t(fx().m.hp.vocab_size));
        ctx->prefill(fx().prompt, 0, o.logits.data());
        o.layout_bytes = ctx->layout_bytes();
        o.mask = ctx->density_sum();
        o.read = ctx->read_density_sum();
        o.tokens = ctx->density_tokens();
        return o;
    };
    const outcome layouts = run_planned(-1.0f), rows = run_planned(0.99f);
    EXPECT_GT(layouts.layout_bytes, 0u);
    EXPECT_EQ(rows.layout_bytes, 0u);
    ASSERT_EQ(layouts.logits.size(), rows.logits.size());
    double err = 0.0, ref = 0.0;
    for (size_t i = 0; i < rows.logits.size(); ++i) {
        err = std::max(err, std::fabs(double(rows.logits[i]) - layouts.logits[i]));
        ref = std::max(ref, std::fabs(double(layouts.logits[i])));
    }
    EXPECT_LE(err, 1e-4 * ref);
    EXPECT_EQ(rows.tokens, int64_t(fx().prompt.size()));
    double pruned = 0.0;
    for (size_t l = 0; l < rows.mask.size(); ++l)
        for (int p = 0; p < sl::proj_count; ++p) {
            SCOPED_TRACE(::testing::Message() << "layer " << l << " " << sl::proj_name(sl::proj(p)));
            EXPECT_EQ(layouts.read[l].d[p], layouts.mask[l].d[p]);  // layouts read what the masks keep
            EXPECT_EQ(rows.read[l].d[p], float(rows.tokens));       // row-major: every weight, every token
            EXPECT_NEAR(rows.mask[l].d[p], layouts.mask[l].d[p], 0.05 * rows.tokens);
            pruned += rows.tokens - rows.mask[l].d[p];
        }
    EXPECT_GT(pruned, 0.3 * rows.tokens * sl::proj_count * rows.mask.size());  // TEAL at 0.5 did prune
}

// Shared held-out evaluation: 6 windows of 64 tokens.
struct held_out_eval {
    sl::context ctx;
    sl::dense_reference ref;
    sl::eval_params ep;
};

held_out_eval& ev() {
    static held_out_eval* e = [] {
        auto ctx = sl::context::create(fx().m, one_thread());
        EXPECT_TRUE(ctx.ok());
        sl::eval_params ep = sl::eval_default_params();
        ep.n_ctx = 64;
        ep.max_windows = 6;
        auto ref = sl::eval_dense_reference(*ctx, fx().held_out, ep);
        EXPECT_TRUE(ref.ok());
        return new held_out_eval{std::move(ctx).value(), std::move(ref).value(), ep};
    }();
    return *e;
}

sl::eval_result evaluate(sl::sparsity_method& m) {
    auto r = sl::eval_method(ev().ctx, ev().ref, m, nullptr, ev().ep);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : sl::eval_result{};
}

// Density of the whole layer's linear weights (by bytes), averaged over layers.
double layer_density(const sl::eval_result& r) {
    const sl::model_hparams& hp = fx().m.hp;
    const double a = 2.0 * hp.dim * hp.dim + 2.0 * hp.dim * hp.kv_dim(), mlp = 3.0 * hp.dim * hp.hidden_dim;
    return (a * r.attn_density + mlp * r.mlp_density) / (a + mlp);
}

TEST(ThresholdMethods, DensityOnTargetOnHeldOutText) {
    const sl::model_hparams& hp = fx().m.hp;
    for (float d : {0.3f, 0.5f, 0.7f}) {
        for (const char* name : threshold_methods) {
            auto m = make(name, d);
            ASSERT_TRUE(m);
            const sl::eval_result r = evaluate(*m);
            const std::string what = std::string(name) + " at " + std::to_string(d);
            if (std::string(name).rfind("teal", 0) == 0) {
                EXPECT_NEAR(layer_density(r), d, 0.03) << what;
                continue;
            }
            // Dense-gate methods cannot go below 1/3: at 30% they sit exactly on that floor.
            const double want = std::max(d, 1.0f / 3.0f);
            EXPECT_NEAR(r.mlp_density, want, 0.03) << what;
            if (std::string(name) == "chess-attn") {
                const double a = sl::dense_gate_keep(d), q = hp.dim, kv = hp.kv_dim();
                EXPECT_NEAR(r.attn_density, (2 * q * a + 2 * kv) / (2 * q + 2 * kv), 0.03) << what;
                EXPECT_LT(r.attn_density, 1.0) << what;
                for (const sl::layer_density& l : r.per_layer) {
                    EXPECT_EQ(l.d[int(sl::proj::k)], 1.0f);
                    EXPECT_EQ(l.d[int(sl::proj::v)], 1.0f);
                }
            } else {
                EXPECT_EQ(r.attn_density, 1.0) << what;  // CATS, CHESS w/o: attention exactly dense
            }
        }
    }
}

TEST(ThresholdMethods, TealSparsifiesEveryProjectionAt50) {
    for (const char* name : {"teal", "teal-uniform"}) {
        auto m = make(name, 0.5f);
        ASSERT_TRUE(m);
        const sl::eval_result r = evaluate(*m);
        for (size_t l = 0; l < r.per_layer.size(); ++l) {
            std::printf("%-12s layer %zu:", name, l);
            for (int p = 0; p < sl::proj_count; ++p) {
                std::printf(" %s %.2f", sl::proj_name(sl::proj(p)), r.per_layer[l].d[p]);
                EXPECT_LT(r.per_layer[l].d[p], 1.0f) << name << " layer " << l << " " << sl::proj_name(sl::proj(p));
            }
            std::printf("\n");
        }
        std::printf("%-12s MLP %.3f attention %.3f layer %.3f\n", name, r.mlp_density, r.attn_density,
                    layer_density(r));
    }
}

// TEAL's attention share: attention density 1 (the default) is the single whole-layer budget bit for
// bit; below 1, the MLP lands on `density` and q/k/v/o on the attention density, on held-out text.
TEST(ThresholdMethods, TealAttentionShare) {
    for (const char* name : {"teal", "teal-uniform"}) {
        sl::method_config c = sl::method_default_config();
        c.name = name;
        c.density = 0.5f;
        c.attn_density = 1.0f;
        auto same = sl::make_method(c, fx().m, &fx().cal);
        ASSERT_TRUE(same.ok()) << same.message();
        sl::teal_params joint = sl::teal_default_params();
        if (std::string(name) == "teal-uniform") joint.proxy = sl::teal_proxy::uniform;
        auto plan = sl::teal_make_plan(fx().m, fx().cal, 0.5f, joint);
        ASSERT_TRUE(plan.ok()) << plan.message();
        auto old = sl::make_teal_method(std::move(plan).value());
        EXPECT_EQ(run(same->get()), run(old.get(), old->traits())) << name;
        EXPECT_EQ((*same)->per_layer_values(), old->per_layer_values()) << name;

        double prev_kl = -1;
        for (float a : {0.7f, 0.5f, 0.3f}) {
            c.attn_density = a;
            auto m = sl::make_method(c, fx().m, &fx().cal);
            ASSERT_TRUE(m.ok()) << m.message();
            const sl::eval_result r = evaluate(**m);
            const std::string what = std::string(name) + " attention " + std::to_string(a);
            std::printf("%-12s MLP 50%% attention %.0f%%: MLP %.3f attention %.3f ppl %.3f (dense %.3f) KL %.4f top-1 %.1f%%\n",
                        name, 100 * a, r.mlp_density, r.attn_density, r.ppl, r.ppl_dense, r.kld_mean,
                        100 * r.top1_agreement);
            EXPECT_NEAR(r.mlp_density, 0.5, 0.03) << what;
            EXPECT_NEAR(r.attn_density, a, 0.03) << what;
            EXPECT_GE(r.kld_mean, prev_kl) << what;  // less attention density never helps
            prev_kl = r.kld_mean;
        }
        c.attn_density = 1.5f;
        auto bad = sl::make_method(c, fx().m, &fx().cal);
        ASSERT_FALSE(bad.ok());
        EXPECT_EQ(bad.message(), std::string(name) + ": attention density 1.500000 is outside [0, 1]");
    }
}

// Records, per token and layer, whether every pinned neuron was executed (in every neuron mask).
struct pin_probe : sl::activation_observer {
    std::vector<v32> pinned;
    int64_t checked = 0, missing = 0;
    void on_activation(int32_t, sl::probe, int32_t, int32_t, const float*, int32_t) override {}
    void on_masks(int32_t layer, int32_t, const sl::layer_masks& m, const sl::layer_density&) override {
        for (int32_t j : pinned[size_t(layer)]) {
            ++checked;
            if (!(m.neurons_pre.contains(j) && m.neurons_post.contains(j) && m.down_in.contains(j))) ++missing;
        }
    }
};

TEST(ThresholdMethods, PinnedNeuronsAlwaysRunAndDensityStaysOnTarget) {
    const float pin = 0.1f;
    pin_probe probe;
    for (int32_t l = 0; l < fx().m.hp.n_layers; ++l) probe.pinned.push_back(fx().cal.heavy_hitters(l, pin));
    ev().ctx.set_observer(&probe);
    for (const char* name : {"dip", "dip-ca", "cats", "chess", "chess-attn"}) {
        for (float d : {0.5f, 0.7f}) {
            auto m = make(name, d, pin);
            ASSERT_TRUE(m);
            probe.checked = probe.missing = 0;
            const sl::eval_result r = evaluate(*m);
            EXPECT_GT(probe.checked, 0);
            EXPECT_EQ(probe.missing, 0) << name;
            auto plain = make(name, d);
            const sl::eval_result u = evaluate(*plain);
            std::printf("%-10s %.0f%% pinned %.0f%%: MLP density %.3f (unpinned %.3f), KL %.4f (unpinned %.4f)\n", name,
                        100 * d, 100 * pin, r.mlp_density, u.mlp_density, r.kld_mean, u.kld_mean);
            EXPECT_NEAR(r.mlp_density, d, 0.03) << name;
        }
    }
    ev().ctx.set_observer(nullptr);
}

TEST(ThresholdMethods, AccuracyTable) {
    std::printf("\nstories260K, calibrated on 4096 tokens, evaluated on %d held-out windows of %d tokens\n",
                ev().ref.n_windows, ev().ref.n_ctx);
    std::printf("dense ppl %.3f\n", ev().ref.ppl);
    std::printf("| method | target | MLP density | attn density | layer density | ppl | KL | top-1 |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    auto row = [](const std::string& name, float d, const sl::eval_result& r) {
        std::printf("| %s | %.0f%% | %.3f | %.3f | %.3f | %.3f | %.4f | %.1f%% |\n", name.c_str(), 100 * d,
                    r.mlp_density, r.attn_density, layer_density(r), r.ppl, r.kld_mean, 100 * r.top1_agreement);
    };
    for (const char* name : {"gate", "dip", "cats", "chess", "chess-attn", "teal", "teal-uniform"}) {
        double prev_kl = -1;
        for (float d : {0.9f, 0.7f, 0.5f, 0.3f}) {
            auto m = make(name, d);
            ASSERT_TRUE(m);
            const sl::eval_result r = evaluate(*m);
            row(name, d, r);
            EXPECT_GE(r.kld_mean, prev_kl) << name << " at " << d;  // less density never helps
            prev_kl = r.kld_mean;
        }
    }
    // TEAL's greedy under the other error proxies (docs/methods.md explains why block_error is the default).
    for (sl::teal_proxy proxy : {sl::teal_proxy::relative_error, sl::teal_proxy::output_error}) {
        for (float d : {0.9f, 0.7f, 0.5f}) {
            sl::teal_params tp = sl::teal_default_params();
            tp.proxy = proxy;
            auto plan = sl::teal_make_plan(fx().m, fx().cal, d, tp);
            ASSERT_TRUE(plan.ok()) << plan.message();
            auto m = sl::make_teal_method(std::move(plan).value());
            row(std::string("teal/") + sl::teal_proxy_name(proxy), d, evaluate(*m));
        }
    }
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

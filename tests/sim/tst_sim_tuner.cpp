// The tuner: budget parsing, and the search on a random-weight model of the tiny shape (recommendations
// meet their budgets, fronts are non-dominated, DIP-CA's replay matches what it ran with, cancellation).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <unistd.h>

#include "sparselens/core/context.h"
#include "sparselens/core/synthetic.h"
#include "sparselens/sim/residency.h"
#include "sparselens/sim/shape.h"
#include "sparselens/sim/tuner.h"

namespace {

using namespace sl;
using namespace sl::sim;

TEST(TunerBudget, ParsesEveryForm) {
    struct row {
        const char* text;
        budget_metric metric;
        double limit;
        const char* canonical;
    };
    const row rows[] = {{"ppl+0.2", budget_metric::ppl_delta, 0.2, "ppl+0.2"},
                        {" PPL + 0.5 ", budget_metric::ppl_delta, 0.5, "ppl+0.5"},
                        {"ppl*1.05", budget_metric::ppl_ratio, 1.05, "ppl*1.05"},
                        {"ppl<3.5", budget_metric::ppl_max, 3.5, "ppl<3.5"},
                        {"ppl<=3.5", budget_metric::ppl_max, 3.5, "ppl<3.5"},
                        {"kld<0.05", budget_metric::kld_max, 0.05, "kld<0.05"},
                        {"kld<=.05", budget_metric::kld_max, 0.05, "kld<0.05"},
                        {"top1>0.9", budget_metric::top1_min, 0.9, "top1>0.9"},
                        {"top1>=1", budget_metric::top1_min, 1.0, "top1>1"}};
    for (const row& r : rows) {
        auto b = budget_parse(r.text);
        ASSERT_TRUE(b.ok()) << r.text << ": " << b.message();
        EXPECT_EQ(b->metric, r.metric) << r.text;
        EXPECT_DOUBLE_EQ(b->limit, r.limit) << r.text;
        EXPECT_EQ(b->text, r.canonical) << r.text;
    }
    for (const char* bad : {"", "ppl", "ppl+", "ppl+-0.2", "ppl+0.2x", "ppl*0.9", "kld>0.1", "top1>1.5", "speed<3",
                            "ppl+nan", "ppl+inf", "ppl+1e999"}) {
        auto b = budget_parse(bad);
        EXPECT_FALSE(b.ok()) << "accepted '" << bad << "'";
        if (!b.ok()) {
            EXPECT_NE(b.message().find("budget"), std::string::npos);
        }
    }
}

TEST(TunerBudget, MetOnTheRightSide) {
    eval_result r;
    r.ppl_dense = 3.0;
    r.ppl = 3.2;
    r.kld_mean = 0.05;
    r.top1_agreement = 0.9;
    EXPECT_TRUE(budget_met(budget_parse("ppl+0.2").value(), r));
    EXPECT_FALSE(budget_met(budget_parse("ppl+0.19").value(), r));
    EXPECT_TRUE(budget_met(budget_parse("ppl*1.07").value(), r));
    EXPECT_FALSE(budget_met(budget_parse("ppl*1.06").value(), r));
    EXPECT_TRUE(budget_met(budget_parse("ppl<3.2").value(), r));
    EXPECT_FALSE(budget_met(budget_parse("ppl<3.1").value(), r));
    EXPECT_TRUE(budget_met(budget_parse("kld<0.05").value(), r));
    EXPECT_FALSE(budget_met(budget_parse("kld<0.049").value(), r));
    EXPECT_TRUE(budget_met(budget_parse("top1>0.9").value(), r));
    EXPECT_FALSE(budget_met(budget_parse("top1>0.91").value(), r));
    r.ppl = r.ppl_dense;  // a method reproducing dense meets "ppl+0"
    EXPECT_TRUE(budget_met(budget_parse("ppl+0").value(), r));
}

TEST(TunerLayout, EveryMethodHasAValidLayout) {
    for (const std::string& m : method_names()) {
        auto l = layout_parse(method_layout(m));
        EXPECT_TRUE(l.ok()) << m << ": " << method_layout(m);
    }
    EXPECT_EQ(method_layout("dip"), "dip");
    EXPECT_EQ(method_layout("cats"), "cats");
    EXPECT_EQ(method_layout("griffin"), "bundle");
}

TEST(TunerPareto, FrontIsNonDominated) {
    std::vector<tune_candidate> c(6);
    const double obj[] = {10, 12, 11, 12, 9, 20};
    const double ppl[] = {3.0, 3.5, 3.6, 3.4, 2.9, 9.0};
    for (size_t i = 0; i < c.size(); ++i) {
        c[i].config.name = i < 5 ? "dip" : "cats";
        c[i].full = true;
        c[i].objective = obj[i];
        c[i].eval.ppl = ppl[i];
    }
    c[4].full = false;  // coarse-only: never on a front, dominates nothing
    c.push_back(c[0]);  // an equal point: only the first stays on the front
    tune_mark_pareto(c);
    EXPECT_FALSE(c[6].pareto);
    EXPECT_TRUE(c[0].pareto);
    EXPECT_FALSE(c[1].pareto);  // (12, 3.4) dominates it
    EXPECT_FALSE(c[2].pareto);
    EXPECT_TRUE(c[3].pareto);
    EXPECT_FALSE(c[4].pareto);
    EXPECT_TRUE(c[5].pareto);  // alone on its method's front
}

// A random-weight model of the tiny shape and a few windows of random text, built once.
struct tiny_setup {
    std::string path;
    model m;
    std::vector<int32_t> tokens;
    tiny_setup() {
        path = (std::filesystem::temp_directory_path() / ("sl_tuner_tiny_" + std::to_string(::getpid()) + ".gguf")).string();
        synthetic_params sp = synthetic_default_params();
        sp.path = path;
        sp.shape = "tiny";
        auto w = synthetic_write(sp);
        EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.message());
        auto loaded = model_load(path);
        EXPECT_TRUE(loaded.ok()) << (loaded.ok() ? "" : loaded.message());
        m = std::move(loaded).value();
        std::mt19937 rng(7);
        std::uniform_int_distribution<int32_t> id(3, m.hp.vocab_size - 1);
        tokens.resize(32 * 6);
        for (int32_t& t : tokens) t = id(rng);
    }
    ~tiny_setup() { std::filesystem::remove(path); }
};

tiny_setup& tiny() {
    static tiny_setup s;
    return s;
}

// One thread and windows of 32 tokens, as every tuner test evaluates the tiny model.
context tiny_context() {
    context_params cp = context_default_params();
    cp.n_ctx = 32;
    cp.n_threads = 1;
    auto ctx = context::create(tiny().m, cp);
    EXPECT_TRUE(ctx.ok()) << (ctx.ok() ? "" : ctx.message());
    return std::move(ctx).value();
}

eval_params tiny_eval_params(int32_t windows) {
    eval_params ep = eval_default_params();
    ep.n_ctx = 32;
    ep.max_windows = windows;
    return ep;
}

struct tuned {
    tune_params p;
    dense_reference ref;
    tune_result r;
    std::vector<float> progress;
};

// The tiny model has 5 layers of 172 neurons; at 8 bits and 64 context tokens its MLP does not fit in 200 KB.
tune_params tiny_params() {
    tune_params p = tune_default_params();
    p.methods = {"dip", "dip-ca", "gate"};
    p.densities = {0.5f, 0.7f, 0.9f};
    p.gammas = {0.2f, 0.6f};
    p.coarse_windows = 2;
    p.refine_steps = 2;
    p.dip_split_points = 2;
    p.budgets = {budget_parse("kld<0.02").value(), budget_parse("ppl*1.05").value()};
    p.sim.quant = quant_default(8);
    p.sim.context_tokens = 64;
    p.sim.device.dram_bytes = 200000;
    p.sim.device.flash_page_bytes = 0;
    return p;
}

const tuned& tiny_tuned() {
    static const tuned t = [] {
        tuned x;
        x.p = tiny_params();
        x.p.progress = [&x](float f) {
            x.progress.push_back(f);
            return true;
        };
        context ctx = tiny_context();
        const eval_params ep = tiny_eval_params(6);
        x.ref = dense_reference(eval_dense_reference(ctx, tiny().tokens, ep).value());
        auto r = tune(ctx, x.ref, nullptr, x.p, ep);
        EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.message());
        if (r.ok()) x.r = std::move(r).value();
        x.p.progress = nullptr;
        return x;
    }();
    return t;
}

TEST(Tuner, RecommendationsMeetTheirBudgets) {
    const tuned& t = tiny_tuned();
    ASSERT_EQ(t.r.budgets.size(), 2u);
    EXPECT_GT(t.r.dense.objective, 0.0);
    EXPECT_EQ(t.r.dense.eval.kld_mean, 0.0);
    int recommended = 0;
    for (const tune_budget_result& b : t.r.budgets) {
        ASSERT_EQ(b.best.size(), t.p.methods.size());
        for (size_t m = 0; m < b.best.size(); ++m) {
            if (b.best[m] < 0) continue;
            const tune_candidate& c = t.r.candidates[static_cast<size_t>(b.best[m])];
            EXPECT_EQ(c.config.name, t.p.methods[m]);
            EXPECT_TRUE(c.full);
            EXPECT_TRUE(budget_met(b.budget, c.eval)) << b.budget.text << " " << c.config.name;
            // Nothing of the same method in budget on every window does better.
            for (const tune_candidate& o : t.r.candidates)
                if (o.config.name == c.config.name && o.full && budget_met(b.budget, o.eval)) {
                    EXPECT_LE(o.objective, c.objective);
                }
        }
        if (b.recommended >= 0) {
            ++recommended;
            const tune_candidate& c = t.r.candidates[static_cast<size_t>(b.recommended)];
            EXPECT_TRUE(budget_met(b.budget, c.eval));
            EXPECT_GT(c.objective, t.r.dense.objective);
            ASSERT_GE(c.best_sim, 0);
            EXPECT_TRUE(c.sims[static_cast<size_t>(c.best_sim)].recommendable);
            EXPECT_NE(c.sims[static_cast<size_t>(c.best_sim)].policy, cache_policy::belady);
            EXPECT_TRUE(std::find(b.best.begin(), b.best.end(), b.recommended) != b.best.end());
        }
    }
    EXPECT_GT(recommended, 0) << "the search found nothing faster than dense within either budget";
}

TEST(Tuner, FrontsAreNonDominatedAndCoverTheRest) {
    const tuned& t = tiny_tuned();
    int on_front = 0;
    for (const tune_candidate& p : t.r.candidates) {
        if (!p.full) {
            EXPECT_FALSE(p.pareto);
            continue;
        }
        bool dominated = false;
        for (const tune_candidate& q : t.r.candidates)
            if (&q != &p && q.full && q.config.name == p.config.name && q.objective >= p.objective &&
                q.eval.ppl <= p.eval.ppl && (q.objective > p.objective || q.eval.ppl < p.eval.ppl || &q < &p))
                dominated = true;
        EXPECT_EQ(p.pareto, !dominated) << p.config.name << " " << p.config.density;
        on_front += p.pareto;
    }
    EXPECT_GT(on_front, 0);
}

TEST(Tuner, StagesWindowsAndReplays) {
    const tuned& t = tiny_tuned();
    bool coarse = false, refine = false, split = false;
    for (const tune_candidate& c : t.r.candidates) {
        coarse |= c.stage == "coarse";
        refine |= c.stage == "refine";
        split |= c.stage == "split";
        EXPECT_EQ(c.windows, c.full ? t.ref.n_windows : t.p.coarse_windows);
        EXPECT_EQ(c.full, c.stage != "coarse");
        if (c.stage == "split") {
            EXPECT_EQ(c.config.name, "dip");
            EXPECT_NEAR((2 * c.config.d_in + c.config.d_down) / 3, c.config.density, 2e-3);
        }
        // lru, lfu and the Belady bound; Belady never has fewer hits than an online policy.
        ASSERT_EQ(c.sims.size(), 3u);
        EXPECT_EQ(c.sims[2].policy, cache_policy::belady);
        EXPECT_FALSE(c.sims[2].recommendable);
        EXPECT_GE(c.sims[2].hit_rate + 1e-12, std::max(c.sims[0].hit_rate, c.sims[1].hit_rate));
        if (c.config.name == "dip-ca") {  // only the cache it read while choosing its masks counts
            for (const sim_summary& s : c.sims) EXPECT_EQ(s.recommendable, s.policy == t.p.online_policy);
        }
        EXPECT_EQ(c.objective, c.sims[static_cast<size_t>(c.best_sim)].tokens_per_s);
    }
    EXPECT_TRUE(coarse && refine && split);
    EXPECT_EQ(t.r.evaluations, static_cast<int32_t>(t.r.candidates.size()) + 1);  // + dense
    ASSERT_FALSE(t.progress.empty());
    EXPECT_TRUE(std::is_sorted(t.progress.begin(), t.progress.end()));
    EXPECT_EQ(t.progress.back(), 1.0f);
}

// The replay of DIP-CA's recorded masks under the policy it ran with reproduces the online simulator:
// same hits, misses and bytes, token by token (each window from a cold cache).
TEST(Tuner, DipCaReplayMatchesTheOnlineCache) {
    const tuned& t = tiny_tuned();
    const tune_candidate* ca = nullptr;
    for (const tune_candidate& c : t.r.candidates)
        if (c.config.name == "dip-ca" && c.full) ca = &c;
    ASSERT_NE(ca, nullptr);
    context ctx = tiny_context();
    sim_params sp = t.p.sim;
    sp.policy = t.p.online_policy;
    auto layout = layout_parse(method_layout("dip-ca"));
    ASSERT_TRUE(layout.ok());
    auto method = make_method(ca->config, tiny().m, nullptr);
    ASSERT_TRUE(method.ok());
    double hits = 0, misses = 0, latency = 0, tokens = 0;
    for (int32_t w = 0; w < t.ref.n_windows; ++w) {
        auto dev = sim_residency::create(shape_from_model(tiny().m), *layout, sp);
        ASSERT_TRUE(dev.ok());
        ctx.set_method(method->get());
        ctx.set_residency(dev->get());
        const int32_t* win = t.ref.tokens.data() + static_cast<size_t>(w) * t.ref.n_ctx;
        ctx.prefill({win, static_cast<size_t>(t.ref.n_ctx / 2)}, 0);
        for (int32_t j = t.ref.n_ctx / 2; j < t.ref.n_ctx - 1; ++j) ctx.decode(win[j], j);
        const run_report r = (*dev)->sim().report();
        for (const stream_report& s : r.streams) hits += static_cast<double>(s.hits), misses += static_cast<double>(s.misses);
        latency += r.mean_latency_s * r.n_tokens;
        tokens += r.n_tokens;
        ctx.set_residency(nullptr);
    }
    ctx.set_method(nullptr);
    const sim_summary* s = nullptr;
    for (const sim_summary& x : ca->sims)
        if (x.policy == t.p.online_policy) s = &x;
    ASSERT_NE(s, nullptr);
    EXPECT_DOUBLE_EQ(s->hit_rate, hits / (hits + misses));
    EXPECT_NEAR(s->tokens_per_s, tokens / latency, 1e-9 * s->tokens_per_s);
}

TEST(Tuner, CancelReturnsCancelled) {
    for (int stop_after : {0, 3}) {
        tune_params p = tiny_params();
        p.methods = {"dip"};
        int calls = 0;
        p.progress = [&](float) { return calls++ < stop_after; };
        context ctx = tiny_context();
        const eval_params ep = tiny_eval_params(4);
        const dense_reference ref = eval_dense_reference(ctx, tiny().tokens, ep).value();
        auto r = tune(ctx, ref, nullptr, p, ep);
        ASSERT_FALSE(r.ok());
        EXPECT_TRUE(r.cancelled()) << r.message();
        EXPECT_EQ(ctx.method(), nullptr);  // the evaluation detached its method
    }
}

TEST(Tuner, RefusesBadParameters) {
    context ctx = tiny_context();
    const eval_params ep = tiny_eval_params(2);
    const dense_reference ref = eval_dense_reference(ctx, tiny().tokens, ep).value();
    auto fails = [&](tune_params p, const char* what) {
        auto r = tune(ctx, ref, nullptr, p, ep);
        ASSERT_FALSE(r.ok()) << what;
        EXPECT_FALSE(r.cancelled());
        EXPECT_NE(r.message().find(what), std::string::npos) << r.message();
    };
    tune_params p = tiny_params();
    p.methods = {"cats"};
    fails(p, "calibration");
    p = tiny_params();
    p.methods = {"nope"};
    fails(p, "unknown method");
    p = tiny_params();
    p.budgets.clear();
    fails(p, "budget");
    p = tiny_params();
    p.policies = {cache_policy::belady};
    fails(p, "Belady");
    p = tiny_params();
    p.densities = {1.5f};
    fails(p, "density");
}

}  // namespace

// EngineController on stories260K: snapshots of a generation, coalescing of tagged requests, stale
// results, cancellation, re-running for an unrecorded selection, and the GUI thread never blocking.
// The latency of a full evaluation after a slider release is a benchmark: tst_bench_evaluation_latency.
#include <QSignalSpy>

#include <chrono>
#include <cmath>
#include <thread>

#include "gui_test_support.h"
#include "sparselens/core/context.h"
#include "sparselens/core/generate.h"
#include "sparselens/views/engine_controller.h"
#include "stories_fixture.h"

using namespace sl::views;

namespace {

template <class T>
T arg0(const QSignalSpy& spy, int i) {
    return qvariant_cast<T>(spy.at(i).at(0));
}

evaluate_request eval_at(const std::string& method, float density, int windows = 4) {
    evaluate_request r;
    r.method.name = method;
    r.method.density = density;
    r.windows = windows;
    r.device.dram_bytes = 400'000;  // stories260K at 4 bits does not fit: the cache matters
    return r;
}

// The text core's own generate() produces (what `sparselens generate` prints), greedy.
std::string reference_text(const std::string& prompt, int32_t steps) {
    const auto& s = sl::test::stories260k();
    auto ctx = sl::context::create(s.m);
    sl::generate_params gp = sl::generate_default_params();
    gp.steps = steps;
    gp.sampling.temperature = 0;
    auto r = sl::generate(ctx.value(), s.tok.encode(prompt, true, false), gp, [](const sl::generate_step&) { return true; });
    return s.tok.decode_all(r->tokens);
}

}  // namespace

class TestEngineController : public QObject {
    Q_OBJECT

private:
    std::unique_ptr<EngineController> c;
    sl::test::event_loop_probe probe;

    void load() {
        QSignalSpy loaded(c.get(), &EngineController::modelLoaded);
        c->loadModel(QString::fromStdString(sl::test::shared_path("models/stories260K_f32.bin")),
                     QString::fromStdString(sl::test::shared_path("models/tok512.bin")));
        QVERIFY(loaded.wait(10000));
    }
    void waitIdle() { QTRY_VERIFY_WITH_TIMEOUT(!c->isBusy(), 15000); }

private slots:
    void init() {
        c = std::make_unique<EngineController>();
        probe.start();
        load();
    }
    void cleanup() {
        QVERIFY2(probe.stall_ms() < 100, qPrintable(QStringLiteral("event loop blocked for %1 ms while the process ran").arg(probe.stall_ms())));
        qInfo("max event-loop gap %lld ms, stall %lld ms", static_cast<long long>(probe.max_gap_ms()), static_cast<long long>(probe.stall_ms()));
        c.reset();
    }

    void modelCard() {
        auto card = c->modelCard();
        QVERIFY(card);
        QCOMPARE(card->dim, 64);
        QCOMPARE(card->n_layers, 5);
        QCOMPARE(card->hidden_dim, 172);
        QVERIFY(card->has_tokenizer);
        QVERIFY(card->mlp_bytes > card->attention_bytes);
        QCOMPARE(QString::fromStdString(card->weight_type), QStringLiteral("F32"));
        QVERIFY(QString::fromStdString(card->architecture).startsWith(QStringLiteral("llama")));
        QCOMPARE(QString::fromStdString(card->tokenizer_kind), QStringLiteral("none embedded"));  // llama2.c file
        QVERIFY(!card->tensor_types.empty());
        QCOMPARE(QString::fromStdString(card->tensor_types.front().type), QStringLiteral("F32"));
    }

    void badFileGivesOneLineError() {
        QSignalSpy err(c.get(), &EngineController::errorOccurred);
        const std::string junk = sl::test::write_temp("junk.bin", std::vector<uint8_t>(100, 7));
        c->loadModel(QString::fromStdString(junk));
        QVERIFY(err.wait(5000));
        const QString msg = arg0<QString>(err, 0);
        QVERIFY(msg.contains(QStringLiteral("junk.bin")));
        QVERIFY(!msg.contains(QLatin1Char('\n')));
        QVERIFY(c->hasModel());  // the previous model stays loaded
    }

    void generateDenseMatchesCore() {
        QSignalSpy tokens(c.get(), &EngineController::tokensStreamed);
        QSignalSpy done(c.get(), &EngineController::generationFinished);
        QSignalSpy acts(c.get(), &EngineController::activationsReady);
        QSignalSpy neurons(c.get(), &EngineController::neuronStatsReady);
        QSignalSpy cache(c.get(), &EngineController::cacheSeriesReady);
        generate_request req;
        req.prompt = "Once upon a time";
        req.steps = 120;
        req.temperature = 0;
        const auto gen = c->generate(req);
        QVERIFY(done.wait(10000));
        const auto stats = arg0<generation_stats>(done, 0);
        QCOMPARE(stats.generation, gen);
        QCOMPARE(stats.text, reference_text(req.prompt, req.steps));
        // The weights the engine held, next to the model's (the prompt panel shows the ratio).
        QVERIFY(stats.model_weights > 0);
        QVERIFY(stats.weights_in_ram >= stats.model_weights / 2 && stats.weights_in_ram <= 3 * stats.model_weights);

        // Streamed in batches: every position once, in order, far fewer signals than tokens.
        std::vector<token_event> all;
        for (int i = 0; i < tokens.count(); ++i) {
            const auto batch = arg0<std::vector<token_event>>(tokens, i);
            all.insert(all.end(), batch.begin(), batch.end());
        }
        QCOMPARE(static_cast<int>(all.size()), stats.n_tokens);
        QVERIFY(tokens.count() < stats.n_tokens / 4);
        for (size_t i = 0; i < all.size(); ++i) QCOMPARE(all[i].pos, static_cast<int32_t>(i));
        QVERIFY(std::isnan(all[0].logprob));
        QVERIFY(all[5].logprob < 0 && all[5].logprob > -30);
        QCOMPARE(all[5].kld_to_dense, -1.0f);  // dense run: no shadow
        QCOMPARE(all[5].mlp_density, 1.0f);

        QVERIFY(acts.count() >= 1);
        auto a = arg0<std::shared_ptr<const activation_snapshot>>(acts, acts.count() - 1);
        QCOMPARE(a->n_tokens, stats.n_tokens);
        QCOMPARE(a->width, 172);
        QCOMPARE(a->values.size(), size_t(a->n_tokens) * 172);
        QCOMPARE(neurons.count(), 1);
        auto n = arg0<std::shared_ptr<const neuron_snapshot>>(neurons, 0);
        QCOMPARE(n->layers.size(), size_t(5));
        std::vector<int32_t> order = n->layers[0].order_by_importance;
        std::sort(order.begin(), order.end());
        for (int i = 0; i < 172; ++i) QCOMPARE(order[size_t(i)], i);  // a permutation
        QVERIFY(n->layers[0].importance_sorted.front() >= n->layers[0].importance_sorted.back());
        QVERIFY(n->layers[0].top_share_10 > 0.1f && n->layers[0].top_share_10 < 1.0f);
        QCOMPARE(cache.count(), 1);
        auto series = arg0<std::shared_ptr<const cache_snapshot_series>>(cache, 0);
        QCOMPARE(static_cast<int>(series->frames.size()), stats.n_tokens);
        QCOMPARE(series->n_layers, 5);
    }

    void methodRunHasKlAndDensity() {
        QSignalSpy tokens(c.get(), &EngineController::tokensStreamed);
        QSignalSpy done(c.get(), &EngineController::generationFinished);
        generate_request req;
        req.steps = 80;
        req.temperature = 0;
        req.method.name = "dip";
        req.method.density = 0.5f;
        req.device.dram_bytes = 400'000;
        c->generate(req);
        QVERIFY(done.wait(10000));
        const auto stats = arg0<generation_stats>(done, 0);
        QVERIFY(stats.mean_kld > 0);
        QVERIFY(stats.sim_hit_rate > 0 && stats.sim_hit_rate < 1);
        std::vector<token_event> all;
        for (int i = 0; i < tokens.count(); ++i) {
            const auto batch = arg0<std::vector<token_event>>(tokens, i);
            all.insert(all.end(), batch.begin(), batch.end());
        }
        QCOMPARE(static_cast<int>(all.size()), stats.n_tokens);
        for (size_t i = 1; i < all.size(); ++i) {
            QVERIFY(all[i].kld_to_dense >= 0);
            QVERIFY(std::abs(all[i].mlp_density - 0.5f) < 0.05f);
        }
    }

    void rerunForUnrecordedSelection() {
        // A budget too small for every probe records only the selection; another one is re-run and
        // must equal what a full recording of the same (greedy) run holds.
        QSignalSpy done(c.get(), &EngineController::generationFinished);
        QSignalSpy acts(c.get(), &EngineController::activationsReady);
        generate_request req;
        req.steps = 60;
        req.temperature = 0;
        req.method.name = "dip-ca";
        req.method.density = 0.5f;
        req.device.dram_bytes = 400'000;
        c->generate(req);
        QVERIFY(done.wait(10000));
        c->requestActivations(3, sl::probe::mlp_in);
        QTRY_VERIFY_WITH_TIMEOUT(acts.count() >= 1 && arg0<std::shared_ptr<const activation_snapshot>>(acts, acts.count() - 1)->layer == 3, 10000);
        const auto full = arg0<std::shared_ptr<const activation_snapshot>>(acts, acts.count() - 1);

        req.activation_budget_bytes = 64 << 10;
        c->generate(req);
        QVERIFY(done.wait(10000));
        acts.clear();
        c->requestActivations(3, sl::probe::mlp_in);
        QTRY_VERIFY_WITH_TIMEOUT(acts.count() >= 1, 10000);
        const auto rerun = arg0<std::shared_ptr<const activation_snapshot>>(acts, acts.count() - 1);
        QCOMPARE(rerun->layer, 3);
        QCOMPARE(rerun->where, sl::probe::mlp_in);
        QCOMPARE(rerun->n_tokens, full->n_tokens);
        QVERIFY(rerun->values == full->values);
        QVERIFY(rerun->kept == full->kept);
        QVERIFY(!rerun->kept.empty());
    }

    void taggedRequestsCoalesce() {
        QSignalSpy results(c.get(), &EngineController::tuningResultReady);
        QSignalSpy cancelled(c.get(), &EngineController::requestCancelled);
        generation_id last = 0;
        const int n = 20;
        for (int i = 0; i < n; ++i) {
            last = c->evaluate(eval_at("dip", 0.3f + 0.03f * i));
            std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a drag: requests a few ms apart
        }
        waitIdle();
        QCoreApplication::processEvents();
        QVERIFY2(results.count() <= 3, qPrintable(QString::number(results.count())));
        QVERIFY(results.count() >= 1);
        const auto r = arg0<std::shared_ptr<const tuning_result>>(results, results.count() - 1);
        QCOMPARE(r->generation, last);
        QCOMPARE(r->config.density, 0.3f + 0.03f * (n - 1));
        QVERIFY(r->eval.mlp_density < 0.95);
        QVERIFY(r->eval.kld_mean > 0);
        QVERIFY(r->sim_tokens_per_s > 0 && r->sim_hit_rate > 0);
    }

    void staleResultDropped() {
        QSignalSpy results(c.get(), &EngineController::tuningResultReady);
        c->evaluate(eval_at("dip", 0.5f));
        QVERIFY(results.wait(10000));  // the dense reference is now cached
        results.clear();
        // The first result is computed and queued while the GUI thread sleeps; by the time the event
        // loop runs, a newer request of the same tag exists, so it must never be emitted.
        c->evaluate(eval_at("dip", 0.6f));
        std::this_thread::sleep_for(std::chrono::milliseconds(800));
        const auto second = c->evaluate(eval_at("dip", 0.7f));
        waitIdle();
        QCoreApplication::processEvents();
        QCOMPARE(results.count(), 1);
        QCOMPARE(arg0<std::shared_ptr<const tuning_result>>(results, 0)->generation, second);
        probe.start();  // the deliberate sleep above is not an event-loop stall of the controller
    }

    void otherTagsAreIndependent() {
        QSignalSpy results(c.get(), &EngineController::tuningResultReady);
        const auto a = c->evaluate(eval_at("dip", 0.5f), QStringLiteral("a"));
        const auto b = c->evaluate(eval_at("teal", 0.5f), QStringLiteral("b"));
        waitIdle();
        QCoreApplication::processEvents();
        QCOMPARE(results.count(), 2);
        QCOMPARE(arg0<std::shared_ptr<const tuning_result>>(results, 0)->generation, a);
        QCOMPARE(arg0<std::shared_ptr<const tuning_result>>(results, 1)->generation, b);
    }

    void cancelIsQuick() {
        QVERIFY(c->setEvalTextFile(QString::fromStdString(sl::test::shared_path("text/stories260K_samples.txt"))));
        QSignalSpy results(c.get(), &EngineController::tuningResultReady);
        QSignalSpy cancelled(c.get(), &EngineController::requestCancelled);
        c->evaluate(eval_at("dip", 0.5f, 100000));  // every window of 335 KB: many seconds
        QTest::qWait(300);
        QElapsedTimer t;
        t.start();
        c->cancel();
        QVERIFY(cancelled.wait(2000));
        qInfo("cancelled after %lld ms", static_cast<long long>(t.elapsed()));
        QVERIFY(t.elapsed() < 500);
        QCOMPARE(results.count(), 0);
    }
};

SL_GUI_TEST_MAIN(TestEngineController, true)
#include "tst_engine_controller.moc"

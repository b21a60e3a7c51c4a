// Benchmark: how long the Tuning panel waits for a full evaluation (8 windows of stories260K, DIP, dense
// reference cached) after a slider is released. Target 300 ms on an idle machine; prints worst and median
// against it and fails only past a generous bound (shared, busy cores stretch it). Runs serially.
#include <QSignalSpy>

#include <algorithm>
#include <vector>

#include "gui_test_support.h"
#include "sparselens/views/engine_controller.h"

using namespace sl::views;

namespace {

constexpr double target_ms = 300;
constexpr double bound_ms = 1500;  // a regression (e.g. the dense reference recomputed) costs far more

evaluate_request eval_at(float density) {
    evaluate_request r;
    r.method.name = "dip";
    r.method.density = density;
    r.windows = 8;
    r.device.dram_bytes = 400'000;
    return r;
}

}  // namespace

class BenchEvaluationLatency : public QObject {
    Q_OBJECT

private slots:
    void fullEvaluationAfterRelease() {
        EngineController c;
        QSignalSpy loaded(&c, &EngineController::modelLoaded);
        c.loadModel(QString::fromStdString(sl::test::shared_path("models/stories260K_f32.bin")),
                    QString::fromStdString(sl::test::shared_path("models/tok512.bin")));
        QVERIFY(loaded.wait(10000));
        QSignalSpy results(&c, &EngineController::tuningResultReady);
        c.evaluate(eval_at(0.5f));  // computes and caches the dense reference
        QVERIFY(results.wait(10000));

        std::vector<double> ms;
        for (float d : {0.3f, 0.4f, 0.6f, 0.7f, 0.8f, 0.9f, 0.45f}) {
            QElapsedTimer t;
            t.start();
            c.evaluate(eval_at(d));
            QVERIFY(results.wait(10000));
            ms.push_back(double(t.elapsed()));
        }
        std::sort(ms.begin(), ms.end());
        const double worst = ms.back(), median = ms[ms.size() / 2];
        std::printf("full evaluation after release: median %.0f ms, worst %.0f ms (target %.0f ms, bound %.0f ms)\n",
                    median, worst, target_ms, bound_ms);
        if (median > target_ms) qWarning("median %.0f ms is over the %.0f ms target", median, target_ms);
        QVERIFY2(worst < bound_ms, qPrintable(QStringLiteral("worst %1 ms").arg(worst)));
    }
};

SL_GUI_TEST_MAIN(BenchEvaluationLatency, true)
#include "tst_bench_evaluation_latency.moc"

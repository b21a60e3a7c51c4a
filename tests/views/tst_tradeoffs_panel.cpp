// TradeoffsPanel with synthetic runs: series per method, Pareto fronts on throughput and density axes,
// log scale, tuner / recommended overlays, hollow live points, and a real mouse click on a point
// restoring that run's configuration.
#include <QtCharts/QChart>
#include <QtCharts/QChartView>
#include <QtCharts/QLineSeries>
#include <QtCharts/QLogValueAxis>
#include <QtCharts/QValueAxis>
#include <QtCharts/QScatterSeries>
#include <QtTest>

#include "gui_test_support.h"
#include "sparselens/sessions/run_convert.h"
#include "sparselens/views/tradeoffs_panel.h"

using namespace sl::views;
namespace ss = sl::sessions;

namespace {

sl::method_config config(const std::string& method, float density, float gamma = 0.2f) {
    sl::method_config c = sl::method_default_config();
    c.name = method;
    c.density = density;
    c.gamma = gamma;
    return c;
}

ss::run_record run(int64_t id, const sl::method_config& c, double sim, double dppl, double kld, double mlp,
                   const std::string& label = {}) {
    ss::run_record r;
    r.id = id;
    r.method = c.name;
    r.params_json = ss::method_config_to_json(c);
    r.ppl_dense = 8;
    r.ppl = 8 + dppl;
    r.kld_mean = kld;
    r.mlp_density = mlp;
    r.cpu_tok_s = 1000 * (1.2 - mlp);
    if (sim > 0) r.sim_tok_s = sim, r.hit_rate = 0.4, r.device_name = "apple-a18";
    r.label = label;
    return r;
}

std::vector<QPointF> points(const QXYSeries* s) {
    std::vector<QPointF> out;
    for (const QPointF& p : s->points()) out.push_back(p);
    return out;
}

}  // namespace

class TestTradeoffsPanel : public QObject {
    Q_OBJECT
    std::vector<ss::run_record> m_runs;

private slots:
    void init() {
        m_runs = {
            run(1, config("dip", 0.5f), 30, 0.20, 0.020, 0.50, "tune coarse"),
            run(2, config("dip", 0.7f), 20, 0.05, 0.005, 0.70),
            run(3, config("dip", 0.6f), 18, 0.30, 0.030, 0.60),  // dominated on the sim axis by run 1 and 2
            run(4, config("dip-ca", 0.5f, 0.5f), 40, 0.25, 0.025, 0.52),
            run(5, config("dip-ca", 0.8f, 0.5f), 25, 0.02, 0.002, 0.80),
            run(6, config("dense", 1.0f), 10, 0.0, 0.0, 1.0),
            run(7, config("cats", 0.5f), 0, 0.15, 0.015, 0.55),  // not simulated
        };
    }

    void seriesAndFrontsPerMethod() {
        TradeoffsPanel p;
        p.setRuns(m_runs);
        QVERIFY(p.scatterOf("dip") && p.scatterOf("dip-ca") && p.scatterOf("dense"));
        QCOMPARE(p.scatterOf("dip")->count(), 3);
        QCOMPARE(p.scatterOf("dip-ca")->count(), 2);
        QCOMPARE(p.scatterOf("cats")->count(), 0);  // no simulated tok/s: not drawn on this axis
        QCOMPARE(p.scatterOf("dip")->color(), method_color("dip"));
        QVERIFY(method_color("dip") != method_color("dip-ca"));
        // Fronts: maximise tok/s, minimise ΔPPL.
        QVERIFY(p.frontOf("dip"));
        QCOMPARE(points(p.frontOf("dip")), (std::vector<QPointF>{{20, 0.05}, {30, 0.20}}));
        QCOMPARE(points(p.frontOf("dip-ca")), (std::vector<QPointF>{{25, 0.02}, {40, 0.25}}));
        QVERIFY(!p.frontOf("dense"));  // one point has no front line

        // Density axis: the front minimises x.
        p.setAxes(TradeoffsPanel::XAxis::MlpDensity, TradeoffsPanel::YAxis::Kld, false);
        QCOMPARE(p.scatterOf("cats")->count(), 1);
        QCOMPARE(points(p.frontOf("dip")), (std::vector<QPointF>{{0.5, 0.020}, {0.7, 0.005}}));
        // CPU axis.
        p.setAxes(TradeoffsPanel::XAxis::CpuTokS, TradeoffsPanel::YAxis::DeltaPpl, false);
        QCOMPARE(p.scatterOf("dip")->count(), 3);
        QPointF v;
        QVERIFY(p.valueOfRun(7, &v));
        QCOMPARE(v.y(), 0.15);
    }

    void logScaleFloorsNonPositiveValues() {
        TradeoffsPanel p;
        p.setRuns(m_runs);
        p.setAxes(TradeoffsPanel::XAxis::SimTokS, TradeoffsPanel::YAxis::DeltaPpl, true);
        QVERIFY(!p.chart()->axes(Qt::Vertical).isEmpty());
        auto* axis = qobject_cast<QLogValueAxis*>(p.chart()->axes(Qt::Vertical).front());
        QVERIFY(axis);
        QPointF dense;
        QVERIFY(p.valueOfRun(6, &dense));
        QVERIFY(dense.y() > 0);  // ΔPPL 0 drawn at the floor
        QVERIFY(axis->min() <= dense.y() && axis->max() >= 0.30);
    }

    // Linear axes start at zero for non-negative data and end on round values; a tok/s axis whose points
    // span more than a decade is logarithmic unless the user turns it off.
    void axesAreRoundAndLogXFollowsTheSpread() {
        TradeoffsPanel p;
        p.setRuns(m_runs);  // simulated tok/s 10 .. 40
        QVERIFY(!p.logX());
        auto* x = qobject_cast<QValueAxis*>(p.chart()->axes(Qt::Horizontal).front());
        auto* y = qobject_cast<QValueAxis*>(p.chart()->axes(Qt::Vertical).front());
        QVERIFY(x && y);
        QCOMPARE(y->min(), 0.0);  // ΔPPL >= 0: no padding below zero
        QVERIFY(y->max() >= 0.30);
        const double step = (x->max() - x->min()) / (x->tickCount() - 1);
        QCOMPARE(std::fmod(x->min() / step, 1.0), 0.0);  // ticks on multiples of the step

        std::vector<ss::run_record> runs = m_runs;
        runs.push_back(run(8, config("dense", 1.0f), 1000, 0.0, 0.0, 1.0));
        p.setRuns(runs);  // 10 .. 1000: two decades
        QVERIFY(p.logX());
        auto* lx = qobject_cast<QLogValueAxis*>(p.chart()->axes(Qt::Horizontal).front());
        QVERIFY(lx);
        QVERIFY(lx->min() <= 10 && lx->max() >= 1000);
        p.setLogX(false);
        QVERIFY(!p.logX());
        QVERIFY(qobject_cast<QValueAxis*>(p.chart()->axes(Qt::Horizontal).front()));
        // The density axis is never logarithmic.
        p.setAxes(TradeoffsPanel::XAxis::MlpDensity, TradeoffsPanel::YAxis::DeltaPpl, false);
        QVERIFY(!p.logX());
    }

    void overlaysMarkTunerRunsRecommendationsAndLivePoints() {
        TradeoffsPanel p;
        p.setRuns(m_runs);
        auto overlay = [&](const QString& name) -> QScatterSeries* {
            for (QAbstractSeries* s : p.chart()->series())
                if (s->name() == name) return qobject_cast<QScatterSeries*>(s);
            return nullptr;
        };
        QVERIFY(overlay("tuner / sweep runs"));
        QCOMPARE(overlay("tuner / sweep runs")->count(), 1);
        QVERIFY(!overlay("recommended"));
        p.setRecommendedRuns({4, 0});
        QVERIFY(overlay("recommended"));
        QCOMPARE(overlay("recommended")->points().front(), QPointF(40, 0.25));

        auto live = std::make_shared<tuning_result>();
        live->config = config("dip", 0.4f);
        live->eval.ppl_dense = 8;
        live->eval.ppl = 8.5;
        live->eval.mlp_density = 0.4;
        live->sim_tokens_per_s = 35;
        p.addLiveResult(live);
        QVERIFY(p.liveOf("dip"));
        QCOMPARE(p.liveOf("dip")->count(), 1);
        QCOMPARE(p.liveOf("dip")->color().alpha(), 0);  // hollow
        auto partial = std::make_shared<tuning_result>(*live);
        partial->partial = true;
        partial->sim_tokens_per_s = 36;
        p.addLiveResult(partial);
        auto partial2 = std::make_shared<tuning_result>(*partial);
        partial2->sim_tokens_per_s = 37;
        p.addLiveResult(partial2);  // replaces the previous partial one
        QCOMPARE(p.liveOf("dip")->count(), 2);
        QVERIFY(TradeoffsPanel::liveSummary(*partial2).contains("partial"));
        p.clearLiveResults();
        QVERIFY(!p.liveOf("dip"));
    }

    void clickingAPointRestoresItsSettings() {
        TradeoffsPanel p;
        p.resize(900, 600);
        p.show();
        QVERIFY(QTest::qWaitForWindowExposed(&p));
        p.setRuns(m_runs);
        std::vector<sl::method_config> restored;
        std::vector<int64_t> activated;
        connect(&p, &TradeoffsPanel::restoreRequested, this, [&](const sl::method_config& c) { restored.push_back(c); });
        connect(&p, &TradeoffsPanel::runActivated, this, [&](const ss::run_record& r) { activated.push_back(r.id); });
        QApplication::processEvents();

        auto click = [&](QXYSeries* s, const QPointF& value) {
            const QPointF scene = p.chart()->mapToScene(p.chart()->mapToPosition(value, s));
            const QPoint pos = p.chartView()->mapFromScene(scene);
            QTest::mouseClick(p.chartView()->viewport(), Qt::LeftButton, {}, pos);
            QApplication::processEvents();
        };
        click(p.scatterOf("dip-ca"), QPointF(40, 0.25));
        QCOMPARE(activated, (std::vector<int64_t>{4}));
        QCOMPARE(restored.size(), size_t{1});
        QCOMPARE(restored[0], config("dip-ca", 0.5f, 0.5f));

        click(p.scatterOf("dip"), QPointF(20, 0.05));
        QCOMPARE(activated.back(), int64_t{2});
        QCOMPARE(restored.back(), config("dip", 0.7f));
        // The clicked run is ringed once the panel redraws.
        QTRY_VERIFY([&] {
            for (QAbstractSeries* s : p.chart()->series())
                if (s->name() == "selected") return qobject_cast<QScatterSeries*>(s)->points().front() == QPointF(20, 0.05);
            return false;
        }());

        // A tuner run under its ring overlay: the click still resolves to the run.
        click(p.scatterOf("dip"), QPointF(30, 0.20));
        QCOMPARE(activated.back(), int64_t{1});
        QCOMPARE(restored.back(), config("dip", 0.5f));

        // A live (unsaved) point restores its configuration without a run.
        auto live = std::make_shared<tuning_result>();
        live->config = config("teal", 0.45f);
        live->eval.ppl_dense = 8;
        live->eval.ppl = 8.1;
        live->sim_tokens_per_s = 33;
        p.addLiveResult(live);
        const size_t runs_before = activated.size();
        click(p.liveOf("teal"), QPointF(33, 0.1));
        QCOMPARE(activated.size(), runs_before);
        QCOMPARE(restored.back(), config("teal", 0.45f));

        // A run whose parameters do not parse reports it instead of restoring something else.
        auto broken = m_runs;
        broken[3].params_json = "{\"density\": []}";
        p.setRuns(broken);
        QString message;
        connect(&p, &TradeoffsPanel::messageChanged, this, [&](const QString& m) { message = m; });
        const size_t restores = restored.size();
        click(p.scatterOf("dip-ca"), QPointF(40, 0.25));
        QCOMPARE(restored.size(), restores);
        QVERIFY2(message.contains("density"), qPrintable(message));
    }

    void summaryNamesTheRun() {
        const QString s = TradeoffsPanel::runSummary(m_runs[0]);
        QVERIFY(s.contains("run 1"));
        QVERIFY(s.contains("dip"));
        QVERIFY(s.contains("tune coarse"));
        QVERIFY(s.contains("apple-a18"));
    }
};

SL_GUI_TEST_MAIN(TestTradeoffsPanel, false)
#include "tst_tradeoffs_panel.moc"

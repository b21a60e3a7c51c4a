// NeuronsPanel, CachePanel and ActivationsPanel: chart series follow the data, the scrubber steps the
// occupancy map, play runs to the end, orders are applied or refused, and snapshots of mismatched or
// empty sizes are shown without crashing.
#include "sparselens/views/activations_panel.h"
#include "sparselens/views/cache_map_view.h"
#include "sparselens/views/cache_panel.h"
#include "sparselens/views/color_legend.h"
#include "sparselens/views/neurons_panel.h"
#include "sparselens/views/tuning_panel.h"

#include <QBarSet>
#include <QComboBox>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QSignalSpy>
#include <QSlider>

#include <cmath>

#include "gui_test_support.h"

using namespace sl::views;

namespace {

std::shared_ptr<neuron_snapshot> neuron_stats(sl::views::generation_id gen = 1) {
    auto s = std::make_shared<neuron_snapshot>();
    s->generation = gen;
    for (int l = 0; l < 3; ++l) {
        neuron_layer_stats st;
        for (int i = 0; i < 10; ++i) st.importance_sorted.push_back(std::pow(2.0f, 6 - i - l));  // 64 .. 1/8, halving
        st.importance_sorted.push_back(0.0f);  // a dead neuron: kept in the shares, not on the log axis
        for (int i = 0; i < 11; ++i) st.order_by_importance.push_back(10 - i);
        for (int i = 0; i < 11; ++i) st.order_by_griffin.push_back((i * 3) % 11);
        st.ffsplit_split = 2 + l;
        st.flock_jaccard = 0.25f * static_cast<float>(l + 1);
        s->layers.push_back(st);
    }
    return s;
}

// 2 layers x 2 groups, 5 units per stream; frame t: unit t loaded, unit t-1 (if any) evicted, rest resident.
std::shared_ptr<cache_snapshot_series> cache_series(int frames = 3) {
    auto s = std::make_shared<cache_snapshot_series>();
    s->generation = 1;
    s->n_layers = 2;
    s->n_groups = 2;
    s->group_names = {"input_column_pair", "down_column"};
    s->capacity = {5, 5, 5, 5};
    for (int t = 0; t < frames; ++t) {
        cache_frame f;
        f.token = 10 + t;
        f.hit_rate = 0.2 * t;
        f.flash_bytes = 1000u * static_cast<uint64_t>(t + 1);
        for (int st = 0; st < 4; ++st) {
            std::vector<uint8_t> units(5, static_cast<uint8_t>(slot_state::resident));
            units[static_cast<size_t>(t % 5)] = static_cast<uint8_t>(slot_state::loaded);
            if (t > 0) units[static_cast<size_t>((t - 1) % 5)] = static_cast<uint8_t>(slot_state::evicted);
            f.streams.push_back(units);
        }
        s->frames.push_back(f);
    }
    return s;
}

std::shared_ptr<activation_snapshot> activations(int layer, int width, sl::views::generation_id gen = 1) {
    auto a = std::make_shared<activation_snapshot>();
    a->generation = gen;
    a->layer = layer;
    a->n_tokens = 4;
    a->n_prompt = 2;
    a->width = width;
    for (int i = 0; i < 4 * width; ++i) a->values.push_back(static_cast<float>(i % 7) - 3.0f);
    return a;
}

}  // namespace

class TestDensePanels : public QObject {
    Q_OBJECT

private slots:
    void neuronsSeriesMatchTheData() {
        NeuronsPanel p;
        p.resize(700, 600);
        p.show();
        auto stats = neuron_stats();
        p.setNeuronStats(stats);
        p.setLayer(1);
        QCOMPARE(p.layer(), 1);
        const auto& imp = stats->layers[1].importance_sorted;
        const QList<QPointF> pts = p.importanceSeries()->points();
        QCOMPARE(pts.size(), 10);  // the zero is left off the log axis
        for (int i = 0; i < 10; ++i) {
            QCOMPARE(pts[i].x(), static_cast<double>(i + 1));
            QCOMPARE(pts[i].y(), static_cast<double>(imp[static_cast<size_t>(i)]));
        }
        const QList<QPointF> split = p.splitSeries()->points();
        QCOMPARE(split.size(), 2);
        QCOMPARE(split[0].x(), 3.5);  // after the 3 heavy neurons of layer 1
        QCOMPARE(split[1].x(), 3.5);
        // Top 3 of 11 (27.3% rounds to 3 neurons): (32 + 16 + 8) / (64 - 1/8) of layer 1's total.
        p.setTopPercent(27.3);
        double total = 0;
        for (float v : imp) total += v;
        QVERIFY(std::fabs(p.shareOfTop(27.3) - (32.0 + 16.0 + 8.0) / total) < 1e-9);
        QVERIFY2(p.readout().contains(QStringLiteral("(3 of 11)")), qPrintable(p.readout()));
        QCOMPARE(p.cursorSeries()->points().at(0).x(), 3.5);
        QCOMPARE(p.shareOfTop(100.0), 1.0);
        QCOMPARE(p.shareOfTop(0.0), 0.0);
        // Flocking bars: one per layer, the Jaccard values.
        QCOMPARE(p.flockingSet()->count(), 3);
        for (int l = 0; l < 3; ++l) QCOMPARE(p.flockingSet()->at(l), 0.25 * (l + 1));
        // Switching layers replaces the series.
        QSignalSpy layers(&p, &NeuronsPanel::layerChanged);
        p.setLayer(2);
        QCOMPARE(layers.count(), 1);
        QCOMPARE(p.importanceSeries()->points().at(0).y(), 16.0);
        QCOMPARE(p.splitSeries()->points().at(0).x(), 4.5);
        // An older generation is ignored.
        auto old = neuron_stats(0);
        old->layers.resize(1);
        p.setNeuronStats(old);
        QCOMPARE(p.flockingSet()->count(), 3);
    }

    void neuronsAcceptOddSnapshots() {
        NeuronsPanel p;
        p.show();
        p.setNeuronStats(std::make_shared<neuron_snapshot>());  // no layers
        QCOMPARE(p.importanceSeries()->count(), 0);
        QCOMPARE(p.flockingSet()->count(), 0);
        auto s = neuron_stats(2);
        s->layers[0].importance_sorted = {NAN, INFINITY, -1.0f, 0.0f};  // nothing plottable
        s->layers[0].ffsplit_split = 99;                                 // beyond the layer
        s->layers[0].flock_jaccard = NAN;
        s->layers[1].importance_sorted.clear();
        p.setNeuronStats(s);
        p.setLayer(0);
        QCOMPARE(p.importanceSeries()->count(), 0);
        QCOMPARE(p.splitSeries()->count(), 0);
        QCOMPARE(p.shareOfTop(50), 0.0);
        QCOMPARE(p.flockingSet()->at(0), 0.0);
        p.setLayer(1);
        QCOMPARE(p.importanceSeries()->count(), 0);
        p.setLayer(7);  // out of range: ignored
        QCOMPARE(p.layer(), 1);
        p.setNeuronStats(nullptr);
        QCOMPARE(p.layer(), -1);
        QTest::qWait(20);
    }

    void cacheScrubberStepsTheMap() {
        CachePanel p;
        p.resize(700, 500);
        p.show();
        QVERIFY(QTest::qWaitForWindowExposed(&p));
        auto s = cache_series();
        p.setSeries(s);
        QCOMPARE(p.frameCount(), 3);
        QCOMPARE(p.scrubber()->maximum(), 2);
        QCOMPARE(p.currentFrame(), 0);
        // 1:1 rendering: one pixel per (stream, unit) in the state's colour.
        const QImage f0 = p.mapView()->render(QSize(5, 4));
        QCOMPARE(f0.pixelColor(0, 0), CacheMapView::stateColor(slot_state::loaded));
        QCOMPARE(f0.pixelColor(1, 3), CacheMapView::stateColor(slot_state::resident));
        QSignalSpy frames(&p, &CachePanel::frameChanged);
        p.scrubber()->setValue(1);  // what dragging the scrubber does
        QCOMPARE(frames.count(), 1);
        const QImage f1 = p.mapView()->render(QSize(5, 4));
        QVERIFY(f1 != f0);
        QCOMPARE(f1.pixelColor(1, 2), CacheMapView::stateColor(slot_state::loaded));
        QCOMPARE(f1.pixelColor(0, 2), CacheMapView::stateColor(slot_state::evicted));
        QVERIFY(p.mapView()->grab().toImage() != QImage());
        // Downsampled, the eventful state wins: 5 units into 1 pixel shows "loaded", not "resident".
        QCOMPARE(p.mapView()->render(QSize(1, 4)).pixelColor(0, 0), CacheMapView::stateColor(slot_state::loaded));
        // Charts: one point per frame; cursor at the current token.
        QCOMPARE(p.hitRateSeries()->count(), 3);
        QCOMPARE(p.hitRateSeries()->at(2), QPointF(12, 40));
        QCOMPARE(p.flashSeries()->at(1).x(), 11.0);
        QCOMPARE(p.flashSeries()->at(1).y(), 2.0);  // 2000 bytes in KB
        // Every row is named: layer and unit group.
        QCOMPARE(p.mapView()->rowLabel(0), QStringLiteral("L0 in-cols"));
        QCOMPARE(p.mapView()->rowLabel(1), QStringLiteral("L0 down"));
        QCOMPARE(p.mapView()->rowLabel(3), QStringLiteral("L1 down"));
    }

    // Importances inside one decade: the log axis switches to base 2 and runs from one power of 2 to
    // another, so it has labelled ticks (a base-10 axis from 0.16 to 1.9 would label nothing).
    void neuronsLogAxisLabelsANarrowRange() {
        NeuronsPanel p;
        auto s = neuron_stats();
        for (neuron_layer_stats& l : s->layers) {
            l.importance_sorted.clear();
            for (int i = 0; i < 11; ++i) l.importance_sorted.push_back(1.5f - 0.13f * static_cast<float>(i));  // 1.5 .. 0.2
        }
        p.setNeuronStats(s);
        QLogValueAxis* axis = nullptr;
        for (QAbstractAxis* a : const_cast<QLineSeries*>(p.importanceSeries())->attachedAxes())
            if (auto* l = qobject_cast<QLogValueAxis*>(a)) axis = l;
        QVERIFY(axis);
        QCOMPARE(axis->base(), 2.0);
        QVERIFY(axis->min() <= 0.2 && axis->max() >= 1.5);
        QCOMPARE(std::exp2(std::round(std::log2(axis->min()))), axis->min());
        QCOMPARE(std::exp2(std::round(std::log2(axis->max()))), axis->max());
        QVERIFY(axis->max() / axis->min() <= 16.0);  // 0.125 .. 2, not decades of empty axis
        // Several decades: base 10 again.
        p.setNeuronStats(neuron_stats(2));
        QCOMPARE(axis->base(), 10.0);
    }

    // The Tuning panel: the flash read unit follows the profile and overrides it; without a split the
    // d_in / d_down sliders follow Density; speed ratios say when dense is faster.
    void tuningFlashPageSplitAndRatios() {
        TuningPanel t;
        t.setDeviceProfile(QStringLiteral("apple-a18"));
        QCOMPARE(t.flashPageBytes(), int64_t{4096});  // the profile's page
        QCOMPARE(t.deviceSettings().flash_page_bytes, int64_t{4096});
        t.setFlashPage(0);
        QCOMPARE(t.deviceSettings().flash_page_bytes, int64_t{0});
        device_settings d = t.deviceSettings();
        d.flash_page_bytes = 16384;
        t.setDeviceSettings(d);
        QCOMPARE(t.flashPageBytes(), int64_t{16384});

        sl::method_config c = sl::method_default_config();
        c.name = "dip";
        c.density = 0.7f;
        t.setMethodConfig(c);
        QList<QSlider*> sliders;
        for (QSlider* s : t.findChildren<QSlider*>())
            if (s != t.densitySlider() && s != t.dramSlider() && s != t.attnSlider() && s->minimum() == 5) sliders << s;
        QCOMPARE(sliders.size(), 2);  // d_in, d_down
        for (QSlider* s : sliders) {
            QVERIFY(!s->isEnabled());
            QCOMPARE(s->value(), 70);
        }
        QCOMPARE(t.methodConfig().d_in, -1.0f);  // not split: the method derives both from density

        auto r = std::make_shared<tuning_result>();
        r->config = c;
        r->eval.ppl = r->eval.ppl_dense = 4;
        r->eval.decode_tokens_per_second = 3000;
        r->eval.dense_decode_tokens_per_second = 1000;
        r->sim_tokens_per_s = 1000;
        r->sim_dense_tokens_per_s = 16000;
        t.showResult(r);
        QVERIFY2(t.readout(QStringLiteral("sim_ratio")).startsWith(QStringLiteral("×0.06")), qPrintable(t.readout("sim_ratio")));
        QVERIFY(t.readout(QStringLiteral("sim_ratio")).contains(QStringLiteral("dense is faster")));
        QCOMPARE(t.readout(QStringLiteral("cpu_ratio")), QStringLiteral("×3.00 vs dense"));
    }

    void cachePlayRunsToTheEnd() {
        CachePanel p;
        p.show();
        p.setSeries(cache_series(6));
        p.setPlaying(true);
        QVERIFY(p.isPlaying());
        QTRY_COMPARE_WITH_TIMEOUT(p.currentFrame(), 5, 5000);
        QTRY_VERIFY(!p.isPlaying());
        p.setPlaying(true);  // at the end: starts over
        QVERIFY(p.isPlaying());
        QVERIFY(p.currentFrame() < 5);
        p.setPlaying(false);
    }

    void cacheAcceptsOddSeries() {
        CachePanel p;
        p.resize(600, 400);
        p.show();
        p.setSeries(std::make_shared<cache_snapshot_series>());
        QCOMPARE(p.frameCount(), 0);
        p.grab();
        auto s = cache_series(2);
        s->generation = 2;
        s->frames[0].streams.clear();                    // no streams at all
        s->frames[1].streams[1].assign(3000, 200);       // states outside the enum, one long stream
        s->frames[1].streams[2].clear();                 // and an empty one
        s->frames[1].hit_rate = NAN;
        s->group_names.clear();
        s->capacity.clear();
        p.setSeries(s);
        p.grab();
        p.setCurrentFrame(1);
        const QImage img = p.mapView()->render(QSize(300, 4));
        QCOMPARE(img.pixelColor(0, 1), CacheMapView::noSlotColor());
        QCOMPARE(img.pixelColor(299, 0), CacheMapView::noSlotColor());  // past the end of a 5-unit stream
        QMouseEvent move(QEvent::MouseMove, QPointF(200, 50), p.mapView()->mapToGlobal(QPointF(200, 50)), Qt::NoButton,
                         Qt::NoButton, Qt::NoModifier);
        QCoreApplication::sendEvent(p.mapView(), &move);  // hover tooltip over odd data
        p.grab();
        p.setSeries(cache_series(1));  // older generation (1 < 2): ignored
        QCOMPARE(p.frameCount(), 2);
        p.setSeries(nullptr);
        QCOMPARE(p.frameCount(), 0);
        p.grab();
    }

    void activationsSelectionAndOrders() {
        ActivationsPanel p;
        p.resize(800, 500);
        p.show();
        QVERIFY(QTest::qWaitForWindowExposed(&p));
        QSignalSpy sel(&p, &ActivationsPanel::selectionChanged);
        p.setLayerCount(3);  // from no layer to layer 0: a selection the controller must serve
        QCOMPARE(sel.count(), 1);
        QCOMPARE(p.layer(), 0);
        QCOMPARE(p.probe(), sl::probe::glu);
        p.setLayerCount(3);  // same selection: no signal
        QCOMPARE(sel.count(), 1);
        p.findChildren<QComboBox*>().at(0)->setCurrentIndex(2);
        QCOMPARE(sel.count(), 2);
        QCOMPARE(sel.at(1).at(0).toInt(), 2);
        QCOMPARE(sel.at(1).at(1).toInt(), static_cast<int>(sl::probe::glu));
        p.findChildren<QComboBox*>().at(1)->setCurrentIndex(3);  // MLP input
        QCOMPARE(p.probe(), sl::probe::mlp_in);
        QCOMPARE(sel.last().at(1).toInt(), static_cast<int>(sl::probe::mlp_in));
        p.setLayerCount(2);  // shrinks below the selection: clamps and says so
        QCOMPARE(p.layer(), 1);
        QCOMPARE(sel.last().at(0).toInt(), 1);

        auto stats = neuron_stats();
        p.setNeuronOrders(stats);
        p.setActivations(activations(1, 11));
        p.setOrder(column_order::griffin);
        QCOMPARE(p.effectiveOrder(), column_order::griffin);
        auto cell = p.canvas()->cellAt(p.canvas()->cellCenter(0, 1));
        QVERIFY(cell.has_value());
        QCOMPARE(cell->neuron, stats->layers[1].order_by_griffin[1]);
        p.setOrder(column_order::heavy_hitter);
        QCOMPARE(p.canvas()->cellAt(p.canvas()->cellCenter(0, 0))->neuron, 10);
        // A probe of another width (dim-wide MLP input): the neuron orders do not apply.
        p.setActivations(activations(1, 6, 2));
        QCOMPARE(p.effectiveOrder(), column_order::index);
        QCOMPARE(p.canvas()->cellAt(p.canvas()->cellCenter(0, 3))->neuron, 3);
        // Stats of a layer beyond the snapshot's: index order.
        p.setActivations(activations(5, 11, 3));
        QCOMPARE(p.effectiveOrder(), column_order::index);
        // A broken order (not a permutation) is refused.
        auto broken = neuron_stats(4);
        broken->layers[1].order_by_importance.assign(11, 0);
        p.setNeuronOrders(broken);
        p.setActivations(activations(1, 11, 4));
        QCOMPARE(p.effectiveOrder(), column_order::index);
        // Older generations are ignored.
        p.setActivations(activations(0, 9, 1));
        QCOMPARE(p.canvas()->snapshot()->width, 11);

        p.highlightToken(2);
        QCOMPARE(p.canvas()->highlightedToken(), 2);
        QSignalSpy hovered(&p, &ActivationsPanel::tokenHovered);
        const QPointF at = p.canvas()->cellCenter(3, 4);
        QMouseEvent move(QEvent::MouseMove, at, p.canvas()->mapToGlobal(at), Qt::NoButton, Qt::NoButton, Qt::NoModifier);
        QCoreApplication::sendEvent(p.canvas(), &move);
        QCOMPARE(hovered.count(), 1);
        QCOMPARE(hovered.at(0).at(0).toInt(), 3);

        p.setMode(heatmap_mode::mask_overlay);
        QCOMPARE(p.canvas()->mode(), heatmap_mode::mask_overlay);
        QCOMPARE(p.legend()->swatches().size(), 3);  // boundary, skipped, NaN
        p.setMode(heatmap_mode::relative);
        QCOMPARE(p.legend()->gradientHigh(), 1.0f);
    }

    void activationsAcceptOddSnapshots() {
        ActivationsPanel p;
        p.show();
        QVERIFY(QTest::qWaitForWindowExposed(&p));
        p.setLayerCount(-3);
        p.setLayerCount(0);
        auto a = activations(0, 8);
        a->values.resize(5);  // lies about its size
        p.setActivations(a);
        QVERIFY(p.canvas()->snapshot() == nullptr);
        p.grab();
        auto e = std::make_shared<activation_snapshot>();
        e->generation = 2;
        p.setActivations(e);  // 0 x 0
        QVERIFY(p.canvas()->snapshot() == nullptr);
        auto m = activations(0, 8, 3);
        m->kept.resize(7, 1);  // mask of the wrong size
        m->n_prompt = 99;      // beyond the tokens
        p.setActivations(m);
        QVERIFY(p.canvas()->snapshot() != nullptr);
        p.setNeuronOrders(std::make_shared<neuron_snapshot>());
        p.setOrder(column_order::griffin);
        p.setMode(heatmap_mode::mask_overlay);
        p.grab();
        p.setActivations(nullptr);
        p.setNeuronOrders(nullptr);
        p.grab();
        if (p.canvas()->glReady()) QCOMPARE(p.canvas()->glErrorCount(), 0);
    }
};

SL_GUI_TEST_MAIN(TestDensePanels, false)

#include "tst_dense_panels.moc"

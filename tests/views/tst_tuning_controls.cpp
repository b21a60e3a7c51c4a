// Tuning panel method-parameter controls: pinning, attention density, rank, FFSplit split and
// compression are enabled for the methods that read them, round-trip through method_config, request
// evaluations like the other sliders, and the Neurons chart marks the pinned set.
#include "sparselens/views/neurons_panel.h"
#include "sparselens/views/stage_bars.h"
#include "sparselens/views/tuning_panel.h"

#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QImage>
#include <QLabel>
#include <QLocale>
#include <QLineSeries>
#include <QSignalSpy>
#include <QSlider>
#include <QSpinBox>
#include <QTemporaryDir>

#include "gui_test_support.h"

using namespace sl::views;

namespace {

std::shared_ptr<model_card> stories_card() {
    auto c = std::make_shared<model_card>();
    c->name = "stories260K";
    c->dim = 64;
    c->hidden_dim = 172;
    c->n_layers = 5;
    c->n_heads = 8;
    c->n_kv_heads = 4;
    c->vocab_size = 512;
    c->seq_len = 512;
    return c;
}

QStringList label_texts(const QWidget& w) {
    QStringList l;
    for (QLabel* x : w.findChildren<QLabel*>()) l << x->text();
    return l;
}

sl::method_config named(const char* name) {
    sl::method_config c = sl::method_default_config();
    c.name = name;
    c.density = 0.5f;
    return c;
}

}  // namespace

class TestTuningControls : public QObject {
    Q_OBJECT
private slots:
    void controlsFollowTheMethod_data() {
        QTest::addColumn<QString>("method");
        QTest::addColumn<bool>("pin");
        QTest::addColumn<bool>("attn");
        QTest::addColumn<bool>("rank");
        QTest::addColumn<bool>("ffsplit");
        QTest::newRow("dense") << "dense" << false << false << false << false;
        QTest::newRow("dip") << "dip" << true << false << false << false;
        QTest::newRow("chess") << "chess" << true << false << false << false;
        QTest::newRow("chess-attn") << "chess-attn" << true << true << false << false;
        QTest::newRow("teal") << "teal" << false << true << false << false;
        QTest::newRow("teal-uniform") << "teal-uniform" << false << true << false << false;
        QTest::newRow("sparsellm") << "sparsellm" << false << false << true << false;
        QTest::newRow("ffsplit") << "ffsplit" << false << false << true << true;
    }
    void controlsFollowTheMethod() {
        QFETCH(QString, method);
        QFETCH(bool, pin);
        QFETCH(bool, attn);
        QFETCH(bool, rank);
        QFETCH(bool, ffsplit);
        TuningPanel t;
        t.setMethodConfig(named(method.toLatin1().constData()));
        QCOMPARE(t.methodCombo()->currentText(), method);
        QCOMPARE(t.pinSlider()->isEnabled(), pin);
        QCOMPARE(t.attnSlider()->isEnabled(), attn);
        QCOMPARE(t.rankSpin()->isEnabled(), rank);
        QCOMPARE(t.ffsplitHeavySlider()->isEnabled(), ffsplit);
        QCOMPARE(t.compressCombo()->isEnabled(), ffsplit);
        for (QWidget* w : std::initializer_list<QWidget*>{t.pinSlider(), t.attnSlider(), t.rankSpin(),
                                                          t.ffsplitHeavySlider(), t.compressCombo()})
            QVERIFY(!w->toolTip().isEmpty());
        // A disabled control does not leak into the config.
        const sl::method_config c = t.methodConfig();
        if (!pin) QCOMPARE(c.pin_fraction, 0.0f);
        if (!attn) QCOMPARE(c.attn_density, 1.0f);
        if (!rank) QCOMPARE(c.rank, 0);
    }

    void configsRoundTrip() {
        TuningPanel t;
        sl::method_config c = named("chess-attn");
        c.pin_fraction = 0.1f;
        c.attn_density = 0.3f;
        t.setMethodConfig(c);
        QCOMPARE(t.methodConfig().pin_fraction, 0.1f);
        QCOMPARE(t.methodConfig().attn_density, 0.3f);
        c = named("teal");
        c.attn_density = 0.7f;
        t.setMethodConfig(c);
        QCOMPARE(t.methodConfig().attn_density, 0.7f);
        c.attn_density = 1.0f;  // the single whole-layer budget
        t.setMethodConfig(c);
        QCOMPARE(t.methodConfig().attn_density, 1.0f);
        c = named("sparsellm");
        c.rank = 12;
        t.setMethodConfig(c);
        QCOMPARE(t.methodConfig().rank, 12);
        c = named("ffsplit");
        c.ffsplit_mode = "q4";
        c.ffsplit_heavy = 0.2f;
        t.setMethodConfig(c);
        QCOMPARE(t.methodConfig().ffsplit_mode, std::string("q4"));
        QCOMPARE(t.methodConfig().ffsplit_heavy, 0.2f);
        QVERIFY(!t.rankSpin()->isEnabled());  // q4 has no rank
        QVERIFY(!t.densitySlider()->isEnabled());  // nor a density
        c.ffsplit_mode = "svd";
        c.rank = 16;
        t.setMethodConfig(c);
        QCOMPARE(t.methodConfig().rank, 16);
        QVERIFY(!t.densitySlider()->isEnabled());  // a fixed rank sets the bytes
        t.rankSpin()->setValue(0);
        QVERIFY(t.densitySlider()->isEnabled());  // auto rank: from the density
    }

    void changesRequestEvaluations() {
        TuningPanel t;
        t.setModelCard(stories_card());
        t.setMethodConfig(named("ffsplit"));
        QSignalSpy spy(&t, &TuningPanel::evaluationRequested);
        t.ffsplitHeavySlider()->setValue(20);
        QCOMPARE(spy.count(), 1);
        QCOMPARE(spy.last().at(0).toBool(), false);  // not dragged: a full evaluation
        QCOMPARE(t.request(false).method.ffsplit_heavy, 0.2f);
        t.compressCombo()->setCurrentIndex(t.compressCombo()->findText(QStringLiteral("q4")));
        QCOMPARE(spy.count(), 2);
        QCOMPARE(t.request(false).method.ffsplit_mode, std::string("q4"));
        t.setMethodConfig(named("dip"));
        spy.clear();
        t.pinSlider()->setValue(10);
        QCOMPARE(spy.count(), 1);
        QCOMPARE(t.request(false).method.pin_fraction, 0.1f);
        // The share's label names the neuron count on the loaded model.
        bool found = false;
        for (QLabel* l : t.findChildren<QLabel*>()) found |= l->text() == QStringLiteral("10% · 17");
        QVERIFY(found);
        // TEAL's attention share: a change re-evaluates; 100% reads "joint" (one budget), below it the value.
        t.setMethodConfig(named("teal"));
        QCOMPARE(t.attnSlider()->value(), 100);
        auto attnLabel = [&] { return label_texts(t); };
        QVERIFY(attnLabel().contains(QStringLiteral("joint")));
        spy.clear();
        t.attnSlider()->setValue(30);
        QCOMPARE(spy.count(), 1);
        QCOMPARE(spy.last().at(0).toBool(), false);
        QCOMPARE(t.request(false).method.attn_density, 0.3f);
        QCOMPARE(t.request(false).method.name, std::string("teal"));
        QVERIFY(attnLabel().contains(QStringLiteral("30%")));
        t.setMethodConfig(named("sparsellm"));
        spy.clear();
        t.rankSpin()->setValue(8);
        QCOMPARE(spy.count(), 1);
        QCOMPARE(t.request(false).method.rank, 8);
    }

    // Labels say what is read: a density below a method's dense floor shows the floor, γ only for DIP-CA.
    void labelsSayWhatIsRead() {
        TuningPanel t;
        auto texts = [&] { return label_texts(t); };
        t.setMethodConfig(named("glu"));
        QVERIFY(texts().contains(QStringLiteral("50% → 67%")));
        QVERIFY(!texts().contains(QStringLiteral("0.20")));  // γ belongs to DIP-CA
        t.setMethodConfig(named("cats"));
        QVERIFY(texts().contains(QStringLiteral("50%")));  // above CATS's 1/3 floor
        t.densitySlider()->setValue(20);
        QVERIFY(texts().contains(QStringLiteral("20% → 34%")));
        t.setMethodConfig(named("dip-ca"));
        QVERIFY(texts().contains(QStringLiteral("50%")));
        QVERIFY(texts().contains(QStringLiteral("0.20")));
    }

    // Dense: one baseline figure everywhere, ×1.00, no hit rate. Methods: the CPU ratio with its spread.
    void denseReadoutsAgreeAndRatiosShowSpread() {
        TuningPanel t;
        auto r = std::make_shared<tuning_result>();
        r->config = named("dense");
        r->eval.ppl = r->eval.ppl_dense = 4;
        r->eval.decode_tokens_per_second = r->eval.dense_decode_tokens_per_second = 12495;
        r->eval.speed_ratio_median = r->eval.speed_ratio_p25 = r->eval.speed_ratio_p75 = 1.0;
        r->sim_tokens_per_s = r->sim_dense_tokens_per_s = 900;
        r->sim_hit_rate = 0.49;
        t.showResult(r);
        QVERIFY2(t.readout(QStringLiteral("cpu")).startsWith(QLocale().toString(12495.0, 'f', 0)), qPrintable(t.readout("cpu")));
        QVERIFY(t.readout(QStringLiteral("cpu")).contains(QStringLiteral("dense baseline")));
        QCOMPARE(t.readout(QStringLiteral("cpu_ratio")), QStringLiteral("×1.00 (dense)"));
        QCOMPARE(t.readout(QStringLiteral("sim_ratio")), QStringLiteral("×1.00 (dense)"));
        QVERIFY(!t.readout(QStringLiteral("hit")).contains(QStringLiteral("49")));

        auto showSpread = [&](double median, double p25, double p75) {
            r = std::make_shared<tuning_result>(*r);
            r->config = named("dip");
            r->eval.decode_tokens_per_second = 15000;
            r->eval.speed_ratio_median = median;
            r->eval.speed_ratio_p25 = p25;
            r->eval.speed_ratio_p75 = p75;
        };
        showSpread(1.2, 1.1, 1.3);
        t.showResult(r);
        QCOMPARE(t.readout(QStringLiteral("cpu_ratio")), QStringLiteral("×1.20 (1.10–1.30)"));
        showSpread(0.8, 0.7, 0.9);
        r->eval.ppl = 3086.02;
        t.showResult(r);
        QCOMPARE(t.readout(QStringLiteral("cpu_ratio")), QStringLiteral("×0.80 (0.70–0.90) slower"));
        QCOMPARE(t.readout(QStringLiteral("dppl")), QStringLiteral("+3082.0 (4.000 → 3086.0)"));
        QCOMPARE(t.readout(QStringLiteral("hit")), QStringLiteral("49.0%"));
    }

    // "CPU time per token": the eval's stage times as ms per token per group, dense above the method;
    // the dense method shows one bar (the baseline); the tooltip lists every stage.
    void stageBarsShowWhereTheTimeGoes() {
        TuningPanel t;
        StageBars* b = t.stageBars();
        QVERIFY(b);
        QCOMPARE(b->totalMs(false), 0.0);
        auto r = std::make_shared<tuning_result>();
        r->config = named("dip");
        r->eval.ppl = r->eval.ppl_dense = 4;
        sl::stage_times d, m;
        d.tokens = m.tokens = 10;
        d.seconds[int(sl::stage::qkv)] = 0.010;     // 1 ms per token
        d.seconds[int(sl::stage::o)] = 0.005;       // 0.5
        d.seconds[int(sl::stage::mlp_in)] = 0.040;  // 4
        d.seconds[int(sl::stage::down)] = 0.020;    // 2
        d.seconds[int(sl::stage::logits)] = 0.003;  // 0.3
        m = d;
        m.seconds[int(sl::stage::mlp_in)] = 0.025;
        m.seconds[int(sl::stage::down)] = 0.012;
        m.seconds[int(sl::stage::select)] = 0.004;
        r->eval.dense_stages = d;
        r->eval.stages = m;
        // Bytes per token: DIP read half of gate/up and of down; everything else whole, no selection reads.
        double* db = r->eval.dense_stage_bytes;
        double* mb = r->eval.stage_bytes;
        db[int(sl::stage::qkv)] = mb[int(sl::stage::qkv)] = 30;
        db[int(sl::stage::o)] = mb[int(sl::stage::o)] = 10;
        db[int(sl::stage::mlp_in)] = 100;
        mb[int(sl::stage::mlp_in)] = 50;
        db[int(sl::stage::down)] = 50;
        mb[int(sl::stage::down)] = 25;
        db[int(sl::stage::logits)] = mb[int(sl::stage::logits)] = 5;
        t.showResult(r);
        const auto group = [](const char* label) {
            const auto& g = StageBars::groups();
            for (int i = 0; i < g.size(); ++i)
                if (g[i].label == QLatin1String(label)) return i;
            return -1;
        };
        QVERIFY(b->hasMethod());
        QCOMPARE(b->groupMs(false, group("attention weights")), 1.5);
        QCOMPARE(b->groupMs(false, group("MLP weights")), 6.0);
        QCOMPARE(b->groupMs(true, group("MLP weights")), 3.7);
        QCOMPARE(b->groupMs(false, group("selection")), 0.0);
        QCOMPARE(b->groupMs(true, group("selection")), 0.4);
        QCOMPARE(b->totalMs(false), 7.8);
        QVERIFY(std::abs(b->totalMs(true) - 5.9) < 1e-9);
        QVERIFY2(b->toolTip().contains(QStringLiteral("mlp_in")) && b->toolTip().contains(QStringLiteral("select")),
                 qPrintable(b->toolTip()));
        QVERIFY(b->toolTip().contains(QStringLiteral("dip ms")));
        // Ideal: qkv 1 + o 0.5 + mlp_in 4 * 50/100 + down 2 * 25/50 + logits 0.3; selection reads nothing.
        QVERIFY2(std::abs(b->idealMs() - 4.8) < 1e-9, qPrintable(QString::number(b->idealMs())));
        QVERIFY2(b->toolTip().contains(QStringLiteral("ideal ms")) && b->toolTip().contains(QStringLiteral("81%")),
                 qPrintable(b->toolTip()));  // 4.8 / 5.9
        QVERIFY(b->heightForWidth(120) > b->heightForWidth(800));  // the legend wraps when narrow
        b->resize(300, b->heightForWidth(300));
        QImage img(b->size(), QImage::Format_ARGB32);
        img.fill(Qt::white);
        b->render(&img);  // paints both bars without a window

        r = std::make_shared<tuning_result>(*r);
        r->config = named("dense");
        t.showResult(r);
        QVERIFY(!b->hasMethod());
        QCOMPARE(b->totalMs(true), 0.0);
        QCOMPARE(b->idealMs(), 0.0);
        QCOMPARE(b->totalMs(false), 7.8);
    }

    void neuronsChartMarksThePinnedSet() {
        NeuronsPanel p;
        auto s = std::make_shared<neuron_snapshot>();
        s->generation = 1;
        neuron_layer_stats st;
        for (int i = 0; i < 10; ++i) st.importance_sorted.push_back(float(10 - i));
        for (int i = 0; i < 10; ++i) st.order_by_importance.push_back(i);
        st.ffsplit_split = 2;
        st.pinned = 3;
        s->layers.push_back(st);
        p.setNeuronStats(s);
        p.setLayer(0);
        QCOMPARE(p.pinnedSeries()->count(), 2);
        QCOMPARE(p.pinnedSeries()->points().at(0).x(), 3.5);
        st.pinned = 0;
        s = std::make_shared<neuron_snapshot>(*s);
        s->generation = 2;
        s->layers[0] = st;
        p.setNeuronStats(s);
        QCOMPARE(p.pinnedSeries()->count(), 0);
    }

    void measuredProfileIsListedAsThisMachine() {
        // probe-device --save writes this-machine.json into the user's device folder.
        QTemporaryDir home;
        QVERIFY(home.isValid());
        const QByteArray old = qgetenv("XDG_CONFIG_HOME");
        qputenv("XDG_CONFIG_HOME", home.path().toUtf8());
        QVERIFY(QDir(home.path()).mkpath(QStringLiteral("sparselens/devices")));
        QFile f(home.filePath(QStringLiteral("sparselens/devices/this-machine.json")));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("{\"schema\": \"sparselens.device\", \"version\": 1, \"name\": \"this-machine\", "
                "\"display_name\": \"this machine (measured)\", \"dram_bytes\": \"8GB\", "
                "\"dram_bandwidth\": \"10GB/s\", \"flash_bandwidth\": \"1.2GB/s\", \"flash_page_bytes\": 4096, "
                "\"flash_read_latency_s\": 2e-5, \"flash_batch_latency_s\": 1e-4, \"flash_merge_gap_pages\": 5, "
                "\"overlap_io_compute\": false}");
        f.close();
        {
            TuningPanel t;
            QComboBox* device = nullptr;
            for (QComboBox* c : t.findChildren<QComboBox*>())
                if (c->findText(QStringLiteral("this machine (measured)")) >= 0) device = c;
            QVERIFY(device);
            QVERIFY(device->findText(QStringLiteral("apple-a18")) >= 0);  // the shipped ones stay
            t.setDeviceProfile(QStringLiteral("this-machine"));
            QCOMPARE(device->currentText(), QStringLiteral("this machine (measured)"));
            QCOMPARE(t.deviceProfile(), QStringLiteral("this-machine"));
            QCOMPARE(t.deviceSettings().device, std::string("this-machine"));
            t.setDeviceProfile(QStringLiteral("apple-a18"));
            QCOMPARE(t.deviceProfile(), QStringLiteral("apple-a18"));
        }
        if (old.isEmpty())
            qunsetenv("XDG_CONFIG_HOME");
        else
            qputenv("XDG_CONFIG_HOME", old);
    }
};

SL_GUI_TEST_MAIN(TestTuningControls, false)

#include "tst_tuning_controls.moc"

// "Verify on this machine" (Trade-offs panel + EngineController, label gui): a DIP run of stories260K saved in
// a session is run offloaded on this machine under a budget that forces misses. Without a probed profile the
// box says to run probe-device --save; its Probe button writes one; with it Verify writes the pack once, shows measured next to simulated,
// and the bytes and hit rate it measured equal the simulator's (same masks, same caches); Cancel ends it.
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>

#include <filesystem>

#include "gui_test_support.h"
#include "sparselens/views/engine_controller.h"
#include "sparselens/views/offload_verify_box.h"
#include "sparselens/views/tradeoffs_panel.h"

using namespace sl::views;
namespace fs = std::filesystem;

class TestOffloadVerify : public QObject {
    Q_OBJECT

private:
    fs::path m_dir = fs::path(SL_VERIFY_SCRATCH) / "verify";
    std::unique_ptr<EngineController> c;
    std::unique_ptr<TradeoffsPanel> panel;
    qint64 m_run = 0;

    // Clicks Verify with `budget` and waits for the task's end; returns whether it succeeded.
    bool verify(const QString& budget, const QString& expectInMessage = {}) {
        OffloadVerifyBox* box = panel->verifyBox();
        box->budgetEdit()->setText(budget);
        QSignalSpy finished(c.get(), &EngineController::taskFinished);
        if (!box->verifyButton()->isEnabled()) return false;
        QTest::mouseClick(box->verifyButton(), Qt::LeftButton);
        if (!box->isRunning() || !box->cancelButton()->isVisible()) return false;
        for (int i = 0; i < 200 && finished.isEmpty(); ++i) finished.wait(100);
        if (finished.isEmpty()) return false;
        const QList<QVariant> last = finished.takeLast();
        if (last.at(0).toString() != QLatin1String(EngineController::taskVerify)) return false;
        if (!expectInMessage.isEmpty() && !box->resultLabel()->text().contains(expectInMessage))
            qWarning("%s", qPrintable(box->resultLabel()->text()));
        return last.at(1).toBool();
    }

private slots:
    void initTestCase() {
        fs::remove_all(m_dir);
        fs::create_directories(m_dir);
        qputenv("XDG_CONFIG_HOME", QByteArray::fromStdString((m_dir / "config").string()));
        qputenv("XDG_CACHE_HOME", QByteArray::fromStdString((m_dir / "cache").string()));  // packs (O_DIRECT: not tmpfs)
        c = std::make_unique<EngineController>();
        QSignalSpy loaded(c.get(), &EngineController::modelLoaded);
        c->loadModel(QString::fromStdString(sl::test::shared_path("models/stories260K_f32.bin")),
                     QString::fromStdString(sl::test::shared_path("models/tok512.bin")));
        QVERIFY(loaded.wait(10000));
        QSignalSpy opened(c.get(), &EngineController::sessionOpened);
        c->openSession(QString::fromStdString((m_dir / "s.slsession").string()), session_open_mode::create);
        QVERIFY(opened.wait(10000));

        // A saved DIP run (simulated on the A18 with 400 kB of DRAM).
        QSignalSpy results(c.get(), &EngineController::tuningResultReady);
        evaluate_request r;
        r.method.name = "dip";
        r.method.density = 0.5f;
        r.windows = 2;
        r.device.dram_bytes = 400'000;
        c->evaluate(r);
        QVERIFY(results.wait(20000));
        QSignalSpy recorded(c.get(), &EngineController::runRecorded);
        c->recordResult(*results.first().at(0).value<std::shared_ptr<const tuning_result>>());
        QVERIFY(recorded.wait(10000));
        m_run = recorded.first().at(0).toLongLong();

        panel = std::make_unique<TradeoffsPanel>();
        panel->attachController(c.get());
        panel->resize(800, 600);
        panel->show();
        QVERIFY(!panel->verifyBox()->verifyButton()->isEnabled());  // no run selected
        panel->selectRun(m_run);
        QVERIFY(panel->verifyBox()->verifyButton()->isEnabled());
    }
    void cleanupTestCase() {
        panel.reset();
        c.reset();
        fs::remove_all(m_dir);
    }

    void withoutAProfileItSaysToProbe() {
        QVERIFY(!verify(QStringLiteral("64MB")));
        QVERIFY2(panel->verifyBox()->resultLabel()->text().contains(QStringLiteral("probe-device --save")),
                 qPrintable(panel->verifyBox()->resultLabel()->text()));
        QVERIFY(!panel->verifyBox()->isRunning());
    }

    void measuredNextToSimulated() {
        // "Probe this machine" (probe-device --save, a small quick probe) writes the profile Verify uses.
        OffloadVerifyBox* box = panel->verifyBox();
        box->setProbeSize(16 << 20, 0.02);
        QSignalSpy probed(c.get(), &EngineController::taskFinished);
        QTest::mouseClick(box->probeButton(), Qt::LeftButton);
        QVERIFY(box->isRunning());
        QTRY_VERIFY_WITH_TIMEOUT(!probed.isEmpty(), 60000);
        QCOMPARE(probed.first().at(0).toString(), QLatin1String(EngineController::taskProbe));
        QVERIFY2(probed.first().at(1).toBool(), qPrintable(probed.first().at(2).toString()));
        QVERIFY(fs::exists(m_dir / "config/sparselens/devices/this-machine.json"));
        QVERIFY(box->resultLabel()->text().contains(QStringLiteral("this-machine.json")));
        QVERIFY(fs::is_empty(m_dir / "cache/sparselens") || !fs::exists(m_dir / "cache/sparselens/packs"));  // scratch removed
        QSignalSpy verified(c.get(), &EngineController::offloadVerified);
        QVERIFY(verify(QStringLiteral("64MB")));  // everything fits: the pack is written first
        QCOMPARE(verified.count(), 1);
        auto big = verified.takeFirst().at(0).value<std::shared_ptr<const offload_verify_result>>();
        QVERIFY(big->pack_written);
        QCOMPARE(big->run_id, m_run);
        QCOMPARE(big->method, std::string("dip"));
        QVERIFY(big->n_decoded > 0 && big->tokens_per_s > 0 && big->sim_tokens_per_s > 0);
        QVERIFY(fs::exists(big->pack) && big->pack.find((m_dir / "cache").string()) == 0);
        QVERIFY(panel->verifyBox()->resultLabel()->text().contains(QStringLiteral("measured")));

        // Tiny budget: the resident part plus 200 kB of the 660 kB of MLP weights.
        const uint64_t budget = big->resident + 200'000;
        QVERIFY(verify(QString::number(budget)));
        QCOMPARE(verified.count(), 1);
        auto small = verified.takeFirst().at(0).value<std::shared_ptr<const offload_verify_result>>();
        QVERIFY(!small->pack_written);
        QCOMPARE(small->budget, budget);
        QVERIFY(small->resident + small->cache_capacity <= budget);
        QVERIFY2(small->hit_rate < 0.9 && small->bytes_per_token > 0, qPrintable(QString::number(small->hit_rate)));
        qInfo("budget %llu B: hit rate %.3f, %.0f B read/token, %.1f tok/s measured, %.1f simulated",
              static_cast<unsigned long long>(budget), small->hit_rate, small->bytes_per_token, small->tokens_per_s,
              small->sim_tokens_per_s);
        QCOMPARE(small->bytes_per_token, small->sim_bytes_per_token);  // same masks, same caches, same reads
        QCOMPARE(small->hit_rate, small->sim_hit_rate);
        const QString shown = OffloadVerifyBox::resultTable(*small);
        QCOMPARE(panel->verifyBox()->resultLabel()->text(), shown);
        QVERIFY(shown.contains(QStringLiteral("simulated")) && shown.contains(QStringLiteral("hit rate")));
        // The pack is probed just before the run: the read rate row shows it.
        QVERIFY(small->flash_probed && small->sim_flash_bytes_per_s > 0);
        QVERIFY(shown.contains(QStringLiteral("read rate")) && shown.contains(QStringLiteral("probed")));

        // "+30%": the run's resident part plus 30% of the pack's MLP bytes; a malformed share is one line.
        QVERIFY(verify(QStringLiteral("+30%")));
        auto share = verified.takeFirst().at(0).value<std::shared_ptr<const offload_verify_result>>();
        QVERIFY(share->budget > share->resident && share->budget < big->resident + 660'000 / 2);
        QVERIFY(share->resident + share->cache_capacity <= share->budget);
        QCOMPARE(share->bytes_per_token, share->sim_bytes_per_token);
        box->budgetEdit()->setText(QStringLiteral("+150%"));
        QTest::mouseClick(box->verifyButton(), Qt::LeftButton);
        QVERIFY(!box->isRunning());
        QVERIFY(box->resultLabel()->text().contains(QStringLiteral("+0% .. +100%")));
    }

    void cancelEndsIt() {
        OffloadVerifyBox* box = panel->verifyBox();
        box->budgetEdit()->setText(QStringLiteral("64MB"));
        QSignalSpy finished(c.get(), &EngineController::taskFinished);
        QSignalSpy verified(c.get(), &EngineController::offloadVerified);
        QTest::mouseClick(box->verifyButton(), Qt::LeftButton);
        QVERIFY(box->isRunning());
        QTest::mouseClick(box->cancelButton(), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 10000);
        QCOMPARE(finished.last().at(0).toString(), QLatin1String(EngineController::taskVerify));
        QVERIFY(!finished.last().at(1).toBool());
        QTRY_VERIFY(!box->isRunning());
        QCOMPARE(verified.count(), 0);
        QVERIFY(box->verifyButton()->isEnabled());
    }

    void badBudgetIsRefusedInPlace() {
        QSignalSpy finished(c.get(), &EngineController::taskFinished);
        panel->verifyBox()->budgetEdit()->setText(QStringLiteral("lots"));
        QTest::mouseClick(panel->verifyBox()->verifyButton(), Qt::LeftButton);
        QVERIFY(!panel->verifyBox()->isRunning());
        QVERIFY(panel->verifyBox()->resultLabel()->text().contains(QStringLiteral("lots")));
        QTest::qWait(50);
        QCOMPARE(finished.count(), 0);
    }
};

SL_GUI_TEST_MAIN(TestOffloadVerify, true)
#include "tst_offload_verify.moc"

// GUI sweeps carry the Tuning panel's method knobs (issue 14): with pinning 10% and attention 50% set
// in the panel, a Session panel sweep over chess-attn and teal records runs that say so (params_json,
// the runs table's tooltip), whose numbers equal `sparselens eval` given the same flags, and whose
// exported configs re-measure without drift (`eval --config`). A reopened session still shows them.
#include <QComboBox>
#include <QSettings>
#include <QSignalSpy>
#include <QSlider>

#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "gui_test_support.h"
#include "sparselens/sessions/run_convert.h"
#include "sparselens/sim/deploy_config.h"
#include "sparselens/views/main_window.h"
#include "sparselens/views/runs_model.h"
#include "sparselens/views/session_panel.h"
#include "sparselens/views/tuning_panel.h"

using namespace sl::views;
namespace fs = std::filesystem;
using json = nlohmann::json;

class TestGuiSweepKnobs : public QObject {
    Q_OBJECT

private:
    fs::path m_dir;
    QString m_session;
    std::unique_ptr<MainWindow> w;

    EngineController* c() { return w->controller(); }

    void openWindow() {
        w = std::make_unique<MainWindow>();
        w->resize(1100, 750);
        w->show();
        QVERIFY(QTest::qWaitForWindowExposed(w.get()));
        w->sessionPanel()->setFileChooser([this](SessionPanel::FileRole role, const QString&) {
            return role == SessionPanel::FileRole::NewSession ? m_session : QString();
        });
    }
    // A copy: the panel re-reads its runs whenever the session changes (an export does).
    std::optional<sl::sessions::run_record> runOf(const std::string& method) {
        for (const auto& r : w->sessionPanel()->runs())
            if (r.method == method) return r;
        return std::nullopt;
    }
    QString methodTooltip(int64_t id) {
        RunsTableModel* m = w->sessionPanel()->runsModel();
        const int row = m->rowOfId(id);
        return row < 0 ? QString() : m->index(row, RunsTableModel::ColMethod).data(Qt::ToolTipRole).toString();
    }
    static json evalJson(const std::string& args) {
        const auto r = sl::test::run_cli("eval " + sl::test::q("models/stories260K_f32.bin") + " " +
                                         sl::test::q("text/stories260K_samples.txt") + " -z " +
                                         sl::test::q("models/tok512.bin") + " " + args + " --json");
        if (r.code != 0) qWarning("eval %s: %s", args.c_str(), r.err.c_str());
        return r.code == 0 ? json::parse(r.out) : json();
    }

private slots:
    void initTestCase() {
        QSettings().clear();
        m_dir = fs::temp_directory_path() / ("sl_gui_sweep_knobs_" + std::to_string(::getpid()));
        fs::remove_all(m_dir);
        fs::create_directories(m_dir);
        m_session = QString::fromStdString((m_dir / "knobs.slsession").string());
    }
    void cleanupTestCase() {
        w.reset();
        fs::remove_all(m_dir);
    }

    void sweepCarriesThePanelKnobs() {
        openWindow();
        SessionPanel* sp = w->sessionPanel();
        sp->newSession();
        QTRY_COMPARE_WITH_TIMEOUT(sp->sessionPath(), m_session, 5000);
        QVERIFY(c()->setEvalTextFile(QString::fromStdString(sl::test::shared_path("text/stories260K_samples.txt"))));
        w->openModel(QString::fromStdString(sl::test::shared_path("models/stories260K_f32.bin")),
                     QString::fromStdString(sl::test::shared_path("models/tok512.bin")));
        QTRY_VERIFY_WITH_TIMEOUT(c()->hasModel() && w->tuningPanel()->lastResult(), 10000);

        // The panel on TEAL (its pin slider disabled): the sweep still takes the pin for chess-attn.
        TuningPanel* t = w->tuningPanel();
        t->methodCombo()->setCurrentIndex(t->methodCombo()->findText(QStringLiteral("teal")));
        t->pinSlider()->setValue(10);
        t->attnSlider()->setValue(50);
        QCOMPARE(t->methodKnobs().pin_fraction, 0.10f);
        QCOMPARE(t->methodKnobs().attn_density, 0.50f);
        QTRY_VERIFY_WITH_TIMEOUT(!c()->isBusy(), 20000);

        QSignalSpy finished(c(), &EngineController::taskFinished);
        emit sp->sweepRequested({QStringLiteral("chess-attn"), QStringLiteral("teal")}, {0.5});
        QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty() && finished.last().at(0).toString() == QLatin1String("sweep"),
                                 60000);
        QVERIFY2(finished.last().at(1).toBool(), qPrintable(finished.last().at(2).toString()));
        QTRY_COMPARE(sp->runs().size(), size_t{3});  // dense + one density per method

        const auto chess = runOf("chess-attn");
        const auto teal = runOf("teal");
        const auto dense = runOf("dense");
        QVERIFY(chess && teal && dense);
        const auto cc = sl::sessions::method_config_from_json(chess->params_json, "chess").value();
        const auto tc = sl::sessions::method_config_from_json(teal->params_json, "teal").value();
        const auto dc = sl::sessions::method_config_from_json(dense->params_json, "dense").value();
        QCOMPARE(cc.pin_fraction, 0.10f);
        QCOMPARE(cc.attn_density, 0.50f);
        QCOMPARE(cc.density, 0.50f);
        QCOMPARE(tc.pin_fraction, 0.0f);  // TEAL has no pinning: not applied, not recorded
        QCOMPARE(tc.attn_density, 0.50f);
        QCOMPARE(dc.pin_fraction, 0.0f);
        QCOMPARE(dc.attn_density, 1.0f);
        QVERIFY(methodTooltip(chess->id).contains(QStringLiteral("pin 10%")));
        QVERIFY(methodTooltip(chess->id).contains(QStringLiteral("attention 50%")));
        QVERIFY(!methodTooltip(teal->id).contains(QStringLiteral("pin")));
        QVERIFY(methodTooltip(teal->id).contains(QStringLiteral("attention 50%")));

        const std::string windows =
            " -c " + std::to_string(teal->n_ctx) + " --windows " + std::to_string(teal->windows);
        // Export each swept run; its config re-measures without drift (chess-attn with its calibration).
        for (const auto& r : {*chess, *teal}) {
            const fs::path cfg = m_dir / (r.method + ".json");
            QSignalSpy exported(c(), &EngineController::configExported);
            c()->exportRun(r.id, QString::fromStdString(cfg.string()));
            QVERIFY(exported.wait(20000));
            const auto loaded = sl::sim::deploy_config_read(cfg.string());
            QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.message().c_str());
            QCOMPARE(loaded->config.method, sl::sessions::method_config_from_json(r.params_json, "run").value());
            const json again = evalJson("--config '" + cfg.string() + "'");
            QVERIFY(again.contains("drift"));
            QCOMPARE(again["drift"]["ppl"].get<double>(), 0.0);
            QCOMPARE(again["drift"]["kld_mean"].get<double>(), 0.0);
            // The engine, not a re-implementation: `sparselens eval` with the same flags, on the calibration
            // the sweep ran with (the export's sidecar), gives the same numbers.
            const std::string flags = r.method == "chess-attn"
                                          ? "--method chess-attn --density 0.5 --attn-density 0.5 --pin 0.1"
                                          : "--method teal --density 0.5 --attn-density 0.5";
            QVERIFY(!loaded->config.calibration_file.empty());
            const std::string calib = (m_dir / loaded->config.calibration_file).string();
            const json e = evalJson(flags + " --calib '" + calib + "'" + windows);
            QVERIFY(e.contains("ppl"));
            QVERIFY2(std::abs(e["ppl"].get<double>() / r.ppl - 1) < 1e-9,
                     qPrintable(QStringLiteral("%1: %2 vs %3")
                                    .arg(QString::fromStdString(r.method))
                                    .arg(e["ppl"].get<double>())
                                    .arg(r.ppl)));
        }
    }

    void reopenedSessionShowsTheKnobs() {
        w->close();
        w.reset();
        openWindow();  // opens the last session
        SessionPanel* sp = w->sessionPanel();
        QTRY_COMPARE_WITH_TIMEOUT(sp->sessionPath(), m_session, 5000);
        QTRY_COMPARE_WITH_TIMEOUT(sp->runs().size(), size_t{3}, 5000);
        const auto chess = runOf("chess-attn");
        QVERIFY(chess);
        QVERIFY(methodTooltip(chess->id).contains(QStringLiteral("pin 10%")));
        QVERIFY(methodTooltip(chess->id).contains(QStringLiteral("attention 50%")));
        // Restoring it puts the knobs back on the panel.
        QSignalSpy restored(sp, &SessionPanel::restoreRequested);
        sp->selectRun(chess->id);
        sp->restoreSelected();
        QCOMPARE(restored.size(), 1);
        QTRY_COMPARE(w->tuningPanel()->methodCombo()->currentText(), QStringLiteral("chess-attn"));
        QCOMPARE(w->tuningPanel()->pinSlider()->value(), 10);
        QCOMPARE(w->tuningPanel()->attnSlider()->value(), 50);
        QTRY_VERIFY_WITH_TIMEOUT(!c()->isBusy(), 20000);
    }
};

#include "tst_gui_sweep_knobs.moc"

SL_GUI_TEST_MAIN(TestGuiSweepKnobs, true)

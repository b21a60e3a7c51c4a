// SessionPanel on a temporary session: the table shows the runs (read-only connection, refresh after a
// writer adds one), method and text filters, export / import / delete / restore requests, Save As, the
// tune dialog's request, progress rows with Cancel.
#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QProgressBar>
#include <QPushButton>
#include <QTableView>
#include <QtTest>

#include <filesystem>
#include <unistd.h>

#include "gui_test_support.h"
#include "sparselens/sessions/run_convert.h"
#include "sparselens/views/runs_model.h"
#include "sparselens/views/session_panel.h"

using namespace sl::views;
namespace ss = sl::sessions;
namespace fs = std::filesystem;

namespace {

ss::run_record make_run(int64_t model_id, const std::string& method, float density, double sim, const std::string& label) {
    ss::run_record r;
    r.method = method;
    sl::method_config c = sl::method_default_config();
    c.name = method;
    c.density = density;
    r.params_json = ss::method_config_to_json(c);
    r.model_id = model_id;
    r.ppl_dense = 5;
    r.ppl = 5 + (1 - density);
    r.kld_mean = 0.1 * (1 - density);
    r.mlp_density = density;
    r.cpu_tok_s = 50;
    r.sim_tok_s = sim;
    r.label = label;
    return r;
}

}  // namespace

class TestSessionPanel : public QObject {
    Q_OBJECT
    fs::path m_dir;
    QString m_path;
    std::unique_ptr<ss::session_store> m_writer;
    int64_t m_model = 0;

    int rowOf(SessionPanel& p, int64_t id) {
        const QModelIndex src = p.runsModel()->index(p.runsModel()->rowOfId(id), 0);
        return p.runsProxy()->mapFromSource(src).row();
    }

private slots:
    void init() {
        m_dir = fs::temp_directory_path() / ("sl_session_panel_" + std::to_string(::getpid()));
        fs::remove_all(m_dir);
        fs::create_directories(m_dir);
        m_path = QString::fromStdString((m_dir / "s.slsession").string());
        m_writer = std::make_unique<ss::session_store>(ss::session_store::create(m_path.toStdString(), "panel test").value());
        ss::model_record m;
        m.sha256 = std::string(64, 'a');
        m.path = "/models/x.bin";
        m.format = "llama2c-f32";
        m.name = "x";
        m_model = m_writer->add_model(m).value();
        QVERIFY(m_writer->add_run(make_run(m_model, "dip", 0.5f, 30, "tune coarse")).ok());
        QVERIFY(m_writer->add_run(make_run(m_model, "cats", 0.6f, 25, "manual")).ok());
        QVERIFY(m_writer->add_run(make_run(m_model, "dip", 0.7f, 20, "sweep coarse")).ok());
    }
    void cleanup() {
        m_writer.reset();
        fs::remove_all(m_dir);
    }

    void showsRunsAndFilters() {
        SessionPanel p;
        std::vector<size_t> changed;
        connect(&p, &SessionPanel::runsChanged, this, [&](const std::vector<ss::run_record>& r) { changed.push_back(r.size()); });
        p.setSessionPath(m_path);
        QCOMPARE(p.runsView()->model()->rowCount(), 3);
        QCOMPARE(changed, (std::vector<size_t>{3}));
        QCOMPARE(p.methodFilterBox()->count(), 3);  // all, cats, dip

        p.methodFilterBox()->setCurrentIndex(p.methodFilterBox()->findData("dip"));
        QCOMPARE(p.runsView()->model()->rowCount(), 2);
        p.textFilterEdit()->setText("sweep");
        QCOMPARE(p.runsView()->model()->rowCount(), 1);
        p.textFilterEdit()->clear();
        p.methodFilterBox()->setCurrentIndex(0);
        QCOMPARE(p.runsView()->model()->rowCount(), 3);

        // The engine's writer records a run; refresh() shows it (inserted, the selection kept).
        p.selectRun(2);
        QCOMPARE(p.selectedRunId().value_or(0), int64_t{2});
        QVERIFY(m_writer->add_run(make_run(m_model, "teal", 0.4f, 35, "live")).ok());
        QSignalSpy inserted(p.runsModel(), &QAbstractItemModel::rowsInserted);
        p.refresh();
        QCOMPARE(inserted.count(), 1);
        QCOMPARE(p.runsView()->model()->rowCount(), 4);
        QCOMPARE(p.selectedRunId().value_or(0), int64_t{2});
        QCOMPARE(changed.back(), size_t{4});

        // Clicking a header sorts numerically (sim tok/s descending: 35, 30, 25, 20).
        p.runsView()->sortByColumn(RunsTableModel::ColSimTokS, Qt::DescendingOrder);
        QCOMPARE(p.runsView()->model()->index(0, RunsTableModel::ColId).data().toString(), QStringLiteral("4"));

        // A file that is not a session: an error, no rows, no crash.
        const QString junk = QString::fromStdString((m_dir / "junk.slsession").string());
        QFile f(junk);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("definitely not sqlite");
        f.close();
        p.setSessionPath(junk);
        QCOMPARE(p.runsView()->model()->rowCount(), 0);
        QVERIFY(p.lastMessage().contains("junk.slsession"));
    }

    void requestsCarryTheSelectedRunAndChosenFiles() {
        SessionPanel p;
        QList<SessionPanel::FileRole> asked;
        QString answer;
        p.setFileChooser([&](SessionPanel::FileRole role, const QString&) {
            asked << role;
            return answer;
        });
        p.setSessionPath(m_path);

        QSignalSpy exported(&p, &SessionPanel::exportRequested);
        p.exportSelected();  // nothing selected
        QCOMPARE(exported.count(), 0);
        p.selectRun(3);
        answer = QString::fromStdString((m_dir / "tuned").string());
        p.exportSelected();
        QCOMPARE(exported.count(), 1);
        QCOMPARE(exported[0][0].toLongLong(), qint64{3});
        QCOMPARE(exported[0][1].toString(), answer + ".json");  // extension added
        QCOMPARE(asked.back(), SessionPanel::FileRole::ExportConfig);
        answer.clear();  // dialog cancelled
        p.exportSelected();
        QCOMPARE(exported.count(), 1);

        QSignalSpy imported(&p, &SessionPanel::importRequested);
        answer = "/configs/other.json";
        p.importConfig();
        QCOMPARE(imported.count(), 1);
        QCOMPARE(imported[0][0].toString(), answer);

        QSignalSpy saveAs(&p, &SessionPanel::saveAsRequested);
        answer = QString::fromStdString((m_dir / "copy").string());
        p.saveSessionAs();
        QCOMPARE(saveAs.count(), 1);
        QCOMPARE(saveAs[0][0].toString(), answer + ".slsession");
        QCOMPARE(saveAs[0][1].toBool(), false);
        answer = m_path;  // the session itself: nothing to do
        p.saveSessionAs();
        QCOMPARE(saveAs.count(), 1);

        QSignalSpy created(&p, &SessionPanel::newSessionRequested), opened(&p, &SessionPanel::openSessionRequested);
        answer = QString::fromStdString((m_dir / "fresh.slsession").string());
        p.newSession();
        QCOMPARE(created.count(), 1);
        answer = m_path;  // exists: opened instead of failing to create
        p.newSession();
        QCOMPARE(created.count(), 1);
        QCOMPARE(opened.count(), 1);

        // Restore: the run's configuration, parsed back from params_json.
        std::vector<sl::method_config> restored;
        connect(&p, &SessionPanel::restoreRequested, this, [&](const sl::method_config& c) { restored.push_back(c); });
        p.selectRun(2);
        p.restoreSelected();
        QCOMPARE(restored.size(), size_t{1});
        QCOMPARE(restored[0].name, std::string("cats"));
        QCOMPARE(restored[0].density, 0.6f);

        // Delete asks first.
        QSignalSpy deleted(&p, &SessionPanel::deleteRunRequested);
        bool yes = false;
        p.setConfirmer([&](const QString&) { return yes; });
        p.deleteSelected();
        QCOMPARE(deleted.count(), 0);
        yes = true;
        p.deleteSelected();
        QCOMPARE(deleted.count(), 1);
        QCOMPARE(deleted[0][0].toLongLong(), qint64{2});
    }

    void tuneDialogAndProgressRows() {
        SessionPanel p;
        p.setSessionPath(m_path);
        QSignalSpy tune(&p, &SessionPanel::tuneRequested);
        QSignalSpy cancel(&p, &SessionPanel::cancelRequested);
        bool sawError = false;
        QTimer::singleShot(0, this, [&] {
            auto* d = qobject_cast<QDialog*>(QApplication::activeModalWidget());
            QVERIFY(d && d->objectName() == "tuneDialog");
            auto* values = d->findChild<QLineEdit*>("values");
            values->setText("ppl+0.3, fast");  // refused: the dialog stays open with the message
            d->findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok)->click();
            sawError = d->isVisible() && d->findChild<QLabel*>("error")->text().contains("fast");
            values->setText("kld<0.05");
            auto* methods = d->findChild<QListWidget*>("methods");
            for (int i = 0; i < methods->count(); ++i)
                methods->item(i)->setCheckState(methods->item(i)->text() == "teal" ? Qt::Checked : Qt::Unchecked);
            d->findChild<QComboBox*>("objective")->setCurrentIndex(1);
            d->findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok)->click();
        });
        p.startTune();
        QVERIFY(sawError);
        QCOMPARE(tune.count(), 1);
        QCOMPARE(tune[0][0].toString(), QStringLiteral("kld<0.05"));
        QCOMPARE(tune[0][1].toStringList(), QStringList{"teal"});
        QCOMPARE(tune[0][2].toString(), QStringLiteral("cpu"));

        // Progress row: queued, then a fraction, Cancel, finished.
        QProgressBar* bar = p.progressBar(SessionPanel::taskTune);
        QVERIFY(!bar->isHidden());
        QVERIFY(!p.actionButton(SessionPanel::taskSweep)->isEnabled());  // one job at a time
        p.setProgress(SessionPanel::taskTune, 0.25);
        QCOMPARE(bar->value(), 250);
        p.cancelButton(SessionPanel::taskTune)->click();
        QCOMPARE(cancel.count(), 1);
        QVERIFY(!p.cancelButton(SessionPanel::taskTune)->isEnabled());
        p.setTaskFinished(SessionPanel::taskTune, false, "tune cancelled after 3 evaluations");
        QVERIFY(bar->isHidden());
        QVERIFY(p.actionButton(SessionPanel::taskSweep)->isEnabled());

        // A job started elsewhere shows its progress too; other tasks report in the status line.
        p.setProgress(SessionPanel::taskCalibrate, 0.5);
        QVERIFY(!p.progressBar(SessionPanel::taskCalibrate)->isHidden());
        p.setTaskFinished(SessionPanel::taskCalibrate, true, "calibrated");
        p.setTaskFinished("export", false, "x.json: cannot write");
        QCOMPARE(p.lastMessage(), QStringLiteral("x.json: cannot write"));

        // Sweep dialog: densities validated, then requested as numbers.
        QSignalSpy sweep(&p, &SessionPanel::sweepRequested);
        QTimer::singleShot(0, this, [&] {
            auto* d = qobject_cast<QDialog*>(QApplication::activeModalWidget());
            QVERIFY(d && d->objectName() == "sweepDialog");
            d->findChild<QLineEdit*>("values")->setText("0.4, 0.8");
            d->findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok)->click();
        });
        p.startSweep();
        QCOMPARE(sweep.count(), 1);
        const QList<double> dens = sweep[0][1].value<QList<double>>();
        QCOMPARE(dens.size(), 2);
        QCOMPARE(float(dens[1]), 0.8f);
    }
};

SL_GUI_TEST_MAIN(TestSessionPanel, false)
#include "tst_session_panel.moc"

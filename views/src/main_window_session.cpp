// MainWindow's session side: the File menu's session actions, the startup session, and the wiring of the
// Session and Trade-offs panels to the EngineController (which holds the only writable session store).
#include <QAction>
#include <QDir>
#include <QDockWidget>
#include <QFileInfo>
#include <QMenu>
#include <QSettings>
#include <QStandardPaths>

#include "sparselens/views/main_window.h"
#include "sparselens/views/session_panel.h"
#include "sparselens/views/tradeoffs_panel.h"
#include "sparselens/views/tuning_panel.h"

namespace sl::views {

namespace {

const char* const last_session_key = "session/last";
constexpr size_t max_pending_live = 256;  // as many as the Trade-offs panel keeps

}  // namespace

QString MainWindow::defaultSessionPath() {
    return QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + QStringLiteral("/default.slsession");
}

QString MainWindow::sessionPath() const { return m_controller->sessionPath(); }

QDockWidget* MainWindow::dockOf(const QWidget* panel) const {
    for (QWidget* w = panel ? panel->parentWidget() : nullptr; w; w = w->parentWidget())
        if (auto* d = qobject_cast<QDockWidget*>(w)) return d->parentWidget() == this ? d : nullptr;
    return nullptr;
}

void MainWindow::buildSessionMenu(QMenu* file) {
    auto add = [&](const QString& text, const QKeySequence& key, const QString& tip, auto slot) {
        QAction* a = file->addAction(text, this, slot);
        a->setShortcut(key);
        a->setToolTip(tip);
        a->setStatusTip(tip);
        addAction(a);  // the shortcut works wherever the focus is
        return a;
    };
    add(tr("&New Session…"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_N),
        tr("Create a session file (*.slsession) and record runs there from now on"), [this] { m_session->newSession(); });
    add(tr("Open &Session…"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O),
        tr("Open a session file and record runs there from now on"), [this] { m_session->openSession(); });
    add(tr("Save Session &As…"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_S),
        tr("Copy the session to a new file and continue there (runs are saved as they are recorded)"),
        [this] { m_session->saveSessionAs(); });
    add(tr("Save &Run"), QKeySequence::Save,
        tr("Record the Tuning panel's result (method, device, metrics) as a run of the session"), [this] { saveRun(); });
    add(tr("&Export Config…"), QKeySequence(Qt::CTRL | Qt::Key_E),
        tr("Write the run selected in the Session panel as a deployment config"), [this] {
            if (QDockWidget* d = dockOf(m_session)) d->raise();
            m_session->exportSelected();
        });
    add(tr("&Import Config…"), QKeySequence(Qt::CTRL | Qt::Key_I),
        tr("Load a deployment config's method, device and calibration (checked against the loaded model)"),
        [this] { m_session->importConfig(); });
}

void MainWindow::openStartupSession() {
    const QString fallback = defaultSessionPath();
    QString path = QSettings().value(QString::fromLatin1(last_session_key)).toString();
    if (path.isEmpty() || !QFileInfo::exists(path)) path = fallback;
    else if (QFileInfo(path).absoluteFilePath() != QFileInfo(fallback).absoluteFilePath()) m_startupFallback = fallback;
    QDir().mkpath(QFileInfo(path).absolutePath());
    openSession(path);
}

void MainWindow::openSession(const QString& path) {
    m_controller->openSession(path, session_open_mode::open_or_create);
}

void MainWindow::saveRun() {
    const std::shared_ptr<const tuning_result> r = m_tuning->lastResult();
    QString why;
    if (!m_controller->hasModel() || !r) why = tr("Nothing to save yet: load a model and wait for its evaluation");
    else if (r->partial) why = tr("Not saved: wait for the full evaluation (the slider is still moving)");
    else if (m_controller->sessionPath().isEmpty()) why = tr("Not saved: no session is open");
    if (!why.isEmpty()) {
        m_session->setTaskFinished(QString::fromLatin1(EngineController::taskSave), false, why);
        setStatus(why, 5000);
        return;
    }
    m_controller->recordResult(*r);
}

void MainWindow::restoreMethod(const method_config& c) {
    // Evaluates (and re-generates when the prompt panel asks for it) as a manual change would.
    m_tuning->setMethodConfig(c);
    if (QDockWidget* d = dockOf(m_tuning)) d->raise();
}

void MainWindow::flushTradeoffs() {
    if (m_pendingRuns) m_tradeoffs->setRuns(*std::exchange(m_pendingRuns, std::nullopt));
    if (!m_pendingLive.empty()) m_tradeoffs->addLiveResults(std::exchange(m_pendingLive, {}));
}

void MainWindow::wireSession() {
    EngineController* c = m_controller.get();
    SessionPanel* s = m_session;

    // Session panel requests -> engine.
    connect(s, &SessionPanel::newSessionRequested, c, [c](const QString& p) { c->openSession(p, session_open_mode::create); });
    connect(s, &SessionPanel::openSessionRequested, c, [c](const QString& p) { c->openSession(p, session_open_mode::open); });
    connect(s, &SessionPanel::saveAsRequested, c, [c](const QString& p, bool overwrite) { c->saveSessionAs(p, overwrite); });
    connect(s, &SessionPanel::exportRequested, c, [c](qint64 id, const QString& p) { c->exportRun(id, p); });
    connect(s, &SessionPanel::deleteRunRequested, c, [c](qint64 id) { c->deleteRun(id); });
    connect(s, &SessionPanel::importRequested, this, [this, c, s](const QString& p) {
        if (!c->hasModel()) {
            s->setTaskFinished(QString::fromLatin1(EngineController::taskImport), false,
                               tr("Load the model the config was made for first (Ctrl+O)"));
            return;
        }
        c->importConfig(p);
    });
    connect(s, &SessionPanel::calibrateRequested, this, [this, c, s](const QString& p) {
        if (!c->hasModel()) {
            s->setTaskFinished(QString::fromLatin1(EngineController::taskCalibrate), false, tr("No model loaded"));
            return;
        }
        c->calibrate(p);
    });
    auto jobRequest = [this](bool tune, const QStringList& methods) {
        session_job_request r;
        r.tune = tune;
        for (const QString& m : methods) r.methods.push_back(m.toStdString());
        r.device = m_tuning->deviceSettings();
        r.knobs = m_tuning->methodKnobs();
        r.windows = TuningPanel::fullWindows;
        return r;
    };
    connect(s, &SessionPanel::sweepRequested, this, [this, c, s, jobRequest](const QStringList& methods, const QList<double>& densities) {
        if (!c->hasModel()) {
            s->setTaskFinished(QString::fromLatin1(EngineController::taskSweep), false, tr("No model loaded"));
            return;
        }
        session_job_request r = jobRequest(false, methods);
        for (double d : densities) r.densities.push_back(static_cast<float>(d));
        c->runSessionJob(r);
    });
    connect(s, &SessionPanel::tuneRequested, this,
            [this, c, s, jobRequest](const QString& budgets, const QStringList& methods, const QString& objective) {
                if (!c->hasModel()) {
                    s->setTaskFinished(QString::fromLatin1(EngineController::taskTune), false, tr("No model loaded"));
                    return;
                }
                session_job_request r = jobRequest(true, methods);
                r.budgets = budgets.toStdString();
                r.objective = objective.toStdString();
                c->runSessionJob(r);
            });
    connect(s, &SessionPanel::cancelRequested, c, &EngineController::cancel);
    connect(s, &SessionPanel::restoreRequested, this, &MainWindow::restoreMethod);
    connect(m_tuning, &TuningPanel::saveRunRequested, this, &MainWindow::saveRun);

    // Session panel <-> Trade-offs panel.
    connect(s, &SessionPanel::runsChanged, this, [this](const std::vector<sessions::run_record>& runs) {
        if (m_tradeoffsDock->isVisible()) m_tradeoffs->setRuns(runs);
        else m_pendingRuns = runs;
    });
    connect(s, &SessionPanel::runSelected, m_tradeoffs, &TradeoffsPanel::selectRun);
    connect(m_tradeoffs, &TradeoffsPanel::runActivated, s, [s](const sessions::run_record& r) { s->selectRun(r.id); });
    connect(m_tradeoffs, &TradeoffsPanel::restoreRequested, this, &MainWindow::restoreMethod);
    connect(m_tradeoffs, &TradeoffsPanel::messageChanged, this, [this](const QString& m) { setStatus(m, 8000); });
    connect(m_tradeoffsDock, &QDockWidget::visibilityChanged, this, [this](bool on) {
        if (on) flushTradeoffs();
    });

    // Engine -> panels.
    connect(c, &EngineController::sessionOpened, this, [this](const QString& path) {
        m_startupFallback.clear();
        QSettings().setValue(QString::fromLatin1(last_session_key), path);
        m_tradeoffs->setRecommendedRuns({});
        m_session->setSessionPath(path);
    });
    connect(c, &EngineController::sessionChanged, s, &SessionPanel::refresh);
    connect(c, &EngineController::runRecorded, s, [s](qint64 id) { s->selectRun(id); });
    connect(c, &EngineController::configImported, this, [this](const imported_settings& imp) {
        if (imp.has_device) m_tuning->setDeviceSettings(imp.device);
        restoreMethod(imp.method);
    });
    connect(c, &EngineController::tuneRecorded, this, [this](const QList<qint64>& ids, qint64) {
        m_tradeoffs->setRecommendedRuns(std::vector<int64_t>(ids.begin(), ids.end()));
    });
    connect(c, &EngineController::taskProgress, s, &SessionPanel::setProgress);
    connect(c, &EngineController::taskFinished, this, [this, c](const QString& task, bool ok, const QString& msg) {
        m_session->setTaskFinished(task, ok, msg);
        if (ok) setStatus(msg, 5000);
        if (!ok && task == QLatin1String(EngineController::taskSession) && !m_startupFallback.isEmpty()) {
            // The remembered session is unreadable: record into the default one rather than nowhere.
            const QString fallback = std::exchange(m_startupFallback, QString());
            QDir().mkpath(QFileInfo(fallback).absolutePath());
            c->openSession(fallback, session_open_mode::open_or_create);
        }
    });
    connect(c, &EngineController::tuningResultReady, this, [this](std::shared_ptr<const tuning_result> r) {
        if (m_tradeoffsDock->isVisible()) {
            m_tradeoffs->addLiveResult(std::move(r));
            return;
        }
        m_pendingLive.push_back(std::move(r));
        if (m_pendingLive.size() > max_pending_live) m_pendingLive.erase(m_pendingLive.begin());
    });
}

}  // namespace sl::views

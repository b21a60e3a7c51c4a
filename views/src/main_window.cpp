// MainWindow: docks, menus, status bar, drag-and-drop, settings, and the wiring between the panels
// and the EngineController.
#include "sparselens/views/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QEventLoop>
#include <QFileDialog>
#include <QFileInfo>
#include <QGraphicsScene>
#include <QGraphicsView>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressDialog>
#include <QScrollArea>
#include <QSettings>
#include <QStatusBar>
#include <QTimer>
#include <QToolButton>

#include <utility>

#include "progress_strip.h"
#include "sparselens/views/activations_panel.h"
#include "sparselens/views/cache_panel.h"
#include "sparselens/views/model_panel.h"
#include "sparselens/views/neurons_panel.h"
#include "sparselens/views/prompt_panel.h"
#include "sparselens/views/session_panel.h"
#include "sparselens/views/tradeoffs_panel.h"
#include "sparselens/views/tuning_panel.h"

namespace sl::views {

namespace {

// QGraphicsView (every chart) flushes the whole window synchronously after each scene change, unless
// something listens to the scene's changed() signal; then it repaints through ordinary, coalesced
// updates. With OpenGL canvases in the window every flush recomposes all of it (measured 20-100 ms
// per flush under software GL, several per chart rebuild), so listening keeps the event loop free.
void coalesce_scene_repaints(QWidget* root) {
    for (QGraphicsView* v : root->findChildren<QGraphicsView*>())
        if (QGraphicsScene* scene = v->scene(); scene && !scene->property("sl_coalesced").toBool()) {
            scene->setProperty("sl_coalesced", true);
            QObject::connect(scene, &QGraphicsScene::changed, scene, [] {});
        }
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent), m_controller(std::make_unique<EngineController>()) {
    setWindowTitle(tr("SparseLens"));
    setAcceptDrops(true);
    setDockNestingEnabled(true);
    resize(1400, 900);

    m_activations = new ActivationsPanel(this);
    // The central canvas takes what the docks leave; its changing labels must not resize the window.
    m_activations->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Ignored);
    m_activations->setMinimumSize(320, 240);
    setCentralWidget(m_activations);
    m_model = new ModelPanel(this);
    m_tuning = new TuningPanel(this);
    m_prompt = new PromptPanel(this);
    m_neurons = new NeuronsPanel(this);
    m_cache = new CachePanel(this);
    m_session = new SessionPanel(this);
    m_tradeoffs = new TradeoffsPanel(this);
    m_tradeoffs->setMinimumSize(360, 280);
    m_tradeoffs->attachController(m_controller.get());  // "Verify on this machine"

    m_status = new QLabel(this);
    m_progress = new ProgressStrip(this);
    m_progress->setFixedWidth(180);
    m_progress->setToolTip(tr("Progress of the running job"));
    m_cancel = new QToolButton(this);
    m_cancel->setText(tr("Cancel"));
    m_cancel->setToolTip(tr("Cancel the running job and drop queued ones (Esc stops a generation)"));
    statusBar()->addWidget(m_status, 1);
    statusBar()->addPermanentWidget(m_progress);
    statusBar()->addPermanentWidget(m_cancel);
    m_progress->hide();
    m_cancel->hide();

    buildMenus();
    // The left column runs down to the status bar (the bottom docks sit under the centre and the right
    // side only), and Model shares it as a tab with Tuning: the Tuning readouts are the numbers a user
    // watches while moving its knobs, so they must not end below the window's edge.
    setCorner(Qt::BottomLeftCorner, Qt::LeftDockWidgetArea);
    setCorner(Qt::TopLeftCorner, Qt::LeftDockWidgetArea);
    QDockWidget* modelDock = addDockPanel(m_model, tr("Model"), Qt::LeftDockWidgetArea, QStringLiteral("dock.model"));
    QDockWidget* tuningDock = addDockPanel(m_tuning, tr("Tuning"), Qt::LeftDockWidgetArea, QStringLiteral("dock.tuning"));
    tabifyDockWidget(modelDock, tuningDock);
    tuningDock->raise();
    // "and", not "&": tab labels of tabified docks treat '&' as a mnemonic marker.
    addDockPanel(m_prompt, tr("Prompt and output"), Qt::BottomDockWidgetArea, QStringLiteral("dock.prompt"));
    // Neurons and Cache share the right side as tabs: both are chart-heavy, and a hidden chart does
    // not repaint when a generation delivers new statistics.
    m_neuronsDock = addDockPanel(m_neurons, tr("Neurons"), Qt::RightDockWidgetArea, QStringLiteral("dock.neurons"));
    m_cacheDock = addDockPanel(m_cache, tr("Cache"), Qt::RightDockWidgetArea, QStringLiteral("dock.cache"));
    tabifyDockWidget(m_neuronsDock, m_cacheDock);
    // Trade-offs joins the chart tabs; Session sits behind Prompt and output (both wide tables / text).
    m_tradeoffsDock = addDockPanel(m_tradeoffs, tr("Trade-offs"), Qt::RightDockWidgetArea, QStringLiteral("dock.tradeoffs"));
    tabifyDockWidget(m_cacheDock, m_tradeoffsDock);
    m_neuronsDock->raise();
    m_sessionDock = addDockPanel(m_session, tr("Session"), Qt::BottomDockWidgetArea, QStringLiteral("dock.session"));
    tabifyDockWidget(dockOf(m_prompt), m_sessionDock);
    dockOf(m_prompt)->raise();
    // A hidden panel gets its latest snapshot when it is shown (chart rebuilds are not free).
    connect(m_neuronsDock, &QDockWidget::visibilityChanged, this, [this](bool on) {
        if (on && m_pendingNeurons) m_neurons->setNeuronStats(std::exchange(m_pendingNeurons, nullptr));
    });
    connect(m_cacheDock, &QDockWidget::visibilityChanged, this, [this](bool on) {
        if (on && m_pendingCache) m_cache->setSeries(std::exchange(m_pendingCache, nullptr));
    });

    QSettings s;
    m_recent = s.value(QStringLiteral("files/recent")).toStringList();
    rebuildRecent();
    const QString device = s.value(QStringLiteral("tuning/device")).toString();
    if (!device.isEmpty()) m_tuning->setDeviceProfile(device);
    const QString evalText = s.value(QStringLiteral("files/evalText")).toString();
    if (!evalText.isEmpty() && QFileInfo::exists(evalText)) m_controller->setEvalTextFile(evalText);
    m_tuning->setEvalTextName(m_controller->evalTextName());

    wireController();
    wireSession();
    openStartupSession();
    setStatus(tr("Open a model (Ctrl+O) or drop a model file on the window"));
}

MainWindow::~MainWindow() = default;

QDockWidget* MainWindow::addDockPanel(QWidget* panel, const QString& title, Qt::DockWidgetArea area,
                                      const QString& objectName) {
    auto* dock = new QDockWidget(title, this);
    QString name = objectName;
    if (name.isEmpty()) name = QStringLiteral("dock.") + QString(title).remove(QLatin1Char('&')).simplified().toLower().replace(QLatin1Char(' '), QLatin1Char('-'));
    dock->setObjectName(name);
    // In a scroll area: a panel whose content grows (longer texts, more rows) scrolls instead of
    // raising the window's minimum size, which resized the whole window and with it the OpenGL canvas.
    auto* scroll = new QScrollArea(dock);
    scroll->setWidget(panel);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    dock->setWidget(scroll);
    addDockWidget(area, dock);
    coalesce_scene_repaints(panel);
    QAction* toggle = dock->toggleViewAction();
    toggle->setText(QString(title).replace(QLatin1Char('&'), QLatin1String("&&")));  // '&' is no mnemonic here
    toggle->setToolTip(tr("Show or hide the %1 panel").arg(title));
    if (m_dockShortcut < 9) toggle->setShortcut(QKeySequence(Qt::ALT | static_cast<Qt::Key>(Qt::Key_1 + m_dockShortcut++)));
    m_viewMenu->addAction(toggle);
    return dock;
}

void MainWindow::buildMenus() {
    m_fileMenu = menuBar()->addMenu(tr("&File"));
    QAction* open = m_fileMenu->addAction(tr("&Open model…"), this, &MainWindow::openModelDialog);
    open->setShortcut(QKeySequence::Open);
    open->setToolTip(tr("Open a GGUF or llama2.c model"));
    m_recentMenu = m_fileMenu->addMenu(tr("Recent files"));
    QAction* evalText = m_fileMenu->addAction(tr("Choose evaluation text…"), this, [this] {
        emit m_tuning->evalTextChangeRequested();
    });
    evalText->setToolTip(tr("The text the Tuning panel evaluates on"));
    m_fileMenu->addSeparator();
    buildSessionMenu(m_fileMenu);
    m_fileMenu->addSeparator();
    QAction* quit = m_fileMenu->addAction(tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);

    QMenu* run = menuBar()->addMenu(tr("&Run"));
    QAction* gen = run->addAction(tr("&Generate"), this, &MainWindow::generate);
    gen->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_Return), QKeySequence(Qt::CTRL | Qt::Key_Enter)});
    gen->setToolTip(tr("Generate from the prompt with the current method and device"));
    QAction* stop = run->addAction(tr("&Stop / cancel"), this, &MainWindow::stopOrCancel);
    stop->setShortcut(QKeySequence(Qt::Key_Escape));
    QAction* eval = run->addAction(tr("&Evaluate"), this, [this] { evaluate(false); });
    eval->setShortcut(QKeySequence(Qt::Key_F5));
    QAction* calib = run->addAction(tr("&Calibrate on eval text"), m_controller.get(), [this] { m_controller->calibrate(); });
    calib->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_K));
    for (QAction* a : run->actions()) addAction(a);  // shortcuts work wherever the focus is

    m_viewMenu = menuBar()->addMenu(tr("&View"));
    QMenu* help = menuBar()->addMenu(tr("&Help"));
    QAction* keys = help->addAction(tr("&Shortcuts"), this, &MainWindow::showShortcuts);
    keys->setShortcut(QKeySequence::HelpContents);
    help->addAction(tr("&About SparseLens"), this, &MainWindow::showAbout);
}

void MainWindow::wireController() {
    EngineController* c = m_controller.get();
    connect(m_model, &ModelPanel::openRequested, this, &MainWindow::openModelDialog);
    connect(m_model, &ModelPanel::recentRequested, this, [this](const QString& p) { openModel(p); });
    connect(m_model, &ModelPanel::cancelRequested, c, &EngineController::cancel);
    connect(m_model, &ModelPanel::calibrateRequested, c, [c] { c->calibrate(); });
    connect(m_cancel, &QToolButton::clicked, c, &EngineController::cancel);

    connect(c, &EngineController::modelLoaded, this, [this](std::shared_ptr<const model_card> card) {
        m_model->setLoading(false);
        m_model->setModelCard(card);
        m_tuning->setModelCard(card);
        m_prompt->setMaxSteps(card->seq_len);
        m_activations->setLayerCount(card->n_layers);
        setWindowTitle(tr("SparseLens — %1").arg(QFileInfo(QString::fromStdString(card->path)).fileName()));
        addRecent(QString::fromStdString(card->path));
        setStatus(tr("Loaded %1").arg(QString::fromStdString(card->name)), 5000);
        m_generatedOnce = false;
        evaluate(false);
        if (m_generateOnLoad) generate();
    });
    connect(c, &EngineController::tokensStreamed, m_prompt, &PromptPanel::appendTokens);
    connect(c, &EngineController::generationFinished, this, [this](const generation_stats& s) {
        m_prompt->finishOutput(s);
        m_generatedOnce = true;
        setStatus(tr("Generated %1 tokens at %2 tok/s").arg(s.n_tokens).arg(s.decode_tokens_per_s, 0, 'f', 0), 5000);
    });
    connect(c, &EngineController::activationsReady, m_activations, &ActivationsPanel::setActivations);
    connect(c, &EngineController::neuronStatsReady, this, [this](std::shared_ptr<const neuron_snapshot> n) {
        m_activations->setNeuronOrders(n);
        if (m_neuronsDock->isVisible()) m_neurons->setNeuronStats(n);
        else m_pendingNeurons = std::move(n);
    });
    connect(c, &EngineController::cacheSeriesReady, this, [this](std::shared_ptr<const cache_snapshot_series> s) {
        if (m_cacheDock->isVisible()) m_cache->setSeries(std::move(s));
        else m_pendingCache = std::move(s);
    });
    connect(c, &EngineController::tuningResultReady, m_tuning, &TuningPanel::showResult);
    connect(c, &EngineController::calibrationChanged, this, [this](bool present, const QString& d) {
        m_model->setCalibration(present, d);
        m_tuning->setCalibrated(present);
    });
    connect(c, &EngineController::progressChanged, this, [this](const QString& what, double f) {
        m_progressWhat = what;
        m_progress->show();
        m_progress->setFraction(f);
        if (!what.isEmpty()) m_status->setText(what);
        if (m_model->isLoading()) m_model->setLoading(true, what, f);
    });
    connect(c, &EngineController::busyChanged, this, [this](bool busy) {
        m_cancel->setVisible(busy);
        if (!busy) {
            m_progress->hide();
            if (!m_progressWhat.isEmpty() && m_status->text() == m_progressWhat) m_status->clear();
        }
    });
    connect(c, &EngineController::requestFinished, this, [this, c](const QString& tag, quint64) {
        if (tag == QLatin1String(EngineController::tagLoad)) m_model->setLoading(false);
        if (tag == QLatin1String(EngineController::tagGenerate)) m_prompt->setGenerating(c->isGenerating());
    });
    connect(c, &EngineController::requestCancelled, this, [this](const QString& tag, quint64) {
        if (tag != QLatin1String(EngineController::tagTune)) setStatus(tr("Cancelled"), 3000);
    });
    connect(c, &EngineController::errorOccurred, this, &MainWindow::showError);

    connect(m_prompt, &PromptPanel::generateRequested, this, &MainWindow::generate);
    connect(m_prompt, &PromptPanel::stopRequested, c, &EngineController::stop);
    connect(m_prompt, &PromptPanel::tokenHovered, m_activations, &ActivationsPanel::highlightToken);
    connect(m_activations, &ActivationsPanel::tokenHovered, m_prompt, &PromptPanel::highlightToken);
    connect(m_activations, &ActivationsPanel::selectionChanged, this, [this, c](int layer, int where) {
        if (where < 0 || where >= probe_count) return;
        c->requestActivations(layer, static_cast<probe>(where));
        m_neurons->setLayer(layer);
    });

    connect(m_tuning, &TuningPanel::evaluationRequested, this, &MainWindow::evaluate);
    connect(m_tuning, &TuningPanel::deviceProfileChanged, this, [](const QString& name) {
        QSettings().setValue(QStringLiteral("tuning/device"), name);
    });
    connect(m_tuning, &TuningPanel::evalTextChangeRequested, this, [this, c] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Evaluation text"), QString(),
                                                          tr("Text files (*.txt *.md *.tokens);;All files (*)"));
        if (path.isEmpty() || !c->setEvalTextFile(path)) return;
        QSettings().setValue(QStringLiteral("files/evalText"), path);
        m_tuning->setEvalTextName(c->evalTextName());
        evaluate(false);
    });
    connect(m_tuning, &TuningPanel::evalTextResetRequested, this, [this, c] {
        c->setEvalTextFile({});
        QSettings().remove(QStringLiteral("files/evalText"));
        m_tuning->setEvalTextName(c->evalTextName());
        evaluate(false);
    });
}

void MainWindow::openModelDialog() {
    const QString start = m_recent.isEmpty() ? QString() : QFileInfo(m_recent.front()).absolutePath();
    const QString path = QFileDialog::getOpenFileName(this, tr("Open model"), start,
                                                      tr("Models (*.gguf *.bin);;All files (*)"));
    if (!path.isEmpty()) openModel(path);
}

void MainWindow::openModel(const QString& path, const QString& tokenizerPath) {
    m_controller->loadModel(path, tokenizerPath);
    m_model->setLoading(true, tr("Loading %1").arg(QFileInfo(path).fileName()), -1);
    setStatus(tr("Loading %1…").arg(path));
}

void MainWindow::setPrompt(const QString& text) { m_prompt->setPrompt(text); }

void MainWindow::generate() {
    if (!m_controller->hasModel()) {
        showError(tr("No model loaded: open a model file first (Ctrl+O)"));
        return;
    }
    generate_request r;
    r.prompt = m_prompt->prompt().toStdString();
    r.chat = m_prompt->chatFormat();
    r.steps = m_prompt->steps();
    r.temperature = m_prompt->temperature();
    r.seed = m_prompt->seed();
    r.method = m_tuning->methodConfig();
    r.device = m_tuning->deviceSettings();
    r.layer = m_activations->layer();
    r.where = m_activations->probe();
    m_prompt->beginOutput(m_controller->generate(r));
    m_prompt->setGenerating(true);
}

void MainWindow::evaluate(bool partial) {
    if (!m_controller->hasModel()) return;
    m_controller->evaluate(m_tuning->request(partial));
    // A settled tuning change also re-runs the prompt, so the text shows the method's effect.
    if (!partial && m_generatedOnce && m_prompt->regenerateOnTuning()) generate();
}

void MainWindow::stopOrCancel() {
    if (m_controller->isGenerating()) m_controller->stop();
    else m_controller->cancel();
}

void MainWindow::addRecent(const QString& path) {
    const QString abs = QFileInfo(path).absoluteFilePath();
    m_recent.removeAll(abs);
    m_recent.prepend(abs);
    while (m_recent.size() > maxRecentFiles) m_recent.removeLast();
    QSettings().setValue(QStringLiteral("files/recent"), m_recent);
    rebuildRecent();
}

void MainWindow::rebuildRecent() {
    m_model->setRecentFiles(m_recent);
    m_recentMenu->clear();
    m_recentMenu->setEnabled(!m_recent.isEmpty());
    for (const QString& p : m_recent) {
        QAction* a = m_recentMenu->addAction(QFileInfo(p).fileName(), this, [this, p] { openModel(p); });
        a->setToolTip(p);
    }
}

void MainWindow::showError(const QString& message) {
    m_lastError = message;
    setStatus(message, 15000);
    // Non-modal: the window keeps working while the message is shown; one box, reused.
    if (!m_errorBox) {
        m_errorBox = new QMessageBox(QMessageBox::Warning, tr("SparseLens"), QString(), QMessageBox::Ok, this);
        m_errorBox->setWindowModality(Qt::NonModal);
        m_errorBox->setModal(false);
    }
    m_errorBox->setText(message);
    if (isVisible()) m_errorBox->show();
}

void MainWindow::setStatus(const QString& text, int timeoutMs) {
    if (timeoutMs > 0) statusBar()->showMessage(text, timeoutMs);
    else m_status->setText(text);
}

QString MainWindow::statusText() const {
    const QString temp = statusBar()->currentMessage();
    return temp.isEmpty() ? m_status->text() : temp;
}

void MainWindow::showShortcuts() {
    auto* box = new QMessageBox(QMessageBox::Information, tr("Keyboard shortcuts"),
                                tr("<table>"
                                   "<tr><td>Ctrl+O</td><td>Open model</td></tr>"
                                   "<tr><td>Ctrl+Return</td><td>Generate</td></tr>"
                                   "<tr><td>Esc</td><td>Stop the generation / cancel the running job</td></tr>"
                                   "<tr><td>F5</td><td>Evaluate the current tuning</td></tr>"
                                   "<tr><td>Ctrl+Shift+K</td><td>Calibrate on the evaluation text</td></tr>"
                                   "<tr><td>Ctrl+S</td><td>Save the Tuning panel's result as a run</td></tr>"
                                   "<tr><td>Ctrl+Shift+N / O / S</td><td>New / open / save-as session</td></tr>"
                                   "<tr><td>Ctrl+E / Ctrl+I</td><td>Export the selected run / import a config</td></tr>"
                                   "<tr><td>Alt+1…9</td><td>Show / hide panels</td></tr>"
                                   "<tr><td>F1</td><td>This list</td></tr>"
                                   "<tr><td>Ctrl+Q</td><td>Quit</td></tr></table>"),
                                QMessageBox::Close, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->setModal(false);
    box->show();
}

void MainWindow::showAbout() {
    QMessageBox::about(this, tr("About SparseLens"),
                       tr("<b>SparseLens</b> — a workbench for training-free activation sparsity in on-device LLM "
                          "inference: a real CPU engine, sparsity methods and a flash/DRAM device simulator."));
}

void MainWindow::saveSettings() {
    QSettings s;
    s.setValue(QStringLiteral("window/geometry"), saveGeometry());
    s.setValue(QStringLiteral("window/state"), saveState());
    s.setValue(QStringLiteral("tuning/device"), m_tuning->deviceProfile());
}

void MainWindow::closeEvent(QCloseEvent* e) {
    saveSettings();
    // Evaluations, generations and sweeps stop; a session write the user asked for (Save run just
    // clicked, an export, a delete) finishes first, behind a short progress dialog.
    m_controller->cancelAllButSessionWrites();
    finishSessionWrites();
    QMainWindow::closeEvent(e);
}

void MainWindow::finishSessionWrites() {
    if (m_controller->pendingSessionWrites() == 0) return;
    QProgressDialog dialog(tr("Finishing session writes before closing…"), QString(), 0, 0, this);
    dialog.setWindowTitle(tr("Closing"));
    dialog.setWindowModality(Qt::WindowModal);
    dialog.setMinimumDuration(200);  // a write of a few milliseconds shows nothing
    QEventLoop loop;
    auto check = [this, &loop] {
        if (m_controller->pendingSessionWrites() == 0) loop.quit();
    };
    connect(m_controller.get(), &EngineController::requestFinished, &loop, check, Qt::QueuedConnection);
    QTimer poll;  // the running job's end is signalled before it leaves m_running: look again shortly
    connect(&poll, &QTimer::timeout, &loop, check);
    poll.start(20);
    loop.exec();
    setStatus(tr("Session writes finished"), 0);
}

void MainWindow::applyDefaultDockSizes() {
    QList<QDockWidget*> left, right, bottom;
    for (QDockWidget* d : findChildren<QDockWidget*>()) {
        if (d->isFloating() || !d->isVisible()) continue;
        switch (dockWidgetArea(d)) {
            case Qt::LeftDockWidgetArea: left << d; break;
            case Qt::RightDockWidgetArea: right << d; break;
            case Qt::BottomDockWidgetArea: bottom << d; break;
            default: break;
        }
    }
    const int w = width(), h = height();
    if (!left.isEmpty()) resizeDocks({left.front()}, {w * 25 / 100}, Qt::Horizontal);
    if (!right.isEmpty()) resizeDocks({right.front()}, {w * 36 / 100}, Qt::Horizontal);
    if (!bottom.isEmpty()) resizeDocks({bottom.front()}, {h * 26 / 100}, Qt::Vertical);
}

void MainWindow::showEvent(QShowEvent* e) {
    // Restored on first show, when every panel (later ones too) has its dock.
    bool sized = true;
    if (!m_restored) {
        m_restored = true;
        QSettings s;
        restoreGeometry(s.value(QStringLiteral("window/geometry")).toByteArray());
        sized = restoreState(s.value(QStringLiteral("window/state")).toByteArray());
    }
    QMainWindow::showEvent(e);
    if (!sized) applyDefaultDockSizes();
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
    for (const QUrl& u : e->mimeData()->urls())
        if (u.isLocalFile()) {
            e->acceptProposedAction();
            return;
        }
}

void MainWindow::dropEvent(QDropEvent* e) {
    for (const QUrl& u : e->mimeData()->urls())
        if (u.isLocalFile()) {
            openModel(u.toLocalFile());
            e->acceptProposedAction();
            return;
        }
}

}  // namespace sl::views

// ScreenshotTour: one scripted session in the real window, waiting on the controller's signals (never on
// timers) between steps, then grabs of the window and of each dock. OpenGL canvases are read back with
// grabFramebuffer() and painted over the widget grab, so their content does not depend on how the
// platform composes QOpenGLWidget into QWidget::grab().
#include "sparselens/views/screenshot_tour.h"

#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QFile>
#include <QEventLoop>
#include <QFileInfo>
#include <QLabel>
#include <QLineSeries>
#include <QMap>
#include <QOpenGLWidget>
#include <QPainter>
#include <QPointer>
#include <QTimer>

#include <algorithm>
#include <cmath>

#include "sparselens/views/activations_panel.h"
#include "sparselens/views/cache_panel.h"
#include "sparselens/views/main_window.h"
#include "sparselens/views/model_panel.h"
#include "sparselens/views/neurons_panel.h"
#include "sparselens/views/prompt_panel.h"
#include "sparselens/views/session_panel.h"
#include "sparselens/views/tradeoffs_panel.h"
#include "sparselens/views/tuning_panel.h"

namespace sl::views {

QStringList ScreenshotTour::fileNames() {
    return {QStringLiteral("window.png"),       QStringLiteral("activations-absolute.png"),
            QStringLiteral("activations-relative.png"), QStringLiteral("activations-mask.png"),
            QStringLiteral("neurons.png"),      QStringLiteral("cache.png"),
            QStringLiteral("tuning.png"),       QStringLiteral("prompt.png"),
            QStringLiteral("tradeoffs.png"),    QStringLiteral("session.png")};
}

QSize ScreenshotTour::shotSize(const QString& name) {
    static const QMap<QString, QSize> sizes = {
        {QStringLiteral("window.png"), QSize(1600, 1000)},  // options::windowSize by default
        {QStringLiteral("tuning.png"), QSize(440, 900)},      {QStringLiteral("prompt.png"), QSize(1200, 400)},
        {QStringLiteral("neurons.png"), QSize(820, 760)},     {QStringLiteral("cache.png"), QSize(900, 800)},
        {QStringLiteral("tradeoffs.png"), QSize(960, 680)},   {QStringLiteral("session.png"), QSize(1100, 640)},
    };
    return sizes.value(name);
}

ScreenshotTour::ScreenshotTour(MainWindow* window, options opts, QObject* parent)
    : QObject(parent), m_w(window), m_o(std::move(opts)),
      m_tmp(QDir::tempPath() + QStringLiteral("/sparselens-tour-XXXXXX")) {
    EngineController* c = m_w->controller();
    // Every signal that can end a wait re-checks the pending condition (queued: after the window's own
    // handlers, connected earlier, have updated the panels).
    const auto poke = [this] { emit changed(); };
    connect(c, &EngineController::modelLoaded, this, poke, Qt::QueuedConnection);
    connect(c, &EngineController::generationFinished, this, [this] { m_generated = true; emit changed(); },
            Qt::QueuedConnection);
    connect(c, &EngineController::activationsReady, this, poke, Qt::QueuedConnection);
    connect(c, &EngineController::neuronStatsReady, this, poke, Qt::QueuedConnection);
    connect(c, &EngineController::cacheSeriesReady, this, poke, Qt::QueuedConnection);
    connect(c, &EngineController::tuningResultReady, this, poke, Qt::QueuedConnection);
    connect(c, &EngineController::busyChanged, this, poke, Qt::QueuedConnection);
    connect(c, &EngineController::requestFinished, this, poke, Qt::QueuedConnection);
    connect(c, &EngineController::errorOccurred, this, [this](const QString& m) {
        m_engineError = m;
        emit changed();
    }, Qt::QueuedConnection);
}

ScreenshotTour::~ScreenshotTour() = default;

bool ScreenshotTour::isFlat(const QImage& img) {
    if (img.isNull()) return true;
    const QImage rgb = img.convertToFormat(QImage::Format_RGB32);
    const QRgb first = rgb.pixel(0, 0);
    for (int y = 0; y < rgb.height(); ++y) {
        const auto* row = reinterpret_cast<const QRgb*>(rgb.constScanLine(y));
        for (int x = 0; x < rgb.width(); ++x)
            if (row[x] != first) return false;
    }
    return true;
}

bool ScreenshotTour::step(const QString& what) {
    emit progress(what);
    return true;
}

// A local event loop that ends when `ready` holds (checked on every changed()), on an engine error, or
// after the timeout. Optional waits only leave a note.
bool ScreenshotTour::waitUntil(const std::function<bool()>& ready, const QString& what, bool optional) {
    QElapsedTimer clock;
    clock.start();
    m_engineError.clear();
    if (!ready()) {
        QEventLoop loop;
        QTimer timeout;
        timeout.setSingleShot(true);
        connect(&timeout, &QTimer::timeout, &loop, &QEventLoop::quit);
        connect(this, &ScreenshotTour::changed, &loop, [&] {
            if (ready() || !m_engineError.isEmpty()) loop.quit();
        });
        timeout.start(m_o.timeoutMs);
        loop.exec();
    }
    if (ready()) return true;
    const QString why = !m_engineError.isEmpty()
                            ? tr("the engine reported: %1").arg(m_engineError)
                            : tr("no result after %1 s").arg(clock.elapsed() / 1000.0, 0, 'f', 1);
    if (optional) {
        m_notes << tr("%1: %2").arg(what, why);
        return false;
    }
    m_error = tr("screenshot tour: waiting for %1: %2").arg(what, why);
    return false;
}

// Posted layout, polish and chart geometry updates; the grab itself paints synchronously.
void ScreenshotTour::settle() {
    for (int i = 0; i < 3; ++i) {
        QCoreApplication::sendPostedEvents();
        QCoreApplication::processEvents(QEventLoop::ExcludeUserInputEvents);
    }
}

QDockWidget* ScreenshotTour::dockOf(QWidget* panel) const {
    for (QWidget* p = panel; p; p = p->parentWidget())
        if (auto* d = qobject_cast<QDockWidget*>(p)) return d;
    return nullptr;
}

bool ScreenshotTour::showDock(QWidget* panel) {
    QDockWidget* d = dockOf(panel);
    if (!d) return false;
    d->show();
    d->raise();  // the front tab when tabified
    settle();
    return d->isVisible();
}

// Fixed dock sizes, so the screenshots do not depend on saved layouts or font metrics.
void ScreenshotTour::layoutDocks() {
    m_w->applyDefaultDockSizes();
    const int h = m_o.windowSize.height();
    QList<QDockWidget*> left;
    for (QDockWidget* d : m_w->findChildren<QDockWidget*>())
        if (!d->isFloating() && d->isVisible() && m_w->dockWidgetArea(d) == Qt::LeftDockWidgetArea) left << d;
    // Model over Tuning on the left (a layout of the user's; by default they are tabs): the model card
    // scrolls, the Tuning readouts should show.
    QDockWidget *model = dockOf(m_w->modelPanel()), *tuning = dockOf(m_w->tuningPanel());
    if (model && tuning && left.contains(model) && left.contains(tuning) &&
        !m_w->tabifiedDockWidgets(model).contains(tuning))
        m_w->resizeDocks({model, tuning}, {h * 16 / 100, h * 60 / 100}, Qt::Vertical);
    settle();
}

// The widget as drawn, with each visible OpenGL canvas inside it read back from its framebuffer.
QImage ScreenshotTour::grabWithGL(QWidget* w) const {
    QImage img = w->grab().toImage().convertToFormat(QImage::Format_RGB32);
    QPainter p(&img);
    for (QOpenGLWidget* gl : w->findChildren<QOpenGLWidget*>()) {
        if (!gl->isVisible()) continue;
        const QImage fb = gl->grabFramebuffer();
        if (fb.isNull()) continue;
        const QRect r(gl->mapTo(w, QPoint(0, 0)), gl->size());
        p.drawImage(QRectF(r.topLeft() * 1.0, r.size() * 1.0), fb);
    }
    return img;
}

bool ScreenshotTour::save(QWidget* w, const QString& name) {
    settle();
    const QImage img = grabWithGL(w);
    if (isFlat(img)) {
        m_error = tr("screenshot tour: %1 is a single flat colour (%2x%3)").arg(name).arg(img.width()).arg(img.height());
        return false;
    }
    const QString path = QDir(m_o.outDir).absoluteFilePath(name);
    if (!img.save(path, "PNG")) {
        m_error = tr("screenshot tour: cannot write %1").arg(path);
        return false;
    }
    m_written << path;
    emit progress(tr("wrote %1 (%2x%3)").arg(path).arg(img.width()).arg(img.height()));
    return true;
}

// A dock alone at a fixed size: floated, resized, grabbed, then the window's layout restored.
bool ScreenshotTour::saveDock(QWidget* panel, const QString& name) {
    QDockWidget* d = dockOf(panel);
    if (!d) return false;
    const QByteArray state = m_w->saveState();
    d->setFloating(true);
    d->resize(shotSize(name));
    d->show();
    d->raise();
    settle();
    const bool ok = save(d, name);
    m_w->restoreState(state);
    settle();
    return ok;
}

// The Activations panel's layer combo is its label's buddy ("&Layer").
bool ScreenshotTour::selectLayer(int layer) {
    ActivationsPanel* a = m_w->activationsPanel();
    QComboBox* combo = nullptr;
    for (QLabel* l : a->findChildren<QLabel*>())
        if (l->text() == tr("&Layer")) combo = qobject_cast<QComboBox*>(l->buddy());
    if (!combo || combo->count() == 0) {
        m_notes << tr("activations: no layer selector found; showing layer %1").arg(a->layer());
        return true;
    }
    layer = std::clamp(layer, 0, combo->count() - 1);
    if (combo->currentIndex() == layer) return true;
    combo->setCurrentIndex(layer);  // asks the controller for that layer's activations
    return waitUntil([a, layer] {
        const activation_snapshot* s = a->canvas()->snapshot();
        return s && s->layer == layer;
    }, tr("the activations of layer %1").arg(layer));
}

bool ScreenshotTour::tourActivations() {
    ActivationsPanel* a = m_w->activationsPanel();
    HeatmapCanvas* canvas = a->canvas();
    if (!canvas->isVisible() || !canvas->glReady()) {
        m_error = tr("screenshot tour: the activation heatmap has no OpenGL context (%1)").arg(canvas->glFailure());
        return false;
    }
    struct shot {
        heatmap_mode mode;
        column_order order;
        const char* file;
    };
    // Absolute by heavy-hitter norm (the heavy hitters gather on the left), relative by GRIFFIN's
    // statistic (flocking: the same columns light up in every row), the mask in neuron order.
    for (const shot& s : {shot{heatmap_mode::absolute, column_order::heavy_hitter, "activations-absolute.png"},
                          shot{heatmap_mode::relative, column_order::griffin, "activations-relative.png"},
                          shot{heatmap_mode::mask_overlay, column_order::index, "activations-mask.png"}}) {
        a->setMode(s.mode);
        a->setOrder(s.order);
        canvas->resetView();
        settle();
        const QImage fb = canvas->grabFramebuffer();
        if (isFlat(fb)) {
            m_error = tr("screenshot tour: the heatmap rendered a flat image in %1 mode")
                          .arg(QString::fromUtf8(heatmap_mode_name(s.mode).data()));
            return false;
        }
        if (!save(a, QString::fromLatin1(s.file))) return false;
    }
    a->setMode(heatmap_mode::absolute);
    a->setOrder(column_order::heavy_hitter);
    return true;
}

bool ScreenshotTour::tourNeurons() {
    NeuronsPanel* n = m_w->neuronsPanel();
    if (!showDock(n)) {
        m_notes << tr("neurons.png: the Neurons dock was not found");
        return true;
    }
    if (!waitUntil([n] { return n->importanceSeries() && n->importanceSeries()->count() > 0; },
                   tr("the Neurons panel's statistics")))
        return false;
    n->setLayer(std::clamp(m_o.activationsLayer, 0, std::max(0, m_w->controller()->modelCard()->n_layers - 1)));
    n->setTopPercent(10);
    // The whole window first, while every dock still has the layout it started with (floating a dock and
    // restoring the state leaves its splitters where the floating size put them).
    if (!save(m_w, QStringLiteral("window.png"))) return false;
    return saveDock(n, QStringLiteral("neurons.png"));
}

bool ScreenshotTour::tourCache() {
    CachePanel* c = m_w->cachePanel();
    if (!showDock(c)) {
        m_notes << tr("cache.png: the Cache dock was not found");
        return true;
    }
    // A hidden Cache panel gets the series held for it when it is shown.
    if (!waitUntil([c] { return c->frameCount() > 0; }, tr("the Cache panel's simulation"))) return false;
    c->setPlaying(false);
    c->setCurrentFrame(c->frameCount() / 2);
    return saveDock(c, QStringLiteral("cache.png"));
}

bool ScreenshotTour::tourTuning() {
    TuningPanel* t = m_w->tuningPanel();
    if (!showDock(t)) {
        m_notes << tr("tuning.png: the Tuning dock was not found");
        return true;
    }
    return saveDock(t, QStringLiteral("tuning.png"));
}

bool ScreenshotTour::tourPrompt() {
    PromptPanel* p = m_w->promptPanel();
    if (!showDock(p)) {
        m_notes << tr("prompt.png: the Prompt and output dock was not found");
        return true;
    }
    p->setColorBy(PromptPanel::ColorBy::Kld);
    return saveDock(p, QStringLiteral("prompt.png"));
}

// Trade-offs and Session exist once the window adds them (issue 7, panels 7 and 8): a small sweep into a
// fresh session gives the scatter something to show. Each missing piece is a note, not a failure.
bool ScreenshotTour::tourSessionAndTradeoffs() {
    auto* session = m_w->findChild<SessionPanel*>();
    auto* tradeoffs = m_w->findChild<TradeoffsPanel*>();
    if (!session || !dockOf(session)) m_notes << tr("session.png: the window has no Session dock");
    if (!tradeoffs || !dockOf(tradeoffs)) m_notes << tr("tradeoffs.png: the window has no Trade-offs dock");
    if (session && dockOf(session)) {
        showDock(session);
        connect(session, &SessionPanel::runsChanged, this, &ScreenshotTour::changed, Qt::QueuedConnection);
        // A fresh session of the tour's own: the sweep must not land in the user's session.
        const QString path = m_tmp.filePath(QStringLiteral("screenshots.slsession"));
        bool opened = false;
        if (m_tmp.isValid()) {
            session->setFileChooser([path](SessionPanel::FileRole, const QString&) { return path; });
            step(tr("new session %1").arg(path));
            session->newSession();
            opened = waitUntil([session, path] { return session->sessionPath() == path; },
                               tr("session.png: a new session"), true);
        }
        if (opened && session->runs().empty()) {
            step(tr("sweep into the session"));
            EngineController* c = m_w->controller();
            emit session->sweepRequested({QStringLiteral("dip"), QStringLiteral("dip-ca"), QStringLiteral("cats"),
                                          QStringLiteral("teal")},
                                         {0.5, 0.8});  // 30% would stretch the axes (CATS: ΔPPL in the thousands)
            waitUntil([session, c] { return session->runs().size() >= 8 && !c->isBusy(); },
                      tr("session.png: the sweep's runs"), true);
        }
        // Select (and ring in the Trade-offs chart) the run closest to the tour's own setting.
        const sessions::run_record* pick = nullptr;
        for (const sessions::run_record& r : session->runs())
            if (r.method == m_o.method.toStdString() &&
                (!pick || std::abs(r.mlp_density * 100 - m_o.densityPercent) < std::abs(pick->mlp_density * 100 - m_o.densityPercent)))
                pick = &r;
        if (pick) session->selectRun(pick->id);
    }
    if (tradeoffs && dockOf(tradeoffs)) {
        showDock(tradeoffs);
        if (!saveDock(tradeoffs, QStringLiteral("tradeoffs.png"))) return false;
    }
    if (session && dockOf(session)) {
        showDock(session);
        if (!saveDock(session, QStringLiteral("session.png"))) return false;
    }
    return true;
}

bool ScreenshotTour::run() {
    m_error.clear();
    m_written.clear();
    m_notes.clear();
    if (!QDir().mkpath(m_o.outDir)) {
        m_error = tr("screenshot tour: cannot create %1").arg(m_o.outDir);
        return false;
    }
    for (const QString& f : fileNames()) QFile::remove(QDir(m_o.outDir).absoluteFilePath(f));  // no stale views
    if (!QFileInfo::exists(m_o.model)) {
        m_error = tr("screenshot tour: %1: no such model file").arg(m_o.model);
        return false;
    }
    EngineController* c = m_w->controller();
    m_w->setGenerateOnLoad(false);
    m_w->resize(m_o.windowSize);
    m_w->show();
    settle();
    m_w->resize(m_o.windowSize);  // after show: a restored geometry does not count here

    // Byte-exact flash reads by default: the demo model's units are smaller than a flash page (see
    // options::flashPageBytes). Set before loading, so the dense evaluation on load uses it too.
    if (m_o.flashPageBytes >= 0) m_w->tuningPanel()->setFlashPage(m_o.flashPageBytes);
    step(tr("loading %1").arg(m_o.model));
    m_w->openModel(m_o.model, m_o.tokenizer);
    // Loading ends with the dense evaluation of the Tuning panel.
    if (!waitUntil([this, c] { return c->hasModel() && m_w->tuningPanel()->lastResult() && !c->isBusy(); },
                   tr("the model to load")))
        return false;
    layoutDocks();

    step(tr("%1 at %2%").arg(m_o.method).arg(m_o.densityPercent));
    PromptPanel* p = m_w->promptPanel();
    m_w->setPrompt(m_o.prompt);
    p->setSteps(m_o.steps);
    TuningPanel* t = m_w->tuningPanel();
    method_config cfg = method_default_config();
    cfg.name = m_o.method.toStdString();
    cfg.density = static_cast<float>(m_o.densityPercent) / 100.0f;
    t->setMethodConfig(cfg);  // the DRAM budget stays at its default: about half of the MLP fits
    const std::string method = cfg.name;
    if (!waitUntil([t, c, method] {
            const auto r = t->lastResult();
            return r && !r->partial && r->config.name == method && !c->isBusy();
        }, tr("the %1 evaluation").arg(m_o.method)))
        return false;

    step(tr("generating %1 positions").arg(m_o.steps));
    m_generated = false;
    m_w->generate();
    if (!waitUntil([this, c] { return m_generated && !c->isGenerating() && !c->isBusy(); }, tr("the generation")))
        return false;
    if (!selectLayer(m_o.activationsLayer)) return false;

    step(tr("grabbing the views"));
    // The window is grabbed with Neurons in front on the right and the heatmap by heavy hitters (in
    // tourNeurons, before any dock is floated; here when there is no Neurons dock).
    if (!tourActivations() || !tourNeurons()) return false;
    if (!m_written.contains(QDir(m_o.outDir).absoluteFilePath(QStringLiteral("window.png"))) &&
        !save(m_w, QStringLiteral("window.png")))
        return false;
    if (!tourTuning() || !tourPrompt() || !tourCache()) return false;
    if (!tourSessionAndTradeoffs()) return false;
    return true;
}

}  // namespace sl::views

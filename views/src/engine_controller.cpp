// EngineController: request queue with tag coalescing, the engine thread, stale-result filtering and
// the streaming buffer drained by a GUI timer.
#include "sparselens/views/engine_controller.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QMetaObject>
#include <QPointer>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>

#include "engine.h"
#include "sparselens/core/calibration.h"

// Resources of a static library must be registered explicitly (outside any namespace).
static void sl_init_views_resources() { Q_INIT_RESOURCE(views_assets); }

namespace sl::views {

namespace {

constexpr int drain_interval_ms = 30;
constexpr double progress_interval_s = 0.05;
const char* const default_eval_resource = ":/sparselens/prompts/eval.txt";

std::shared_ptr<const detail::eval_text> read_text(const QString& path, QString& err) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        err = QStringLiteral("%1: cannot open the text file (%2)").arg(path, f.errorString());
        return nullptr;
    }
    auto t = std::make_shared<detail::eval_text>();
    const QByteArray bytes = f.readAll();
    t->bytes.assign(bytes.constData(), static_cast<size_t>(bytes.size()));
    t->name = path.startsWith(QLatin1Char(':')) ? std::string("the built-in evaluation text")
                                                : QFileInfo(path).fileName().toStdString();
    t->hash = fnv1a64(t->bytes.data(), t->bytes.size());
    if (t->bytes.empty()) {
        err = QStringLiteral("%1: the text file is empty").arg(path);
        return nullptr;
    }
    return t;
}

}  // namespace

EngineController::EngineController(QObject* parent) : QObject(parent), m_engine(std::make_unique<detail::engine>()) {
    sl_init_views_resources();
    QString err;
    m_evalText = read_text(QString::fromLatin1(default_eval_resource), err);
    m_drain.setInterval(drain_interval_ms);
    connect(&m_drain, &QTimer::timeout, this, &EngineController::drainStream);
    m_thread = std::thread([this] { engineLoop(); });
}

EngineController::~EngineController() {
    {
        std::lock_guard lock(m_mutex);
        m_quit = true;
        m_queue.clear();
        if (m_running) m_running->cancel = true;
    }
    m_wake.notify_all();
    if (m_thread.joinable()) m_thread.join();
}

QString EngineController::assetsDir() {
    const QByteArray env = qgetenv("SPARSELENS_ASSETS_DIR");
    if (!env.isEmpty()) return QString::fromLocal8Bit(env);
    return QStringLiteral(SPARSELENS_ASSETS_DIR);
}

QStringList EngineController::defaultPrompts() {
    sl_init_views_resources();
    QStringList out;
    QFile f(QStringLiteral(":/sparselens/prompts/default.txt"));
    if (f.open(QIODevice::ReadOnly | QIODevice::Text))
        for (const QString& line : QString::fromUtf8(f.readAll()).split(QLatin1Char('\n')))
            if (!line.trimmed().isEmpty()) out << line.trimmed();
    if (out.isEmpty()) out << QStringLiteral("Once upon a time");
    return out;
}

bool EngineController::setEvalTextFile(const QString& path) {
    QString err;
    auto t = read_text(path.isEmpty() ? QString::fromLatin1(default_eval_resource) : path, err);
    if (!t) {
        emit errorOccurred(err);
        return false;
    }
    m_evalText = std::move(t);
    return true;
}

QString EngineController::evalTextName() const {
    return m_evalText ? QString::fromStdString(m_evalText->name) : QString();
}

generation_id EngineController::post(const std::string& tag, std::function<void(job&)> run, const std::string& task) {
    auto j = std::make_shared<job>();
    j->tag = tag;
    j->task = task;
    j->run = std::move(run);
    std::vector<generation_id> replaced;
    {
        std::lock_guard lock(m_mutex);
        j->generation = ++m_nextGeneration;
        if (!tag.empty()) {
            // Coalesce: a queued request of this tag is replaced, a running one is cancelled.
            for (const auto& q : m_queue)
                if (q->tag == tag) replaced.push_back(q->generation);
            std::erase_if(m_queue, [&](const std::shared_ptr<job>& q) { return q->tag == tag; });
            if (m_running && m_running->tag == tag) m_running->cancel = true;
        }
        m_queue.push_back(j);
    }
    if (!tag.empty()) m_latest[tag] = j->generation;
    for (generation_id g : replaced)
        QMetaObject::invokeMethod(this, [this, t = QString::fromStdString(tag), g] { emit requestFinished(t, g); },
                                  Qt::QueuedConnection);
    m_wake.notify_one();
    setBusy(true);
    return j->generation;
}

void EngineController::engineLoop() {
    // Below the GUI thread: its 10 ms event loop wins the core when both want it. Set before the first
    // OpenMP region, so the worker threads created from here inherit it (Linux nice is per thread).
    errno = 0;
    const int nice_now = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
    if (errno == 0) setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), std::min(19, nice_now + 5));
    for (;;) {
        std::shared_ptr<job> j;
        {
            std::unique_lock lock(m_mutex);
            m_wake.wait(lock, [&] { return m_quit || !m_queue.empty(); });
            if (m_quit) return;
            j = m_queue.front();
            m_queue.pop_front();
            m_running = j;
        }
        try {
            j->run(*j);
        } catch (const std::bad_alloc&) {
            deliverError(*j, "out of memory (" + j->tag + ")", false);
        } catch (const std::exception& e) {
            deliverError(*j, j->tag + ": " + e.what(), false);
        }
        QMetaObject::invokeMethod(this, [this, tag = QString::fromStdString(j->tag), gen = j->generation] {
            emit requestFinished(tag, gen);
        }, Qt::QueuedConnection);
        bool idle;
        {
            std::lock_guard lock(m_mutex);
            m_running.reset();
            idle = m_queue.empty();
        }
        if (idle) QMetaObject::invokeMethod(this, [this] {
            bool still_idle;
            {
                std::lock_guard lock(m_mutex);
                still_idle = !m_running && m_queue.empty();
            }
            if (still_idle) setBusy(false);  // outside the lock: a slot may post a request
        }, Qt::QueuedConnection);
    }
}

void EngineController::deliver(const std::string& tag, generation_id gen, std::function<void()> fn) {
    QMetaObject::invokeMethod(this, [this, tag, gen, fn = std::move(fn)] {
        if (!tag.empty()) {
            auto it = m_latest.find(tag);
            if (it != m_latest.end() && gen < it->second) return;  // stale: a newer request of this tag exists
        }
        fn();
    }, Qt::QueuedConnection);
}

void EngineController::deliverError(const job& j, const std::string& message, bool cancelled) {
    const QString tag = QString::fromStdString(j.tag);
    const QString task = QString::fromStdString(j.task);
    const generation_id gen = j.generation;
    const QString msg = QString::fromStdString(message);
    // Cancellation notices are never stale: the caller wants to know its request ended.
    QMetaObject::invokeMethod(this, [this, tag, task, gen, msg, cancelled] {
        if (tag == QLatin1String(tagGenerate) && m_latest[tagGenerate] == gen) m_generating = false;
        // A task's row waits for its end whatever it was (a queued one dropped by cancel() too).
        if (!task.isEmpty()) emit taskFinished(task, false, msg == QLatin1String("cancelled") ? tr("Cancelled") : msg);
        if (cancelled) {
            emit requestCancelled(tag, gen);
            return;
        }
        auto it = m_latest.find(tag.toStdString());
        if (it != m_latest.end() && gen < it->second) return;
        emit errorOccurred(msg);
    }, Qt::QueuedConnection);
}

detail::job_hooks EngineController::hooksFor(job& j) {
    detail::job_hooks h;
    auto last = std::make_shared<std::chrono::steady_clock::time_point>();
    h.progress = [this, &j, last](const std::string& what, float f) {
        if (j.cancel.load()) return false;
        if (f < 0) return true;  // a cancellation check only
        const auto now = std::chrono::steady_clock::now();
        if (f >= 1.0f || std::chrono::duration<double>(now - *last).count() >= progress_interval_s) {
            *last = now;
            const QString text = QString::fromStdString(what);
            const QString task = QString::fromStdString(j.task);
            deliver(j.tag, j.generation, [this, text, task, f] {
                emit progressChanged(text, f);
                if (!task.isEmpty()) emit taskProgress(task, f);
            });
        }
        return true;
    };
    h.stop_requested = [&j] { return j.stop.load(); };
    h.stream = [this, &j](std::vector<token_event>&& tokens, std::shared_ptr<activation_snapshot> live) {
        std::lock_guard lock(m_streamMutex);
        m_streamTokens.insert(m_streamTokens.end(), std::make_move_iterator(tokens.begin()),
                              std::make_move_iterator(tokens.end()));
        if (live) m_streamActivations = std::move(live);
    };
    h.selection = [this] { return std::make_pair(m_selLayer.load(), static_cast<probe>(m_selProbe.load())); };
    return h;
}

generation_id EngineController::loadModel(const QString& path, const QString& tokenizerPath) {
    const std::string p = path.toStdString(), t = tokenizerPath.toStdString();
    return post(tagLoad, [this, p, t](job& j) {
        auto r = m_engine->load(p, t, j.generation, hooksFor(j));
        if (!r) return deliverError(j, r.message(), r.cancelled());
        std::shared_ptr<const model_card> card = std::move(r).value();
        const bool cal = m_engine->has_calibration();
        deliver(j.tag, j.generation, [this, card, cal] {
            m_card = card;
            m_haveRun = false;
            emit modelLoaded(card);
            emit calibrationChanged(cal, cal ? QString::fromStdString(card->calibration_source) : QString());
        });
    });
}

generation_id EngineController::generate(const generate_request& req) {
    m_selLayer = req.layer;
    m_selProbe = static_cast<int>(req.where);
    {
        std::lock_guard lock(m_streamMutex);
        m_streamTokens.clear();
        m_streamActivations.reset();
    }
    m_generating = true;
    m_drain.start();
    auto text = m_evalText;
    return post(tagGenerate, [this, req, text](job& j) {
        const bool had_cal = m_engine->has_calibration();
        auto r = m_engine->generate(req, text, j.generation, hooksFor(j));
        if (!had_cal && m_engine->has_calibration())
            deliver({}, 0, [this] { emit calibrationChanged(true, tr("calibrated on %1").arg(evalTextName())); });
        if (!r) return deliverError(j, r.message(), r.cancelled());
        auto out = std::make_shared<detail::engine::generated>(std::move(r).value());
        deliver(j.tag, j.generation, [this, out] {
            drainStream();  // the last tokens before the summary
            m_generating = false;
            m_haveRun = true;
            if (out->activations) emit activationsReady(out->activations);
            if (out->neurons) emit neuronStatsReady(out->neurons);
            if (out->cache) emit cacheSeriesReady(out->cache);
            emit generationFinished(out->stats);
        });
    });
}

generation_id EngineController::evaluate(const evaluate_request& req, const QString& tag) {
    auto text = m_evalText;
    return post(tag.toStdString(), [this, req, text](job& j) {
        const bool had_cal = m_engine->has_calibration();
        auto r = m_engine->evaluate(req, text, j.generation, hooksFor(j));
        if (!had_cal && m_engine->has_calibration())
            deliver({}, 0, [this] { emit calibrationChanged(true, tr("calibrated on %1").arg(evalTextName())); });
        if (!r) return deliverError(j, r.message(), r.cancelled());
        std::shared_ptr<const tuning_result> res = std::move(r).value();
        deliver(j.tag, j.generation, [this, res] { emit tuningResultReady(res); });
    });
}

generation_id EngineController::calibrate() {
    auto text = m_evalText;
    return postCalibration([text]() -> result<std::shared_ptr<const detail::eval_text>> {
        if (!text) return error{"calibrate: no text"};
        return text;
    });
}

generation_id EngineController::calibrate(const QString& textPath) {
    const std::string path = textPath.toStdString();
    return postCalibration([path]() -> result<std::shared_ptr<const detail::eval_text>> {
        // Read here, on the engine thread, not on the GUI thread: calibration texts may be large.
        std::ifstream f(path, std::ios::binary);
        if (!f) return error{path + ": cannot open the calibration text"};
        auto text = std::make_shared<detail::eval_text>();
        text->bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
        if (text->bytes.empty()) return error{path + ": the calibration text is empty"};
        text->name = std::filesystem::path(path).filename().string();
        text->hash = fnv1a64(text->bytes.data(), text->bytes.size());
        return std::shared_ptr<const detail::eval_text>(std::move(text));
    });
}

generation_id EngineController::postCalibration(
    std::function<result<std::shared_ptr<const detail::eval_text>>()> text_source) {
    return post(tagCalibrate, [this, text_source = std::move(text_source)](job& j) {
        auto text = text_source();
        if (!text) return deliverError(j, text.message(), false);
        auto r = m_engine->calibrate(**text, hooksFor(j));
        if (!r) return deliverError(j, r.message(), r.cancelled());
        const QString desc = QString::fromStdString(r.value());
        deliver(j.tag, j.generation, [this, desc] {
            emit calibrationChanged(true, desc);
            emit taskFinished(QString::fromLatin1(taskCalibrate), true, desc);
        });
    }, taskCalibrate);
}

generation_id EngineController::requestActivations(int layer, probe where) {
    m_selLayer = layer;
    m_selProbe = static_cast<int>(where);
    // Before the first generation there is nothing to show; the selection applies to the next run.
    if (!m_haveRun) return 0;
    return post(tagActivations, [this, layer, where](job& j) {
        auto r = m_engine->activations(layer, where, j.generation, hooksFor(j));
        if (!r) return deliverError(j, r.message(), r.cancelled());
        std::shared_ptr<const activation_snapshot> s = std::move(r).value();
        deliver(j.tag, j.generation, [this, s] { emit activationsReady(s); });
    });
}

void EngineController::stop() {
    std::vector<std::shared_ptr<job>> dropped;
    {
        std::lock_guard lock(m_mutex);
        if (m_running && m_running->tag == tagGenerate) m_running->stop = true;
        for (const auto& q : m_queue)
            if (q->tag == tagGenerate) dropped.push_back(q);
        std::erase_if(m_queue, [](const std::shared_ptr<job>& q) { return q->tag == tagGenerate; });
    }
    for (const auto& j : dropped) {
        deliverError(*j, "stopped", true);
        QMetaObject::invokeMethod(this, [this, gen = j->generation] {
            emit requestFinished(QString::fromLatin1(tagGenerate), gen);
        }, Qt::QueuedConnection);
    }
}

void EngineController::cancel() { cancelJobs(false); }

void EngineController::cancelAllButSessionWrites() { cancelJobs(true); }

int EngineController::pendingSessionWrites() const {
    std::lock_guard lock(m_mutex);
    int n = static_cast<int>(std::count_if(m_queue.begin(), m_queue.end(), [](const auto& j) { return j->tag.empty(); }));
    return n + (m_running && m_running->tag.empty() ? 1 : 0);
}

void EngineController::cancelJobs(bool keep_session_writes) {
    std::vector<std::shared_ptr<job>> dropped;
    {
        std::lock_guard lock(m_mutex);
        auto keep = [&](const std::shared_ptr<job>& j) { return keep_session_writes && j->tag.empty(); };
        for (const auto& j : m_queue)
            if (!keep(j)) dropped.push_back(j);
        std::erase_if(m_queue, [&](const std::shared_ptr<job>& j) { return !keep(j); });
        if (m_running && !keep(m_running)) m_running->cancel = true;
    }
    for (const auto& j : dropped) {
        deliverError(*j, "cancelled", true);
        QMetaObject::invokeMethod(this, [this, tag = QString::fromStdString(j->tag), gen = j->generation] {
            emit requestFinished(tag, gen);
        }, Qt::QueuedConnection);
    }
}

void EngineController::drainStream() {
    std::vector<token_event> batch;
    std::shared_ptr<const activation_snapshot> live;
    {
        std::lock_guard lock(m_streamMutex);
        batch.swap(m_streamTokens);
        live = std::move(m_streamActivations);
        m_streamActivations.reset();
    }
    const generation_id latest = m_latest[tagGenerate];
    std::erase_if(batch, [&](const token_event& e) { return e.generation < latest; });
    if (!batch.empty()) emit tokensStreamed(batch);
    if (live && live->generation >= latest) emit activationsReady(live);
    if (!m_generating) m_drain.stop();
}

void EngineController::setBusy(bool busy) {
    if (busy == m_busy) return;
    m_busy = busy;
    emit busyChanged(busy);
}

}  // namespace sl::views

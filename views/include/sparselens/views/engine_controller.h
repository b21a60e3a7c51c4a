// EngineController: the only object that talks to the engine. One engine thread owns the model,
// tokenizer, calibration, contexts and simulator; the GUI posts requests and gets immutable snapshots.
//
// Requests carry a tag. A newer request replaces a queued one with the same tag, and cancels a running
// one (through its progress callback); results of a tag older than its latest request are dropped on
// the GUI thread before any signal is emitted. Streamed tokens go to a buffer that a GUI timer drains
// every ~30 ms: one tokensStreamed() per batch, never one per token.
#pragma once

#include <QList>
#include <QObject>
#include <QString>
#include <QTimer>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sparselens/views/engine_requests.h"
#include "sparselens/views/snapshots.h"

namespace sl::views {

namespace detail {
class engine;
struct eval_text;
struct job_hooks;
}  // namespace detail

class EngineController : public QObject {
    Q_OBJECT
public:
    // Tags of the built-in requests (evaluate() takes any tag).
    static constexpr const char* tagLoad = "load";
    static constexpr const char* tagGenerate = "generate";
    static constexpr const char* tagTune = "tune";
    static constexpr const char* tagCalibrate = "calibrate";
    static constexpr const char* tagActivations = "activations";
    static constexpr const char* tagSweep = "session.sweep";
    static constexpr const char* tagSessionTune = "session.tune";
    static constexpr const char* tagVerify = "verify";
    static constexpr const char* tagProbe = "probe";

    // Task names of taskProgress / taskFinished (the Session panel's rows use the first three).
    static constexpr const char* taskCalibrate = "calibrate";
    static constexpr const char* taskSweep = "sweep";
    static constexpr const char* taskTune = "tune";
    static constexpr const char* taskSession = "session";  // new, open, save as
    static constexpr const char* taskSave = "save";        // recording a Tuning panel result
    static constexpr const char* taskExport = "export";
    static constexpr const char* taskImport = "import";
    static constexpr const char* taskDelete = "delete";
    static constexpr const char* taskVerify = "verify";  // Verify on this machine
    static constexpr const char* taskProbe = "probe";    // probe-device --save from the GUI

    explicit EngineController(QObject* parent = nullptr);
    ~EngineController() override;  // cancels the running job and joins the engine thread

    // Each returns the request's generation id.
    generation_id loadModel(const QString& path, const QString& tokenizerPath = {});
    generation_id generate(const generate_request& req);
    generation_id evaluate(const evaluate_request& req, const QString& tag = QString::fromLatin1(tagTune));
    generation_id calibrate();  // on the current evaluation text
    generation_id calibrate(const QString& textPath);
    // The Activations view's selection: delivered from the recording or by re-running the last tokens.
    generation_id requestActivations(int layer, sl::probe where);

    // ---- the session (engine_controller_session.cpp) ----
    // Session files and writes run on the engine thread, in order, untagged (never coalesced); each ends
    // with taskFinished. The engine holds the only writable connection; views read through their own.
    generation_id openSession(const QString& path, session_open_mode mode);
    generation_id saveSessionAs(const QString& path, bool overwrite);
    // Records a complete result of evaluate() (one of the last 16 on this model) as a run: runRecorded.
    generation_id recordResult(const tuning_result& r, const QString& label = QStringLiteral("saved"));
    generation_id exportRun(qint64 runId, const QString& path);
    generation_id deleteRun(qint64 runId);
    // Checks the config against the loaded model, installs its calibration: configImported.
    generation_id importConfig(const QString& path);
    // A sweep or tune on the evaluation text into the session (cancellable, with taskProgress).
    generation_id runSessionJob(const session_job_request& req);
    // "Verify on this machine": the run's config offloaded on this machine (engine_offload.cpp), with
    // taskProgress("verify") and cancelVerify(); ends with offloadVerified or an error, then taskFinished.
    generation_id verifyOffload(const offload_verify_request& req);
    // Measures this machine's storage and memory (sparselens probe-device --save: a scratch file of
    // `fileBytes` in ~/.cache/sparselens, removed afterwards) and saves this-machine.json; taskFinished("probe").
    generation_id probeThisMachine(quint64 fileBytes = quint64{512} << 20, double secondsPerPoint = 0.4);
    void cancelVerify();  // cancels a queued or running verification or probe only
    QString sessionPath() const { return m_sessionPath; }

    void stop();    // ends a running generation early, keeping what it produced
    void cancel();  // cancels the running job and drops every queued one
    // Closing: like cancel(), but session file jobs (the untagged ones: save run, save as, export,
    // delete, import, open) run to their end, so a write the user asked for is never lost.
    void cancelAllButSessionWrites();
    int pendingSessionWrites() const;  // session file jobs queued or running

    // The text evaluate() and automatic calibration use; empty path: the built-in default text.
    // Returns false (and emits errorOccurred) when the file cannot be read.
    bool setEvalTextFile(const QString& path);
    QString evalTextName() const;

    bool hasModel() const { return static_cast<bool>(m_card); }
    std::shared_ptr<const model_card> modelCard() const { return m_card; }
    bool isBusy() const { return m_busy; }
    bool isGenerating() const { return m_generating; }
    int streamIntervalMs() const { return m_drain.interval(); }

    // Default prompts (one per line) and the built-in evaluation text.
    static QStringList defaultPrompts();
    static QString assetsDir();

signals:
    void modelLoaded(std::shared_ptr<const sl::views::model_card> card);
    void tokensStreamed(const std::vector<sl::views::token_event>& batch);
    void generationFinished(const sl::views::generation_stats& stats);
    void activationsReady(std::shared_ptr<const sl::views::activation_snapshot> snapshot);
    void neuronStatsReady(std::shared_ptr<const sl::views::neuron_snapshot> snapshot);
    void cacheSeriesReady(std::shared_ptr<const sl::views::cache_snapshot_series> series);
    void tuningResultReady(std::shared_ptr<const sl::views::tuning_result> result);
    void calibrationChanged(bool present, const QString& description);
    void progressChanged(const QString& what, double fraction);  // fraction in [0, 1]
    void busyChanged(bool busy);
    void requestCancelled(const QString& tag, quint64 generation);
    // The session jobs.
    void sessionOpened(const QString& path);
    void sessionChanged();  // runs were added or deleted: re-read them
    void runRecorded(qint64 runId);
    void configExported(qint64 runId, const QString& path);
    void configImported(const sl::views::imported_settings& settings);
    void tuneRecorded(const QList<qint64>& recommendedRuns, qint64 sweepId);
    void offloadVerified(std::shared_ptr<const sl::views::offload_verify_result> result);
    void taskProgress(const QString& task, double fraction);
    // Every task ends with this (cancelled and failed ones with ok = false), after its result signals.
    void taskFinished(const QString& task, bool ok, const QString& message);
    // Every request ends with this, whatever its outcome (after its result or error signal).
    void requestFinished(const QString& tag, quint64 generation);
    void errorOccurred(const QString& message);

private:
    struct job {
        std::string tag;
        std::string task;  // taskFinished / taskProgress name; empty: none
        generation_id generation = 0;
        std::function<void(job&)> run;  // engine thread
        std::atomic<bool> cancel{false};
        std::atomic<bool> stop{false};
    };

    generation_id post(const std::string& tag, std::function<void(job&)> run, const std::string& task = {});
    void engineLoop();
    // Runs `fn` on the GUI thread unless a newer request of `tag` exists by then.
    void deliver(const std::string& tag, generation_id gen, std::function<void()> fn);
    void deliverError(const job& j, const std::string& message, bool cancelled);
    void cancelJobs(bool keep_session_writes);
    detail::job_hooks hooksFor(job& j);
    // The calibration job of both calibrate() overloads; `text_source` runs on the engine thread.
    generation_id postCalibration(std::function<result<std::shared_ptr<const detail::eval_text>>()> text_source);
    void drainStream();
    void setBusy(bool busy);

    std::unique_ptr<detail::engine> m_engine;  // engine thread only
    std::thread m_thread;

    // Shared between the GUI and the engine thread.
    mutable std::mutex m_mutex;
    std::condition_variable m_wake;
    std::deque<std::shared_ptr<job>> m_queue;
    std::shared_ptr<job> m_running;
    bool m_quit = false;
    generation_id m_nextGeneration = 0;
    std::atomic<int> m_selLayer{0}, m_selProbe{static_cast<int>(sl::probe::glu)};

    std::mutex m_streamMutex;
    std::vector<token_event> m_streamTokens;
    std::shared_ptr<const activation_snapshot> m_streamActivations;

    // GUI thread only.
    std::map<std::string, generation_id> m_latest;  // newest request per tag
    std::shared_ptr<const model_card> m_card;
    std::shared_ptr<const detail::eval_text> m_evalText;
    QTimer m_drain;
    bool m_busy = false;
    bool m_generating = false;
    bool m_haveRun = false;  // a generation finished on the current model
    QString m_sessionPath;
};

}  // namespace sl::views

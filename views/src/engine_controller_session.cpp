// EngineController's session requests: session files, recording, exporting, deleting and importing runs,
// sweeps and tunes. All of them run on the engine thread, which holds the only writable session store.
#include <QFileInfo>

#include <filesystem>

#include "engine.h"
#include "sparselens/sim/offload_probe.h"
#include "sparselens/views/engine_controller.h"

namespace sl::views {

generation_id EngineController::openSession(const QString& path, session_open_mode mode) {
    const std::string p = QFileInfo(path).absoluteFilePath().toStdString();
    return post({}, [this, p, mode](job& j) {
        auto r = m_engine->open_session(p, mode);
        if (!r) return deliverError(j, r.message(), r.cancelled());
        const QString opened = QString::fromStdString(r.value());
        deliver({}, 0, [this, opened] {
            m_sessionPath = opened;
            emit sessionOpened(opened);
            emit taskFinished(QString::fromLatin1(taskSession), true, tr("Session %1").arg(opened));
        });
    }, taskSession);
}

generation_id EngineController::saveSessionAs(const QString& path, bool overwrite) {
    const std::string p = QFileInfo(path).absoluteFilePath().toStdString();
    return post({}, [this, p, overwrite](job& j) {
        auto r = m_engine->save_session_as(p, overwrite);
        if (!r) return deliverError(j, r.message(), r.cancelled());
        const QString saved = QString::fromStdString(r.value());
        deliver({}, 0, [this, saved] {
            m_sessionPath = saved;
            emit sessionOpened(saved);
            emit taskFinished(QString::fromLatin1(taskSession), true, tr("Saved as %1; runs are recorded there now").arg(saved));
        });
    }, taskSession);
}

generation_id EngineController::recordResult(const tuning_result& r, const QString& label) {
    const generation_id evaluated = r.generation;
    const std::string l = label.toStdString();
    const bool partial = r.partial;
    return post({}, [this, evaluated, l, partial](job& j) {
        if (partial) return deliverError(j, "not saving a partial result (the slider was still moving): wait for the full one", false);
        auto recorded = m_engine->record_evaluation(evaluated, l, hooksFor(j));
        if (!recorded) return deliverError(j, recorded.message(), recorded.cancelled());
        const qint64 id = recorded.value();
        deliver({}, 0, [this, id] {
            emit sessionChanged();
            emit runRecorded(id);
            emit taskFinished(QString::fromLatin1(taskSave), true, tr("Saved run %1").arg(id));
        });
    }, taskSave);
}

generation_id EngineController::exportRun(qint64 runId, const QString& path) {
    const std::string p = path.toStdString();
    return post({}, [this, runId, p](job& j) {
        auto r = m_engine->export_run(runId, p);
        if (!r) return deliverError(j, r.message(), r.cancelled());
        const QString written = QString::fromStdString(r->path);
        const bool sidecar = !r->config.calibration_file.empty();
        deliver({}, 0, [this, runId, written, sidecar] {
            emit sessionChanged();
            emit configExported(runId, written);
            emit taskFinished(QString::fromLatin1(taskExport), true,
                              sidecar ? tr("Exported run %1 to %2 (with its calibration sidecar)").arg(runId).arg(written)
                                      : tr("Exported run %1 to %2").arg(runId).arg(written));
        });
    }, taskExport);
}

generation_id EngineController::deleteRun(qint64 runId) {
    return post({}, [this, runId](job& j) {
        if (auto r = m_engine->delete_run(runId); !r) return deliverError(j, r.message(), r.cancelled());
        deliver({}, 0, [this, runId] {
            emit sessionChanged();
            emit taskFinished(QString::fromLatin1(taskDelete), true, tr("Deleted run %1").arg(runId));
        });
    }, taskDelete);
}

generation_id EngineController::importConfig(const QString& path) {
    const std::string p = path.toStdString();
    return post({}, [this, p](job& j) {
        auto r = m_engine->import_config(p, hooksFor(j));
        if (!r) return deliverError(j, r.message(), r.cancelled());
        auto settings = std::make_shared<const imported_settings>(std::move(r).value());
        deliver({}, 0, [this, settings] {
            if (settings->calibration_installed)
                emit calibrationChanged(true, tr("from %1").arg(QString::fromStdString(settings->path)));
            emit configImported(*settings);
            QString msg = tr("Imported %1").arg(QString::fromStdString(settings->summary));
            for (const std::string& w : settings->warnings) msg += QStringLiteral("; ") + QString::fromStdString(w);
            emit taskFinished(QString::fromLatin1(taskImport), true, msg);
        });
    }, taskImport);
}

generation_id EngineController::runSessionJob(const session_job_request& req) {
    auto text = m_evalText;
    const char* tag = req.tune ? tagSessionTune : tagSweep;
    const char* task = req.tune ? taskTune : taskSweep;
    return post(tag, [this, req, text, task](job& j) {
        const bool had_cal = m_engine->has_calibration();
        auto r = m_engine->session_job(req, text, hooksFor(j));
        if (!had_cal && m_engine->has_calibration())
            deliver({}, 0, [this] { emit calibrationChanged(true, tr("calibrated on %1").arg(evalTextName())); });
        if (!r) {
            // A cancelled or failed job keeps the runs it recorded: the views re-read them.
            deliver({}, 0, [this] { emit sessionChanged(); });
            return deliverError(j, r.message(), r.cancelled());
        }
        QList<qint64> recommended;
        for (int64_t id : r->recommended_run_ids) recommended << id;
        const qint64 sweep = r->sweep_id;
        const int runs = static_cast<int>(r->candidate_run_ids.size()) + 1;
        const bool tune = req.tune;
        deliver(j.tag, j.generation, [this, recommended, sweep, runs, tune, task] {
            emit sessionChanged();
            if (tune) emit tuneRecorded(recommended, sweep);
            emit taskFinished(QString::fromLatin1(task), true,
                              tune ? tr("Tune recorded as sweep %1 (%2 runs)").arg(sweep).arg(runs)
                                   : tr("Sweep %1 recorded (%2 runs)").arg(sweep).arg(runs));
        });
    }, task);
}

generation_id EngineController::verifyOffload(const offload_verify_request& req) {
    return post(tagVerify, [this, req, text = m_evalText](job& j) {
        auto r = m_engine->verify_offload(req, text, hooksFor(j));
        if (!r) return deliverError(j, r.message(), r.cancelled());
        std::shared_ptr<const offload_verify_result> res = std::move(r).value();
        deliver(j.tag, j.generation, [this, res] {
            emit offloadVerified(res);
            emit taskFinished(QString::fromLatin1(taskVerify), true,
                              tr("Verified run %1 on this machine: %2 tok/s measured, %3 simulated")
                                  .arg(res->run_id)
                                  .arg(res->tokens_per_s, 0, 'f', 2)
                                  .arg(res->sim_tokens_per_s, 0, 'f', 2));
        });
    }, taskVerify);
}

generation_id EngineController::probeThisMachine(quint64 fileBytes, double secondsPerPoint) {
    return post(tagProbe, [this, fileBytes, secondsPerPoint](job& j) {
        offload::probe_params p;
        p.file_bytes = fileBytes;
        p.dir = offload::probe_default_dir();
        p.seconds_per_point = secondsPerPoint;
        const detail::job_hooks hooks = hooksFor(j);
        p.progress = [&](float f) { return hooks.progress("Probing this machine's storage", f); };
        std::error_code ec;
        std::filesystem::create_directories(p.dir, ec);
        auto r = offload::probe_device(p);
        if (!r) return deliverError(j, r.message(), r.cancelled());
        auto saved = offload::probe_save_this_machine(offload::probe_profile_json(*r, p.file_bytes));
        if (!saved) return deliverError(j, saved.message(), false);
        const QString msg = tr("Measured this machine: flash %1 MB/s + %2 us per read; saved to %3")
                                .arg(r->profile.flash_bandwidth / 1e6, 0, 'f', 0)
                                .arg(r->profile.flash_read_latency_s * 1e6, 0, 'f', 1)
                                .arg(QString::fromStdString(*saved));
        deliver(j.tag, j.generation, [this, msg] { emit taskFinished(QString::fromLatin1(taskProbe), true, msg); });
    }, taskProbe);
}

void EngineController::cancelVerify() {
    std::vector<std::pair<QString, generation_id>> dropped;
    auto mine = [](const std::string& tag) { return tag == tagVerify || tag == tagProbe; };
    {
        std::lock_guard lock(m_mutex);
        for (const auto& q : m_queue)
            if (mine(q->tag)) dropped.emplace_back(QString::fromStdString(q->task), q->generation);
        std::erase_if(m_queue, [&](const std::shared_ptr<job>& q) { return mine(q->tag); });
        if (m_running && mine(m_running->tag)) m_running->cancel = true;
    }
    for (const auto& [task, g] : dropped) {
        emit taskFinished(task, false, tr("Cancelled"));
        emit requestCancelled(task, g);  // the task names equal the tags
        emit requestFinished(task, g);
    }
}

}  // namespace sl::views

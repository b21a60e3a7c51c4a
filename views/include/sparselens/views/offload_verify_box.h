// "Verify on this machine" under the Trade-offs chart: runs the selected run's deployment config offloaded
// on this machine (MLP weights read from its pack with O_DIRECT under a DRAM budget, in the engine thread,
// with progress and Cancel) and shows measured next to simulated tok/s, bytes/token and hit rate.
#pragma once

#include <memory>

#include <QWidget>

#include "sparselens/views/engine_requests.h"

class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;

namespace sl::views {

class EngineController;

class OffloadVerifyBox : public QWidget {
    Q_OBJECT
public:
    explicit OffloadVerifyBox(QWidget* parent = nullptr);

    // The controller the verification runs on (not owned); connects its progress, result and end signals.
    void attach(EngineController* controller);
    // Scratch file size and seconds per point of the probe button (tests use a small, quick probe).
    void setProbeSize(quint64 fileBytes, double secondsPerPoint);
    void setRunId(qint64 id);  // 0: nothing selected (the button is disabled)
    qint64 runId() const { return m_runId; }

    QPushButton* verifyButton() const { return m_verify; }
    QPushButton* cancelButton() const { return m_cancel; }
    QPushButton* probeButton() const { return m_probe; }
    QLineEdit* budgetEdit() const { return m_budget; }
    QProgressBar* progressBar() const { return m_progress; }
    QLabel* resultLabel() const { return m_result; }
    bool isRunning() const { return m_running; }
    std::shared_ptr<const offload_verify_result> lastResult() const { return m_last; }

    // The side-by-side table of a result (rich text).
    static QString resultTable(const offload_verify_result& r);

public slots:
    void startVerify();
    void startProbe();  // probe-device --save in the engine thread (a 512 MiB scratch file, ~10 s)

private:
    void setRunning(bool on);
    void updateButton();

    EngineController* m_controller = nullptr;
    qint64 m_runId = 0;
    quint64 m_probeBytes = quint64{512} << 20;
    double m_probeSeconds = 0.4;
    bool m_running = false;
    std::shared_ptr<const offload_verify_result> m_last;
    QPushButton* m_verify = nullptr;
    QPushButton* m_cancel = nullptr;
    QPushButton* m_probe = nullptr;
    QLineEdit* m_budget = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_result = nullptr;
};

}  // namespace sl::views

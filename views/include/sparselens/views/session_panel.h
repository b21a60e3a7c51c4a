// Session panel (issue 7, panel 8): the session file (New / Open / Save As), its runs as a sortable,
// filterable table, Export / Import config, and the long jobs (Calibrate, Sweep, Tune) with progress and
// Cancel. The panel only reads the session, through its own read-only connection on the GUI thread (WAL
// readers never block the engine's writer); everything that writes or runs long leaves as a request
// signal for the EngineController, which answers through the slots.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <QStringList>
#include <QWidget>

#include "sparselens/core/methods.h"
#include "sparselens/sessions/session_store.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QTableView;

namespace sl::views {

class RunsFilterProxy;
class RunsTableModel;

class SessionPanel : public QWidget {
    Q_OBJECT
public:
    // Task names used by setProgress / setTaskFinished. The three jobs have a progress row each; other
    // names (export, import, save-as, delete, session) only report in the status line.
    static constexpr const char* taskCalibrate = "calibrate";
    static constexpr const char* taskSweep = "sweep";
    static constexpr const char* taskTune = "tune";

    enum class FileRole { NewSession, OpenSession, SaveSessionAs, ExportConfig, ImportConfig, CalibrationText };
    // Asks the user for a file; empty: cancelled. For the "save" roles an existing file that is returned
    // was confirmed for overwriting (QFileDialog asks). Replaceable for tests and for the main window's
    // own dialogs; the default uses QFileDialog.
    using FileChooser = std::function<QString(FileRole role, const QString& suggestion)>;
    // Asks yes/no before something destructive (deleting a run); the default uses QMessageBox.
    using Confirmer = std::function<bool(const QString& question)>;

    explicit SessionPanel(QWidget* parent = nullptr);
    ~SessionPanel() override;

    void setFileChooser(FileChooser chooser) { m_chooser = std::move(chooser); }
    void setConfirmer(Confirmer confirm) { m_confirm = std::move(confirm); }

    QString sessionPath() const { return m_path; }
    const std::vector<sessions::run_record>& runs() const;
    std::optional<int64_t> selectedRunId() const;
    QString lastMessage() const;

    RunsTableModel* runsModel() const { return m_model; }
    RunsFilterProxy* runsProxy() const { return m_proxy; }
    QTableView* runsView() const { return m_table; }
    QComboBox* methodFilterBox() const { return m_methodBox; }
    QLineEdit* textFilterEdit() const { return m_filterEdit; }
    QProgressBar* progressBar(const QString& task) const;
    QPushButton* cancelButton(const QString& task) const;
    QPushButton* actionButton(const QString& task) const;

public slots:
    // Opens `path` read-only and shows its runs; empty: no session. Errors go to the status line.
    void setSessionPath(const QString& path);
    // Re-reads the runs (after the engine recorded, deleted or imported something).
    void refresh();
    void setProgress(const QString& task, double fraction);
    void setTaskFinished(const QString& task, bool ok, const QString& message);
    void selectRun(qint64 id);

    // The panel's actions, public so menus and shortcuts of the main window can trigger them.
    void newSession();
    void openSession();
    void saveSessionAs();
    void exportSelected();
    void importConfig();
    void deleteSelected();
    void restoreSelected();
    void startCalibration();
    void startSweep();
    void startTune();

signals:
    void newSessionRequested(const QString& path);
    void openSessionRequested(const QString& path);
    void saveAsRequested(const QString& path, bool overwrite);
    void exportRequested(qint64 runId, const QString& path);
    void importRequested(const QString& path);
    void deleteRunRequested(qint64 runId);
    void calibrateRequested(const QString& textPath);
    // densities in (0, 1]; methods from method_names()
    void sweepRequested(const QStringList& methods, const QList<double>& densities);
    // budgets: comma-separated sim::budget_parse forms ("ppl+0.2, kld<0.05"); objective: "sim" or "cpu"
    void tuneRequested(const QString& budgets, const QStringList& methods, const QString& objective);
    void cancelRequested();
    void restoreRequested(const sl::method_config& config);
    void runActivated(const sl::sessions::run_record& run);
    void runSelected(qint64 runId);  // 0: none
    // After every refresh: the session's runs (wire to TradeoffsPanel::setRuns).
    void runsChanged(const std::vector<sl::sessions::run_record>& runs);

private:
    struct task_row {
        QPushButton* action = nullptr;
        QProgressBar* bar = nullptr;
        QPushButton* cancel = nullptr;
        QLabel* status = nullptr;
    };
    QString chooseFile(FileRole role, const QString& suggestion);
    void setMessage(const QString& text, bool error);
    void updateMethodBox();
    void updateHeader();
    void updateButtons();
    void taskStarted(const QString& task);
    void showContextMenu(const QPoint& pos);
    const sessions::run_record* selectedRun() const;
    QWidget* makeTaskRow(const QString& task, const QString& label, const QString& tip);

    FileChooser m_chooser;
    Confirmer m_confirm;
    QString m_path;
    std::unique_ptr<sessions::session_store> m_store;

    RunsTableModel* m_model = nullptr;
    RunsFilterProxy* m_proxy = nullptr;
    QTableView* m_table = nullptr;
    QLabel* m_header = nullptr;
    QLabel* m_message = nullptr;
    QLabel* m_count = nullptr;
    QComboBox* m_methodBox = nullptr;
    QLineEdit* m_filterEdit = nullptr;
    QPushButton* m_saveAs = nullptr;
    QPushButton* m_export = nullptr;
    QPushButton* m_import = nullptr;
    std::map<QString, task_row> m_tasks;
    QString m_running;  // the task with a progress row that is queued or running

    // Remembered parameters of the Sweep / Tune dialogs.
    QStringList m_sweepMethods = {"dip", "dip-ca", "cats", "teal"};
    QString m_sweepDensities = "0.3, 0.5, 0.7, 0.9";
    QStringList m_tuneMethods = {"dip", "dip-ca", "cats", "chess", "teal"};
    QString m_tuneBudgets = "ppl+0.2, ppl+0.5";
    QString m_tuneObjective = "sim";
};

}  // namespace sl::views

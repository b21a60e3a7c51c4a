// The main window: dock panels around the Activations view, menus, status bar with progress and
// Cancel, drag-and-drop of model files and QSettings persistence. Owns the EngineController.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "sparselens/sessions/session_store.h"
#include "sparselens/views/engine_controller.h"

#include <QMainWindow>
#include <QStringList>

class QDockWidget;
class QLabel;
class QMenu;
class QMessageBox;
class QToolButton;

namespace sl::views {

class ActivationsPanel;
class CachePanel;
class ModelPanel;
class NeuronsPanel;
class ProgressStrip;
class PromptPanel;
class SessionPanel;
class TradeoffsPanel;
class TuningPanel;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    static constexpr int maxRecentFiles = 8;

    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    // Adds a panel as a dock with a View-menu toggle; the hook later panels (Trade-offs, Session) use.
    // `objectName` keys the saved layout (default: derived from the title).
    QDockWidget* addDockPanel(QWidget* panel, const QString& title, Qt::DockWidgetArea area,
                              const QString& objectName = {});

    void openModel(const QString& path, const QString& tokenizerPath = {});
    void setPrompt(const QString& text);
    void setGenerateOnLoad(bool on) { m_generateOnLoad = on; }
    // Dock sizes as shares of the window: left column 25%, right 36%, bottom 26% (the first show
    // without a saved layout; the screenshot tour).
    void applyDefaultDockSizes();

    EngineController* controller() const { return m_controller.get(); }
    ModelPanel* modelPanel() const { return m_model; }
    PromptPanel* promptPanel() const { return m_prompt; }
    TuningPanel* tuningPanel() const { return m_tuning; }
    ActivationsPanel* activationsPanel() const { return m_activations; }
    NeuronsPanel* neuronsPanel() const { return m_neurons; }
    CachePanel* cachePanel() const { return m_cache; }
    SessionPanel* sessionPanel() const { return m_session; }
    TradeoffsPanel* tradeoffsPanel() const { return m_tradeoffs; }
    // The dock a panel was added to with addDockPanel (null for others), e.g. to raise() it.
    QDockWidget* dockOf(const QWidget* panel) const;
    // The session the engine records into (empty until the startup session is open).
    QString sessionPath() const;
    // Where runs go when no session was chosen: AppDataLocation/default.slsession.
    static QString defaultSessionPath();
    ProgressStrip* progressStrip() const { return m_progress; }
    QString statusText() const;
    QStringList recentFiles() const { return m_recent; }
    QString lastError() const { return m_lastError; }

public slots:
    void openModelDialog();
    void generate();
    void evaluate(bool partial);
    void stopOrCancel();  // Esc: stops a generation, otherwise cancels the running job
    void openSession(const QString& path);  // opens it, creating it when it does not exist
    void saveRun();                         // Ctrl+S: records the Tuning panel's complete result
    void showShortcuts();
    void showAbout();

protected:
    void closeEvent(QCloseEvent* e) override;
    void finishSessionWrites();  // waits (progress dialog) for queued or running session file jobs
    void showEvent(QShowEvent* e) override;
    void dragEnterEvent(QDragEnterEvent* e) override;
    void dropEvent(QDropEvent* e) override;

private:
    void buildMenus();
    void wireController();
    void addRecent(const QString& path);
    void rebuildRecent();
    void showError(const QString& message);
    void setStatus(const QString& text, int timeoutMs = 0);
    void saveSettings();
    // main_window_session.cpp
    void buildSessionMenu(QMenu* file);
    void wireSession();
    void openStartupSession();
    void restoreMethod(const method_config& c);
    void flushTradeoffs();

    std::unique_ptr<EngineController> m_controller;
    ModelPanel* m_model = nullptr;
    PromptPanel* m_prompt = nullptr;
    TuningPanel* m_tuning = nullptr;
    ActivationsPanel* m_activations = nullptr;
    NeuronsPanel* m_neurons = nullptr;
    CachePanel* m_cache = nullptr;
    SessionPanel* m_session = nullptr;
    TradeoffsPanel* m_tradeoffs = nullptr;
    QDockWidget *m_neuronsDock = nullptr, *m_cacheDock = nullptr, *m_sessionDock = nullptr, *m_tradeoffsDock = nullptr;
    // For the Trade-offs panel while it is hidden: given when it is shown (chart rebuilds are not free).
    std::optional<std::vector<sessions::run_record>> m_pendingRuns;
    std::vector<std::shared_ptr<const tuning_result>> m_pendingLive;
    QString m_startupFallback;  // the default session, tried when the remembered one fails to open
    std::shared_ptr<const neuron_snapshot> m_pendingNeurons;  // for a hidden panel, given when shown
    std::shared_ptr<const cache_snapshot_series> m_pendingCache;
    QMenu *m_fileMenu = nullptr, *m_recentMenu = nullptr, *m_viewMenu = nullptr;
    QLabel* m_status = nullptr;
    ProgressStrip* m_progress = nullptr;
    QToolButton* m_cancel = nullptr;
    QMessageBox* m_errorBox = nullptr;
    QStringList m_recent;
    QString m_lastError;
    QString m_progressWhat;
    bool m_restored = false;
    bool m_generateOnLoad = false;
    bool m_generatedOnce = false;
    int m_dockShortcut = 0;
};

}  // namespace sl::views

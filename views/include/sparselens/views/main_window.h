// The main window: dock panels around the Activations view, menus, status bar with progress and
// Cancel, drag-and-drop of model files and QSettings persistence. Owns the EngineController.
#pragma once

#include <memory>

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

    EngineController* controller() const { return m_controller.get(); }
    ModelPanel* modelPanel() const { return m_model; }
    PromptPanel* promptPanel() const { return m_prompt; }
    TuningPanel* tuningPanel() const { return m_tuning; }
    ActivationsPanel* activationsPanel() const { return m_activations; }
    NeuronsPanel* neuronsPanel() const { return m_neurons; }
    CachePanel* cachePanel() const { return m_cache; }
    ProgressStrip* progressStrip() const { return m_progress; }
    QString statusText() const;
    QStringList recentFiles() const { return m_recent; }
    QString lastError() const { return m_lastError; }

public slots:
    void openModelDialog();
    void generate();
    void evaluate(bool partial);
    void stopOrCancel();  // Esc: stops a generation, otherwise cancels the running job
    void showShortcuts();
    void showAbout();

protected:
    void closeEvent(QCloseEvent* e) override;
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

    std::unique_ptr<EngineController> m_controller;
    ModelPanel* m_model = nullptr;
    PromptPanel* m_prompt = nullptr;
    TuningPanel* m_tuning = nullptr;
    ActivationsPanel* m_activations = nullptr;
    NeuronsPanel* m_neurons = nullptr;
    CachePanel* m_cache = nullptr;
    QDockWidget *m_neuronsDock = nullptr, *m_cacheDock = nullptr;
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

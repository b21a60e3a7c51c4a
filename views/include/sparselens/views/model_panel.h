// Model panel: open / recent files, the model card (shapes, tensor types, bytes by component), load
// progress with Cancel, and the calibration the sparsity methods use.
#pragma once

#include <memory>

#include "sparselens/views/snapshots.h"

#include <QStringList>
#include <QWidget>

class QComboBox;
class QLabel;
class QPushButton;

namespace sl::views {

class ProgressStrip;

class ModelPanel : public QWidget {
    Q_OBJECT
public:
    explicit ModelPanel(QWidget* parent = nullptr);

    void setModelCard(std::shared_ptr<const model_card> card);
    void setRecentFiles(const QStringList& paths);
    // Shows the load progress bar and its Cancel button while `loading`; fraction < 0: indeterminate.
    void setLoading(bool loading, const QString& what = {}, double fraction = -1);
    void setCalibration(bool present, const QString& description);

    QString cardText() const;  // the card as plain text (tests, clipboard)
    bool isLoading() const { return m_loading; }

signals:
    void openRequested();
    void recentRequested(const QString& path);
    void cancelRequested();
    void calibrateRequested();

private:
    QPushButton *m_open = nullptr, *m_cancel = nullptr, *m_calibrate = nullptr;
    QComboBox* m_recent = nullptr;
    QLabel *m_card = nullptr, *m_calibration = nullptr, *m_loadLabel = nullptr;
    ProgressStrip* m_progress = nullptr;
    bool m_loading = false;
};

// "1.23 MB", "4.00 GB": three significant digits, decimal units (as the CLI prints).
QString formatBytes(double bytes);

}  // namespace sl::views

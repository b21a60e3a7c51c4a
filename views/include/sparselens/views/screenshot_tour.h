// Screenshot tour: drives a MainWindow through a fixed scenario on a model (DIP-CA at 70% under a DRAM
// budget that holds only part of the MLP, byte-exact flash reads, one generation) and writes PNGs of the
// window and of each view.
#pragma once

#include <cstdint>
#include <functional>

#include <QImage>
#include <QObject>
#include <QSize>
#include <QString>
#include <QStringList>
#include <QTemporaryDir>

class QDockWidget;

namespace sl::views {

class MainWindow;

class ScreenshotTour : public QObject {
    Q_OBJECT
public:
    struct options {
        QString model;
        QString tokenizer;  // empty: embedded or beside the model
        QString outDir;     // created when missing
        QString prompt = QStringLiteral("Once upon a time");
        QString method = QStringLiteral("dip-ca");
        int densityPercent = 70;
        // Flash read unit of the simulated device; -1: the profile's. 0 (byte-exact) by default: the demo
        // model's units (136-370 bytes) are far smaller than a 4 KB page, and whole-page reads for each
        // scattered miss would make every sparse method simulate slower than dense.
        int64_t flashPageBytes = 0;
        int steps = 200;           // positions in total (BOS and prompt included)
        int activationsLayer = 2;  // clamped to the model's layers
        QSize windowSize{1600, 1000};
        int timeoutMs = 120000;    // per wait for the engine
    };

    // The files a complete tour writes, in order (trade-offs and session only when the window has them).
    static QStringList fileNames();
    // The size of the docks' screenshots (each is floated and resized for it) and of the window's with the
    // default options; invalid for the Activations view, grabbed where it sits in the window.
    static QSize shotSize(const QString& name);

    ScreenshotTour(MainWindow* window, options opts, QObject* parent = nullptr);
    ~ScreenshotTour() override;

    // Runs the tour to the end (a local event loop while it waits for the engine). False: error() says why.
    bool run();
    QString error() const { return m_error; }
    QStringList written() const { return m_written; }  // absolute paths
    QStringList notes() const { return m_notes; }      // views skipped and why

    // True when every pixel of `img` has the same colour (e.g. an OpenGL canvas that rendered nothing).
    static bool isFlat(const QImage& img);

signals:
    void progress(const QString& step);
    void changed();  // something the tour may be waiting for happened (engine signals, panels)

private:
    bool step(const QString& what);
    bool waitUntil(const std::function<bool()>& ready, const QString& what, bool optional = false);
    void settle();
    void layoutDocks();
    bool save(QWidget* w, const QString& name);
    bool saveDock(QWidget* panel, const QString& name);
    QImage grabWithGL(QWidget* w) const;
    QDockWidget* dockOf(QWidget* panel) const;
    bool showDock(QWidget* panel);
    bool selectLayer(int layer);
    bool tourActivations();
    bool tourNeurons();
    bool tourCache();
    bool tourTuning();
    bool tourPrompt();
    bool tourSessionAndTradeoffs();

    MainWindow* m_w;
    options m_o;
    QString m_error, m_engineError;
    QStringList m_written, m_notes;
    QTemporaryDir m_tmp;  // the tour's session file
    bool m_generated = false;
};

}  // namespace sl::views

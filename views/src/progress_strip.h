// A thin progress bar that repaints through update(): QProgressBar::setValue() repaints synchronously,
// and with OpenGL canvases in the window every such repaint recomposes the whole window (measured
// 45-80 ms each under software GL), enough to starve the event loop at 20 progress reports a second.
#pragma once

#include <QWidget>

namespace sl::views {

class ProgressStrip : public QWidget {
    Q_OBJECT
public:
    explicit ProgressStrip(QWidget* parent = nullptr);
    // fraction in [0, 1]; < 0: indeterminate (a moving block)
    void setFraction(double f);
    double fraction() const { return m_fraction; }
    QSize sizeHint() const override { return {160, 14}; }
    QSize minimumSizeHint() const override { return {40, 10}; }

protected:
    void paintEvent(QPaintEvent*) override;
    void timerEvent(QTimerEvent*) override;

private:
    double m_fraction = 0;
    int m_phase = 0, m_timer = 0;
};

}  // namespace sl::views

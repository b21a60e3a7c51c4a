// ProgressStrip: deferred-repaint progress bar for the status bar and the Model panel.
#include "progress_strip.h"

#include <QPainter>
#include <QTimerEvent>

#include <algorithm>

namespace sl::views {

ProgressStrip::ProgressStrip(QWidget* parent) : QWidget(parent) {
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
}

void ProgressStrip::setFraction(double f) {
    if (f == m_fraction) return;
    m_fraction = f;
    if (f < 0 && !m_timer) m_timer = startTimer(80);
    if (f >= 0 && m_timer) {
        killTimer(m_timer);
        m_timer = 0;
    }
    update();
}

void ProgressStrip::timerEvent(QTimerEvent* e) {
    if (e->timerId() != m_timer) return QWidget::timerEvent(e);
    m_phase = (m_phase + 1) % 20;
    update();
}

void ProgressStrip::paintEvent(QPaintEvent*) {
    QPainter p(this);
    const QRect r = rect().adjusted(0, 2, -1, -3);
    p.setPen(palette().color(QPalette::Mid));
    p.setBrush(palette().color(QPalette::Base));
    p.drawRect(r);
    QRect fill = r.adjusted(1, 1, 0, 0);
    if (m_fraction < 0) {
        const int w = std::max(8, fill.width() / 5);
        fill.setLeft(fill.left() + (fill.width() - w) * m_phase / 19);
        fill.setWidth(w);
    } else {
        fill.setWidth(static_cast<int>(fill.width() * std::clamp(m_fraction, 0.0, 1.0)));
    }
    p.fillRect(fill, palette().color(QPalette::Highlight));
}

}  // namespace sl::views

// Paints the legend with QPainter; the gradient is sampled from the same control points the shader uses.
#include "sparselens/views/color_legend.h"

#include <cmath>

#include <QFontMetrics>
#include <QPainter>

namespace sl::views {

namespace {

constexpr int legend_margin = 6;

// Swatch i starts at x[i] on row r[i]: swatches wrap onto further rows when `width` is too narrow.
int swatch_rows(const QVector<ColorLegend::Swatch>& sw, const QFontMetrics& fm, int width,
                QVector<QPoint>* at = nullptr) {
    int x = legend_margin, row = 0;
    for (const ColorLegend::Swatch& s : sw) {
        const int w = 16 + fm.horizontalAdvance(s.label);
        if (x > legend_margin && x + w > width - legend_margin) {
            ++row;
            x = legend_margin;
        }
        if (at) at->push_back(QPoint(x, row));
        x += w + 14;
    }
    return sw.isEmpty() ? 0 : row + 1;
}

}  // namespace

ColorLegend::ColorLegend(QWidget* parent) : QWidget(parent) {
    QSizePolicy p(QSizePolicy::Expanding, QSizePolicy::Fixed);
    p.setHeightForWidth(true);
    setSizePolicy(p);
}

void ColorLegend::setGradient(colormap cmap, float lo, float hi, bool log, const QString& title) {
    m_cmap = cmap;
    m_lo = lo;
    m_hi = hi;
    m_log = log;
    m_title = title;
    updateGeometry();
    update();
}

void ColorLegend::clearGradient() {
    m_title.clear();
    updateGeometry();
    update();
}

void ColorLegend::setSwatches(QVector<Swatch> swatches) {
    m_swatches = std::move(swatches);
    updateGeometry();
    update();
}

int ColorLegend::heightForWidth(int w) const {
    const int line = fontMetrics().height();
    int h = 4;
    if (hasGradient()) h += line + 12 + line + 4;
    if (!m_swatches.isEmpty()) h += swatch_rows(m_swatches, fontMetrics(), w) * (line + 2) + 4;
    return h;
}

QSize ColorLegend::sizeHint() const { return {320, heightForWidth(width() > 1 ? width() : 320)}; }

QSize ColorLegend::minimumSizeHint() const { return {120, sizeHint().height()}; }

void ColorLegend::paintEvent(QPaintEvent*) {
    QPainter p(this);
    const QFontMetrics fm = fontMetrics();
    const int line = fm.height();
    const int margin = 6;
    int y = 2;
    if (hasGradient()) {
        p.drawText(QRect(margin, y, width() - 2 * margin, line), Qt::AlignLeft | Qt::AlignVCenter, m_title);
        y += line;
        const QRect bar(margin, y, std::max(10, width() - 2 * margin), 12);
        for (int x = 0; x < bar.width(); ++x) {
            const float t = bar.width() > 1 ? static_cast<float>(x) / static_cast<float>(bar.width() - 1) : 0.0f;
            p.setPen(colormap_color(m_cmap, t));
            p.drawLine(bar.left() + x, bar.top(), bar.left() + x, bar.bottom());
        }
        p.setPen(palette().color(QPalette::WindowText));
        p.drawRect(bar.adjusted(0, 0, -1, -1));
        y += bar.height();
        // Ticks: ends and midpoint (linear) or one per decade (log, at most 7).
        struct tick {
            float t;
            QString text;
        };
        QVector<tick> ticks;
        const auto fmt = [](double v) { return QString::number(v, 'g', 3); };
        if (m_log && m_lo > 0 && m_hi > m_lo) {
            const double l0 = std::log10(m_lo), l1 = std::log10(m_hi);
            const int d0 = static_cast<int>(std::ceil(l0 - 1e-6)), d1 = static_cast<int>(std::floor(l1 + 1e-6));
            const int step = std::max(1, (d1 - d0 + 1 + 6) / 7);
            for (int d = d0; d <= d1; d += step)
                ticks.push_back({static_cast<float>((d - l0) / (l1 - l0)), QStringLiteral("1e%1").arg(d)});
            if (ticks.isEmpty()) ticks = {{0, fmt(m_lo)}, {1, fmt(m_hi)}};
        } else {
            ticks = {{0, fmt(m_lo)}, {0.5f, fmt(0.5 * (m_lo + m_hi))}, {1, fmt(m_hi)}};
        }
        for (const tick& t : ticks) {
            const int x = bar.left() + static_cast<int>(std::lround(t.t * (bar.width() - 1)));
            p.drawLine(x, y, x, y + 3);
            const int w = fm.horizontalAdvance(t.text);
            const int tx = std::clamp(x - w / 2, 0, std::max(0, width() - w));
            p.drawText(QPoint(tx, y + 3 + fm.ascent()), t.text);
        }
        y += line + 4;
    }
    QVector<QPoint> at;
    swatch_rows(m_swatches, fm, width(), &at);
    for (qsizetype i = 0; i < m_swatches.size(); ++i) {
        const Swatch& s = m_swatches[i];
        int x = at[i].x();
        const int ry = y + at[i].y() * (line + 2);
        const QRect box(x, ry + (line - 12) / 2 + 3, 12, 12);
        p.fillRect(box, s.color);
        if (s.hatch.isValid()) {
            p.save();
            p.setClipRect(box);
            p.setPen(QPen(s.hatch, 2));
            for (int k = -12; k < 12; k += 4) p.drawLine(box.left() + k, box.bottom(), box.left() + k + 12, box.top());
            p.restore();
        }
        p.setPen(palette().color(QPalette::WindowText));
        p.drawRect(box.adjusted(0, 0, -1, -1));
        x += 16;
        p.drawText(QPoint(x, ry + 3 + fm.ascent()), s.label);
    }
}

}  // namespace sl::views

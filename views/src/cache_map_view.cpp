// CacheMapView: a QImage built per frame; no GL needed for a few hundred thousand slots.
#include "sparselens/views/cache_map_view.h"

#include <algorithm>
#include <cmath>

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

namespace sl::views {
namespace {

constexpr uint8_t no_slot = 0xFF;

// Which state wins when several slots share a pixel: events over steady states.
int rank(uint8_t s) {
    switch (static_cast<slot_state>(s)) {
        case slot_state::empty: return 0;
        case slot_state::resident: return 1;
        case slot_state::pinned: return 2;
        case slot_state::hit: return 3;
        case slot_state::evicted: return 4;
        case slot_state::loaded: return 5;
    }
    return -1;  // no slot, or a value outside the enum (untrusted input): drawn as "no slot"
}

}  // namespace

QString CacheMapView::groupShortName(const std::string& kind) {
    static const std::pair<const char*, const char*> names[] = {
        {"input_column_pair", "in-cols"}, {"down_column", "down"},       {"neuron_bundle", "bundle"},
        {"up_down_bundle", "up+down"},    {"gate_row", "gate"},          {"up_row", "up"},
        {"up_column", "up-cols"},         {"gate_column", "gate-cols"},
    };
    for (const auto& [k, v] : names)
        if (kind == k) return QString::fromLatin1(v);
    return QString::fromStdString(kind);
}

QString CacheMapView::rowLabel(int stream) const {
    if (!m_series) return {};
    const int groups = std::max(1, m_series->n_groups);
    const int g = stream % groups;
    QString label = QStringLiteral("L%1").arg(stream / groups);
    if (groups > 1)
        label += QLatin1Char(' ') + (g < static_cast<int>(m_series->group_names.size())
                                         ? groupShortName(m_series->group_names[static_cast<size_t>(g)])
                                         : QStringLiteral("g%1").arg(g));
    return label;
}

int CacheMapView::labelMargin() const {
    // Wide enough for the longest row label ("L31 in-cols"), so every row can be named.
    int w = fontMetrics().horizontalAdvance(QStringLiteral("L00"));
    const int R = rows();
    for (int r = 0; r < std::min(R, 64); ++r) w = std::max(w, fontMetrics().horizontalAdvance(rowLabel(r)));
    return w + 8;
}

CacheMapView::CacheMapView(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    setMinimumSize(200, 80);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

QColor CacheMapView::stateColor(slot_state s) {
    switch (s) {
        case slot_state::empty: return {48, 48, 56};
        case slot_state::resident: return {66, 110, 170};
        case slot_state::hit: return {70, 200, 100};
        case slot_state::loaded: return {250, 165, 40};
        case slot_state::evicted: return {225, 50, 50};
        case slot_state::pinned: return {175, 95, 225};
    }
    return noSlotColor();
}

QString CacheMapView::stateName(slot_state s) {
    switch (s) {
        case slot_state::empty: return tr("empty");
        case slot_state::resident: return tr("resident");
        case slot_state::hit: return tr("hit");
        case slot_state::loaded: return tr("newly loaded");
        case slot_state::evicted: return tr("evicted");
        case slot_state::pinned: return tr("pinned");
    }
    return tr("no unit");
}

void CacheMapView::setFrame(std::shared_ptr<const cache_snapshot_series> series, int index) {
    m_series = std::move(series);
    m_index = m_series && index >= 0 && static_cast<size_t>(index) < m_series->frames.size() ? index : -1;
    update();
}

int CacheMapView::rows() const {
    return m_index >= 0 ? static_cast<int>(m_series->frames[static_cast<size_t>(m_index)].streams.size()) : 0;
}

int CacheMapView::columns() const {
    if (m_index < 0) return 0;
    size_t c = 0;
    for (const auto& s : m_series->frames[static_cast<size_t>(m_index)].streams) c = std::max(c, s.size());
    return static_cast<int>(std::min<size_t>(c, 1u << 24));
}

QRect CacheMapView::mapRect() const { return rect().adjusted(labelMargin(), 2, -2, -2); }

QImage CacheMapView::render(QSize size) const {
    const int w = std::max(1, size.width()), h = std::max(1, size.height());
    QImage img(w, h, QImage::Format_RGB32);
    img.fill(noSlotColor());
    const int R = rows(), C = columns();
    if (R == 0 || C == 0) return img;
    const auto& streams = m_series->frames[static_cast<size_t>(m_index)].streams;
    QRgb palette[256];
    for (int i = 0; i < 256; ++i) palette[i] = (rank(static_cast<uint8_t>(i)) < 0 ? noSlotColor() : stateColor(static_cast<slot_state>(i))).rgb();
    // Columns first (per stream), then rows; each output cell takes the highest-ranked state it covers.
    std::vector<uint8_t> reduced(static_cast<size_t>(R) * w, no_slot);
    for (int r = 0; r < R; ++r) {
        const std::vector<uint8_t>& s = streams[static_cast<size_t>(r)];
        const int64_t len = static_cast<int64_t>(std::min<size_t>(s.size(), static_cast<size_t>(C)));
        for (int x = 0; x < w; ++x) {
            int64_t u0 = static_cast<int64_t>(x) * C / w, u1 = static_cast<int64_t>(x + 1) * C / w;
            u1 = std::max(u1, u0 + 1);
            uint8_t best = no_slot;
            int best_rank = -1;
            for (int64_t u = u0; u < std::min(u1, len); ++u) {
                const int k = rank(s[static_cast<size_t>(u)]);
                if (k > best_rank) {
                    best_rank = k;
                    best = s[static_cast<size_t>(u)];
                }
            }
            reduced[static_cast<size_t>(r) * w + x] = best;
        }
    }
    for (int y = 0; y < h; ++y) {
        int r0 = static_cast<int>(static_cast<int64_t>(y) * R / h), r1 = static_cast<int>(static_cast<int64_t>(y + 1) * R / h);
        r1 = std::max(r1, r0 + 1);
        auto* line = reinterpret_cast<QRgb*>(img.scanLine(y));
        for (int x = 0; x < w; ++x) {
            uint8_t best = no_slot;
            int best_rank = -1;
            for (int r = r0; r < std::min(r1, R); ++r) {
                const uint8_t v = reduced[static_cast<size_t>(r) * w + x];
                if (rank(v) > best_rank) {
                    best_rank = rank(v);
                    best = v;
                }
            }
            line[x] = palette[best];
        }
    }
    return img;
}

void CacheMapView::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), palette().color(QPalette::Window));
    const QRect r = mapRect();
    if (r.width() <= 0 || r.height() <= 0) return;
    if (m_index < 0 || rows() == 0) {
        p.fillRect(r, noSlotColor());
        p.setPen(QColor(200, 200, 210));
        p.drawText(r, Qt::AlignCenter, m_series ? tr("No cache frame") : tr("No cache simulation yet"));
        return;
    }
    p.drawImage(r.topLeft(), render(r.size()));
    // Row labels on the left: every row ("L0 in-cols", "L0 down") when they fit, else the layers' first
    // rows, as many as fit.
    const int R = rows(), groups = std::max(1, m_series->n_groups);
    const int line = fontMetrics().height();
    const double per_row = static_cast<double>(r.height()) / R;
    const int margin = r.left();
    const int step = per_row >= line ? 1 : groups * std::max(1, static_cast<int>(std::ceil(line / std::max(per_row * groups, 1e-3))));
    p.setPen(palette().color(QPalette::WindowText));
    for (int row = 0; row < R; row += step) {
        const int y0 = r.top() + static_cast<int>(row * per_row);
        const int h = std::max(line, static_cast<int>(per_row));
        p.drawText(QRect(0, y0, margin - 4, h), Qt::AlignRight | (per_row >= line ? Qt::AlignVCenter : Qt::AlignTop),
                   rowLabel(row));
    }
    // Layer boundaries: a gap in the window colour, when the rows are tall enough to spare a pixel.
    if (groups > 1 && per_row * groups >= 8) {
        p.setPen(palette().color(QPalette::Window));
        for (int l = groups; l < R; l += groups) {
            const int y = r.top() + static_cast<int>(l * per_row);
            p.drawLine(r.left(), y, r.right(), y);
        }
    }
}

void CacheMapView::mouseMoveEvent(QMouseEvent* e) {
    const QRect r = mapRect();
    const int R = rows(), C = columns();
    if (R == 0 || C == 0 || !r.contains(e->position().toPoint())) {
        QToolTip::hideText();
        return;
    }
    const int stream = std::clamp(static_cast<int>((e->position().y() - r.top()) * R / r.height()), 0, R - 1);
    const int unit = std::clamp(static_cast<int>((e->position().x() - r.left()) * C / r.width()), 0, C - 1);
    const auto& s = m_series->frames[static_cast<size_t>(m_index)].streams[static_cast<size_t>(stream)];
    const int groups = std::max(1, m_series->n_groups);
    const int g = stream % groups;
    const QString group = g < static_cast<int>(m_series->group_names.size())
                              ? QString::fromStdString(m_series->group_names[static_cast<size_t>(g)])
                              : QStringLiteral("group %1").arg(g);
    const int state = static_cast<size_t>(unit) < s.size() ? s[static_cast<size_t>(unit)] : no_slot;
    QString text = tr("layer %1 · %2 · unit %3: %4").arg(stream / groups).arg(group).arg(unit)
                       .arg(rank(static_cast<uint8_t>(state)) < 0
                                ? tr("no such unit (this group has %1 units per layer)").arg(s.size())
                                : stateName(static_cast<slot_state>(state)));
    if (stream < static_cast<int>(m_series->capacity.size()))
        text += tr("\ncapacity %1 units").arg(m_series->capacity[static_cast<size_t>(stream)]);
    QToolTip::showText(e->globalPosition().toPoint(), text, this);
    emit slotHovered(stream, unit, state);
}

}  // namespace sl::views

// CachePanel: scrubber / play over the frames of one cache simulation, map + legend + time-series charts.
#include "sparselens/views/cache_panel.h"

#include <algorithm>
#include <cmath>

#include <QChart>
#include <QChartView>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineSeries>
#include <QLocale>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSlider>
#include <QSpinBox>
#include <QResizeEvent>
#include <QSplitter>
#include <QValueAxis>
#include <QVBoxLayout>

#include "sparselens/views/cache_map_view.h"
#include "sparselens/views/color_legend.h"

namespace sl::views {
namespace {

QChart* make_chart(const QString& title, QLineSeries* series, QLineSeries* cursor, QValueAxis* x, QValueAxis* y) {
    auto* c = new QChart;
    c->setTitle(title);
    c->legend()->hide();
    c->addSeries(series);
    c->addSeries(cursor);
    x->setTitleText(QObject::tr("token"));
    x->setLabelFormat("%d");
    c->addAxis(x, Qt::AlignBottom);
    c->addAxis(y, Qt::AlignLeft);
    for (QLineSeries* s : {series, cursor}) {
        s->attachAxis(x);
        s->attachAxis(y);
    }
    cursor->setPen(QPen(QColor(220, 50, 50), 1.5));
    return c;
}

}  // namespace

CachePanel::CachePanel(QWidget* parent) : QWidget(parent) {
    m_map = new CacheMapView(this);
    m_legend = new ColorLegend(this);
    QVector<ColorLegend::Swatch> sw;
    for (slot_state s : {slot_state::empty, slot_state::resident, slot_state::hit, slot_state::loaded, slot_state::evicted,
                         slot_state::pinned})
        sw.push_back({CacheMapView::stateColor(s), CacheMapView::stateName(s), {}});
    sw.push_back({CacheMapView::noSlotColor(), tr("no unit (shorter group)"), {}});
    m_legend->setSwatches(sw);
    m_legend->setToolTip(tr("Each row is one unit group of a layer and each cell one unit of it. A group with fewer "
                            "units than the widest (DIP: one gate/up input-column pair per model dimension, one down "
                            "column per hidden neuron) ends early: black = no such unit, not a free cache slot."));

    m_slider = new QSlider(Qt::Horizontal, this);
    m_slider->setRange(0, 0);
    m_play = new QPushButton(tr("Play"), this);
    m_play->setCheckable(true);
    m_speed = new QSpinBox(this);
    m_speed->setRange(1, 120);
    m_speed->setValue(8);
    m_speed->setSuffix(tr(" tok/s"));
    m_info = new QLabel(this);

    m_hit = new QLineSeries;
    m_hitCursor = new QLineSeries;
    m_hitX = new QValueAxis;
    m_hitY = new QValueAxis;
    m_hitY->setRange(0, 100);
    m_hitY->setTitleText(tr("hit rate %"));
    m_hitY->setLabelFormat("%d");
    m_hitY->setTickCount(5);
    m_hitChart = make_chart(tr("Cache hit rate per token"), m_hit, m_hitCursor, m_hitX, m_hitY);
    m_flash = new QLineSeries;
    m_flashCursor = new QLineSeries;
    m_flashX = new QValueAxis;
    m_flashY = new QValueAxis;
    m_flashY->setLabelFormat("%.3g");
    m_flashChart = make_chart(tr("Bytes read from flash per token"), m_flash, m_flashCursor, m_flashX, m_flashY);

    auto* controls = new QHBoxLayout;
    controls->addWidget(m_play);
    controls->addWidget(m_slider, 1);
    controls->addWidget(m_speed);
    auto* charts = new QWidget(this);
    auto* chartsLayout = new QHBoxLayout(charts);
    chartsLayout->setContentsMargins(0, 0, 0, 0);
    for (QChart* c : {m_hitChart, m_flashChart}) {
        auto* v = new QChartView(c, charts);
        v->setRenderHint(QPainter::Antialiasing);
        // Qt Charts elides every axis label to "…" when a chart is squeezed; below this the panel scrolls.
        v->setMinimumSize(240, 200);
        c->setMargins(QMargins(2, 2, 2, 2));
        chartsLayout->addWidget(v);
    }
    auto* top = new QWidget(this);
    auto* topLayout = new QVBoxLayout(top);
    topLayout->setContentsMargins(0, 0, 0, 0);
    topLayout->addWidget(m_map, 1);
    topLayout->addWidget(m_legend);
    auto* splitter = m_splitter = new QSplitter(Qt::Vertical, this);
    connect(splitter, &QSplitter::splitterMoved, this, [this] { m_userSplit = true; });
    splitter->addWidget(top);
    splitter->addWidget(charts);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 2);
    splitter->setChildrenCollapsible(false);
    m_map->setMinimumHeight(160);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(controls);
    layout->addWidget(m_info);
    layout->addWidget(splitter, 1);

    m_timer.setInterval(1000 / m_speed->value());
    connect(m_speed, &QSpinBox::valueChanged, this, [this](int v) { m_timer.setInterval(1000 / std::max(1, v)); });
    connect(m_slider, &QSlider::valueChanged, this, &CachePanel::showFrame);
    connect(m_play, &QPushButton::toggled, this, &CachePanel::setPlaying);
    connect(&m_timer, &QTimer::timeout, this, [this] {
        if (currentFrame() + 1 < frameCount())
            setCurrentFrame(currentFrame() + 1);
        else
            setPlaying(false);
    });
    showFrame(0);
}

void CachePanel::setSeries(std::shared_ptr<const cache_snapshot_series> series) {
    if (series && m_series && series->generation < m_series->generation) return;
    m_series = std::move(series);
    const int n = frameCount();
    {
        const QSignalBlocker block(m_slider);
        m_slider->setRange(0, std::max(0, n - 1));
    }
    if (n == 0) setPlaying(false);
    rebuildCharts();
    showFrame(m_slider->value());
}

int CachePanel::frameCount() const { return m_series ? static_cast<int>(std::min<size_t>(m_series->frames.size(), INT32_MAX)) : 0; }

int CachePanel::currentFrame() const { return m_slider->value(); }

void CachePanel::setCurrentFrame(int index) { m_slider->setValue(index); }

void CachePanel::setPlaying(bool on) {
    on = on && frameCount() > 1;
    if (on && currentFrame() + 1 >= frameCount()) setCurrentFrame(0);  // replay from the start
    if (on)
        m_timer.start();
    else
        m_timer.stop();
    const QSignalBlocker block(m_play);
    m_play->setChecked(on);
    m_play->setText(on ? tr("Pause") : tr("Play"));
}

void CachePanel::rebuildCharts() {
    QList<QPointF> hit, flash;
    double max_bytes = 0, x0 = 0, x1 = 1;
    if (m_series && !m_series->frames.empty()) {
        for (const cache_frame& f : m_series->frames) max_bytes = std::max(max_bytes, static_cast<double>(f.flash_bytes));
        x0 = m_series->frames.front().token;
        x1 = m_series->frames.back().token;
    }
    const char* unit = "B";
    m_flashScale = 1.0;
    for (const char* u : {"KB", "MB", "GB"})
        if (max_bytes / m_flashScale >= 1000.0) {
            m_flashScale *= 1000.0;
            unit = u;
        }
    if (m_series) {
        hit.reserve(static_cast<qsizetype>(m_series->frames.size()));
        flash.reserve(static_cast<qsizetype>(m_series->frames.size()));
        for (const cache_frame& f : m_series->frames) {
            const double h = std::isfinite(f.hit_rate) ? std::clamp(f.hit_rate, 0.0, 1.0) : 0.0;
            hit.append(QPointF(f.token, 100.0 * h));
            flash.append(QPointF(f.token, static_cast<double>(f.flash_bytes) / m_flashScale));
        }
    }
    m_hit->replace(hit);
    m_flash->replace(flash);
    if (x1 <= x0) x1 = x0 + 1;
    // Round tick values: token numbers on x, whole KB/MB steps on y.
    for (QValueAxis* x : {m_hitX, m_flashX}) {
        x->setRange(x0, x1);
        x->applyNiceNumbers();
    }
    m_flashY->setRange(0, std::max(1.0, max_bytes / m_flashScale * 1.05));
    m_flashY->applyNiceNumbers();
    m_flashY->setTitleText(tr("flash %1").arg(QLatin1String(unit)));
}

void CachePanel::showFrame(int index) {
    const int n = frameCount();
    const bool valid = index >= 0 && index < n;
    m_map->setFrame(m_series, valid ? index : -1);
    m_hitCursor->clear();
    m_flashCursor->clear();
    if (!valid) {
        m_info->setText(m_series ? tr("The simulation recorded no frames") : tr("No cache simulation yet"));
        return;
    }
    const cache_frame& f = m_series->frames[static_cast<size_t>(index)];
    m_hitCursor->append(f.token, 0);
    m_hitCursor->append(f.token, 100);
    m_flashCursor->append(f.token, 0);
    m_flashCursor->append(f.token, m_flashY->max());
    m_info->setText(tr("Token %1 (frame %2 of %3) · hit rate %4% · %5 bytes from flash")
                        .arg(f.token)
                        .arg(index + 1)
                        .arg(n)
                        .arg(100.0 * (std::isfinite(f.hit_rate) ? f.hit_rate : 0.0), 0, 'f', 1)
                        .arg(QLocale().toString(static_cast<qulonglong>(f.flash_bytes))));
    emit frameChanged(index);
}

void CachePanel::resizeEvent(QResizeEvent* e) {
    QWidget::resizeEvent(e);
    // A QSplitter keeps the sizes of its first layout (often a small, not yet shown dock) and spreads
    // later growth unevenly; proportional weights give the same split at any dock size.
    if (!m_userSplit && m_splitter) m_splitter->setSizes({3000, 2000});
}

}  // namespace sl::views

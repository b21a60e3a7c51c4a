// NeuronsPanel: Qt Charts views of the per-neuron statistics the engine computes (neuron_snapshot).
#include "sparselens/views/neurons_panel.h"

#include <algorithm>
#include <cmath>

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPainter>
#include <QSignalBlocker>
#include <QSlider>
#include <QResizeEvent>
#include <QSplitter>
#include <QValueAxis>
#include <QVBoxLayout>

namespace sl::views {
namespace {

// One line, elided at the right when the dock is narrow, the whole text in its tooltip. Not a wrapped
// QLabel: a word-wrapped label gives the panel a height-for-width, and the dock's scroll area then sizes
// the panel to its preferred height (full-size charts) and scrolls instead of shrinking the charts.
class ElidedLabel : public QLabel {
public:
    using QLabel::QLabel;
    QSize minimumSizeHint() const override { return {16, QLabel::minimumSizeHint().height()}; }
    QSize sizeHint() const override { return {16, QLabel::sizeHint().height()}; }

protected:
    void paintEvent(QPaintEvent*) override {
        QPainter p(this);
        const QRect r = contentsRect();
        const QString shown = fontMetrics().elidedText(text(), Qt::ElideRight, r.width());
        setToolTip(shown == text() ? QString() : text());
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(r, Qt::AlignLeft | Qt::AlignVCenter, shown);
    }
};

}  // namespace

NeuronsPanel::NeuronsPanel(QWidget* parent) : QWidget(parent) {
    m_layer = new QComboBox(this);
    m_slider = new QSlider(Qt::Horizontal, this);
    m_slider->setRange(0, 1000);  // 0.1% steps
    m_slider->setValue(100);
    // Elided, so a long readout never forces a horizontal scroll bar on a narrow dock.
    m_readout = new ElidedLabel(this);
    m_engineShares = new ElidedLabel(this);
    m_sharesDetail = new ElidedLabel(this);

    m_importance = new QLineSeries;
    m_importance->setName(tr("heavy-hitter norm (sorted)"));
    m_split = new QLineSeries;
    m_split->setName(tr("FFSplit split"));
    m_split->setPen(QPen(QColor(220, 50, 50), 2, Qt::DashLine));
    m_pinned = new QLineSeries;
    m_pinned->setName(tr("pinned heavy hitters"));
    m_pinned->setPen(QPen(QColor(120, 60, 200), 2, Qt::DotLine));
    m_cursor = new QLineSeries;
    m_cursor->setName(tr("top x%"));
    m_cursor->setPen(QPen(QColor(40, 150, 60), 1.5));
    m_impChart = new QChart;
    m_impChart->setTitle(tr("Neuron importance ‖σ(XU_j)‖·‖V_j‖, sorted"));
    m_rankAxis = new QValueAxis;
    m_rankAxis->setTitleText(tr("neuron rank"));
    m_rankAxis->setLabelFormat("%d");
    m_impAxis = new QLogValueAxis;
    m_impAxis->setTitleText(tr("norm (log)"));
    m_impAxis->setLabelFormat("%.3g");
    m_impAxis->setBase(10);
    m_impChart->addAxis(m_rankAxis, Qt::AlignBottom);
    m_impChart->addAxis(m_impAxis, Qt::AlignLeft);
    for (QLineSeries* s : {m_importance, m_split, m_pinned, m_cursor}) {
        m_impChart->addSeries(s);
        s->attachAxis(m_rankAxis);
        s->attachAxis(m_impAxis);
    }
    auto* impView = new QChartView(m_impChart, this);
    impView->setRenderHint(QPainter::Antialiasing);

    m_flockSet = new QBarSet(tr("Jaccard(prompt top-k, generation top-k)"));
    m_flockSet->setSelectedColor(QColor(250, 160, 40));
    m_flockSeries = new QBarSeries;
    m_flockSeries->append(m_flockSet);
    m_flockChart = new QChart;
    m_flockChart->setTitle(tr("Flocking per layer (GRIFFIN): Jaccard of the prompt's and the generation's top-k"));
    m_flockChart->addSeries(m_flockSeries);
    m_flockLayers = new QBarCategoryAxis;
    m_flockLayers->setTitleText(tr("layer"));
    m_flockAxis = new QValueAxis;
    m_flockAxis->setRange(0, 1);
    m_flockAxis->setTickCount(5);  // 0, 0.25, 0.5, 0.75, 1
    m_flockAxis->setLabelFormat("%.2f");
    m_flockAxis->setTitleText(tr("Jaccard"));
    m_flockChart->addAxis(m_flockLayers, Qt::AlignBottom);
    m_flockChart->addAxis(m_flockAxis, Qt::AlignLeft);
    m_flockSeries->attachAxis(m_flockLayers);
    m_flockSeries->attachAxis(m_flockAxis);
    m_flockChart->legend()->setVisible(false);  // one series, named in the title: its height goes to the bars
    auto* flockView = new QChartView(m_flockChart, this);
    // Below these heights Qt Charts elides every axis label to "…": in a short dock the panel scrolls.
    impView->setMinimumHeight(230);
    flockView->setMinimumHeight(180);

    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("Layer"), this));
    top->addWidget(m_layer);
    top->addSpacing(12);
    top->addWidget(new QLabel(tr("top"), this));
    top->addWidget(m_slider, 1);
    auto* splitter = m_splitter = new QSplitter(Qt::Vertical, this);
    connect(splitter, &QSplitter::splitterMoved, this, [this] { m_userSplit = true; });
    splitter->addWidget(impView);
    splitter->addWidget(flockView);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 2);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addWidget(m_readout);
    layout->addWidget(m_engineShares);
    layout->addWidget(m_sharesDetail);
    layout->addWidget(splitter, 1);

    connect(m_layer, &QComboBox::currentIndexChanged, this, [this](int i) {
        rebuildLayer();
        if (i >= 0) emit layerChanged(i);
    });
    connect(m_slider, &QSlider::valueChanged, this, [this] { updateCursor(); });
    connect(m_flockSet, &QBarSet::clicked, this, [this](int i) { setLayer(i); });
    rebuildLayer();
}

void NeuronsPanel::setNeuronStats(std::shared_ptr<const neuron_snapshot> stats) {
    if (stats && m_stats && stats->generation < m_stats->generation) return;
    m_stats = std::move(stats);
    const int n = m_stats ? static_cast<int>(m_stats->layers.size()) : 0;
    {
        const QSignalBlocker block(m_layer);
        const int keep = m_layer->currentIndex();
        m_layer->clear();
        for (int i = 0; i < n; ++i) m_layer->addItem(QString::number(i));
        if (n > 0) m_layer->setCurrentIndex(std::clamp(keep, 0, n - 1));
    }
    rebuildFlocking();
    rebuildLayer();
}

void NeuronsPanel::setLayer(int layer) {
    if (layer >= 0 && layer < m_layer->count()) m_layer->setCurrentIndex(layer);
}

int NeuronsPanel::layer() const { return m_layer->currentIndex(); }

void NeuronsPanel::setTopPercent(double pct) { m_slider->setValue(static_cast<int>(std::lround(std::clamp(pct, 0.0, 100.0) * 10.0))); }

double NeuronsPanel::topPercent() const { return m_slider->value() / 10.0; }

double NeuronsPanel::shareOfTop(double pct) const {
    if (m_prefix.size() < 2 || !(m_prefix.back() > 0.0)) return 0.0;
    const size_t n = m_prefix.size() - 1;
    const size_t k = std::min(n, static_cast<size_t>(std::lround(std::clamp(pct, 0.0, 100.0) / 100.0 * static_cast<double>(n))));
    return m_prefix[k] / m_prefix.back();
}

QString NeuronsPanel::readout() const { return m_readout->text(); }

void NeuronsPanel::rebuildLayer() {
    m_prefix.clear();
    const int l = m_layer->currentIndex();
    const neuron_layer_stats* s =
        m_stats && l >= 0 && static_cast<size_t>(l) < m_stats->layers.size() ? &m_stats->layers[static_cast<size_t>(l)] : nullptr;
    QList<QPointF> pts;
    m_yMin = 1;
    m_yMax = 10;
    if (s) {
        const std::vector<float>& v = s->importance_sorted;
        pts.reserve(static_cast<qsizetype>(v.size()));
        m_prefix.assign(v.size() + 1, 0.0);
        double lo = INFINITY, hi = 0;
        for (size_t i = 0; i < v.size(); ++i) {
            const double x = std::isfinite(v[i]) && v[i] > 0.0f ? v[i] : 0.0;
            m_prefix[i + 1] = m_prefix[i] + x;
            if (x > 0.0) {  // a log axis cannot show zeros
                pts.append(QPointF(static_cast<double>(i + 1), x));
                lo = std::min(lo, x);
                hi = std::max(hi, x);
            }
        }
        if (hi > 0.0) {
            m_yMin = lo;
            m_yMax = hi > lo ? hi : lo * 10.0;
        }
    }
    m_importance->replace(pts);
    const double n = s ? static_cast<double>(s->importance_sorted.size()) : 0.0;
    m_rankAxis->setRange(0, std::max(1.0, n));
    // A log axis labels only the powers of its base inside its range: with the data inside one decade a
    // base-10 axis would show no label at all. Less than ~1.5 decades: base 2 (…, 0.25, 0.5, 1, 2, …);
    // the range always runs from one labelled power to another.
    const double decades = std::log10(m_yMax / m_yMin);
    const double base = decades < 1.5 ? 2.0 : 10.0;
    const double lb = std::log(base);
    m_axisLo = std::pow(base, std::floor(std::log(m_yMin) / lb + 1e-9));
    m_axisHi = std::pow(base, std::ceil(std::log(m_yMax) / lb - 1e-9));
    if (!(m_axisHi > m_axisLo)) m_axisHi = m_axisLo * base;
    m_impAxis->setBase(base);
    m_impAxis->setLabelFormat(m_axisLo >= 1 ? "%.0f" : "%g");
    m_impAxis->setRange(m_axisLo, m_axisHi);
    m_impAxis->setMinorTickCount(base == 10.0 ? 8 : 0);
    m_split->clear();
    if (s && s->ffsplit_split > 0 && s->ffsplit_split <= static_cast<int32_t>(n)) {
        const double x = s->ffsplit_split + 0.5;  // between the last heavy and the first light neuron
        m_split->append(x, m_axisLo);
        m_split->append(x, m_axisHi);
    }
    // The pinned set: the first `pinned` neurons of the importance order (the calibration's heavy hitters).
    m_pinned->clear();
    if (s && s->pinned > 0 && s->pinned <= static_cast<int32_t>(n)) {
        m_pinned->append(s->pinned + 0.5, m_axisLo);
        m_pinned->append(s->pinned + 0.5, m_axisHi);
    }
    if (s) {
        const QString pinned = s->pinned > 0 ? tr(" · %1 pinned").arg(s->pinned) : QString();
        m_engineShares->setText(tr("FFSplit keeps %1 heavy neurons exact (%2%)%3 · flocking Jaccard %4")
                                    .arg(s->ffsplit_split)
                                    .arg(n > 0 ? 100.0 * s->ffsplit_split / n : 0.0, 0, 'f', 1)
                                    .arg(pinned)
                                    .arg(static_cast<double>(s->flock_jaccard), 0, 'f', 2));
        m_sharesDetail->setText(tr("Top 1% of neurons: %1% of the norm · top 10%: %2%")
                                    .arg(100.0 * s->top_share_1, 0, 'f', 1)
                                    .arg(100.0 * s->top_share_10, 0, 'f', 1));
    } else {
        m_engineShares->setText(m_stats ? tr("No statistics for this layer") : tr("No neuron statistics yet: run a prompt"));
        m_sharesDetail->clear();
    }
    if (m_flockSet->count() > 0) {
        m_flockSet->deselectAllBars();
        if (l >= 0 && l < m_flockSet->count()) m_flockSet->selectBar(l);
    }
    updateCursor();
}

void NeuronsPanel::rebuildFlocking() {
    m_flockSet->remove(0, m_flockSet->count());
    QStringList cats;
    const int n = m_stats ? static_cast<int>(m_stats->layers.size()) : 0;
    QList<qreal> vals;
    for (int i = 0; i < n; ++i) {
        const float j = m_stats->layers[static_cast<size_t>(i)].flock_jaccard;
        vals.append(std::isfinite(j) ? std::clamp(static_cast<double>(j), 0.0, 1.0) : 0.0);
        cats << QString::number(i);
    }
    m_flockSet->append(vals);
    m_flockLayers->setCategories(cats);
}

void NeuronsPanel::updateCursor() {
    const double pct = topPercent();
    m_cursor->clear();
    const size_t n = m_prefix.empty() ? 0 : m_prefix.size() - 1;
    if (n == 0) {
        m_readout->setText(m_stats ? tr("This layer has no neurons") : QString());
        return;
    }
    const size_t k = std::min(n, static_cast<size_t>(std::lround(pct / 100.0 * static_cast<double>(n))));
    m_cursor->append(k + 0.5, m_axisLo);
    m_cursor->append(k + 0.5, m_axisHi);
    m_readout->setText(tr("Top %1% of neurons (%2 of %3) hold %4% of the total heavy-hitter norm")
                           .arg(pct, 0, 'f', 1)
                           .arg(k)
                           .arg(n)
                           .arg(100.0 * shareOfTop(pct), 0, 'f', 1));
}

void NeuronsPanel::resizeEvent(QResizeEvent* e) {
    QWidget::resizeEvent(e);
    // A QSplitter keeps the sizes of its first layout (often a small, not yet shown dock) and spreads
    // later growth unevenly; proportional weights give the same split at any dock size.
    if (!m_userSplit && m_splitter) m_splitter->setSizes({3000, 2000});
}

}  // namespace sl::views

// ActivationsPanel: selectors, order permutations from the neuron statistics, Qt fallbacks for the
// overlay's colour-scale controls, legend and hover readout.
#include "sparselens/views/activations_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSignalBlocker>
#include <QVBoxLayout>

#include "sparselens/views/color_legend.h"

namespace sl::views {

std::string_view column_order_name(column_order o) {
    switch (o) {
        case column_order::index: return "index";
        case column_order::griffin: return "GRIFFIN statistic";
        case column_order::heavy_hitter: return "heavy-hitter norm";
    }
    return "?";
}

ActivationsPanel::ActivationsPanel(QWidget* parent) : QWidget(parent) {
    m_layer = new QComboBox(this);
    // Short item texts (the centre can be under 600 px wide), the full meaning in each item's tooltip.
    const auto item = [](QComboBox* c, const QString& text, int data, const QString& tip) {
        c->addItem(text, data);
        c->setItemData(c->count() - 1, tip, Qt::ToolTipRole);
    };
    m_probe = new QComboBox(this);
    item(m_probe, tr("GLU output"), static_cast<int>(probe::glu), tr("σ(gate)·up: the input of the down projection"));
    item(m_probe, tr("gate"), static_cast<int>(probe::gate_pre), tr("gate pre-activation W_g x"));
    item(m_probe, tr("up"), static_cast<int>(probe::up_pre), tr("up projection W_u x"));
    item(m_probe, tr("MLP input"), static_cast<int>(probe::mlp_in), tr("the normalised input x of the MLP"));
    m_probe->setToolTip(tr("Which activation matrix of the layer to show"));
    m_mode = new QComboBox(this);
    item(m_mode, tr("absolute"), static_cast<int>(heatmap_mode::absolute), tr("absolute |v| against the colour scale"));
    item(m_mode, tr("relative"), static_cast<int>(heatmap_mode::relative),
         tr("relative: |v| divided by the largest |v| of its token row (GRIFFIN's flocking view)"));
    item(m_mode, tr("mask"), static_cast<int>(heatmap_mode::mask_overlay),
         tr("mask overlay: absolute values, with the entries the kernels skipped hatched grey"));
    m_mode->setToolTip(tr("Colour mode: absolute |v|, relative (row-normalised) or the kernels' mask overlay"));
    m_order = new QComboBox(this);
    item(m_order, tr("index"), static_cast<int>(column_order::index), tr("neurons in index order"));
    item(m_order, tr("GRIFFIN"), static_cast<int>(column_order::griffin),
         tr("by GRIFFIN's prompt statistic: the prompt's experts on the left"));
    item(m_order, tr("heavy hitters"), static_cast<int>(column_order::heavy_hitter),
         tr("by heavy-hitter norm ‖σ(xU_j)‖·‖V_j‖: the most important neurons on the left"));
    m_order->setToolTip(tr("Column order of the neurons (the data does not change)"));
    for (QComboBox* c : {m_layer, m_probe, m_mode, m_order}) c->setSizeAdjustPolicy(QComboBox::AdjustToContents);

    auto* selectors = new QHBoxLayout;
    const auto add = [&](QLayout* l, const QString& label, QWidget* w) {
        auto* lab = new QLabel(label, this);
        lab->setBuddy(w);
        l->addWidget(lab);
        l->addWidget(w);
    };
    add(selectors, tr("&Layer"), m_layer);
    add(selectors, tr("&Matrix"), m_probe);
    add(selectors, tr("M&ode"), m_mode);
    add(selectors, tr("&Columns"), m_order);
    selectors->addStretch(1);
    selectors->setSpacing(4);

    // Colour-scale controls: the ImGui overlay has them inside the canvas; without it they live here.
    m_cmap = new QComboBox(this);
    for (int i = 0; i < colormap_count; ++i) m_cmap->addItem(QString::fromUtf8(colormap_name(static_cast<colormap>(i)).data()), i);
    m_log = new QCheckBox(tr("log"), this);
    m_auto = new QCheckBox(tr("auto max"), this);
    m_max = new QDoubleSpinBox(this);
    m_max->setDecimals(6);
    m_max->setRange(1e-6, 1e9);
    m_max->setStepType(QAbstractSpinBox::AdaptiveDecimalStepType);
    m_reset = new QPushButton(tr("Reset view"), this);
    auto* scale = new QHBoxLayout;
    add(scale, tr("Colour map"), m_cmap);
    scale->addWidget(m_log);
    scale->addWidget(m_auto);
    add(scale, tr("max"), m_max);
    scale->addWidget(m_reset);
    scale->addStretch(1);
    auto* scaleRow = new QWidget(this);
    scaleRow->setLayout(scale);
    scale->setContentsMargins(0, 0, 0, 0);
    scaleRow->setVisible(!HeatmapCanvas::hasImGuiOverlay());

    m_title = new QLabel(this);
    // Qt 6.4 switches a window holding any QOpenGLWidget, even a hidden one, to RHI composition, which
    // crashes on raster-only platforms (offscreen): there the canvas is created without a parent.
    QString why;
    const bool gl = HeatmapCanvas::openGLAvailable(&why);
    m_canvas = new HeatmapCanvas(gl ? this : nullptr);
    m_legend = new ColorLegend(this);
    m_readout = new QLabel(this);
    m_readout->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_noGL = new QLabel(tr("The activation heatmap needs OpenGL 3.0: %1").arg(why), this);
    m_noGL->setAlignment(Qt::AlignCenter);
    m_noGL->setWordWrap(true);
    m_noGL->setVisible(!gl);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(selectors);
    layout->addWidget(scaleRow);
    layout->addWidget(m_title);
    if (gl) layout->addWidget(m_canvas, 1);
    layout->addWidget(m_noGL, 1);
    layout->addWidget(m_legend);
    layout->addWidget(m_readout);

    const auto emitSelection = [this] { emit selectionChanged(layer(), static_cast<int>(probe())); };
    connect(m_layer, &QComboBox::currentIndexChanged, this, emitSelection);
    connect(m_probe, &QComboBox::currentIndexChanged, this, emitSelection);
    connect(m_mode, &QComboBox::currentIndexChanged, this,
            [this] { m_canvas->setMode(static_cast<heatmap_mode>(m_mode->currentData().toInt())); });
    connect(m_order, &QComboBox::currentIndexChanged, this, [this] { applyOrder(); });
    connect(m_cmap, &QComboBox::currentIndexChanged, this,
            [this] { m_canvas->setColormap(static_cast<colormap>(m_cmap->currentData().toInt())); });
    connect(m_log, &QCheckBox::toggled, m_canvas, &HeatmapCanvas::setLogScale);
    connect(m_auto, &QCheckBox::toggled, m_canvas, &HeatmapCanvas::setAutoScale);
    connect(m_max, &QDoubleSpinBox::valueChanged, this, [this](double v) {
        if (!m_auto->isChecked()) m_canvas->setScaleMax(static_cast<float>(v));
    });
    connect(m_reset, &QPushButton::clicked, m_canvas, &HeatmapCanvas::resetView);
    connect(m_canvas, &HeatmapCanvas::colorScaleChanged, this, [this] {
        syncScaleControls();
        updateLegend();
    });
    connect(m_canvas, &HeatmapCanvas::tokenHovered, this, &ActivationsPanel::tokenHovered);
    connect(m_canvas, &HeatmapCanvas::cellHovered, this, [this](int token, int neuron, float value, bool kept) {
        QString s = tr("token %1 · neuron %2 · value %3").arg(token).arg(neuron).arg(static_cast<double>(value), 0, 'g', 5);
        if (m_snap && !m_snap->kept.empty()) s += kept ? tr(" · computed") : tr(" · skipped by the kernels");
        m_readout->setText(s);
    });
    syncScaleControls();
    updateLegend();
    updateTitle();
}

ActivationsPanel::~ActivationsPanel() {
    if (!m_canvas->parent()) delete m_canvas;
}

void ActivationsPanel::setActivations(std::shared_ptr<const activation_snapshot> snap) {
    if (snap && m_snap && snap->generation < m_snap->generation) return;
    m_snap = std::move(snap);
    m_canvas->setSnapshot(m_snap);
    applyOrder();
    updateTitle();
}

void ActivationsPanel::setNeuronOrders(std::shared_ptr<const neuron_snapshot> stats) {
    if (stats && m_stats && stats->generation < m_stats->generation) return;
    m_stats = std::move(stats);
    applyOrder();
    updateTitle();
}

void ActivationsPanel::highlightToken(int pos) { m_canvas->setHighlightedToken(pos); }

int ActivationsPanel::layer() const { return std::max(0, m_layer->currentIndex()); }

sl::probe ActivationsPanel::probe() const { return static_cast<sl::probe>(m_probe->currentData().toInt()); }

void ActivationsPanel::setLayerCount(int n) {
    n = std::max(0, n);
    const int before = m_layer->currentIndex();
    {
        const QSignalBlocker block(m_layer);
        m_layer->clear();
        for (int i = 0; i < n; ++i) m_layer->addItem(QString::number(i));
        if (n > 0) m_layer->setCurrentIndex(std::clamp(before, 0, n - 1));
    }
    if (m_layer->currentIndex() != before) emit selectionChanged(layer(), static_cast<int>(probe()));
}

void ActivationsPanel::setMode(heatmap_mode m) { m_mode->setCurrentIndex(m_mode->findData(static_cast<int>(m))); }

heatmap_mode ActivationsPanel::mode() const { return m_canvas->mode(); }

void ActivationsPanel::setOrder(column_order o) { m_order->setCurrentIndex(m_order->findData(static_cast<int>(o))); }

column_order ActivationsPanel::order() const { return static_cast<column_order>(m_order->currentData().toInt()); }

void ActivationsPanel::applyOrder() {
    const column_order want = order();
    m_effectiveOrder = column_order::index;
    std::vector<int32_t> perm;
    if (want != column_order::index && m_snap && m_stats && m_snap->layer >= 0 &&
        static_cast<size_t>(m_snap->layer) < m_stats->layers.size()) {
        const neuron_layer_stats& s = m_stats->layers[static_cast<size_t>(m_snap->layer)];
        perm = want == column_order::griffin ? s.order_by_griffin : s.order_by_importance;
    }
    if (!perm.empty() && m_canvas->setColumnPermutation(std::move(perm))) {
        m_effectiveOrder = want;
    } else {
        m_canvas->setColumnPermutation({});
    }
    updateTitle();
}

void ActivationsPanel::syncScaleControls() {
    const QSignalBlocker b1(m_cmap), b2(m_log), b3(m_auto), b4(m_max);
    m_cmap->setCurrentIndex(static_cast<int>(m_canvas->colormapId()));
    m_log->setChecked(m_canvas->logScale());
    m_auto->setChecked(m_canvas->autoScale());
    m_max->setValue(static_cast<double>(m_canvas->scaleMax()));
    m_max->setEnabled(!m_canvas->autoScale());
    const QSignalBlocker b5(m_mode);
    m_mode->setCurrentIndex(m_mode->findData(static_cast<int>(m_canvas->mode())));
}

void ActivationsPanel::updateLegend() {
    const bool rel = m_canvas->mode() == heatmap_mode::relative;
    m_legend->setGradient(m_canvas->colormapId(), m_canvas->scaleMin(), m_canvas->scaleMax(), m_canvas->logScale(),
                          rel ? tr("|value| / max |value| of the token row") : tr("|value|"));
    QVector<ColorLegend::Swatch> sw{{HeatmapCanvas::boundaryColor(), tr("prompt | generation boundary"), {}}};
    if (m_canvas->mode() == heatmap_mode::mask_overlay)
        sw.push_back({HeatmapCanvas::maskColor(), tr("skipped by the kernels"), HeatmapCanvas::maskHatchColor()});
    sw.push_back({HeatmapCanvas::invalidColor(), tr("NaN / Inf"), {}});
    m_legend->setSwatches(sw);
}

void ActivationsPanel::updateTitle() {
    if (!m_snap) {
        m_title->setText(m_canvas->statusMessage().isEmpty() ? tr("No activations") : m_canvas->statusMessage());
        return;
    }
    QString t = tr("Layer %1 · %2 · %3 tokens (%4 prompt) × %5")
                    .arg(m_snap->layer)
                    .arg(QString::fromUtf8(probe_name(m_snap->where).data()))
                    .arg(m_snap->n_tokens)
                    .arg(m_snap->n_prompt)
                    .arg(m_snap->width);
    if (order() != column_order::index && m_effectiveOrder == column_order::index)
        t += tr(" · %1 order unavailable for this matrix: by index").arg(QString::fromUtf8(column_order_name(order()).data()));
    if (!m_canvas->statusMessage().isEmpty()) t += QStringLiteral(" · ") + m_canvas->statusMessage();
    m_title->setText(t);
}

}  // namespace sl::views

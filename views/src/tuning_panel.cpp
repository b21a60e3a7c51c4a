// Tuning panel: method / device controls that request evaluations, and the readouts of the results.
#include "sparselens/views/tuning_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QPainter>
#include <QPushButton>
#include <QSpinBox>
#include <QStyle>
#include <QStyleOptionSlider>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "sparselens/core/methods.h"
#include "sparselens/sim/device.h"
#include "sparselens/sim/memory_map.h"
#include "sparselens/sim/shape.h"
#include "sparselens/views/model_panel.h"
#include "sparselens/views/stage_bars.h"

namespace sl::views {

namespace {

constexpr int dram_steps = 1000;

// The least MLP density a method can read, in percent: methods with a dense gate read it whole (1/3 of
// gate+up+down), GLU pruning gate and up (2/3). Below it they read exactly the floor with a null MLP,
// so the Density label says so rather than leave a 50% setting looking like 67% by surprise.
int density_floor_percent(const QString& method) {
    if (method == QLatin1String("glu")) return 67;
    for (const char* m : {"gate", "up", "cats", "chess", "chess-attn"})
        if (method == QLatin1String(m)) return 34;
    return 0;
}

QSlider* percent_slider(QWidget* parent, int lo, int value, const QString& tip) {
    auto* s = new QSlider(Qt::Horizontal, parent);
    s->setRange(lo, 100);
    s->setValue(value);
    s->setPageStep(5);
    s->setToolTip(tip);
    return s;
}

}  // namespace

MarkedSlider::MarkedSlider(QWidget* parent) : QSlider(Qt::Horizontal, parent) {}

void MarkedSlider::setMarker(int value, const QString& label) {
    m_marker = value;
    m_label = label;
    update();
}

void MarkedSlider::paintEvent(QPaintEvent* e) {
    QSlider::paintEvent(e);
    if (m_marker < minimum() || m_marker > maximum()) return;
    QStyleOptionSlider opt;
    initStyleOption(&opt);
    const QRect groove = style()->subControlRect(QStyle::CC_Slider, &opt, QStyle::SC_SliderGroove, this);
    const QRect handle = style()->subControlRect(QStyle::CC_Slider, &opt, QStyle::SC_SliderHandle, this);
    const int span = groove.width() - handle.width();
    const int x = groove.left() + handle.width() / 2 +
                  QStyle::sliderPositionFromValue(minimum(), maximum(), m_marker, span);
    QPainter p(this);
    p.setPen(QPen(QColor(200, 40, 40), 2));
    p.drawLine(x, 0, x, height());
}

TuningPanel::TuningPanel(QWidget* parent) : QWidget(parent) {
    m_method = new QComboBox(this);
    for (const std::string& n : method_names()) {
        m_method->addItem(QString::fromStdString(n));
        QString tip = QString::fromStdString(method_description(n));
        if (method_needs_calibration(n)) tip += tr(" (needs a calibration: made on the eval text when missing)");
        m_method->setItemData(m_method->count() - 1, tip, Qt::ToolTipRole);
    }
    m_method->setToolTip(tr("Sparsity method; hover an entry for its description"));
    m_density = percent_slider(this, 5, 50, tr("Target MLP density: the share of gate+up+down weights read per token (TEAL with Attention "
                                                    "at 100%: the share of all seven projections' weights, by bytes)"));
    m_split = new QCheckBox(tr("Separate d_in / d_down"), this);
    m_split->setToolTip(tr("DIP: set the gate/up input-column density and the down-column density separately"));
    m_dIn = percent_slider(this, 5, 50, tr("DIP: density of gate/up input columns (d_in)"));
    m_dDown = percent_slider(this, 5, 50, tr("DIP: density of down-projection columns (d_down)"));
    m_gamma = percent_slider(this, 0, 20, tr("DIP-CA γ: weight of units not in DRAM (1 = plain DIP, small = prefer cached units)"));
    m_densityLabel = new QLabel(this);
    m_dInLabel = new QLabel(this);
    m_dDownLabel = new QLabel(this);
    m_gammaLabel = new QLabel(this);
    for (QLabel* l : {m_densityLabel, m_dInLabel, m_dDownLabel, m_gammaLabel})
        l->setMinimumWidth(l->fontMetrics().horizontalAdvance(QStringLiteral("100%")));
    // Room for a floor ("20% → 34%") without the sliders jumping when it appears.
    m_densityLabel->setMinimumWidth(m_densityLabel->fontMetrics().horizontalAdvance(QStringLiteral("00% → 00%")));

    auto* method = new QGroupBox(tr("Method"), this);
    auto* mg = new QGridLayout(method);
    mg->addWidget(m_method, 0, 0, 1, 3);
    mg->addWidget(new QLabel(tr("Density"), this), 1, 0);
    mg->addWidget(m_density, 1, 1);
    mg->addWidget(m_densityLabel, 1, 2);
    mg->addWidget(m_split, 2, 0, 1, 3);
    mg->addWidget(new QLabel(tr("d_in"), this), 3, 0);
    mg->addWidget(m_dIn, 3, 1);
    mg->addWidget(m_dInLabel, 3, 2);
    mg->addWidget(new QLabel(tr("d_down"), this), 4, 0);
    mg->addWidget(m_dDown, 4, 1);
    mg->addWidget(m_dDownLabel, 4, 2);
    mg->addWidget(new QLabel(tr("γ"), this), 5, 0);
    mg->addWidget(m_gamma, 5, 1);
    mg->addWidget(m_gammaLabel, 5, 2);
    buildParameterControls(mg, 6);
    mg->setColumnStretch(1, 1);

    m_device = new QComboBox(this);
    // Item data: the profile's stem (what device_find, configs and sessions use); the one probe-device
    // --save wrote is shown by what it is.
    for (const std::string& d : sim::device_list()) {
        const QString stem = QString::fromStdString(d);
        m_device->addItem(stem == QLatin1String("this-machine") ? tr("this machine (measured)") : stem, stem);
    }
    m_device->setToolTip(tr("Device profile (assets/devices, or this machine once sparselens probe-device --save "
                            "measured it): DRAM, DRAM and flash bandwidth, flash page size"));
    m_dram = new MarkedSlider(this);
    m_dram->setRange(0, dram_steps);
    m_dram->setValue(dram_steps / 2);
    m_dram->setToolTip(tr("DRAM available to the model (log scale); the red mark is the whole model at this bit-width"));
    m_dramLabel = new QLabel(this);
    m_dramLabel->setMinimumWidth(m_dramLabel->fontMetrics().horizontalAdvance(QStringLiteral("000.00 MB")));
    m_flashBw = new QDoubleSpinBox(this);
    m_flashBw->setRange(0.01, 100);
    m_flashBw->setDecimals(2);
    m_flashBw->setSuffix(tr(" GB/s"));
    m_flashBw->setToolTip(tr("Flash sequential read bandwidth of the device"));
    m_dramBw = new QDoubleSpinBox(this);
    m_dramBw->setRange(0.1, 2000);
    m_dramBw->setDecimals(1);
    m_dramBw->setSuffix(tr(" GB/s"));
    m_dramBw->setToolTip(tr("DRAM bandwidth of the device"));
    m_bits = new QComboBox(this);
    for (int b : {16, 8, 4, 3, 2}) m_bits->addItem(tr("%1-bit").arg(b), b);
    m_bits->setCurrentIndex(2);
    m_bits->setToolTip(tr("Weight bit-width on the device (groups of 32 with fp16 scales below 16 bits)"));
    m_policy = new QComboBox(this);
    for (const char* p : {"lfu", "lru", "window", "none"}) m_policy->addItem(QString::fromLatin1(p));
    m_policy->setToolTip(tr("Replacement policy of the per-layer MLP weight caches in DRAM"));
    m_page = new QComboBox(this);
    for (int64_t b : {int64_t{0}, int64_t{512}, int64_t{4096}, int64_t{16384}}) m_page->addItem(formatPage(b), QVariant::fromValue(b));
    m_page->setToolTip(tr("Flash read unit (page size): every flash read is rounded up to whole pages. A unit smaller "
                          "than a page (all units of a small model such as stories260K: 136–370 bytes) costs a whole page "
                          "per scattered miss, while dense streams the weights sequentially; so with 4 KB pages a tiny "
                          "model simulates sparse methods slower than dense. Byte-exact (0) charges only the bytes read, "
                          "like the CLI's --page 0. Set from the profile when you choose one."));

    auto* device = new QGroupBox(tr("Device"), this);
    auto* dg = new QFormLayout(device);
    dg->addRow(tr("Profile"), m_device);
    auto* dramRow = new QHBoxLayout;
    dramRow->addWidget(m_dram, 1);
    dramRow->addWidget(m_dramLabel);
    dg->addRow(tr("DRAM budget"), dramRow);
    dg->addRow(tr("Flash"), m_flashBw);
    dg->addRow(tr("Flash read unit"), m_page);
    if (QWidget* l = dg->labelForField(m_page)) l->setToolTip(m_page->toolTip());
    dg->addRow(tr("DRAM bw"), m_dramBw);
    dg->addRow(tr("Weights"), m_bits);
    dg->addRow(tr("Cache policy"), m_policy);

    m_evalText = new QLabel(this);
    m_evalText->setToolTip(tr("Text the evaluation runs on (first half of each window prompt, second half scored)"));
    m_chooseText = new QPushButton(tr("Choose…"), this);
    m_chooseText->setToolTip(tr("Evaluate on another UTF-8 text file"));
    m_resetText = new QPushButton(tr("Default"), this);
    m_resetText->setToolTip(tr("Back to the built-in evaluation text"));
    m_calib = new QLabel(this);
    // The name on its own line (wrapped: a long file name must not widen the dock), the buttons below it.
    m_evalText->setWordWrap(true);
    m_evalText->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    auto* textRow = new QHBoxLayout;
    textRow->addWidget(m_chooseText);
    textRow->addWidget(m_resetText);
    textRow->addStretch(1);

    auto* results = new QGroupBox(tr("Result vs dense"), this);
    auto* rg = new QGridLayout(results);
    const QList<std::pair<QString, QString>> rows = {
        {QStringLiteral("dppl"), tr("ΔPPL")},
        {QStringLiteral("kld"), tr("KL to dense")},
        {QStringLiteral("top1"), tr("Same top token")},
        {QStringLiteral("mlp"), tr("MLP density")},
        {QStringLiteral("attn"), tr("Attention density")},
        {QStringLiteral("cpu"), tr("CPU tok/s (measured)")},
        {QStringLiteral("cpu_ratio"), tr("CPU speed vs dense")},
        {QStringLiteral("sim"), tr("Device tok/s (simulated)")},
        {QStringLiteral("sim_ratio"), tr("Device speed vs dense")},
        {QStringLiteral("hit"), tr("Cache hit rate")},
    };
    const QStringList tips = {
        tr("Perplexity of the method minus the dense model's on the scored tokens"),
        tr("Mean KL(dense ‖ method) of the next-token distributions"),
        tr("Share of scored tokens whose most likely next token equals the dense model's"),
        tr("Share of MLP weights the kernels actually read"),
        tr("Share of attention projection weights read"),
        tr("Decode speed of the method on this CPU (dense in brackets)"),
        tr("Measured CPU speed of the method divided by dense's: the median over the windows, with the "
           "quartiles in brackets (timings on a busy machine are noisy). Below ×1 (red) the method is slower "
           "than dense on this CPU"),
        tr("Simulated decode speed on the device with its flash/DRAM caches (dense baseline in brackets)"),
        tr("Simulated device speed of the method divided by dense's: below ×1 (red) dense is faster on this "
           "device, e.g. when each scattered miss reads a whole flash page (see Flash read unit)"),
        tr("Share of active MLP units found in the DRAM cache"),
    };
    for (int i = 0; i < rows.size(); ++i) {
        auto* name = new QLabel(rows[i].second, this);
        auto* value = new QLabel(QStringLiteral("–"), this);
        value->setTextInteractionFlags(Qt::TextSelectableByMouse);
        // Values change with every result: their width must not resize the dock (and with it the
        // OpenGL canvas in the middle, whose framebuffer would be reallocated each time).
        value->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
        value->setMinimumWidth(value->fontMetrics().horizontalAdvance(QStringLiteral("+0.000 (00.000 → 00.000)")));
        name->setToolTip(tips[i]);
        value->setToolTip(tips[i]);
        rg->addWidget(name, i, 0);
        rg->addWidget(value, i, 1);
        m_readouts.insert(rows[i].first, value);
    }
    const int n = int(rows.size());
    auto* stagesName = new QLabel(tr("CPU time per token"), this);
    stagesName->setToolTip(tr("Where a decoded token's time goes on this CPU, dense above the method: hover the "
                              "bars for every stage in ms"));
    rg->addWidget(stagesName, n, 0, 1, 2);
    m_stages = new StageBars(this);
    rg->addWidget(m_stages, n + 1, 0, 1, 2);
    m_status = new QLabel(this);
    m_status->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    m_status->setToolTip(tr("Full results use 8 windows of the text; while a slider moves, 2 (partial)"));
    rg->addWidget(m_status, n + 2, 0, 1, 2);
    m_save = new QPushButton(tr("Save run"), this);
    m_save->setToolTip(tr("Record this result (method, device and metrics) as a run of the session (Ctrl+S)"));
    m_save->setEnabled(false);
    rg->addWidget(m_save, n + 3, 0, 1, 2);
    connect(m_save, &QPushButton::clicked, this, &TuningPanel::saveRunRequested);

    auto* v = new QVBoxLayout(this);
    v->addWidget(method);
    v->addWidget(device);
    v->addWidget(m_evalText);
    v->addLayout(textRow);
    v->addWidget(m_calib);
    v->addWidget(results);
    v->addStretch(1);

    for (QSlider* s : {m_density, m_dIn, m_dDown, m_gamma, m_pin, m_attn, m_ffHeavy, static_cast<QSlider*>(m_dram)})
        connectSlider(s);
    connect(m_rank, &QSpinBox::valueChanged, this, [this] { onMethodChanged(); });
    connect(m_compress, &QComboBox::currentIndexChanged, this, [this] { onMethodChanged(); });
    connect(m_method, &QComboBox::currentIndexChanged, this, [this] { onMethodChanged(); });
    connect(m_split, &QCheckBox::toggled, this, [this] { onMethodChanged(); });
    connect(m_device, &QComboBox::currentIndexChanged, this, [this] { onDeviceChanged(); });
    connect(m_bits, &QComboBox::currentIndexChanged, this, [this] {
        updateDramRange();
        requestFull();
    });
    connect(m_policy, &QComboBox::currentIndexChanged, this, [this] { requestFull(); });
    connect(m_page, &QComboBox::currentIndexChanged, this, [this] { requestFull(); });
    for (QDoubleSpinBox* s : {m_flashBw, m_dramBw})
        connect(s, &QDoubleSpinBox::valueChanged, this, [this] { requestFull(); });
    connect(m_chooseText, &QPushButton::clicked, this, &TuningPanel::evalTextChangeRequested);
    connect(m_resetText, &QPushButton::clicked, this, &TuningPanel::evalTextResetRequested);

    m_updating = true;
    onDeviceChanged();
    m_updating = false;
    onMethodChanged();
    setCalibrated(false);
}

// Pinning, attention density, rank and FFSplit's split and compression: rows `row`.. of the Method grid.
void TuningPanel::buildParameterControls(QGridLayout* grid, int row) {
    m_pin = percent_slider(this, 0, 0, tr("Heavy-hitter pinning (dip, dip-ca, cats, chess, chess-attn): this share of "
                                          "each layer's neurons, the calibration's heavy hitters, is always computed; "
                                          "they come out of the method's budget. Marked on the Neurons chart."));
    m_pin->setMaximum(50);
    m_attn = percent_slider(this, 5, 100, tr("Density of the attention projections' inputs. CHESS w/ (chess-attn): the q "
                                             "and o inputs; 100% = the MLP's keep, as in the paper. TEAL (teal, "
                                             "teal-uniform): below 100%, q/k/v/o get this budget of their own and Density "
                                             "covers the MLP alone; 100% = one budget over all seven projections (the "
                                             "paper's), Density then being the whole layer's."));
    m_rank = new QSpinBox(this);
    m_rank->setRange(0, 1 << 16);
    m_rank->setSpecialValueText(tr("auto"));
    m_rank->setToolTip(tr("SparseLLM: rank of the SVD predictor (auto: dim / 8). FFSplit svd: rank of the light "
                          "neurons' factors (auto: the largest rank whose bytes fit the density)"));
    m_ffHeavy = percent_slider(this, 0, 10, tr("FFSplit: share of each layer's neurons kept exact (the calibration's "
                                               "heavy hitters); the rest is compressed. Marked on the Neurons chart."));
    m_ffHeavy->setMaximum(100);
    m_compress = new QComboBox(this);
    m_compress->addItem(QStringLiteral("svd"));
    m_compress->addItem(QStringLiteral("q4"));
    m_compress->setItemData(0, tr("Light neurons as a rank-r SVD: two small GEMVs per matrix"), Qt::ToolTipRole);
    m_compress->setItemData(1, tr("Light neurons' rows and down columns in Q4_0"), Qt::ToolTipRole);
    m_compress->setToolTip(tr("FFSplit: how the light (non-heavy) neurons are compressed"));
    m_pinLabel = new QLabel(this);
    m_attnLabel = new QLabel(this);
    m_ffHeavyLabel = new QLabel(this);
    for (QLabel* l : {m_pinLabel, m_attnLabel, m_ffHeavyLabel})
        l->setMinimumWidth(l->fontMetrics().horizontalAdvance(QStringLiteral("100%")));
    const QList<std::tuple<QString, QWidget*, QLabel*>> rows = {
        {tr("Pinned"), m_pin, m_pinLabel},
        {tr("Attention"), m_attn, m_attnLabel},
        {tr("Rank"), m_rank, nullptr},
        {tr("FFSplit exact"), m_ffHeavy, m_ffHeavyLabel},
        {tr("Compression"), m_compress, nullptr},
    };
    for (const auto& [name, control, value] : rows) {
        auto* label = new QLabel(name, this);
        label->setToolTip(control->toolTip());
        grid->addWidget(label, row, 0);
        grid->addWidget(control, row, 1, 1, value ? 1 : 2);
        if (value) grid->addWidget(value, row, 2);
        ++row;
    }
}

void TuningPanel::connectSlider(QSlider* s) {
    // While dragged: partial evaluations; on release (or keyboard / wheel steps): a full one.
    connect(s, &QSlider::valueChanged, this, [this, s] {
        updateLabels();
        if (m_updating || !m_card) return;
        emit evaluationRequested(s->isSliderDown());
    });
    connect(s, &QSlider::sliderReleased, this, [this] { requestFull(); });
}

void TuningPanel::requestFull() {
    updateLabels();
    if (!m_updating && m_card) emit evaluationRequested(false);
}

void TuningPanel::onMethodChanged() {
    const QString name = m_method->currentText();
    const sl::method_knob_use use = sl::method_knobs_read(name.toStdString());
    const bool dip = use.d_split;
    m_density->setEnabled(name != QLatin1String("dense") && !(dip && m_split->isChecked()));
    m_split->setEnabled(dip);
    m_dIn->setEnabled(dip && m_split->isChecked());
    m_dDown->setEnabled(dip && m_split->isChecked());
    m_gamma->setEnabled(use.gamma);
    const bool ffsplit = use.ffsplit;
    const bool svd = ffsplit && m_compress->currentText() == QLatin1String("svd");
    m_pin->setEnabled(use.pin);
    m_attn->setEnabled(use.attn);
    m_rank->setEnabled(use.rank && (!ffsplit || svd));  // FFSplit's q4 compression has no rank
    m_ffHeavy->setEnabled(ffsplit);
    m_compress->setEnabled(ffsplit);
    // FFSplit reads the density only to choose its svd rank.
    if (ffsplit) m_density->setEnabled(svd && m_rank->value() == 0);
    syncSplitSliders();
    updateDramRange();  // DIP methods cache other units: same bytes, but keep one place for the range
    requestFull();
}

// Without a split, DIP reads d_in = d_down = density: the (disabled) sliders show those values.
void TuningPanel::syncSplitSliders() {
    if (m_split->isChecked() && m_split->isEnabled()) return;
    const bool was = m_updating;
    m_updating = true;
    m_dIn->setValue(m_density->value());
    m_dDown->setValue(m_density->value());
    m_updating = was;
}

QString TuningPanel::formatPage(int64_t bytes) {
    if (bytes <= 1) return tr("byte-exact");
    if (bytes % 1024 == 0) return tr("%1 KB pages").arg(bytes / 1024);
    return tr("%1 B pages").arg(bytes);
}

void TuningPanel::setFlashPage(int64_t bytes) {
    bytes = std::max<int64_t>(0, bytes == 1 ? 0 : bytes);
    int i = m_page->findData(QVariant::fromValue(bytes));
    if (i < 0) {
        m_page->addItem(formatPage(bytes), QVariant::fromValue(bytes));
        i = m_page->count() - 1;
    }
    m_page->setCurrentIndex(i);
}

int64_t TuningPanel::flashPageBytes() const { return m_page->currentData().value<int64_t>(); }

void TuningPanel::onDeviceChanged() {
    auto d = sim::device_find(m_device->currentData().toString().toStdString());
    if (d) {
        const bool was = m_updating;
        m_updating = true;
        m_flashBw->setValue(d->flash_bandwidth / 1e9);
        m_dramBw->setValue(d->dram_bandwidth / 1e9);
        setFlashPage(d->flash_page_bytes);
        m_updating = was;
        m_dram->setToolTip(tr("DRAM available to the model (log scale); %1 has %2. The red mark is the whole "
                              "model at this bit-width.")
                               .arg(QString::fromStdString(d->display_name), formatBytes(double(d->dram_bytes))));
    }
    updateDramRange();
    emit deviceProfileChanged(m_device->currentData().toString());
    requestFull();
}

void TuningPanel::updateDramRange() {
    if (!m_card) {
        updateLabels();
        return;
    }
    const uint64_t keep = dramBytes();
    const bool had = m_dramHi > m_dramLo && m_dram->property("sized").toBool();
    model_hparams hp{m_card->dim, m_card->hidden_dim, m_card->n_layers, m_card->n_heads, m_card->n_kv_heads,
                     m_card->vocab_size, m_card->seq_len};
    hp.head_width = m_card->head_dim;
    const sim::model_shape shape = sim::shape_from_hparams(hp, m_card->tied_embeddings, m_card->name);
    const uint32_t ctx = static_cast<uint32_t>(std::clamp(m_card->seq_len, 1, 1024));
    auto layout = sim::layout_parse("bundle");
    auto mm = sim::memory_map_build(shape, sim::quant_default(static_cast<uint32_t>(m_bits->currentData().toInt())),
                                    layout.value(), ctx);
    if (!mm) return;
    // From "only the resident part fits" (no MLP cache) to well past "the whole model fits"; the
    // marker is the whole model: resident part (attention, embeddings, KV cache) plus every MLP unit.
    const double resident = double(mm->resident_bytes());
    const double total = resident + double(mm->mlp_dynamic_bytes);
    m_dramLo = resident * 0.9;
    m_dramHi = total * 1.5;
    const bool was = m_updating;
    m_updating = true;
    auto to_pos = [&](double bytes) {
        return static_cast<int>(std::lround(dram_steps * std::log(bytes / m_dramLo) / std::log(m_dramHi / m_dramLo)));
    };
    m_dram->setMarker(to_pos(total), tr("model"));
    double value = double(keep);
    if (!had) {
        // A device far larger than the model would make the cache irrelevant: start with half of the
        // MLP cached.
        auto d = sim::device_find(m_device->currentData().toString().toStdString());
        value = d && double(d->dram_bytes) < total ? double(d->dram_bytes) : resident + double(mm->mlp_dynamic_bytes) / 2;
        m_dram->setProperty("sized", true);
    }
    m_dram->setValue(std::clamp(to_pos(std::clamp(value, m_dramLo, m_dramHi)), 0, dram_steps));
    m_updating = was;
    updateLabels();
}

uint64_t TuningPanel::dramBytes() const {
    const double t = double(m_dram->value()) / dram_steps;
    return static_cast<uint64_t>(m_dramLo * std::pow(m_dramHi / m_dramLo, t));
}

void TuningPanel::updateLabels() {
    syncSplitSliders();
    const int floor = density_floor_percent(m_method->currentText());
    m_densityLabel->setText(m_density->isEnabled() && m_density->value() < floor
                                ? tr("%1% → %2%").arg(m_density->value()).arg(floor)
                                : QStringLiteral("%1%").arg(m_density->value()));
    m_densityLabel->setToolTip(floor > 0 ? tr("%1 computes part of the MLP densely: it reads at least %2% of the MLP "
                                              "weights; below that its sparse part is empty")
                                               .arg(m_method->currentText())
                                               .arg(floor)
                                         : QString());
    // d_in / d_down mean something only for DIP; without a split they follow Density.
    const bool dip = m_split->isEnabled();
    m_dInLabel->setText(dip ? QStringLiteral("%1%").arg(m_dIn->value()) : QStringLiteral("–"));
    m_dDownLabel->setText(dip ? QStringLiteral("%1%").arg(m_dDown->value()) : QStringLiteral("–"));
    m_gammaLabel->setText(m_gamma->isEnabled() ? QString::number(m_gamma->value() / 100.0, 'f', 2) : QStringLiteral("–"));
    // Shares with the neuron count they select on the loaded model (as the engine rounds them).
    auto share = [&](QSlider* s) {
        if (!s->isEnabled()) return QStringLiteral("–");
        const QString pct = QStringLiteral("%1%").arg(s->value());
        return m_card ? tr("%1 · %2").arg(pct).arg(density_to_k(s->value() / 100.0f, m_card->hidden_dim)) : pct;
    };
    m_pinLabel->setText(share(m_pin));
    m_ffHeavyLabel->setText(share(m_ffHeavy));
    // 100% is each method's own rule: CHESS the MLP's keep, TEAL one budget for the whole layer.
    const bool teal = m_method->currentText().startsWith(QLatin1String("teal"));
    m_attnLabel->setText(!m_attn->isEnabled() ? QStringLiteral("–")
                         : m_attn->value() < 100 ? QStringLiteral("%1%").arg(m_attn->value())
                         : teal                  ? tr("joint")
                                                 : tr("= MLP"));
    m_dramLabel->setText(m_card ? formatBytes(double(dramBytes())) : QStringLiteral("–"));
}

method_config TuningPanel::methodKnobs() const {
    method_config c = method_default_config();
    c.name = m_method->currentText().toStdString();
    c.density = c.name == "dense" ? 1.0f : m_density->value() / 100.0f;
    if (m_split->isChecked() && m_split->isEnabled()) {
        c.d_in = m_dIn->value() / 100.0f;
        c.d_down = m_dDown->value() / 100.0f;
        // The MLP density DIP reads with these: (2 d_in + d_down) / 3 over gate, up, down.
        c.density = (2 * c.d_in + c.d_down) / 3;
    }
    c.gamma = m_gamma->value() / 100.0f;
    c.pin_fraction = m_pin->value() / 100.0f;
    c.attn_density = m_attn->value() < 100 ? m_attn->value() / 100.0f : 1.0f;
    c.rank = m_rank->value();
    c.ffsplit_heavy = m_ffHeavy->value() / 100.0f;
    c.ffsplit_mode = m_compress->currentText().toStdString();
    return c;
}

method_config TuningPanel::methodConfig() const {
    method_config c = methodKnobs();
    // The knobs the current method does not read are the ones whose sliders are disabled.
    if (!m_pin->isEnabled()) c.pin_fraction = 0.0f;
    if (!m_attn->isEnabled()) c.attn_density = 1.0f;
    if (!m_rank->isEnabled()) c.rank = 0;
    return c;
}

void TuningPanel::setMethodConfig(const method_config& c) {
    m_updating = true;
    const int i = m_method->findText(QString::fromStdString(c.name));
    if (i >= 0) m_method->setCurrentIndex(i);
    m_density->setValue(std::clamp(static_cast<int>(std::lround(c.density * 100)), 5, 100));
    const bool split = c.d_in >= 0 || c.d_down >= 0;
    m_split->setChecked(split);
    if (c.d_in >= 0) m_dIn->setValue(static_cast<int>(std::lround(c.d_in * 100)));
    if (c.d_down >= 0) m_dDown->setValue(static_cast<int>(std::lround(c.d_down * 100)));
    m_gamma->setValue(static_cast<int>(std::lround(c.gamma * 100)));
    m_pin->setValue(static_cast<int>(std::lround(c.pin_fraction * 100)));
    m_attn->setValue(std::clamp(static_cast<int>(std::lround(c.attn_density * 100)), 5, 100));
    m_rank->setValue(std::max(0, c.rank));
    m_ffHeavy->setValue(static_cast<int>(std::lround(c.ffsplit_heavy * 100)));
    if (const int k = m_compress->findText(QString::fromStdString(c.ffsplit_mode)); k >= 0) m_compress->setCurrentIndex(k);
    m_updating = false;
    onMethodChanged();
}

device_settings TuningPanel::deviceSettings() const {
    device_settings d;
    d.device = m_device->currentData().toString().toStdString();
    d.dram_bytes = m_card ? dramBytes() : 0;
    d.flash_bandwidth = m_flashBw->value() * 1e9;
    d.dram_bandwidth = m_dramBw->value() * 1e9;
    d.bits = static_cast<uint32_t>(m_bits->currentData().toInt());
    d.policy = m_policy->currentText().toStdString();
    d.flash_page_bytes = flashPageBytes();
    return d;
}

void TuningPanel::setDeviceSettings(const device_settings& d) {
    const bool was = m_updating;
    m_updating = true;
    const int i = m_device->findData(QString::fromStdString(d.device));
    if (i >= 0) m_device->setCurrentIndex(i);  // resets the bandwidths to the profile's; the config's follow
    if (d.flash_bandwidth > 0) m_flashBw->setValue(d.flash_bandwidth / 1e9);
    if (d.dram_bandwidth > 0) m_dramBw->setValue(d.dram_bandwidth / 1e9);
    if (const int b = m_bits->findData(static_cast<int>(d.bits)); b >= 0) m_bits->setCurrentIndex(b);
    if (const int p = m_policy->findText(QString::fromStdString(d.policy)); p >= 0) m_policy->setCurrentIndex(p);
    if (d.flash_page_bytes >= 0) setFlashPage(d.flash_page_bytes);
    updateDramRange();
    if (m_card && d.dram_bytes > 0) {
        const double pos = dram_steps * std::log(double(d.dram_bytes) / m_dramLo) / std::log(m_dramHi / m_dramLo);
        m_dram->setValue(std::clamp(static_cast<int>(std::lround(pos)), 0, dram_steps));
        m_dram->setProperty("sized", true);
    }
    m_updating = was;
    updateLabels();
}

QString TuningPanel::deviceProfile() const { return m_device->currentData().toString(); }

void TuningPanel::setDeviceProfile(const QString& name) {
    const int i = m_device->findData(name);
    if (i >= 0) m_device->setCurrentIndex(i);
}

evaluate_request TuningPanel::request(bool partial) const {
    evaluate_request r;
    r.method = methodConfig();
    r.device = deviceSettings();
    r.windows = partial ? partialWindows : fullWindows;
    r.partial = partial;
    return r;
}

void TuningPanel::setModelCard(std::shared_ptr<const model_card> card) {
    m_card = std::move(card);
    m_last.reset();
    m_save->setEnabled(false);
    m_dram->setProperty("sized", false);
    for (QLabel* l : m_readouts) {
        l->setText(QStringLiteral("–"));
        l->setStyleSheet(QString());
    }
    m_updating = true;
    updateDramRange();
    m_updating = false;
    setCalibrated(m_card && m_card->has_calibration);
}

void TuningPanel::setEvalTextName(const QString& name) { m_evalText->setText(tr("Eval text: %1").arg(name)); }

void TuningPanel::setCalibrated(bool present) {
    m_calib->setText(present ? tr("Calibration: loaded") : tr("Calibration: none yet"));
    m_calib->setToolTip(tr("CATS, CHESS, TEAL, GRIFFIN, FFSplit… need activation statistics; they are recorded "
                           "on the evaluation text the first time such a method is chosen"));
}

QString TuningPanel::readout(const QString& key) const {
    const QLabel* l = m_readouts.value(key);
    return l ? l->text() : QString();
}

void TuningPanel::showResult(std::shared_ptr<const tuning_result> r) {
    if (!r) return;
    m_last = r;
    m_save->setEnabled(!r->partial);
    const eval_result& e = r->eval;
    auto set = [&](const char* key, const QString& text) { m_readouts[QLatin1String(key)]->setText(text); };
    // Three decimals while they mean something; a broken method's perplexity in the thousands keeps one,
    // so the line still fits the dock.
    auto ppl = [](double v) { return QString::number(v, 'f', std::abs(v) >= 100 ? 1 : 3); };
    set("dppl", QStringLiteral("%1%2 (%3 → %4)")
                    .arg(e.ppl >= e.ppl_dense ? QStringLiteral("+") : QString(), ppl(e.ppl - e.ppl_dense),
                         ppl(e.ppl_dense), ppl(e.ppl)));
    set("kld", QString::number(e.kld_mean, 'f', 4));
    set("top1", QStringLiteral("%1%").arg(100 * e.top1_agreement, 0, 'f', 1));
    set("mlp", QStringLiteral("%1%").arg(100 * e.mlp_density, 0, 'f', 1));
    set("attn", QStringLiteral("%1%").arg(100 * e.attn_density, 0, 'f', 1));
    const QLocale loc;
    auto speed = [&](double v) { return loc.toString(v, 'f', 0); };
    const bool dense = r->config.name == "dense";
    if (dense) {
        // One measurement of one computation: shown once, as the baseline, never as a difference.
        set("cpu", tr("%1 (the dense baseline)").arg(speed(e.dense_decode_tokens_per_second)));
        set("sim", tr("%1 (the dense baseline)").arg(speed(r->sim_dense_tokens_per_s)));
    } else {
        set("cpu", tr("%1 (dense %2)").arg(speed(e.decode_tokens_per_second), speed(e.dense_decode_tokens_per_second)));
        set("sim", tr("%1 (dense %2)").arg(speed(r->sim_tokens_per_s), speed(r->sim_dense_tokens_per_s)));
    }
    // The ratio says outright when dense wins, rather than leaving it to a comparison of two numbers.
    // spread: the CPU's per-window quartiles (a noisy machine shows it), empty for the simulator.
    auto ratio = [&](const char* key, double x, const QString& spread) {
        QLabel* l = m_readouts[QLatin1String(key)];
        if (dense || !(x > 0)) {
            l->setText(dense ? tr("×1.00 (dense)") : QStringLiteral("–"));
            l->setStyleSheet(QString());
            return;
        }
        const QString v = x < 0.095 ? QString::number(x, 'f', 3) : QString::number(x, 'f', 2);
        // With the spread the line is kept short enough for the dock (the row's name says "vs dense").
        if (!spread.isEmpty())
            l->setText(tr("×%1%2").arg(v, spread) + (x < 1.0 ? tr(" slower") : QString()));
        else
            l->setText(x < 1.0 ? tr("×%1 — dense is faster").arg(v) : tr("×%1 vs dense").arg(v));
        l->setStyleSheet(x < 1.0 ? QStringLiteral("color: #c62828; font-weight: bold;")
                                 : QStringLiteral("color: #2e7d32; font-weight: bold;"));
    };
    const bool perWindow = e.speed_ratio_median > 0 && e.speed_ratio_p75 > e.speed_ratio_p25;
    const double cpuRatio = perWindow ? e.speed_ratio_median
                            : e.dense_decode_tokens_per_second > 0 ? e.decode_tokens_per_second / e.dense_decode_tokens_per_second
                                                                   : 0.0;
    ratio("cpu_ratio", cpuRatio,
          perWindow ? tr(" (%1–%2)").arg(e.speed_ratio_p25, 0, 'f', 2).arg(e.speed_ratio_p75, 0, 'f', 2) : QString());
    ratio("sim_ratio", r->sim_dense_tokens_per_s > 0 ? r->sim_tokens_per_s / r->sim_dense_tokens_per_s : 0.0, QString());
    m_stages->setTimes(e.dense_stages, e.stages, QString::fromStdString(r->config.name), dense, e.dense_stage_bytes,
                       e.stage_bytes);
    set("hit", dense ? tr("– (dense reads every weight)") : QStringLiteral("%1%").arg(100 * r->sim_hit_rate, 0, 'f', 1));
    m_status->setText(tr("%1 · %2 · %3 scored tokens · %4 ms")
                          .arg(QString::fromStdString(r->config.name),
                               r->partial ? tr("partial (dragging)") : tr("full"))
                          .arg(e.n_scored)
                          .arg(r->seconds * 1000, 0, 'f', 0));
}

}  // namespace sl::views

// Prompt & output panel: controls, streamed token text with per-token colouring, hover and legend.
#include "sparselens/views/prompt_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSpinBox>
#include <QTextBlock>
#include <QTextCursor>
#include <QTextEdit>
#include <QToolTip>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "sparselens/views/engine_controller.h"

namespace sl::views {

namespace {

// White -> amber -> red: black text stays readable on every value.
QColor ramp(double t) {
    t = std::clamp(t, 0.0, 1.0);
    const QColor a(255, 255, 255), b(255, 196, 110), c(225, 70, 55);
    auto mix = [](const QColor& x, const QColor& y, double u) {
        return QColor::fromRgbF(float(x.redF() + (y.redF() - x.redF()) * u), float(x.greenF() + (y.greenF() - x.greenF()) * u),
                                float(x.blueF() + (y.blueF() - x.blueF()) * u));
    };
    return t < 0.5 ? mix(a, b, t * 2) : mix(b, c, (t - 0.5) * 2);
}

// Where a value sits on its colour scale, or NaN when the token has no such value.
double scale_position(PromptPanel::ColorBy by, const token_event& e) {
    switch (by) {
        case PromptPanel::ColorBy::Kld:  // log scale, 0.001 .. 1 nat
            if (e.kld_to_dense < 0) return std::nan("");
            return (std::log10(std::max(e.kld_to_dense, 1e-3f)) + 3.0) / 3.0;
        case PromptPanel::ColorBy::MlpDensity:
            return std::isfinite(e.mlp_density) ? e.mlp_density : std::nan("");
        case PromptPanel::ColorBy::LogProb:  // -log p, 0 .. 10 nats
            return std::isfinite(e.logprob) ? -e.logprob / 10.0 : std::nan("");
        case PromptPanel::ColorBy::None: break;
    }
    return std::nan("");
}

}  // namespace

// The colour scale of the output text: the ramp with its end labels.
class TokenLegend : public QWidget {
public:
    explicit TokenLegend(QWidget* parent) : QWidget(parent) { setMinimumSize(160, 18); }
    void setLabels(const QString& lo, const QString& hi) {
        m_lo = lo;
        m_hi = hi;
        setVisible(!lo.isEmpty());
        update();
    }
    QSize sizeHint() const override { return {220, 20}; }

protected:
    void paintEvent(QPaintEvent*) override {
        QPainter p(this);
        const QFontMetrics fm = fontMetrics();
        const int lw = fm.horizontalAdvance(m_lo) + 6, rw = fm.horizontalAdvance(m_hi) + 6;
        const QRect bar(lw, 3, std::max(10, width() - lw - rw), height() - 6);
        QLinearGradient g(bar.topLeft(), bar.topRight());
        for (int i = 0; i <= 10; ++i) g.setColorAt(i / 10.0, ramp(i / 10.0));
        p.fillRect(bar, g);
        p.setPen(palette().color(QPalette::Mid));
        p.drawRect(bar.adjusted(0, 0, -1, -1));
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(QRect(0, 0, lw, height()), Qt::AlignVCenter | Qt::AlignLeft, m_lo);
        p.drawText(QRect(bar.right() + 4, 0, rw, height()), Qt::AlignVCenter | Qt::AlignLeft, m_hi);
    }

private:
    QString m_lo, m_hi;
};

PromptPanel::PromptPanel(QWidget* parent) : QWidget(parent) {
    m_examples = new QComboBox(this);
    m_examples->addItems(EngineController::defaultPrompts());
    m_examples->setToolTip(tr("Example prompts (assets/prompts/default.txt): pick one to put it in the editor"));
    m_examples->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);  // long prompts: no wide dock
    m_examples->setMinimumContentsLength(18);
    m_prompt = new QPlainTextEdit(this);
    m_prompt->setPlainText(m_examples->itemText(0));
    m_prompt->setToolTip(tr("Prompt text; the model continues it (Ctrl+Return generates)"));
    {
        // At most three lines (it scrolls beyond): the output below gets the rest of the dock.
        const int frame = 2 * m_prompt->frameWidth() + static_cast<int>(2 * m_prompt->document()->documentMargin());
        m_prompt->setMaximumHeight(3 * m_prompt->fontMetrics().lineSpacing() + frame);
        m_prompt->setMinimumHeight(m_prompt->fontMetrics().lineSpacing() + frame);
        m_prompt->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Maximum);
    }
    m_prompt->setTabChangesFocus(true);

    m_steps = new QSpinBox(this);
    m_steps->setRange(1, 1 << 20);
    m_steps->setValue(256);
    m_steps->setToolTip(tr("Positions in total, counting BOS and the prompt (llama2.c run semantics)"));
    m_temp = new QDoubleSpinBox(this);
    m_temp->setRange(0.0, 2.0);
    m_temp->setSingleStep(0.1);
    m_temp->setValue(0.8);
    m_temp->setToolTip(tr("Sampling temperature; 0 is greedy (deterministic)"));
    m_seed = new QSpinBox(this);
    m_seed->setRange(0, 1 << 30);
    m_seed->setToolTip(tr("Random seed of the sampler (0: a fixed default); the same seed repeats the text"));
    m_generate = new QPushButton(tr("Generate"), this);
    m_generate->setToolTip(tr("Generate with the method and device set in the Tuning panel (Ctrl+Return)"));
    m_generate->setEnabled(false);
    m_stop = new QPushButton(tr("Stop"), this);
    m_stop->setToolTip(tr("Stop the generation and keep what it produced (Esc)"));
    m_stop->setEnabled(false);
    m_chat = new QCheckBox(tr("Chat format"), this);
    m_chat->setToolTip(tr("Wrap the prompt as a user turn in the model's chat format (Llama-3, ChatML, Phi-3, "
                          "Gemma or Mistral [INST], recognised from its chat template)"));
    m_live = new QCheckBox(tr("Regenerate on tuning changes"), this);
    m_live->setChecked(true);
    m_live->setToolTip(tr("Run the prompt again whenever a tuning control settles (slider released), so the "
                          "text shows the effect of the method"));

    auto* controls = new QHBoxLayout;
    controls->addWidget(m_examples, 1);  // beside the sampling controls: one row less above the output
    controls->addSpacing(8);
    auto* form = new QFormLayout;
    form->addRow(tr("Steps"), m_steps);
    auto* form2 = new QFormLayout;
    form2->addRow(tr("Temperature"), m_temp);
    auto* form3 = new QFormLayout;
    form3->addRow(tr("Seed"), m_seed);
    controls->addLayout(form);
    controls->addLayout(form2);
    controls->addLayout(form3);
    controls->addSpacing(8);
    controls->addWidget(m_generate);
    controls->addWidget(m_stop);

    m_color = new QComboBox(this);
    m_color->addItem(tr("No colouring"));
    m_color->addItem(tr("KL to dense"));
    m_color->addItem(tr("MLP density"));
    m_color->addItem(tr("Surprise (−log p)"));
    m_color->setCurrentIndex(static_cast<int>(m_colorBy));
    m_color->setToolTip(tr("Colour each token by the KL divergence of the method's next-token distribution to the "
                           "dense model's, by the MLP weights read for it, or by how unlikely it was"));
    m_legend = new TokenLegend(this);
    m_legend->setToolTip(tr("Colour scale of the output text"));
    auto* colour = new QHBoxLayout;
    colour->addWidget(new QLabel(tr("Colour by"), this));
    colour->addWidget(m_color);
    colour->addWidget(m_legend, 1);
    colour->addWidget(m_chat);
    colour->addWidget(m_live);

    m_output = new QTextEdit(this);
    m_output->setReadOnly(true);
    m_output->setMouseTracking(true);
    m_output->viewport()->setMouseTracking(true);
    m_output->viewport()->installEventFilter(this);
    m_output->setToolTip(QString());
    m_output->setPlaceholderText(tr("Generated text appears here; hover a token to see it in the Activations view"));
    m_stats = new QLabel(this);
    m_stats->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // its text must not resize the dock
    m_stats->setToolTip(tr("Measured decode speed on this CPU and the simulated device's speed and cache hit rate"));
    m_stats->setTextInteractionFlags(Qt::TextSelectableByMouse);

    m_output->setMinimumHeight(3 * m_output->fontMetrics().lineSpacing());
    auto* v = new QVBoxLayout(this);
    v->setContentsMargins(6, 4, 6, 4);
    v->setSpacing(4);
    v->addLayout(controls);
    v->addWidget(m_prompt);
    v->addLayout(colour);
    v->addWidget(m_output, 1);
    v->addWidget(m_stats);
    updateLegend();

    connect(m_examples, &QComboBox::activated, this, [this](int i) { m_prompt->setPlainText(m_examples->itemText(i)); });
    connect(m_generate, &QPushButton::clicked, this, &PromptPanel::generateRequested);
    connect(m_stop, &QPushButton::clicked, this, &PromptPanel::stopRequested);
    connect(m_color, &QComboBox::currentIndexChanged, this, [this](int i) { setColorBy(static_cast<ColorBy>(i)); });
}

QString PromptPanel::prompt() const { return m_prompt->toPlainText(); }
void PromptPanel::setPrompt(const QString& text) { m_prompt->setPlainText(text); }
int PromptPanel::steps() const { return m_steps->value(); }
void PromptPanel::setSteps(int n) { m_steps->setValue(n); }
float PromptPanel::temperature() const { return static_cast<float>(m_temp->value()); }
void PromptPanel::setTemperature(float t) { m_temp->setValue(t); }
quint64 PromptPanel::seed() const { return static_cast<quint64>(m_seed->value()); }
bool PromptPanel::regenerateOnTuning() const { return m_live->isChecked(); }
bool PromptPanel::chatFormat() const { return m_chat->isChecked(); }

void PromptPanel::setMaxSteps(int n) {
    m_steps->setMaximum(std::max(1, n));
    m_generate->setEnabled(true);
}

void PromptPanel::setGenerating(bool on) {
    m_stop->setEnabled(on);
}

void PromptPanel::beginOutput(generation_id gen) {
    m_gen = gen;
    m_tokens.clear();
    m_starts.clear();
    m_hovered = m_highlighted = -1;
    m_output->clear();
    m_stats->setText(tr("generating…"));
}

void PromptPanel::appendTokens(const std::vector<token_event>& batch) {
    QScrollBar* bar = m_output->verticalScrollBar();
    const bool at_end = bar->value() >= bar->maximum() - 4;
    for (const token_event& e : batch) {
        if (e.generation != m_gen) continue;  // from an older run
        m_tokens.push_back(e);
        appendOne(e);
    }
    if (at_end) bar->setValue(bar->maximum());
}

void PromptPanel::appendOne(const token_event& e) {
    QTextCursor c(m_output->document());
    c.movePosition(QTextCursor::End);
    m_starts.push_back(c.position());
    QTextCharFormat f;
    const QColor bg = tokenColor(e);
    if (bg.isValid()) f.setBackground(bg);
    if (e.in_prompt) f.setFontWeight(QFont::Bold);
    c.insertText(QString::fromUtf8(e.piece.data(), static_cast<qsizetype>(e.piece.size())), f);
}

void PromptPanel::render() {
    m_output->clear();
    m_starts.clear();
    for (const token_event& e : m_tokens) appendOne(e);
    if (m_highlighted >= 0) highlightToken(m_highlighted);
}

void PromptPanel::finishOutput(const generation_stats& s) {
    if (s.generation != m_gen) return;
    QString text = tr("%1 tokens, %2 tok/s on this CPU").arg(s.n_tokens).arg(s.decode_tokens_per_s, 0, 'f', 0);
    text += tr(" · simulated device %1 tok/s, hit rate %2%")
                .arg(s.sim_tokens_per_s, 0, 'f', 1)
                .arg(100 * s.sim_hit_rate, 0, 'f', 1);
    if (s.mean_kld >= 0) text += tr(" · mean KL to dense %1").arg(s.mean_kld, 0, 'f', 4);
    if (s.model_weights > 0)  // layouts in, replaced matrices out (docs/methods.md)
        text += tr(" · weights in RAM %1 MiB (%2× the model's)")
                    .arg(static_cast<double>(s.weights_in_ram) / (1 << 20), 0, 'f', 1)
                    .arg(static_cast<double>(s.weights_in_ram) / static_cast<double>(s.model_weights), 0, 'f', 2);
    if (s.stopped) text += tr(" · stopped");
    else if (!s.stop_reason.empty()) text += tr(" · ended: %1").arg(QString::fromStdString(s.stop_reason));
    m_stats->setText(text);
}

QColor PromptPanel::tokenColor(const token_event& e) const {
    const double t = scale_position(m_colorBy, e);
    return std::isnan(t) ? QColor() : ramp(t);
}

void PromptPanel::setColorBy(ColorBy c) {
    m_colorBy = c;
    if (m_color->currentIndex() != static_cast<int>(c)) m_color->setCurrentIndex(static_cast<int>(c));
    updateLegend();
    render();
}

void PromptPanel::updateLegend() {
    switch (m_colorBy) {
        case ColorBy::Kld: m_legend->setLabels(tr("KL ≤0.001"), tr("≥1 nat")); break;
        case ColorBy::MlpDensity: m_legend->setLabels(tr("density 0"), tr("1")); break;
        case ColorBy::LogProb: m_legend->setLabels(tr("−log p 0"), tr("≥10")); break;
        case ColorBy::None: m_legend->setLabels({}, {}); break;
    }
}

QString PromptPanel::outputText() const { return m_output->toPlainText(); }

int PromptPanel::tokenAtCharacter(int offset) const {
    if (m_starts.empty() || offset < 0) return -1;
    auto it = std::upper_bound(m_starts.begin(), m_starts.end(), offset);
    if (it == m_starts.begin()) return -1;
    const size_t i = static_cast<size_t>(it - m_starts.begin()) - 1;
    const int end = i + 1 < m_starts.size() ? m_starts[i + 1] : m_output->document()->characterCount() - 1;
    return offset < end ? m_tokens[i].pos : -1;
}

void PromptPanel::highlightToken(int pos) {
    // An extra selection marks the token without touching the colouring.
    m_highlighted = pos;
    QList<QTextEdit::ExtraSelection> sel;
    for (size_t i = 0; i < m_tokens.size(); ++i) {
        if (m_tokens[i].pos != pos) continue;
        QTextEdit::ExtraSelection s;
        s.cursor = QTextCursor(m_output->document());
        s.cursor.setPosition(m_starts[i]);
        const int end = i + 1 < m_starts.size() ? m_starts[i + 1] : m_output->document()->characterCount() - 1;
        s.cursor.setPosition(end, QTextCursor::KeepAnchor);
        s.format.setUnderlineStyle(QTextCharFormat::SingleUnderline);
        s.format.setUnderlineColor(palette().color(QPalette::Highlight));
        s.format.setFontUnderline(true);
        s.format.setForeground(palette().color(QPalette::Highlight));
        sel << s;
        break;
    }
    m_output->setExtraSelections(sel);
}

bool PromptPanel::eventFilter(QObject* watched, QEvent* event) {
    if (watched == m_output->viewport()) {
        if (event->type() == QEvent::MouseMove) {
            const auto* me = static_cast<QMouseEvent*>(event);
            const int pos = tokenAtCharacter(m_output->cursorForPosition(me->position().toPoint()).position());
            if (pos != m_hovered) {
                m_hovered = pos;
                if (pos >= 0) emit tokenHovered(pos);
            }
        } else if (event->type() == QEvent::ToolTip) {
            const auto* he = static_cast<QHelpEvent*>(event);
            const int pos = tokenAtCharacter(m_output->cursorForPosition(he->pos()).position());
            const auto it = std::find_if(m_tokens.begin(), m_tokens.end(), [&](const token_event& e) { return e.pos == pos; });
            if (it == m_tokens.end()) {
                QToolTip::hideText();
                return true;
            }
            QString tip = tr("position %1, token %2 “%3”").arg(it->pos).arg(it->id).arg(QString::fromStdString(it->piece).toHtmlEscaped());
            if (std::isfinite(it->logprob)) tip += tr("<br>log p %1").arg(it->logprob, 0, 'f', 3);
            if (it->kld_to_dense >= 0) tip += tr("<br>KL to dense %1").arg(it->kld_to_dense, 0, 'g', 3);
            tip += tr("<br>MLP density %1%, attention %2%").arg(100 * it->mlp_density, 0, 'f', 1).arg(100 * it->attn_density, 0, 'f', 1);
            QToolTip::showText(he->globalPos(), tip, m_output);
            return true;
        }
    }
    return QWidget::eventFilter(watched, event);
}

}  // namespace sl::views

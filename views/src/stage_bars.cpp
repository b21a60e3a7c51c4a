#include "sparselens/views/stage_bars.h"

#include <QFontMetrics>
#include <QPainter>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "sparselens/core/stage_ideal.h"

namespace sl::views {

namespace {

double ms_per_token(const stage_times& t, stage s) {
    return t.tokens > 0 ? 1e3 * t.at(s) / static_cast<double>(t.tokens) : 0.0;
}

constexpr int k_bar_height = 14, k_gap = 4, k_swatch = 10;

}  // namespace

const QVector<StageBars::Group>& StageBars::groups() {
    static const QVector<Group> g = {
        {QObject::tr("attention weights"), QColor(0x42, 0x85, 0xf4), {stage::qkv, stage::o}},
        {QObject::tr("attention"), QColor(0x9c, 0xc3, 0xf9), {stage::attention}},
        {QObject::tr("MLP weights"), QColor(0xef, 0x6c, 0x00), {stage::mlp_in, stage::down, stage::mlp_fused}},
        {QObject::tr("selection"), QColor(0xc6, 0x28, 0x28), {stage::select}},
        {QObject::tr("flash reads"), QColor(0x6a, 0x1b, 0x9a), {stage::fetch}},
        {QObject::tr("logits"), QColor(0x2e, 0x7d, 0x32), {stage::logits}},
        {QObject::tr("GLU, norms, other"), QColor(0x9e, 0x9e, 0x9e), {stage::glu, stage::other}},
    };
    return g;
}

StageBars::StageBars(QWidget* parent) : QWidget(parent) {
    setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Fixed);
    clear();
}

void StageBars::clear() {
    m_dense = m_method = {};
    std::fill(std::begin(m_ideal), std::end(m_ideal), 0.0);
    m_hasMethod = false;
    setToolTip(tr("Where a decoded token's time goes, measured on this CPU: appears with the first result"));
    update();
}

void StageBars::setTimes(const stage_times& dense, const stage_times& method, const QString& method_name,
                         bool dense_only, const double* dense_bytes, const double* method_bytes) {
    m_dense = dense;
    m_method = method;
    m_methodName = method_name;
    m_hasMethod = !dense_only && method.tokens > 0;
    std::fill(std::begin(m_ideal), std::end(m_ideal), 0.0);
    const bool has_bytes = std::any_of(dense_bytes, dense_bytes + stage_count, [](double b) { return b > 0; });
    if (m_hasMethod && dense.tokens > 0 && has_bytes) stage_ideal_ms(dense, dense_bytes, method_bytes, m_ideal);
    setToolTip(tooltipText());
    updateGeometry();  // the legend's rows follow the groups shown
    update();
}

double StageBars::groupMs(bool method, int g) const {
    if ((method && !m_hasMethod) || g < 0 || g >= groups().size()) return 0.0;
    double ms = 0.0;
    for (stage s : groups()[g].stages) ms += ms_per_token(method ? m_method : m_dense, s);
    return ms;
}

double StageBars::idealMs() const {
    double t = 0.0;
    for (double ms : m_ideal) t += ms;
    return m_hasMethod ? t : 0.0;
}

double StageBars::totalMs(bool method) const {
    double t = 0.0;
    for (int g = 0; g < groups().size(); ++g) t += groupMs(method, g);
    return t;
}

QString StageBars::tooltipText() const {
    QString s = tr("<b>Decode time per token by stage</b> (means over the evaluation's decoded tokens; the "
                   "stages of a token add up to it)<table cellspacing=0 cellpadding=1>");
    const double ideal_ms = idealMs();
    const bool ideal = ideal_ms > 0;
    s += QStringLiteral("<tr><td></td><td align=right>&nbsp;dense ms</td>");
    if (m_hasMethod) s += QStringLiteral("<td align=right>&nbsp;%1 ms</td>").arg(m_methodName.toHtmlEscaped());
    if (ideal) s += QStringLiteral("<td align=right>&nbsp;ideal ms</td>");
    s += QStringLiteral("</tr>");
    for (int i = 0; i < stage_count; ++i) {
        const auto st = static_cast<stage>(i);
        const double d = ms_per_token(m_dense, st), m = m_hasMethod ? ms_per_token(m_method, st) : 0.0;
        if (d <= 0 && m <= 0) continue;
        s += QStringLiteral("<tr><td>%1</td><td align=right>%2</td>").arg(QString::fromUtf8(stage_name(st)))
                 .arg(d, 0, 'f', 3);
        if (m_hasMethod) s += QStringLiteral("<td align=right>%1</td>").arg(m, 0, 'f', 3);
        if (ideal) s += QStringLiteral("<td align=right>%1</td>").arg(m_ideal[i], 0, 'f', 3);
        s += QStringLiteral("</tr>");
    }
    s += QStringLiteral("<tr><td><b>total</b></td><td align=right><b>%1</b></td>").arg(totalMs(false), 0, 'f', 3);
    if (m_hasMethod) s += QStringLiteral("<td align=right><b>%1</b></td>").arg(totalMs(true), 0, 'f', 3);
    if (ideal) s += QStringLiteral("<td align=right><b>%1</b></td>").arg(ideal_ms, 0, 'f', 3);
    s += QStringLiteral("</tr></table>");
    if (ideal && totalMs(true) > 0)
        s += tr("<p>The mark across the %1 bar is its <b>ideal</b>: every weight stage at dense's speed per "
                "byte on the bytes %1 read, selection at dense's MLP speed on what it reads (nothing for "
                "activations only), everything else in dense's time. Measured %2 ms per token is %3% of the "
                "ideal's speed. Rows read in a random order cost more per byte than dense's stream: `sparselens "
                "bench --stages` also prints the ideal at the access pattern of the method's reads.</p>")
                 .arg(m_methodName.toHtmlEscaped())
                 .arg(totalMs(true), 0, 'f', 3)
                 .arg(100.0 * ideal_ms / totalMs(true), 0, 'f', 0);
    s += tr("Weight stages stream the model's matrices; a sparse method should shrink them by the share it "
            "skips. Selection is the method's own cost. `sparselens bench --stages` prints the same split "
            "with GB/s per stage.");
    return s;
}

template <class F>
int StageBars::layoutLegend(int w, F&& place) const {
    const QFontMetrics fm(font());
    int x = 0, row = 0, shown = 0;
    for (int g = 0; g < groups().size(); ++g) {
        if (groupMs(false, g) <= 0 && groupMs(true, g) <= 0) continue;
        const int gw = k_swatch + 4 + fm.horizontalAdvance(groups()[g].label) + 10;
        if (x > 0 && x + gw > w) {
            x = 0;
            ++row;
        }
        place(g, x, row);
        x += gw;
        ++shown;
    }
    return shown > 0 ? row + 1 : 0;
}

int StageBars::heightForWidth(int w) const {
    const QFontMetrics fm(font());
    const int rows = std::max(1, layoutLegend(w, [](int, int, int) {}));
    return 2 * (k_bar_height + k_gap) + rows * (fm.height() + 2) + 2;
}

QSize StageBars::sizeHint() const { return {240, heightForWidth(240)}; }

QSize StageBars::minimumSizeHint() const { return {120, heightForWidth(width() > 0 ? width() : 240)}; }

void StageBars::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing, false);
    const QFontMetrics fm(font());
    const QString dl = tr("dense"), ml = m_hasMethod ? m_methodName : QString();
    const int labelW = std::max(fm.horizontalAdvance(dl), fm.horizontalAdvance(ml)) + 6;
    const QString dt = QStringLiteral("%1 ms").arg(totalMs(false), 0, 'f', 2);
    const QString mt = QStringLiteral("%1 ms").arg(totalMs(true), 0, 'f', 2);
    const int valueW = std::max(fm.horizontalAdvance(dt), fm.horizontalAdvance(mt)) + 6;
    const int barW = std::max(10, width() - labelW - valueW);
    // One scale for both bars: the longer one fills the width, so lengths compare directly.
    const double scale = std::max({totalMs(false), totalMs(true), idealMs()});
    auto bar = [&](int y, const QString& label, bool method, double total, const QString& text) {
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(QRect(0, y, labelW, k_bar_height), Qt::AlignLeft | Qt::AlignVCenter, label);
        if (scale > 0) {
            double x = labelW;
            for (int g = 0; g < groups().size(); ++g) {
                const double w = groupMs(method, g) / scale * barW;
                if (w <= 0) continue;
                p.fillRect(QRectF(x, y, w, k_bar_height), groups()[g].color);
                x += w;
            }
            p.setPen(palette().color(QPalette::WindowText));
            p.drawText(QRect(labelW + static_cast<int>(total / scale * barW) + 4, y, valueW, k_bar_height),
                       Qt::AlignLeft | Qt::AlignVCenter, text);
        } else {
            p.setPen(palette().color(QPalette::Mid));
            p.drawRect(QRect(labelW, y, barW - 1, k_bar_height - 1));
        }
    };
    bar(0, dl, false, totalMs(false), dt);
    if (m_hasMethod) {
        const int y = k_bar_height + k_gap;
        bar(y, ml, true, totalMs(true), mt);
        if (const double ideal = idealMs(); ideal > 0 && scale > 0) {  // a mark across the bar, into the gaps
            const int x = labelW + static_cast<int>(std::lround(ideal / scale * barW));
            p.fillRect(QRect(x - 1, y - k_gap / 2, 2, k_bar_height + k_gap), palette().color(QPalette::WindowText));
        }
    }
    // Legend: the groups either bar uses, wrapping onto more rows when narrow.
    const int top = 2 * (k_bar_height + k_gap);
    layoutLegend(width(), [&](int g, int x, int row) {
        const int y = top + row * (fm.height() + 2);
        const int cy = y + (fm.height() - k_swatch) / 2;
        p.fillRect(QRect(x, cy, k_swatch, k_swatch), groups()[g].color);
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(QRect(x + k_swatch + 4, y, width() - x - k_swatch - 4, fm.height()), Qt::AlignLeft | Qt::AlignVCenter,
                   groups()[g].label);
    });
}

}  // namespace sl::views

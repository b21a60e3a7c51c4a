// TradeoffsPanel: scatter series per method, Pareto fronts, tuner/recommended/live overlays, click-to-restore.
#include "sparselens/views/tradeoffs_panel.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <QCheckBox>
#include <QComboBox>
#include <QCursor>
#include <QHBoxLayout>
#include <QLabel>
#include <QToolTip>
#include <QVBoxLayout>
#include <QtCharts/QChart>
#include <QtCharts/QChartView>
#include <QtCharts/QLegend>
#include <QtCharts/QLegendMarker>
#include <QtCharts/QLineSeries>
#include <QtCharts/QLogValueAxis>
#include <QtCharts/QScatterSeries>
#include <QtCharts/QValueAxis>

#include "sparselens/sessions/run_convert.h"
#include "sparselens/views/offload_verify_box.h"
#include "sparselens/views/pareto.h"

namespace sl::views {

namespace ss = sl::sessions;

QColor method_color(const std::string& method) {
    // Categorical colours chosen to stay apart for the usual comparisons (DIP vs DIP-CA vs CATS vs TEAL).
    static const std::map<std::string, QColor> fixed = {
        {"dense", QColor(110, 110, 110)},  {"dip", QColor(31, 119, 180)},      {"dip-ca", QColor(255, 127, 14)},
        {"cats", QColor(44, 160, 44)},     {"chess", QColor(214, 39, 40)},     {"chess-attn", QColor(148, 103, 189)},
        {"teal", QColor(23, 190, 207)},    {"griffin", QColor(140, 86, 75)},   {"ffsplit", QColor(227, 119, 194)},
        {"sparsellm", QColor(188, 189, 34)}, {"glu", QColor(57, 59, 121)},     {"gate", QColor(99, 121, 57)},
        {"up", QColor(140, 109, 49)}};
    if (auto it = fixed.find(method); it != fixed.end()) return it->second;
    uint32_t h = 2166136261u;  // FNV-1a: the same name gets the same hue in every session
    for (unsigned char ch : method) h = (h ^ ch) * 16777619u;
    return QColor::fromHsv(static_cast<int>(h % 360), 160, 200);
}

namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Display order: the factory's order, then unknown names alphabetically.
int method_rank(const std::string& m) {
    const auto& names = method_names();
    const auto it = std::find(names.begin(), names.end(), m);
    return it == names.end() ? static_cast<int>(names.size()) : static_cast<int>(it - names.begin());
}

constexpr double log_floor_ppl = 1e-4, log_floor_kld = 1e-6;

// A base-10 log axis from a power of ten to a power of ten, so the labels sit on the range's ends and
// decades (the epsilon keeps an exact power of ten from rounding out to the next decade).
QLogValueAxis* decade_axis(double min, double max, const QString& title) {
    auto* l = new QLogValueAxis;
    l->setBase(10);
    l->setLabelFormat("%g");
    l->setMinorTickCount(8);
    const double lo = std::pow(10.0, std::floor(std::log10(min) + 1e-9));
    const double hi = std::pow(10.0, std::ceil(std::log10(max) - 1e-9));
    l->setRange(lo, hi > lo ? hi : lo * 10);
    l->setTitleText(title);
    return l;
}

}  // namespace

TradeoffsPanel::TradeoffsPanel(QWidget* parent) : QWidget(parent) {
    m_xCombo = new QComboBox(this);
    m_xCombo->addItem(tr("Simulated tok/s"));
    m_xCombo->addItem(tr("CPU tok/s"));
    m_xCombo->addItem(tr("MLP density"));
    m_yCombo = new QComboBox(this);
    m_yCombo->addItem(tr("ΔPPL"));
    m_yCombo->addItem(tr("KL divergence"));
    m_logCheck = new QCheckBox(tr("Log y"), this);
    m_logCheck->setToolTip(tr("Logarithmic y axis (values at or below zero are drawn at a small floor)"));
    m_logXCheck = new QCheckBox(tr("Log x"), this);
    m_logXCheck->setToolTip(tr("Logarithmic x axis; on by default for a tok/s axis whose points span more than a "
                               "decade (dense far from the sparse methods would squash them)"));
    m_status = new QLabel(this);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);

    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("x:"), this));
    top->addWidget(m_xCombo);
    top->addWidget(new QLabel(tr("y:"), this));
    top->addWidget(m_yCombo);
    top->addWidget(m_logXCheck);
    top->addWidget(m_logCheck);
    top->addStretch(1);

    auto* chart = new QChart;
    chart->legend()->setAlignment(Qt::AlignRight);
    // Legend entries drawn like the points they stand for (rings, stars, hollow circles), not as boxes.
    chart->legend()->setMarkerShape(QLegend::MarkerShapeFromSeries);
    chart->setMargins(QMargins(4, 4, 4, 4));
    m_view = new QChartView(chart, this);
    m_view->setRenderHint(QPainter::Antialiasing);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->addLayout(top);
    layout->addWidget(m_view, 1);
    layout->addWidget(m_status);
    m_verifyBox = new OffloadVerifyBox(this);
    layout->addWidget(m_verifyBox);

    auto apply = [this] {
        setAxes(static_cast<XAxis>(m_xCombo->currentIndex()), static_cast<YAxis>(m_yCombo->currentIndex()),
                m_logCheck->isChecked());
    };
    connect(m_xCombo, &QComboBox::currentIndexChanged, this, [this, apply] {
        m_logXChoice = -1;  // a new x metric starts from the automatic choice
        apply();
    });
    connect(m_yCombo, &QComboBox::currentIndexChanged, this, apply);
    connect(m_logCheck, &QCheckBox::toggled, this, apply);
    connect(m_logXCheck, &QCheckBox::toggled, this, [this](bool on) { setLogX(on); });
    rebuild();
}

TradeoffsPanel::~TradeoffsPanel() = default;

QChart* TradeoffsPanel::chart() const { return m_view->chart(); }

void TradeoffsPanel::setRuns(std::vector<ss::run_record> runs) {
    m_runs = std::move(runs);
    rebuild();
}

void TradeoffsPanel::addLiveResult(std::shared_ptr<const tuning_result> r) {
    if (!r) return;
    addLiveResults({std::move(r)});
}

void TradeoffsPanel::addLiveResults(std::vector<std::shared_ptr<const tuning_result>> results) {
    bool any = false;
    for (auto& r : results) {
        if (!r) continue;
        any = true;
        if (r->partial) {
            m_partial = std::move(r);
        } else {
            m_partial.reset();
            m_live.push_back(std::move(r));
            if (m_live.size() > 256) m_live.erase(m_live.begin());
        }
    }
    if (any) rebuild();
}

void TradeoffsPanel::clearLiveResults() {
    m_live.clear();
    m_partial.reset();
    rebuild();
}

void TradeoffsPanel::setRecommendedRuns(const std::vector<int64_t>& ids) {
    m_recommended = std::set<int64_t>(ids.begin(), ids.end());
    m_recommended.erase(0);
    rebuild();
}

void TradeoffsPanel::setAxes(XAxis x, YAxis y, bool logY) {
    if (x == m_x && y == m_y && logY == m_logY) return;
    m_x = x;
    m_y = y;
    m_logY = logY;
    const QSignalBlocker b1(m_xCombo), b2(m_yCombo), b3(m_logCheck);
    m_xCombo->setCurrentIndex(static_cast<int>(x));
    m_yCombo->setCurrentIndex(static_cast<int>(y));
    m_logCheck->setChecked(logY);
    rebuild();
}

void TradeoffsPanel::setLogX(bool on) {
    m_logXChoice = on ? 1 : 0;
    rebuild();
}

void TradeoffsPanel::attachController(EngineController* controller) { m_verifyBox->attach(controller); }

void TradeoffsPanel::selectRun(qint64 id) {
    if (id == m_selected) return;
    m_selected = id;
    m_verifyBox->setRunId(id);
    // Clicking a point selects it: the series that emitted the click must outlive its signal.
    if (m_rebuildQueued) return;
    m_rebuildQueued = true;
    QMetaObject::invokeMethod(this, [this] { rebuild(); }, Qt::QueuedConnection);
}

QScatterSeries* TradeoffsPanel::scatterOf(const std::string& method) const {
    auto it = m_scatter.find(method);
    return it == m_scatter.end() ? nullptr : it->second;
}
QLineSeries* TradeoffsPanel::frontOf(const std::string& method) const {
    auto it = m_front.find(method);
    return it == m_front.end() ? nullptr : it->second;
}
QScatterSeries* TradeoffsPanel::liveOf(const std::string& method) const {
    auto it = m_liveSeries.find(method);
    return it == m_liveSeries.end() ? nullptr : it->second;
}

bool TradeoffsPanel::valueOfRun(int64_t id, QPointF* out) const {
    for (const ss::run_record& r : m_runs)
        if (r.id == id) return pointOf(r, out);
    return false;
}

// x and y of a run under the current axes; false when the run lacks the x metric (not simulated, no CPU
// timing) or a value is not finite. On a log axis values at or below the floor are drawn at the floor.
bool TradeoffsPanel::pointOf(const ss::run_record& r, QPointF* out) const {
    double x = 0;
    switch (m_x) {
    case XAxis::SimTokS:
        if (!r.sim_tok_s) return false;
        x = *r.sim_tok_s;
        break;
    case XAxis::CpuTokS: x = r.cpu_tok_s; break;
    case XAxis::MlpDensity: x = r.mlp_density; break;
    }
    if (m_x != XAxis::MlpDensity && !(x > 0)) return false;
    double y = m_y == YAxis::DeltaPpl ? r.ppl - r.ppl_dense : r.kld_mean;
    if (!std::isfinite(x) || !std::isfinite(y)) return false;
    if (m_logY) y = std::max(y, m_y == YAxis::DeltaPpl ? log_floor_ppl : log_floor_kld);
    *out = QPointF(x, y);
    return true;
}

bool TradeoffsPanel::pointOf(const tuning_result& t, QPointF* out) const {
    ss::run_record r;
    r.ppl = t.eval.ppl;
    r.ppl_dense = t.eval.ppl_dense;
    r.kld_mean = t.eval.kld_mean;
    r.mlp_density = t.eval.mlp_density;
    r.cpu_tok_s = t.eval.decode_tokens_per_second;
    if (t.sim_tokens_per_s > 0) r.sim_tok_s = t.sim_tokens_per_s;
    return pointOf(r, out);
}

void TradeoffsPanel::addSeries(QXYSeries* s, std::vector<point_ref> refs, bool interactive) {
    chart()->addSeries(s);
    if (interactive) {
        m_refs[s] = std::move(refs);
        connect(s, &QXYSeries::clicked, this, [this, s](const QPointF& p) { onClicked(s, p); });
        connect(s, &QXYSeries::hovered, this, [this, s](const QPointF& p, bool state) { onHovered(s, p, state); });
    }
}

void TradeoffsPanel::rebuild() {
    m_rebuildQueued = false;
    QChart* c = chart();
    // Not removeAllSeries(): it deletes at once, and a rebuild may run inside a series' clicked signal.
    for (QAbstractSeries* old : c->series()) {
        c->removeSeries(old);
        old->disconnect(this);
        old->deleteLater();
    }
    for (QAbstractAxis* a : c->axes()) {
        c->removeAxis(a);
        delete a;
    }
    m_refs.clear();
    m_scatter.clear();
    m_liveSeries.clear();
    m_front.clear();

    std::map<std::string, std::vector<int>> by_method;  // run indices
    for (size_t i = 0; i < m_runs.size(); ++i) by_method[m_runs[i].method].push_back(static_cast<int>(i));
    std::map<std::string, std::vector<int>> live_by_method;
    std::vector<std::shared_ptr<const tuning_result>> live = m_live;
    if (m_partial) live.push_back(m_partial);
    for (size_t i = 0; i < live.size(); ++i) live_by_method[live[i]->config.name].push_back(static_cast<int>(i));
    std::vector<std::string> methods;
    for (const auto& [m, v] : by_method) methods.push_back(m);
    for (const auto& [m, v] : live_by_method)
        if (!by_method.count(m)) methods.push_back(m);
    std::stable_sort(methods.begin(), methods.end(),
                     [](const std::string& a, const std::string& b) { return method_rank(a) < method_rank(b); });

    double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
    auto extend = [&](const QPointF& p) {
        xmin = std::min(xmin, p.x());
        xmax = std::max(xmax, p.x());
        ymin = std::min(ymin, p.y());
        ymax = std::max(ymax, p.y());
    };
    const x_goal goal = m_x == XAxis::MlpDensity ? x_goal::minimise : x_goal::maximise;
    std::vector<point_ref> tuner_refs, star_refs, selected_refs;
    QList<QPointF> tuner_pts, star_pts, selected_pts;
    int hidden = 0;

    for (const std::string& m : methods) {
        const QColor color = method_color(m);
        const QString name = QString::fromStdString(m);
        if (auto it = by_method.find(m); it != by_method.end()) {
            auto* s = new QScatterSeries;
            s->setName(name);
            s->setColor(color);
            s->setBorderColor(color.darker(130));
            s->setMarkerSize(9);
            std::vector<point_ref> refs;
            std::vector<xy_point> xy;
            for (int i : it->second) {
                QPointF p;
                const ss::run_record& r = m_runs[static_cast<size_t>(i)];
                if (!pointOf(r, &p)) {
                    ++hidden;
                    continue;
                }
                s->append(p);
                refs.push_back({i, -1});
                xy.push_back({p.x(), p.y()});
                extend(p);
                if (starts_with(r.label, "tune") || starts_with(r.label, "sweep")) {
                    tuner_pts.append(p);
                    tuner_refs.push_back({i, -1});
                }
                if (m_recommended.count(r.id)) {
                    star_pts.append(p);
                    star_refs.push_back({i, -1});
                }
                if (r.id == m_selected) {
                    selected_pts.append(p);
                    selected_refs.push_back({i, -1});
                }
            }
            if (xy.size() >= 2) {
                auto* f = new QLineSeries;
                f->setName(name + tr(" front"));
                QPen pen(color);
                pen.setWidthF(1.5);
                f->setPen(pen);
                for (size_t k : pareto_front(xy, goal)) f->append(xy[k].x, xy[k].y);
                addSeries(f, {}, false);
                m_front[m] = f;
            }
            addSeries(s, std::move(refs), true);
            m_scatter[m] = s;
        }
        if (auto it = live_by_method.find(m); it != live_by_method.end()) {
            auto* s = new QScatterSeries;
            s->setName(name + tr(" (unsaved)"));
            s->setColor(Qt::transparent);
            QPen pen(color);
            pen.setWidthF(2.0);
            s->setPen(pen);
            s->setMarkerSize(11);
            std::vector<point_ref> refs;
            for (int i : it->second) {
                QPointF p;
                if (!pointOf(*live[static_cast<size_t>(i)], &p)) {
                    ++hidden;
                    continue;
                }
                s->append(p);
                refs.push_back({-1, i});
                extend(p);
            }
            addSeries(s, std::move(refs), true);
            m_liveSeries[m] = s;
        }
    }
    m_liveSnapshot = std::move(live);

    // Overlays on top of the method series; they map clicks to the same runs.
    auto overlay = [&](QList<QPointF> pts, std::vector<point_ref> refs, const QString& name,
                       QScatterSeries::MarkerShape shape, qreal size, const QColor& fill, const QColor& border) {
        if (pts.isEmpty()) return;
        auto* s = new QScatterSeries;
        s->setName(name);
        s->setMarkerShape(shape);
        s->setMarkerSize(size);
        s->setColor(fill);
        QPen pen(border);
        pen.setWidthF(1.5);
        s->setPen(pen);
        s->append(pts);
        addSeries(s, std::move(refs), true);
    };
    overlay(tuner_pts, tuner_refs, tr("tuner / sweep runs"), QScatterSeries::MarkerShapeCircle, 15, Qt::transparent,
            QColor(30, 30, 30));
    overlay(star_pts, star_refs, tr("recommended"), QScatterSeries::MarkerShapeStar, 20, QColor(255, 200, 0),
            QColor(120, 80, 0));
    overlay(selected_pts, selected_refs, tr("selected"), QScatterSeries::MarkerShapeCircle, 19, Qt::transparent,
            QColor(220, 0, 0));
    for (QLegendMarker* lm : c->legend()->markers()) {
        if (qobject_cast<QLineSeries*>(lm->series())) {
            lm->setVisible(false);  // fronts share their method's colour
            continue;
        }
        // Hollow markers (unsaved results, rings): the legend's own background would fill them white.
        if (auto* sc = qobject_cast<QScatterSeries*>(lm->series()); sc && sc->color().alpha() == 0) {
            lm->setBrush(Qt::NoBrush);
            QPen pen = sc->pen();
            pen.setWidthF(2.0);
            lm->setPen(pen);
        }
    }

    // Axes: round tick values, zero as the floor of non-negative data, log x when tok/s spans decades.
    if (!std::isfinite(xmin)) {
        xmin = 0, xmax = 1, ymin = m_logY ? 1e-3 : 0, ymax = 1;
    }
    const bool tokAxis = m_x != XAxis::MlpDensity;
    m_logX = tokAxis && xmin > 0 && (m_logXChoice < 0 ? xmax / xmin > 10.0 : m_logXChoice == 1);
    {
        const QSignalBlocker block(m_logXCheck);
        m_logXCheck->setEnabled(tokAxis);
        m_logXCheck->setChecked(m_logX);
    }
    const QString xtitle = m_x == XAxis::SimTokS ? tr("simulated tokens/s")
                           : m_x == XAxis::CpuTokS ? tr("CPU tokens/s")
                                                   : tr("MLP density read");
    QAbstractAxis* ax = nullptr;
    if (m_logX) {
        ax = decade_axis(xmin, xmax, xtitle + tr(" (log)"));
    } else {
        const double span = xmax > xmin ? xmax - xmin : std::max(std::abs(xmax), 1.0);
        auto* v = new QValueAxis;
        v->setRange(std::max(0.0, xmin - 0.05 * span), xmax + 0.05 * span);
        v->applyNiceNumbers();
        if (v->min() < 0 && xmin >= 0) v->setMin(0);
        v->setLabelFormat(m_x == XAxis::MlpDensity ? "%.2f" : "%g");
        v->setTitleText(xtitle);
        ax = v;
    }
    c->addAxis(ax, Qt::AlignBottom);
    QAbstractAxis* ay = nullptr;
    const QString ytitle = m_y == YAxis::DeltaPpl ? tr("ΔPPL vs dense") : tr("mean KL(dense ‖ method)");
    if (m_logY) {
        ay = decade_axis(ymin, ymax, ytitle + tr(" (log)"));
    } else {
        // ΔPPL and KL of a sparse method are >= 0: the axis starts at 0 rather than padding below it.
        const double span = ymax > ymin ? ymax - ymin : std::max(std::abs(ymax), 1.0);
        auto* v = new QValueAxis;
        v->setRange(ymin >= 0 ? 0.0 : ymin - 0.05 * span, ymax + 0.05 * span);
        v->applyNiceNumbers();
        if (ymin >= 0) v->setMin(0);
        v->setLabelFormat("%g");
        v->setTitleText(ytitle);
        ay = v;
    }
    c->addAxis(ay, Qt::AlignLeft);
    for (QAbstractSeries* s : c->series()) {
        s->attachAxis(ax);
        s->attachAxis(ay);
    }
    QString msg = tr("%n run(s)", nullptr, static_cast<int>(m_runs.size()));
    if (!m_liveSnapshot.empty()) msg += tr(", %n unsaved", nullptr, static_cast<int>(m_liveSnapshot.size()));
    if (hidden > 0) msg += tr("; %n not drawn (no value on this axis)", nullptr, hidden);
    m_status->setText(msg);
}

const TradeoffsPanel::point_ref* TradeoffsPanel::refAt(QXYSeries* s, const QPointF& p) const {
    auto it = m_refs.find(s);
    if (it == m_refs.end() || it->second.empty()) return nullptr;
    // The signal gives the point's value; pick the nearest stored point (scaled per axis).
    const QList<QPointF> pts = s->points();
    const QPointF px = chart()->mapToPosition(p, s);
    int best = -1;
    double best_d = std::numeric_limits<double>::infinity();
    for (int i = 0; i < pts.size() && i < static_cast<int>(it->second.size()); ++i) {
        const QPointF q = chart()->mapToPosition(pts[i], s);
        const double d = std::hypot(q.x() - px.x(), q.y() - px.y());
        if (d < best_d) best_d = d, best = i;
    }
    return best >= 0 ? &it->second[static_cast<size_t>(best)] : nullptr;
}

void TradeoffsPanel::onClicked(QXYSeries* s, const QPointF& p) {
    const point_ref* ref = refAt(s, p);
    if (!ref) return;
    if (ref->run >= 0) {
        const ss::run_record r = m_runs[static_cast<size_t>(ref->run)];
        emit runActivated(r);
        result<method_config> c = ss::method_config_from_json(r.params_json, "run " + std::to_string(r.id));
        if (!c.ok()) {
            m_status->setText(QString::fromStdString(c.message()));
            emit messageChanged(QString::fromStdString(c.message()));
            return;
        }
        emit restoreRequested(*c);
        selectRun(r.id);
    } else if (ref->live >= 0 && ref->live < static_cast<int>(m_liveSnapshot.size())) {
        emit restoreRequested(m_liveSnapshot[static_cast<size_t>(ref->live)]->config);
    }
}

void TradeoffsPanel::onHovered(QXYSeries* s, const QPointF& p, bool state) {
    if (!state) {
        QToolTip::hideText();
        return;
    }
    const point_ref* ref = refAt(s, p);
    if (!ref) return;
    QString text;
    if (ref->run >= 0) text = runSummary(m_runs[static_cast<size_t>(ref->run)]);
    else if (ref->live >= 0 && ref->live < static_cast<int>(m_liveSnapshot.size()))
        text = liveSummary(*m_liveSnapshot[static_cast<size_t>(ref->live)]);
    QToolTip::showText(QCursor::pos(), text, m_view);
}

QString TradeoffsPanel::runSummary(const ss::run_record& r) {
    QString s = QStringLiteral("<b>run %1</b> · %2").arg(r.id).arg(QString::fromStdString(r.method).toHtmlEscaped());
    if (result<method_config> c = ss::method_config_from_json(r.params_json, "run"); c.ok())
        s += QStringLiteral(" at %1% target density").arg(100.0 * c->density, 0, 'g', 4);
    if (!r.label.empty()) s += QStringLiteral("<br><i>%1</i>").arg(QString::fromStdString(r.label).toHtmlEscaped());
    s += QStringLiteral("<br>PPL %1 (dense %2, Δ %3), KL %4, top-1 %5%")
             .arg(r.ppl, 0, 'f', 4)
             .arg(r.ppl_dense, 0, 'f', 4)
             .arg(r.ppl - r.ppl_dense, 0, 'f', 4)
             .arg(r.kld_mean, 0, 'g', 4)
             .arg(100.0 * r.top1, 0, 'f', 1);
    s += QStringLiteral("<br>MLP density read %1%, CPU %2 tok/s").arg(100.0 * r.mlp_density, 0, 'f', 1).arg(r.cpu_tok_s, 0, 'f', 1);
    if (r.sim_tok_s)
        s += QStringLiteral("<br>%1: %2 tok/s simulated, hit rate %3%")
                 .arg(QString::fromStdString(r.device_name).toHtmlEscaped())
                 .arg(*r.sim_tok_s, 0, 'f', 2)
                 .arg(100.0 * r.hit_rate.value_or(0.0), 0, 'f', 1);
    s += QStringLiteral("<br>%1 windows of %2 tokens · %3").arg(r.windows).arg(r.n_ctx).arg(QString::fromStdString(r.created));
    return s;
}

QString TradeoffsPanel::liveSummary(const tuning_result& r) {
    QString s = QStringLiteral("<b>unsaved</b> · %1 at %2% target density%3")
                    .arg(QString::fromStdString(r.config.name).toHtmlEscaped())
                    .arg(100.0 * r.config.density, 0, 'g', 4)
                    .arg(r.partial ? QStringLiteral(" (partial)") : QString());
    s += QStringLiteral("<br>PPL %1 (dense %2), KL %3, top-1 %4%")
             .arg(r.eval.ppl, 0, 'f', 4)
             .arg(r.eval.ppl_dense, 0, 'f', 4)
             .arg(r.eval.kld_mean, 0, 'g', 4)
             .arg(100.0 * r.eval.top1_agreement, 0, 'f', 1);
    s += QStringLiteral("<br>MLP density read %1%, CPU %2 tok/s")
             .arg(100.0 * r.eval.mlp_density, 0, 'f', 1)
             .arg(r.eval.decode_tokens_per_second, 0, 'f', 1);
    if (r.sim_tokens_per_s > 0)
        s += QStringLiteral("<br>%1: %2 tok/s simulated, hit rate %3%")
                 .arg(QString::fromStdString(r.device_name).toHtmlEscaped())
                 .arg(r.sim_tokens_per_s, 0, 'f', 2)
                 .arg(100.0 * r.sim_hit_rate, 0, 'f', 1);
    return s;
}

}  // namespace sl::views

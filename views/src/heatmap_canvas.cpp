// HeatmapCanvas, widget side: snapshot validation and statistics, view transform, input and hover.
#include "sparselens/views/heatmap_canvas.h"

#include <algorithm>
#include <cmath>

#include <QGuiApplication>
#include <QKeyEvent>
#include <QOpenGLContext>
#include <QLabel>
#include <QMouseEvent>
#include <QToolTip>
#include <QWheelEvent>

#include "imgui_qt_glue.h"

namespace sl::views {

std::string_view heatmap_mode_name(heatmap_mode m) {
    switch (m) {
        case heatmap_mode::absolute: return "absolute";
        case heatmap_mode::relative: return "relative";
        case heatmap_mode::mask_overlay: return "mask overlay";
    }
    return "?";
}

heatmap_tiling heatmap_tiling_for(int32_t rows, int32_t cols, int32_t max_side) {
    heatmap_tiling t;
    if (rows <= 0 || cols <= 0 || max_side <= 0) return t;
    t.tiles_x = (cols + max_side - 1) / max_side;
    t.tiles_y = (rows + max_side - 1) / max_side;
    t.tile_w = (cols + t.tiles_x - 1) / t.tiles_x;  // equal tiles: least padding in the array's layers
    t.tile_h = (rows + t.tiles_y - 1) / t.tiles_y;
    return t;
}

HeatmapCanvas::HeatmapCanvas(QWidget* parent) : QOpenGLWidget(parent) {
    QSurfaceFormat f = format();
    f.setVersion(3, 3);
    f.setProfile(QSurfaceFormat::CoreProfile);
    setFormat(f);
    setMouseTracking(true);
    setFocusPolicy(Qt::StrongFocus);
    setMinimumSize(160, 120);
    m_frameTimer.setSingleShot(true);
    m_frameTimer.setInterval(16);
    connect(&m_frameTimer, &QTimer::timeout, this, qOverload<>(&QWidget::update));
    m_message = new QLabel(this);
    m_message->setAlignment(Qt::AlignCenter);
    m_message->setWordWrap(true);
    m_message->setAttribute(Qt::WA_TransparentForMouseEvents);
    m_message->setStyleSheet(QStringLiteral("QLabel { color: #c8c8d2; background: transparent; }"));
    updateMessage();
    m_settleTimer.setSingleShot(true);
    m_settleTimer.setInterval(150);
    connect(&m_settleTimer, &QTimer::timeout, this, [this] {
        m_interacting = false;
        invalidate();
    });
}

HeatmapCanvas::~HeatmapCanvas() {
    disconnect(m_contextGone);  // QOpenGLWidget's destructor destroys the context after this object is gone
    if (context()) {
        makeCurrent();
        releaseGL();
        doneCurrent();
    }
}

bool HeatmapCanvas::openGLAvailable(QString* why) {
    static const QString failure = [] {
        // Raster-only platforms: a context may be creatable (offscreen over GLX), but QOpenGLWidget needs
        // RHI-based widget composition, which Qt 6.4 offers only on windowing platforms (xcb, wayland, ...).
        const QString platform = QGuiApplication::platformName();
        for (const char* raster : {"offscreen", "minimal", "vnc", "linuxfb"})
            if (platform == QLatin1String(raster))
                return QStringLiteral("the \"%1\" Qt platform cannot show OpenGL widgets").arg(platform);
        QOpenGLContext ctx;
        QSurfaceFormat f;
        f.setVersion(3, 3);
        f.setProfile(QSurfaceFormat::CoreProfile);
        ctx.setFormat(f);
        if (!ctx.create()) return QStringLiteral("the \"%1\" platform cannot create an OpenGL context").arg(QGuiApplication::platformName());
        const QSurfaceFormat got = ctx.format();
        if (ctx.isOpenGLES() || got.majorVersion() * 10 + got.minorVersion() < 30)
            return QStringLiteral("OpenGL %1.%2%3 is below 3.0").arg(got.majorVersion()).arg(got.minorVersion()).arg(ctx.isOpenGLES() ? " ES" : "");
        return QString();
    }();
    if (why) *why = failure;
    return failure.isEmpty();
}

bool HeatmapCanvas::hasImGuiOverlay() {
#ifdef SPARSELENS_WITH_IMGUI
    return true;
#else
    return false;
#endif
}

void HeatmapCanvas::setOverlayVisible(bool on) {
    m_overlayVisible = on;
    update();
}

bool HeatmapCanvas::overlayActive() const {
#ifdef SPARSELENS_WITH_IMGUI
    return m_overlayVisible && m_imgui && m_imgui->active();
#else
    return false;
#endif
}

void HeatmapCanvas::setSnapshot(std::shared_ptr<const activation_snapshot> snap) {
    const int old_rows = m_snap ? m_snap->n_tokens : -1, old_cols = m_snap ? m_snap->width : -1;
    m_snap.reset();
    m_maskValid = false;
    m_status.clear();
    m_hover.reset();
    if (snap) {
        const int64_t rows = snap->n_tokens, cols = snap->width;
        if (rows <= 0 || cols <= 0) {
            m_status = tr("Layer %1 %2: no tokens").arg(snap->layer).arg(QString::fromUtf8(probe_name(snap->where).data()));
        } else if (static_cast<int64_t>(snap->values.size()) != rows * cols) {
            m_status = tr("Refused a snapshot of %1 values for %2 tokens x %3").arg(snap->values.size()).arg(rows).arg(cols);
        } else {
            m_snap = std::move(snap);
            m_maskValid = m_snap->kept.size() == m_snap->values.size();
            if (!m_snap->kept.empty() && !m_maskValid)
                m_status = tr("Mask of %1 entries does not match the matrix: ignored").arg(m_snap->kept.size());
        }
    }
    if (!m_snap || m_perm.size() != static_cast<size_t>(m_snap->width)) m_perm.clear();
    computeStatistics();
    m_needUpload = m_needPerm = true;
    if (!m_snap || m_snap->n_tokens != old_rows || m_snap->width != old_cols) m_fitted = true;
    if (m_fitted) resetView();
    invalidate();
    updateMessage();
    emit colorScaleChanged();
}

void HeatmapCanvas::updateMessage() {
    QString text;
    if (!m_glFailure.isEmpty())
        text = tr("OpenGL unavailable: %1").arg(m_glFailure);
    else if (!m_snap)
        text = m_status.isEmpty() ? tr("No activations yet: run a prompt") : m_status;
    m_message->setText(text);
    m_message->setVisible(!text.isEmpty());
    m_message->setGeometry(rect().adjusted(8, 8, -8, -8));
}

void HeatmapCanvas::computeStatistics() {
    m_rowMax.clear();
    m_autoMax = 1.0f;
    if (!m_snap) return;
    const size_t rows = static_cast<size_t>(m_snap->n_tokens), cols = static_cast<size_t>(m_snap->width);
    const float* v = m_snap->values.data();
    m_rowMax.assign(rows, 0.0f);
    float global = 0.0f;
    for (size_t r = 0; r < rows; ++r) {
        float m = 0.0f;
        for (size_t c = 0; c < cols; ++c) {
            const float a = std::fabs(v[r * cols + c]);
            if (a > m && std::isfinite(a)) m = a;
        }
        m_rowMax[r] = m;
        global = std::max(global, m);
    }
    // 99.9th percentile of |v| from at most 2^20 evenly strided entries: one massive activation
    // should not turn a linear scale black.
    const size_t n = rows * cols, stride = std::max<size_t>(1, n >> 20);
    std::vector<float> sample;
    sample.reserve(n / stride + 1);
    for (size_t i = 0; i < n; i += stride)
        if (std::isfinite(v[i])) sample.push_back(std::fabs(v[i]));
    float p = 0.0f;
    if (!sample.empty()) {
        const size_t k = std::min(sample.size() - 1, static_cast<size_t>(0.999 * static_cast<double>(sample.size())));
        std::nth_element(sample.begin(), sample.begin() + static_cast<std::ptrdiff_t>(k), sample.end());
        p = sample[k];
    }
    m_autoMax = p > 0.0f ? p : (global > 0.0f ? global : 1.0f);
}

bool HeatmapCanvas::setColumnPermutation(std::vector<int32_t> perm) {
    bool ok = perm.empty();
    if (!ok && m_snap && perm.size() == static_cast<size_t>(m_snap->width)) {
        std::vector<uint8_t> seen(perm.size(), 0);
        ok = true;
        for (int32_t j : perm) {
            if (j < 0 || static_cast<size_t>(j) >= perm.size() || seen[static_cast<size_t>(j)]) {
                ok = false;
                break;
            }
            seen[static_cast<size_t>(j)] = 1;
        }
    }
    if (ok) {
        m_perm = std::move(perm);
    } else {
        m_perm.clear();
    }
    m_needPerm = true;
    m_hover.reset();
    invalidate();
    return ok;
}

void HeatmapCanvas::setMode(heatmap_mode m) {
    if (m == m_mode) return;
    m_mode = m;
    invalidate();
    emit colorScaleChanged();
}

void HeatmapCanvas::setColormap(colormap c) {
    if (c == m_cmap) return;
    m_cmap = c;
    m_needLut = true;
    invalidate();
    emit colorScaleChanged();
}

void HeatmapCanvas::setLogScale(bool on) {
    if (on == m_log) return;
    m_log = on;
    invalidate();
    emit colorScaleChanged();
}

void HeatmapCanvas::setLogDecades(float decades) {
    decades = std::clamp(std::isfinite(decades) ? decades : 3.0f, 0.5f, 12.0f);
    if (decades == m_decades) return;
    m_decades = decades;
    invalidate();
    emit colorScaleChanged();
}

void HeatmapCanvas::setScaleMax(float v) {
    if (!(v > 0.0f) || !std::isfinite(v)) return;
    m_userMax = v;
    m_autoScale = false;
    invalidate();
    emit colorScaleChanged();
}

void HeatmapCanvas::setAutoScale(bool on) {
    if (on == m_autoScale) return;
    if (!on) m_userMax = scaleMax();  // keep what is on screen as the starting point
    m_autoScale = on;
    invalidate();
    emit colorScaleChanged();
}

float HeatmapCanvas::scaleMax() const {
    if (m_mode == heatmap_mode::relative) return m_autoScale ? 1.0f : std::min(m_userMax, 1.0f);
    return m_autoScale ? m_autoMax : m_userMax;
}

float HeatmapCanvas::scaleMin() const { return m_log ? scaleMax() * std::pow(10.0f, -m_decades) : 0.0f; }

void HeatmapCanvas::setHighlightedToken(int pos) {
    if (pos == m_highlight) return;
    m_highlight = pos;
    update();  // composite only
}

void HeatmapCanvas::setMaxSamplesPerAxis(int n) {
    m_maxSamples = std::clamp(n, 1, 16);
    invalidate();
}

void HeatmapCanvas::setProgressiveRendering(bool on) {
    m_progressive = on;
    if (!on && m_interacting) {
        m_settleTimer.stop();
        m_interacting = false;
        invalidate();
    }
}

void HeatmapCanvas::beginInteraction() {
    if (!m_progressive) return;
    m_interacting = true;
    m_settleTimer.start();
}

void HeatmapCanvas::setMaxTileSideForTesting(int side) {
    m_tileOverride = std::max(0, side);
    m_needUpload = true;
    invalidate();
}

void HeatmapCanvas::invalidate() {
    m_dirty = true;
    update();
}

// ---- view -------------------------------------------------------------------------------------------

void HeatmapCanvas::resetView() {
    m_fitted = true;
    const int cols = m_snap ? m_snap->width : 1, rows = m_snap ? m_snap->n_tokens : 1;
    m_scale = QPointF(std::max(1, width()) / static_cast<double>(cols), std::max(1, height()) / static_cast<double>(rows));
    m_origin = QPointF(0, 0);
    invalidate();
    emit viewChanged();
}

void HeatmapCanvas::zoomAt(QPointF anchor, double fx, double fy) {
    if (!m_snap) return;
    const QPointF fit(std::max(1, width()) / static_cast<double>(m_snap->width),
                      std::max(1, height()) / static_cast<double>(m_snap->n_tokens));
    const QPointF data = m_origin + QPointF(anchor.x() / m_scale.x(), anchor.y() / m_scale.y());
    const double max_scale = 400.0;  // pixels per cell
    m_scale.setX(std::clamp(m_scale.x() * fx, std::min(fit.x(), max_scale) * 0.25, std::max(fit.x(), max_scale)));
    m_scale.setY(std::clamp(m_scale.y() * fy, std::min(fit.y(), max_scale) * 0.25, std::max(fit.y(), max_scale)));
    m_origin = data - QPointF(anchor.x() / m_scale.x(), anchor.y() / m_scale.y());
    m_fitted = false;
    invalidate();
    emit viewChanged();
}

void HeatmapCanvas::panBy(QPointF delta_px) {
    if (!m_snap) return;
    m_origin -= QPointF(delta_px.x() / m_scale.x(), delta_px.y() / m_scale.y());
    // Keep at least a sliver of the matrix on screen.
    const double vis_x = width() / m_scale.x(), vis_y = height() / m_scale.y();
    m_origin.setX(std::clamp(m_origin.x(), -vis_x + 1.0, m_snap->width - 1.0));
    m_origin.setY(std::clamp(m_origin.y(), -vis_y + 1.0, m_snap->n_tokens - 1.0));
    m_fitted = false;
    invalidate();
    emit viewChanged();
}

std::optional<heatmap_cell> HeatmapCanvas::cellAt(QPointF pos) const {
    if (!m_snap) return std::nullopt;
    const double cx = m_origin.x() + pos.x() / m_scale.x(), cy = m_origin.y() + pos.y() / m_scale.y();
    if (!(cx >= 0.0 && cy >= 0.0 && cx < m_snap->width && cy < m_snap->n_tokens)) return std::nullopt;
    heatmap_cell c;
    c.token = static_cast<int32_t>(cy);
    c.column = static_cast<int32_t>(cx);
    c.neuron = m_perm.empty() ? c.column : m_perm[static_cast<size_t>(c.column)];
    const size_t i = static_cast<size_t>(c.token) * static_cast<size_t>(m_snap->width) + static_cast<size_t>(c.neuron);
    c.value = m_snap->values[i];
    c.kept = !m_maskValid || m_snap->kept[i] != 0;
    c.row_max = m_rowMax[static_cast<size_t>(c.token)];
    c.in_prompt = c.token < m_snap->n_prompt;
    return c;
}

QPointF HeatmapCanvas::cellCenter(int token, int display_column) const {
    return {(display_column + 0.5 - m_origin.x()) * m_scale.x(), (token + 0.5 - m_origin.y()) * m_scale.y()};
}

QString HeatmapCanvas::hoverText(const heatmap_cell& c) const {
    QString s = tr("token %1 (%2)\nneuron %3").arg(c.token).arg(c.in_prompt ? tr("prompt") : tr("generated")).arg(c.neuron);
    if (c.neuron != c.column) s += tr(" at column %1").arg(c.column);
    s += tr("\nvalue %1").arg(static_cast<double>(c.value), 0, 'g', 5);
    if (c.row_max > 0.0f) s += tr("\n|v| / row max %1").arg(std::fabs(c.value) / c.row_max, 0, 'f', 3);
    if (m_maskValid) s += c.kept ? tr("\ncomputed by the kernels") : tr("\nskipped by the kernels");
    return s;
}

// ---- input ------------------------------------------------------------------------------------------

void HeatmapCanvas::hoverAt(QPointF pos) {
    const std::optional<heatmap_cell> c = cellAt(pos);
    const int old_token = m_hover ? m_hover->token : -1;
    m_hover = c;
    m_hoverPos = pos;
    if ((c ? c->token : -1) != old_token) emit tokenHovered(c ? c->token : -1);
    if (c) emit cellHovered(c->token, c->neuron, c->value, c->kept);
#ifdef SPARSELENS_WITH_IMGUI
    if (overlayActive()) {
        update();  // the overlay draws the tooltip
        return;
    }
#endif
    if (c)
        QToolTip::showText(mapToGlobal(pos.toPoint()), hoverText(*c), this);
    else
        QToolTip::hideText();
}

void HeatmapCanvas::mousePressEvent(QMouseEvent* e) {
#ifdef SPARSELENS_WITH_IMGUI
    if (overlayActive()) {
        m_imgui->mouseMove(e->position());
        m_imgui->mouseButton(e->button(), true);
        update();
        if (m_imgui->wantsMouse()) return;
    }
#endif
    if (e->button() == Qt::LeftButton) {
        m_dragging = true;
        m_lastMouse = e->position();
        setCursor(Qt::ClosedHandCursor);
    }
}

void HeatmapCanvas::mouseReleaseEvent(QMouseEvent* e) {
#ifdef SPARSELENS_WITH_IMGUI
    if (overlayActive()) {
        m_imgui->mouseButton(e->button(), false);
        update();
    }
#endif
    if (e->button() == Qt::LeftButton && m_dragging) {
        m_dragging = false;
        unsetCursor();
    }
}

void HeatmapCanvas::mouseMoveEvent(QMouseEvent* e) {
#ifdef SPARSELENS_WITH_IMGUI
    if (overlayActive()) {
        m_imgui->mouseMove(e->position());
        update();
    }
#endif
    if (m_dragging) {
        beginInteraction();
        panBy(e->position() - m_lastMouse);
        m_lastMouse = e->position();
    }
    hoverAt(e->position());
}

void HeatmapCanvas::wheelEvent(QWheelEvent* e) {
#ifdef SPARSELENS_WITH_IMGUI
    if (overlayActive()) {
        m_imgui->mouseMove(e->position());
        if (m_imgui->wantsMouse()) {
            m_imgui->wheel(e);
            update();
            e->accept();
            return;
        }
    }
#endif
    // Shift may turn the vertical wheel into a horizontal one on some platforms.
    const int delta = e->angleDelta().y() != 0 ? e->angleDelta().y() : e->angleDelta().x();
    const double f = std::pow(2.0, delta / 480.0);  // one notch: x1.19
    const Qt::KeyboardModifiers m = e->modifiers();
    beginInteraction();
    zoomAt(e->position(), m.testFlag(Qt::ShiftModifier) ? 1.0 : f, m.testFlag(Qt::ControlModifier) ? 1.0 : f);
    hoverAt(e->position());
    e->accept();
}

void HeatmapCanvas::keyPressEvent(QKeyEvent* e) {
#ifdef SPARSELENS_WITH_IMGUI
    if (overlayActive()) {
        m_imgui->key(e, true);
        update();
        if (m_imgui->wantsKeyboard()) return;
    }
#endif
    const QPointF centre(width() / 2.0, height() / 2.0);
    switch (e->key()) {
        case Qt::Key_Plus:
        case Qt::Key_Equal: zoomAt(centre, 1.25, 1.25); break;
        case Qt::Key_Minus: zoomAt(centre, 0.8, 0.8); break;
        case Qt::Key_0:
        case Qt::Key_Home: resetView(); break;
        case Qt::Key_H: setOverlayVisible(!m_overlayVisible); break;
        case Qt::Key_Left: panBy({width() / 8.0, 0}); break;
        case Qt::Key_Right: panBy({-width() / 8.0, 0}); break;
        case Qt::Key_Up: panBy({0, height() / 8.0}); break;
        case Qt::Key_Down: panBy({0, -height() / 8.0}); break;
        default: QOpenGLWidget::keyPressEvent(e);
    }
}

void HeatmapCanvas::keyReleaseEvent(QKeyEvent* e) {
#ifdef SPARSELENS_WITH_IMGUI
    if (overlayActive()) {
        m_imgui->key(e, false);
        update();
    }
#endif
    QOpenGLWidget::keyReleaseEvent(e);
}

void HeatmapCanvas::leaveEvent(QEvent* e) {
#ifdef SPARSELENS_WITH_IMGUI
    if (overlayActive()) m_imgui->mouseLeave();
#endif
    if (m_hover) {
        m_hover.reset();
        emit tokenHovered(-1);
    }
    update();
    QOpenGLWidget::leaveEvent(e);
}

void HeatmapCanvas::resizeEvent(QResizeEvent* e) {
    QOpenGLWidget::resizeEvent(e);
    m_message->setGeometry(rect().adjusted(8, 8, -8, -8));
    if (m_fitted) resetView();
    else invalidate();
}

}  // namespace sl::views

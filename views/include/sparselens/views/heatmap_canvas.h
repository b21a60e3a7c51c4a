// OpenGL heatmap of one activation matrix [tokens x neurons]: float texture, shader colour map, zoom/pan,
// hover inspection, column permutations and a Dear ImGui overlay for the colour scale.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

// Before any Qt header: Qt's `emit` keyword macro would break sl::context::emit in the core headers.
#include "sparselens/views/snapshots.h"

#include <QColor>
#include <QElapsedTimer>
#include <QOpenGLExtraFunctions>
#include <QOpenGLWidget>
#include <QPointF>
#include <QRect>
#include <QTimer>

#include "sparselens/views/colormaps.h"

class QLabel;
class QOpenGLShaderProgram;

namespace sl::views {

class ImGuiQtGlue;

enum class heatmap_mode : uint8_t {
    absolute = 0,      // |v| against the scale max
    relative = 1,      // |v| / max |v| of its token row: GRIFFIN's flocking view
    mask_overlay = 2,  // absolute, with the entries the kernels skipped drawn hatched in the mask colour
};
std::string_view heatmap_mode_name(heatmap_mode m);

// How a matrix is cut into equal texture-array layers when a side exceeds the GPU's texture size limit.
struct heatmap_tiling {
    int32_t tiles_x = 0, tiles_y = 0, tile_w = 0, tile_h = 0;
    int32_t layers() const { return tiles_x * tiles_y; }
};
heatmap_tiling heatmap_tiling_for(int32_t rows, int32_t cols, int32_t max_side);

// What sits under one point of the canvas.
struct heatmap_cell {
    int32_t token = -1;   // row
    int32_t column = -1;  // displayed column (after the permutation)
    int32_t neuron = -1;  // data column
    float value = 0;
    float row_max = 0;    // max |v| of the row (relative mode divides by it)
    bool kept = true;     // false: the kernels skipped this entry
    bool in_prompt = false;
};

class HeatmapCanvas : public QOpenGLWidget, protected QOpenGLExtraFunctions {
    Q_OBJECT
public:
    explicit HeatmapCanvas(QWidget* parent = nullptr);
    ~HeatmapCanvas() override;

    static bool hasImGuiOverlay();  // compiled with SPARSELENS_WITH_IMGUI
    // Whether this platform can create a desktop OpenGL >= 3.0 context (probed once). Qt 6.4 crashes when a
    // QOpenGLWidget is shown where it cannot (the offscreen platform without an X server): check first.
    static bool openGLAvailable(QString* why = nullptr);
    // Hides the ImGui overlay (controls and tooltip; hover then uses a QToolTip). Key: H.
    void setOverlayVisible(bool on);
    bool overlayVisible() const { return m_overlayVisible; }
    bool overlayActive() const;  // compiled in, initialised and visible
    // Where the overlay's "View" button (which opens its controls) was last drawn, in widget pixels: the
    // bottom-right corner, clear of the prompt rows at the top. Empty before the first overlay frame.
    QRect overlayButtonRect() const { return m_overlayButton; }
    bool overlayOpen() const { return m_overlayOpen; }
    // Colours of the fixed overlays (tests and legends use them).
    static QColor maskColor() { return {92, 92, 100}; }
    static QColor maskHatchColor() { return {150, 150, 162}; }
    static QColor boundaryColor() { return {0, 229, 255}; }
    static QColor backgroundColor() { return {28, 28, 32}; }
    static QColor invalidColor() { return {255, 0, 255}; }  // NaN / Inf entries

    // A snapshot whose values/kept sizes do not match n_tokens x width is refused (message shown, no crash);
    // kept of a wrong size is ignored (all entries treated as kept). Null clears.
    void setSnapshot(std::shared_ptr<const activation_snapshot> snap);
    const activation_snapshot* snapshot() const { return m_snap.get(); }
    QString statusMessage() const { return m_status; }

    // Display column j shows data column perm[j]. Must be a permutation of 0..width-1, else refused
    // (returns false) and the index order is used.
    bool setColumnPermutation(std::vector<int32_t> perm);
    bool hasColumnPermutation() const { return !m_perm.empty(); }

    void setMode(heatmap_mode m);
    heatmap_mode mode() const { return m_mode; }
    void setColormap(colormap c);
    colormap colormapId() const { return m_cmap; }
    void setLogScale(bool on);
    bool logScale() const { return m_log; }
    void setLogDecades(float decades);  // log scale spans [max / 10^decades, max]
    float logDecades() const { return m_decades; }
    // Scale max of the absolute modes; auto = 99.9th percentile of |v| (relative mode: 1).
    void setScaleMax(float v);
    void setAutoScale(bool on);
    bool autoScale() const { return m_autoScale; }
    float scaleMax() const;      // in effect, for the current mode
    float scaleMin() const;      // low end of the legend (0, or max / 10^decades with log)
    float autoScaleMax() const { return m_autoMax; }

    void setHighlightedToken(int pos);  // -1: none
    int highlightedToken() const { return m_highlight; }

    // View: logical pixels per cell and the data coordinate at the top-left corner.
    void resetView();
    void zoomAt(QPointF anchor, double factor_x, double factor_y);
    void panBy(QPointF delta_px);
    QPointF viewScale() const { return m_scale; }
    QPointF viewOrigin() const { return m_origin; }
    // Zoomed out, a pixel shows the max |v| of up to n x n samples of the cells it covers (so isolated
    // heavy hitters stay visible); 1 = nearest cell only.
    void setMaxSamplesPerAxis(int n);
    // While the user zooms or pans, frames are drawn at half resolution with nearest sampling and the full
    // picture follows ~150 ms after the last input: keeps interaction fluid on software GL.
    void setProgressiveRendering(bool on);
    bool isInteracting() const { return m_interacting; }
    // With timing on, each pass ends with glFinish and its wall time is kept (a benchmark aid only).
    void setFrameTiming(bool on) { m_timing = on; }
    double lastHeatmapPassMs() const { return m_heatMs; }
    double lastCompositeMs() const { return m_compMs; }

    std::optional<heatmap_cell> cellAt(QPointF widget_pos) const;
    QPointF cellCenter(int token, int display_column) const;  // widget coordinates

    // GL diagnostics: whether initializeGL succeeded, what it got, errors seen since start.
    bool glReady() const { return m_glOk; }
    QString glInfo() const { return m_glInfo; }
    QString glFailure() const { return m_glFailure; }
    int glErrorCount() const { return m_glErrors; }
    int maxTextureSize() const { return m_maxTex; }
    heatmap_tiling tiling() const { return m_tiling; }
    // Test hook: pretend GL_MAX_TEXTURE_SIZE is smaller (0 = the real limit). Re-uploads.
    void setMaxTileSideForTesting(int side);

signals:
    void cellHovered(int token, int neuron, float value, bool kept);
    void tokenHovered(int token);  // -1 when the pointer leaves the matrix
    void colorScaleChanged();      // colormap, log, decades, max or mode changed (legend follows)
    void viewChanged();

protected:
    void initializeGL() override;
    void resizeGL(int w, int h) override;
    void paintGL() override;
    void mousePressEvent(QMouseEvent* e) override;
    void mouseReleaseEvent(QMouseEvent* e) override;
    void mouseMoveEvent(QMouseEvent* e) override;
    void wheelEvent(QWheelEvent* e) override;
    void keyPressEvent(QKeyEvent* e) override;
    void keyReleaseEvent(QKeyEvent* e) override;
    void leaveEvent(QEvent* e) override;
    void resizeEvent(QResizeEvent* e) override;

private:
    void releaseGL();
    void uploadMatrix();
    void uploadPermutation();
    void uploadLut();
    void uploadLinear(unsigned tex, const std::vector<float>& v);
    void ensureFrameTarget(int w, int h);
    void drawHeatmapPass(int w, int h);
    void drawCompositePass(int w, int h);
    void drawOverlay();  // ImGui widgets (heatmap_canvas_overlay.cpp)
    void checkGlErrors(const char* where);
    void invalidate();   // the cached heatmap image must be redrawn
    void beginInteraction();
    void hoverAt(QPointF pos);
    void computeStatistics();
    QString hoverText(const heatmap_cell& c) const;
    void updateMessage();

    std::shared_ptr<const activation_snapshot> m_snap;
    bool m_maskValid = false;
    std::vector<float> m_rowMax;
    std::vector<int32_t> m_perm;
    float m_autoMax = 1.0f;
    QString m_status;

    heatmap_mode m_mode = heatmap_mode::absolute;
    colormap m_cmap = colormap::viridis;
    bool m_log = false, m_autoScale = true;
    float m_decades = 3.0f, m_userMax = 1.0f;
    int m_highlight = -1;
    int m_maxSamples = 4;
    bool m_overlayVisible = true;
    bool m_overlayOpen = false;  // the ImGui "View" controls shown above their corner button
    QRect m_overlayButton;
    bool m_progressive = true, m_interacting = false, m_timing = false;
    int m_renderDiv = 1;  // the cached heatmap was drawn at 1/div resolution
    double m_heatMs = 0, m_compMs = 0;
    QTimer m_settleTimer;

    QPointF m_scale{1, 1}, m_origin{0, 0};
    bool m_fitted = true;
    bool m_dragging = false;
    QPointF m_lastMouse;
    std::optional<heatmap_cell> m_hover;
    QPointF m_hoverPos;

    // GL state
    bool m_glOk = false;
    QString m_glInfo, m_glFailure, m_glsl;
    int m_glErrors = 0;
    int m_maxTex = 0, m_maxLayers = 0, m_tileOverride = 0;
    heatmap_tiling m_tiling;
    QOpenGLShaderProgram* m_heatProg = nullptr;
    QOpenGLShaderProgram* m_compProg = nullptr;
    unsigned m_vao = 0, m_texValues = 0, m_texMask = 0, m_texRowMax = 0, m_texPerm = 0, m_texLut = 0;
    unsigned m_fbo = 0, m_fboTex = 0;
    int m_fboW = 0, m_fboH = 0;
    int m_linW = 1;  // width of the linearised 1-D lookups (row max, permutation)
    bool m_needUpload = false, m_needPerm = false, m_needLut = true, m_dirty = true;

    std::unique_ptr<ImGuiQtGlue> m_imgui;
    QTimer m_frameTimer;
    // Messages (no data, refused snapshot, no GL) are a child label, not QPainter text inside paintGL:
    // GL-side glyph caches on Qt's shared font engines crash at exit when Qt Charts is loaded too.
    QLabel* m_message = nullptr;
    QMetaObject::Connection m_contextGone;
};

}  // namespace sl::views

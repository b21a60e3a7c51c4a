// HeatmapCanvas, GL side: textures, shaders and the two render passes. The colour-mapped heatmap is drawn
// into an off-screen texture only when data, scale or view change; hover, the highlight row, the prompt
// boundary and the ImGui overlay redraw from that texture, so inspection stays fluid even when the
// heatmap pass itself is slow (software GL).
#include <algorithm>
#include <cmath>

#include <QElapsedTimer>
#include <QOpenGLContext>
#include <QLabel>
#include <QOpenGLShaderProgram>
#include <QTimer>

#include "sparselens/views/heatmap_canvas.h"
#include "imgui_qt_glue.h"

namespace sl::views {
namespace {

const char* vertex_src = R"(
void main() {
    vec2 p = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}
)";

const char* heatmap_src = R"(
uniform sampler2DArray u_values;
uniform sampler2DArray u_mask;
uniform sampler2D u_rowmax;
uniform sampler2D u_perm;
uniform sampler2D u_lut;
uniform ivec2 u_size;      // cols, rows
uniform ivec3 u_tile;      // tiles_x, tile_w, tile_h
uniform int u_linw;
uniform int u_mode;        // 0 absolute, 1 relative, 2 mask overlay
uniform int u_has_mask;
uniform int u_has_perm;
uniform int u_log;
uniform float u_max;
uniform float u_decades;
uniform vec2 u_origin;     // data coordinate at the top-left framebuffer corner
uniform vec2 u_cpp;        // cells per framebuffer pixel
uniform float u_fbh;
uniform ivec2 u_samples;
uniform vec3 u_bg;
uniform vec3 u_mask_col;
uniform vec3 u_hatch_col;
uniform vec3 u_bad_col;
out vec4 o_color;

float fetch_linear(sampler2D s, int i) { return texelFetch(s, ivec2(i % u_linw, i / u_linw), 0).r; }
ivec3 tile_of(int col, int row) {
    int tx = col / u_tile.y;
    int ty = row / u_tile.z;
    return ivec3(col - tx * u_tile.y, row - ty * u_tile.z, ty * u_tile.x + tx);
}
float level(float a) {
    if (u_log != 0) {
        if (a <= 0.0) return 0.0;
        return clamp(log2(a / u_max) / (u_decades * 3.3219281) + 1.0, 0.0, 1.0);
    }
    return clamp(a / u_max, 0.0, 1.0);
}
vec3 cmap(float t) { return texture(u_lut, vec2((t * 255.0 + 0.5) / 256.0, 0.5)).rgb; }

void main() {
    vec2 pix = vec2(gl_FragCoord.x - 0.5, u_fbh - gl_FragCoord.y - 0.5);
    vec2 start = u_origin + pix * u_cpp;
    vec2 centre = start + 0.5 * u_cpp;
    if (centre.x < 0.0 || centre.y < 0.0 || centre.x >= float(u_size.x) || centre.y >= float(u_size.y)) {
        o_color = vec4(u_bg, 1.0);
        return;
    }
    vec2 stp = u_cpp / vec2(u_samples);
    float best = 0.0;
    int n = 0;
    int kept = 0;
    bool bad = false;
    for (int sy = 0; sy < u_samples.y; ++sy) {
        int row = int(floor(start.y + (float(sy) + 0.5) * stp.y));
        if (row < 0 || row >= u_size.y) continue;
        float rs = 1.0;
        if (u_mode == 1) {
            float m = fetch_linear(u_rowmax, row);
            rs = m > 0.0 ? 1.0 / m : 0.0;
        }
        for (int sx = 0; sx < u_samples.x; ++sx) {
            int col = int(floor(start.x + (float(sx) + 0.5) * stp.x));
            if (col < 0 || col >= u_size.x) continue;
            int dc = u_has_perm != 0 ? int(fetch_linear(u_perm, col) + 0.5) : col;
            ivec3 tc = tile_of(dc, row);
            float v = texelFetch(u_values, tc, 0).r;
            if (isnan(v) || isinf(v)) {
                bad = true;
                continue;
            }
            ++n;
            if (u_mode == 2 && u_has_mask != 0 && texelFetch(u_mask, tc, 0).r < 0.5 / 255.0) continue;
            ++kept;
            best = max(best, abs(v) * rs);
        }
    }
    if (n == 0) {
        o_color = vec4(bad ? u_bad_col : u_bg, 1.0);
        return;
    }
    vec3 c = cmap(level(best));
    if (kept < n) {
        float stripe = mod(floor(gl_FragCoord.x) + floor(gl_FragCoord.y), 6.0);
        vec3 m = stripe < 2.0 ? u_hatch_col : u_mask_col;
        c = kept == 0 ? m : mix(m, c, float(kept) / float(n));
    }
    o_color = vec4(c, 1.0);
}
)";

const char* composite_src = R"(
uniform sampler2D u_frame;
uniform float u_fbh;
uniform int u_div;         // the frame was drawn at 1/u_div resolution into its bottom-left corner
uniform int u_frame_h;     // height of that drawing
uniform vec2 u_line;       // boundary: y from the top in framebuffer pixels (< 0: none), half width
uniform vec2 u_line_x;     // x extent of the matrix
uniform vec2 u_hl;         // highlighted row: y0, y1 from the top (y1 <= y0: none)
uniform vec3 u_line_col;
out vec4 o_color;
void main() {
    ivec2 px = ivec2(gl_FragCoord.xy);
    int from_top = int(u_fbh) - 1 - px.y;
    vec3 c = texelFetch(u_frame, ivec2(px.x / u_div, u_frame_h - 1 - from_top / u_div), 0).rgb;
    float y = u_fbh - gl_FragCoord.y;
    bool in_x = gl_FragCoord.x >= u_line_x.x && gl_FragCoord.x <= u_line_x.y;
    if (in_x && u_hl.y > u_hl.x && y >= u_hl.x && y < u_hl.y) c = mix(c, vec3(1.0), 0.35);
    if (in_x && u_line.x >= 0.0 && abs(y - u_line.x) <= u_line.y) c = u_line_col;
    o_color = vec4(c, 1.0);
}
)";

QVector3D rgb(const QColor& c) { return {static_cast<float>(c.redF()), static_cast<float>(c.greenF()), static_cast<float>(c.blueF())}; }

void set_nearest(QOpenGLExtraFunctions* f, GLenum target) {
    f->glTexParameteri(target, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    f->glTexParameteri(target, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    f->glTexParameteri(target, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    f->glTexParameteri(target, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    f->glTexParameteri(target, GL_TEXTURE_MAX_LEVEL, 0);
}

}  // namespace

void HeatmapCanvas::initializeGL() {
    disconnect(m_contextGone);
    m_contextGone = connect(context(), &QOpenGLContext::aboutToBeDestroyed, this, [this] {
        makeCurrent();
        releaseGL();
        doneCurrent();
    }, Qt::DirectConnection);
    initializeOpenGLFunctions();
    m_glOk = false;
    const QSurfaceFormat f = context()->format();
    const auto str = [this](GLenum e) {
        const auto* s = reinterpret_cast<const char*>(glGetString(e));
        return QString::fromLatin1(s ? s : "?");
    };
    m_glInfo = QStringLiteral("%1 | %2 | %3 profile").arg(str(GL_RENDERER), str(GL_VERSION),
                                                          f.profile() == QSurfaceFormat::CoreProfile ? "core" : "compat");
    const int version = f.majorVersion() * 10 + f.minorVersion();
    if (context()->isOpenGLES() || version < 30) {
        m_glFailure = QStringLiteral("heatmap needs desktop OpenGL 3.0 (texture arrays, texelFetch); got %1").arg(m_glInfo);
        qWarning("HeatmapCanvas: %s", qPrintable(m_glFailure));
        return;
    }
    m_glsl = version >= 33 ? QStringLiteral("#version 330 core\n") : QStringLiteral("#version 130\n");
    glGetIntegerv(GL_MAX_TEXTURE_SIZE, &m_maxTex);
    glGetIntegerv(GL_MAX_ARRAY_TEXTURE_LAYERS, &m_maxLayers);

    const auto build = [this](const char* frag, const char* what) -> QOpenGLShaderProgram* {
        auto* p = new QOpenGLShaderProgram(this);
        if (!p->addShaderFromSourceCode(QOpenGLShader::Vertex, m_glsl + vertex_src) ||
            !p->addShaderFromSourceCode(QOpenGLShader::Fragment, m_glsl + frag) || !p->link()) {
            m_glFailure = QStringLiteral("%1 shader failed (%2): %3").arg(what, m_glInfo, p->log());
            qWarning("HeatmapCanvas: %s", qPrintable(m_glFailure));
            delete p;
            return nullptr;
        }
        return p;
    };
    m_heatProg = build(heatmap_src, "heatmap");
    m_compProg = m_heatProg ? build(composite_src, "composite") : nullptr;
    if (!m_compProg) return;

    glGenVertexArrays(1, &m_vao);
    unsigned tex[5];
    glGenTextures(5, tex);
    m_texValues = tex[0];
    m_texMask = tex[1];
    m_texRowMax = tex[2];
    m_texPerm = tex[3];
    m_texLut = tex[4];
    for (unsigned t : {m_texValues, m_texMask}) {
        glBindTexture(GL_TEXTURE_2D_ARRAY, t);
        set_nearest(this, GL_TEXTURE_2D_ARRAY);
        const float zero = 0.0f;
        glTexImage3D(GL_TEXTURE_2D_ARRAY, 0, GL_R32F, 1, 1, 1, 0, GL_RED, GL_FLOAT, &zero);
    }
    for (unsigned t : {m_texRowMax, m_texPerm, m_texLut}) {
        glBindTexture(GL_TEXTURE_2D, t);
        set_nearest(this, GL_TEXTURE_2D);
        const float zero = 0.0f;
        glTexImage2D(GL_TEXTURE_2D, 0, GL_R32F, 1, 1, 0, GL_RED, GL_FLOAT, &zero);
    }
    m_linW = std::max(1, std::min(m_maxTex, 4096));
    m_needUpload = m_needPerm = m_needLut = m_dirty = true;
    m_fboW = m_fboH = 0;
    m_glOk = true;
    m_glFailure.clear();
    checkGlErrors("initializeGL");

#ifdef SPARSELENS_WITH_IMGUI
    if (!m_imgui) m_imgui = std::make_unique<ImGuiQtGlue>();
    if (!m_imgui->initialize(context())) qWarning("HeatmapCanvas: %s", qPrintable(m_imgui->error()));
#endif
}

void HeatmapCanvas::releaseGL() {
#ifdef SPARSELENS_WITH_IMGUI
    if (m_imgui) m_imgui->shutdown();
#endif
    if (!m_glOk && !m_heatProg) return;
    delete m_heatProg;
    delete m_compProg;
    m_heatProg = m_compProg = nullptr;
    if (m_vao) glDeleteVertexArrays(1, &m_vao);
    const unsigned tex[6] = {m_texValues, m_texMask, m_texRowMax, m_texPerm, m_texLut, m_fboTex};
    glDeleteTextures(6, tex);
    if (m_fbo) glDeleteFramebuffers(1, &m_fbo);
    m_vao = m_texValues = m_texMask = m_texRowMax = m_texPerm = m_texLut = m_fbo = m_fboTex = 0;
    m_fboW = m_fboH = 0;
    m_glOk = false;
}

void HeatmapCanvas::checkGlErrors(const char* where) {
    for (GLenum e = glGetError(); e != GL_NO_ERROR; e = glGetError()) {
        if (m_glErrors++ < 8) qWarning("HeatmapCanvas: GL error 0x%x in %s", e, where);
    }
}

void HeatmapCanvas::uploadMatrix() {
    m_needUpload = false;
    m_tiling = {};
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    if (!m_snap) {
        uploadLinear(m_texRowMax, {});
        return;
    }
    const int rows = m_snap->n_tokens, cols = m_snap->width;
    const int side = m_tileOverride > 0 ? std::min(m_tileOverride, m_maxTex) : m_maxTex;
    const heatmap_tiling t = heatmap_tiling_for(rows, cols, side);
    if (t.layers() > m_maxLayers) {
        m_status = tr("%1 x %2 needs %3 texture tiles; this GPU allows %4").arg(rows).arg(cols).arg(t.layers()).arg(m_maxLayers);
        m_snap.reset();
        return;
    }
    const auto upload = [&](unsigned tex, GLenum internal, GLenum type, const void* data) {
        glBindTexture(GL_TEXTURE_2D_ARRAY, tex);
        glTexImage3D(GL_TEXTURE_2D_ARRAY, 0, static_cast<GLint>(internal), t.tile_w, t.tile_h, t.layers(), 0, GL_RED, type,
                     nullptr);
        glPixelStorei(GL_UNPACK_ROW_LENGTH, cols);
        for (int ty = 0; ty < t.tiles_y; ++ty)
            for (int tx = 0; tx < t.tiles_x; ++tx) {
                const int x0 = tx * t.tile_w, y0 = ty * t.tile_h;
                const int w = std::min(t.tile_w, cols - x0), h = std::min(t.tile_h, rows - y0);
                if (w <= 0 || h <= 0) continue;
                glPixelStorei(GL_UNPACK_SKIP_PIXELS, x0);
                glPixelStorei(GL_UNPACK_SKIP_ROWS, y0);
                glTexSubImage3D(GL_TEXTURE_2D_ARRAY, 0, 0, 0, ty * t.tiles_x + tx, w, h, 1, GL_RED, type, data);
            }
        glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
        glPixelStorei(GL_UNPACK_SKIP_PIXELS, 0);
        glPixelStorei(GL_UNPACK_SKIP_ROWS, 0);
    };
    upload(m_texValues, GL_R32F, GL_FLOAT, m_snap->values.data());
    if (m_maskValid) upload(m_texMask, GL_R8, GL_UNSIGNED_BYTE, m_snap->kept.data());
    m_tiling = t;
    uploadLinear(m_texRowMax, m_rowMax);
    checkGlErrors("uploadMatrix");
}

void HeatmapCanvas::uploadLinear(unsigned tex, const std::vector<float>& v) {
    const int n = std::max<int>(1, static_cast<int>(v.size()));
    const int w = std::min(n, m_linW), h = (n + w - 1) / w;
    std::vector<float> padded(static_cast<size_t>(w) * h, 0.0f);
    std::copy(v.begin(), v.end(), padded.begin());
    glBindTexture(GL_TEXTURE_2D, tex);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_R32F, w, h, 0, GL_RED, GL_FLOAT, padded.data());
}

void HeatmapCanvas::uploadPermutation() {
    m_needPerm = false;
    std::vector<float> p(m_perm.begin(), m_perm.end());  // exact: ids < 2^24
    uploadLinear(m_texPerm, p);
    checkGlErrors("uploadPermutation");
}

void HeatmapCanvas::uploadLut() {
    m_needLut = false;
    const std::vector<uint8_t> lut = colormap_lut_rgba(m_cmap, 256);
    glBindTexture(GL_TEXTURE_2D, m_texLut);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, 256, 1, 0, GL_RGBA, GL_UNSIGNED_BYTE, lut.data());
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_LINEAR);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_LINEAR);
    checkGlErrors("uploadLut");
}

void HeatmapCanvas::ensureFrameTarget(int w, int h) {
    if (w == m_fboW && h == m_fboH && m_fbo) return;
    if (!m_fbo) glGenFramebuffers(1, &m_fbo);
    if (!m_fboTex) glGenTextures(1, &m_fboTex);
    glBindTexture(GL_TEXTURE_2D, m_fboTex);
    set_nearest(this, GL_TEXTURE_2D);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, w, h, 0, GL_RGBA, GL_UNSIGNED_BYTE, nullptr);
    glBindFramebuffer(GL_FRAMEBUFFER, m_fbo);
    glFramebufferTexture2D(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, m_fboTex, 0);
    if (glCheckFramebufferStatus(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE) {
        m_glFailure = QStringLiteral("off-screen heatmap target %1 x %2 is incomplete").arg(w).arg(h);
        qWarning("HeatmapCanvas: %s", qPrintable(m_glFailure));
        ++m_glErrors;
    }
    glBindFramebuffer(GL_FRAMEBUFFER, defaultFramebufferObject());
    m_fboW = w;
    m_fboH = h;
    m_dirty = true;
}

void HeatmapCanvas::drawHeatmapPass(int w, int h) {
    QElapsedTimer clock;
    clock.start();
    m_renderDiv = m_interacting ? 2 : 1;
    const int div = m_renderDiv;
    w = (w + div - 1) / div;
    h = (h + div - 1) / div;
    glBindFramebuffer(GL_FRAMEBUFFER, m_fbo);
    glViewport(0, 0, w, h);
    glDisable(GL_BLEND);
    glDisable(GL_DEPTH_TEST);
    glDisable(GL_SCISSOR_TEST);
    const QColor bg = backgroundColor();
    glClearColor(static_cast<float>(bg.redF()), static_cast<float>(bg.greenF()), static_cast<float>(bg.blueF()), 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    if (m_snap && m_tiling.layers() > 0) {
        const qreal dpr = devicePixelRatioF() / div;
        const QPointF cpp(1.0 / (m_scale.x() * dpr), 1.0 / (m_scale.y() * dpr));
        const int max_samples = m_interacting ? 1 : m_maxSamples;
        const auto samples = [max_samples](double c) { return std::clamp(static_cast<int>(std::ceil(c - 1e-6)), 1, max_samples); };
        QOpenGLShaderProgram& p = *m_heatProg;
        p.bind();
        const GLenum units[5] = {GL_TEXTURE0, GL_TEXTURE1, GL_TEXTURE2, GL_TEXTURE3, GL_TEXTURE4};
        const unsigned textures[5] = {m_texValues, m_texMask, m_texRowMax, m_texPerm, m_texLut};
        for (int i = 0; i < 5; ++i) {
            glActiveTexture(units[i]);
            glBindTexture(i < 2 ? GL_TEXTURE_2D_ARRAY : GL_TEXTURE_2D, textures[i]);
        }
        glActiveTexture(GL_TEXTURE0);
        p.setUniformValue("u_values", 0);
        p.setUniformValue("u_mask", 1);
        p.setUniformValue("u_rowmax", 2);
        p.setUniformValue("u_perm", 3);
        p.setUniformValue("u_lut", 4);
        glUniform2i(p.uniformLocation("u_size"), m_snap->width, m_snap->n_tokens);
        glUniform3i(p.uniformLocation("u_tile"), m_tiling.tiles_x, m_tiling.tile_w, m_tiling.tile_h);
        glUniform2i(p.uniformLocation("u_samples"), samples(cpp.x()), samples(cpp.y()));
        p.setUniformValue("u_linw", m_linW);
        p.setUniformValue("u_mode", static_cast<int>(m_mode));
        p.setUniformValue("u_has_mask", m_maskValid ? 1 : 0);
        p.setUniformValue("u_has_perm", m_perm.empty() ? 0 : 1);
        p.setUniformValue("u_log", m_log ? 1 : 0);
        p.setUniformValue("u_max", scaleMax());
        p.setUniformValue("u_decades", m_decades);
        p.setUniformValue("u_origin", QVector2D(m_origin));
        p.setUniformValue("u_cpp", QVector2D(cpp));
        p.setUniformValue("u_fbh", static_cast<float>(h));
        p.setUniformValue("u_bg", rgb(backgroundColor()));
        p.setUniformValue("u_mask_col", rgb(maskColor()));
        p.setUniformValue("u_hatch_col", rgb(maskHatchColor()));
        p.setUniformValue("u_bad_col", rgb(invalidColor()));
        glBindVertexArray(m_vao);
        glDrawArrays(GL_TRIANGLES, 0, 3);
        glBindVertexArray(0);
        p.release();
    }
    glBindFramebuffer(GL_FRAMEBUFFER, defaultFramebufferObject());
    m_dirty = false;
    if (m_timing) {
        glFinish();
        m_heatMs = static_cast<double>(clock.nsecsElapsed()) / 1e6;
    }
    checkGlErrors("heatmap pass");
}

void HeatmapCanvas::drawCompositePass(int w, int h) {
    QElapsedTimer clock;
    clock.start();
    glViewport(0, 0, w, h);
    glDisable(GL_BLEND);
    glDisable(GL_DEPTH_TEST);
    glDisable(GL_SCISSOR_TEST);
    const qreal dpr = devicePixelRatioF();
    const double sx = m_scale.x() * dpr, sy = m_scale.y() * dpr;
    float line_y = -1, hl0 = 0, hl1 = 0, x0 = 0, x1 = 0;
    if (m_snap) {
        x0 = static_cast<float>(-m_origin.x() * sx);
        x1 = static_cast<float>((m_snap->width - m_origin.x()) * sx);
        if (m_snap->n_prompt > 0 && m_snap->n_prompt < m_snap->n_tokens)
            line_y = static_cast<float>((m_snap->n_prompt - m_origin.y()) * sy);
        if (m_highlight >= 0 && m_highlight < m_snap->n_tokens) {
            hl0 = static_cast<float>((m_highlight - m_origin.y()) * sy);
            hl1 = static_cast<float>((m_highlight + 1 - m_origin.y()) * sy);
            if (hl1 - hl0 < 3.0f) {  // keep a thin row visible when zoomed out
                const float c = 0.5f * (hl0 + hl1);
                hl0 = c - 1.5f;
                hl1 = c + 1.5f;
            }
        }
    }
    QOpenGLShaderProgram& p = *m_compProg;
    p.bind();
    glActiveTexture(GL_TEXTURE0);
    glBindTexture(GL_TEXTURE_2D, m_fboTex);
    p.setUniformValue("u_frame", 0);
    p.setUniformValue("u_fbh", static_cast<float>(h));
    p.setUniformValue("u_div", m_renderDiv);
    p.setUniformValue("u_frame_h", (h + m_renderDiv - 1) / m_renderDiv);
    p.setUniformValue("u_line", QVector2D(line_y, static_cast<float>(dpr)));
    p.setUniformValue("u_line_x", QVector2D(x0, x1));
    p.setUniformValue("u_hl", QVector2D(hl0, hl1));
    p.setUniformValue("u_line_col", rgb(boundaryColor()));
    glBindVertexArray(m_vao);
    glDrawArrays(GL_TRIANGLES, 0, 3);
    glBindVertexArray(0);
    p.release();
    if (m_timing) {
        glFinish();
        m_compMs = static_cast<double>(clock.nsecsElapsed()) / 1e6;
    }
    checkGlErrors("composite pass");
}

void HeatmapCanvas::resizeGL(int, int) { m_dirty = true; }

void HeatmapCanvas::paintGL() {
    m_heatMs = 0;  // stays 0 when the cached heatmap is reused
    const qreal dpr = devicePixelRatioF();
    const int w = std::max(1, static_cast<int>(std::lround(width() * dpr)));
    const int h = std::max(1, static_cast<int>(std::lround(height() * dpr)));
    if (!m_glOk) {
        if (m_message->text().isEmpty()) QTimer::singleShot(0, this, [this] { updateMessage(); });
        glClearColor(0.3f, 0.0f, 0.0f, 1.0f);
        glClear(GL_COLOR_BUFFER_BIT);
        return;
    }
    if (m_needLut) uploadLut();
    if (m_needUpload) {
        uploadMatrix();
        if (!m_snap) QTimer::singleShot(0, this, [this] { updateMessage(); });  // refused by the GPU's limits
    }
    if (m_needPerm) uploadPermutation();
    ensureFrameTarget(w, h);
    if (m_dirty) drawHeatmapPass(w, h);
    glBindFramebuffer(GL_FRAMEBUFFER, defaultFramebufferObject());
    drawCompositePass(w, h);

#ifdef SPARSELENS_WITH_IMGUI
    if (overlayActive()) {
        glBindFramebuffer(GL_FRAMEBUFFER, defaultFramebufferObject());
        m_imgui->newFrame(size(), dpr);
        drawOverlay();
        m_imgui->render();
        checkGlErrors("imgui");
        if (m_imgui->needsMoreFrames()) m_frameTimer.start();
    }
#endif
}

}  // namespace sl::views

// Qt -> Dear ImGui platform glue: one ImGui context per GL widget, fed from Qt events, drawn with the
// ImGui OpenGL3 backend inside the widget's own GL context.
#pragma once

#ifdef SPARSELENS_WITH_IMGUI

#include <QElapsedTimer>
#include <QPointF>
#include <QSize>
#include <QString>

struct ImGuiContext;
class QKeyEvent;
class QWheelEvent;
class QOpenGLContext;

namespace sl::views {

class ImGuiQtGlue {
public:
    ImGuiQtGlue();
    ~ImGuiQtGlue();
    ImGuiQtGlue(const ImGuiQtGlue&) = delete;
    ImGuiQtGlue& operator=(const ImGuiQtGlue&) = delete;

    // With `ctx` current: picks the GLSL version from the context (#version 330 core on GL >= 3.3,
    // #version 130 on GL 3.0-3.2) and initialises the renderer. False (and error()) below GL 3.0 or on ES.
    bool initialize(QOpenGLContext* ctx);
    // With the same GL context current; safe to call twice.
    void shutdown();
    bool active() const { return m_initialized; }
    QString error() const { return m_error; }
    QString glslVersion() const { return m_glsl; }

    // Makes this glue's ImGui context current (every ImGui call of its widget must follow this).
    void makeCurrent() const;
    // Starts a frame: display size in logical pixels, framebuffer scale, time since the last frame.
    void newFrame(QSize logical_size, qreal dpr);
    // Ends the frame and draws it into the currently bound framebuffer.
    void render();

    void mouseMove(QPointF pos);
    void mouseButton(Qt::MouseButton b, bool down);
    void mouseLeave();
    void wheel(const QWheelEvent* e);
    void key(const QKeyEvent* e, bool down);

    // Whether ImGui used the last frame's input (the widget then ignores the event itself).
    bool wantsMouse() const;
    bool wantsKeyboard() const;
    // True while ImGui still needs frames to settle (a click in flight, recent input).
    bool needsMoreFrames() const;

private:
    ImGuiContext* m_ctx = nullptr;
    bool m_initialized = false;
    QString m_error, m_glsl;
    QByteArray m_glslBytes, m_clipboard;
    QElapsedTimer m_clock, m_sinceInput;
    bool m_pressedSinceFrame[3] = {false, false, false};
    bool m_down[3] = {false, false, false};
};

}  // namespace sl::views

#endif

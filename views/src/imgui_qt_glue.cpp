// ImGui 1.86 predates the input-event queue (1.87), so input goes straight into ImGuiIO's state arrays;
// a press that is released before the next frame is held down for one frame so a quick click registers.
#ifdef SPARSELENS_WITH_IMGUI

#include "imgui_qt_glue.h"

#include <imgui.h>
#include <backends/imgui_impl_opengl3.h>

#include <cfloat>
#include <iterator>

#include <QClipboard>
#include <QGuiApplication>
#include <QKeyEvent>
#include <QOpenGLContext>
#include <QWheelEvent>

namespace sl::views {
namespace {

struct key_pair {
    ImGuiKey imgui;
    int qt;
};
// Index into this table = index into io.KeysDown.
constexpr key_pair key_table[] = {
    {ImGuiKey_Tab, Qt::Key_Tab},         {ImGuiKey_LeftArrow, Qt::Key_Left}, {ImGuiKey_RightArrow, Qt::Key_Right},
    {ImGuiKey_UpArrow, Qt::Key_Up},      {ImGuiKey_DownArrow, Qt::Key_Down}, {ImGuiKey_PageUp, Qt::Key_PageUp},
    {ImGuiKey_PageDown, Qt::Key_PageDown}, {ImGuiKey_Home, Qt::Key_Home},    {ImGuiKey_End, Qt::Key_End},
    {ImGuiKey_Insert, Qt::Key_Insert},   {ImGuiKey_Delete, Qt::Key_Delete},  {ImGuiKey_Backspace, Qt::Key_Backspace},
    {ImGuiKey_Space, Qt::Key_Space},     {ImGuiKey_Enter, Qt::Key_Return},   {ImGuiKey_Escape, Qt::Key_Escape},
    {ImGuiKey_KeyPadEnter, Qt::Key_Enter}, {ImGuiKey_A, Qt::Key_A},          {ImGuiKey_C, Qt::Key_C},
    {ImGuiKey_V, Qt::Key_V},             {ImGuiKey_X, Qt::Key_X},            {ImGuiKey_Y, Qt::Key_Y},
    {ImGuiKey_Z, Qt::Key_Z},
};

const char* get_clipboard(void* user) {
    auto* buffer = static_cast<QByteArray*>(user);
    *buffer = QGuiApplication::clipboard()->text().toUtf8();
    return buffer->constData();
}
void set_clipboard(void*, const char* text) { QGuiApplication::clipboard()->setText(QString::fromUtf8(text)); }

int button_index(Qt::MouseButton b) {
    switch (b) {
        case Qt::LeftButton: return 0;
        case Qt::RightButton: return 1;
        case Qt::MiddleButton: return 2;
        default: return -1;
    }
}

}  // namespace

ImGuiQtGlue::ImGuiQtGlue() {
    ImGuiContext* previous = ImGui::GetCurrentContext();
    m_ctx = ImGui::CreateContext();
    ImGui::SetCurrentContext(m_ctx);
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;  // the canvas' view state is not worth a stray imgui.ini in the working directory
    io.BackendPlatformName = "sparselens_qt";
    for (int i = 0; i < static_cast<int>(std::size(key_table)); ++i) io.KeyMap[key_table[i].imgui] = i;
    io.GetClipboardTextFn = get_clipboard;
    io.SetClipboardTextFn = set_clipboard;
    io.ClipboardUserData = &m_clipboard;
    ImGui::StyleColorsDark();
    ImGui::GetStyle().Alpha = 0.92f;
    ImGui::SetCurrentContext(previous);
    m_clock.start();
    m_sinceInput.start();
}

ImGuiQtGlue::~ImGuiQtGlue() {
    // The renderer's GL objects must have been released by shutdown() with the GL context current;
    // here only the CPU-side context goes.
    if (m_ctx) ImGui::DestroyContext(m_ctx);
}

bool ImGuiQtGlue::initialize(QOpenGLContext* ctx) {
    if (m_initialized) return true;
    if (!ctx || !ctx->isValid()) {
        m_error = QStringLiteral("ImGui overlay: no valid OpenGL context");
        return false;
    }
    const QSurfaceFormat f = ctx->format();
    const int version = f.majorVersion() * 10 + f.minorVersion();
    if (ctx->isOpenGLES() || version < 30) {
        m_error = QStringLiteral("ImGui overlay: needs desktop OpenGL 3.0, got %1 %2.%3")
                      .arg(ctx->isOpenGLES() ? "OpenGL ES" : "OpenGL")
                      .arg(f.majorVersion())
                      .arg(f.minorVersion());
        return false;
    }
    m_glsl = version >= 33 ? QStringLiteral("#version 330 core") : QStringLiteral("#version 130");
    m_glslBytes = m_glsl.toLatin1();
    makeCurrent();
    if (!ImGui_ImplOpenGL3_Init(m_glslBytes.constData())) {
        m_error = QStringLiteral("ImGui overlay: ImGui_ImplOpenGL3_Init(%1) failed").arg(m_glsl);
        return false;
    }
    m_initialized = true;
    return true;
}

void ImGuiQtGlue::shutdown() {
    if (!m_initialized) return;
    makeCurrent();
    ImGui_ImplOpenGL3_Shutdown();
    m_initialized = false;
}

void ImGuiQtGlue::makeCurrent() const { ImGui::SetCurrentContext(m_ctx); }

void ImGuiQtGlue::newFrame(QSize logical_size, qreal dpr) {
    makeCurrent();
    ImGuiIO& io = ImGui::GetIO();
    io.DisplaySize = ImVec2(static_cast<float>(logical_size.width()), static_cast<float>(logical_size.height()));
    io.DisplayFramebufferScale = ImVec2(static_cast<float>(dpr), static_cast<float>(dpr));
    const qint64 ns = m_clock.nsecsElapsed();
    m_clock.restart();
    io.DeltaTime = std::max(1e-4f, static_cast<float>(ns) * 1e-9f);
    for (int i = 0; i < 3; ++i) {
        io.MouseDown[i] = m_down[i] || m_pressedSinceFrame[i];
        m_pressedSinceFrame[i] = false;
    }
    ImGui_ImplOpenGL3_NewFrame();
    ImGui::NewFrame();
}

void ImGuiQtGlue::render() {
    makeCurrent();
    ImGui::Render();
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
}

void ImGuiQtGlue::mouseMove(QPointF pos) {
    makeCurrent();
    ImGui::GetIO().MousePos = ImVec2(static_cast<float>(pos.x()), static_cast<float>(pos.y()));
    m_sinceInput.restart();
}

void ImGuiQtGlue::mouseButton(Qt::MouseButton b, bool down) {
    const int i = button_index(b);
    if (i < 0) return;
    m_down[i] = down;
    if (down) m_pressedSinceFrame[i] = true;
    m_sinceInput.restart();
}

void ImGuiQtGlue::mouseLeave() {
    makeCurrent();
    ImGui::GetIO().MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
    m_sinceInput.restart();
}

void ImGuiQtGlue::wheel(const QWheelEvent* e) {
    makeCurrent();
    ImGuiIO& io = ImGui::GetIO();
    io.MouseWheel += static_cast<float>(e->angleDelta().y()) / 120.0f;
    io.MouseWheelH += static_cast<float>(e->angleDelta().x()) / 120.0f;
    m_sinceInput.restart();
}

void ImGuiQtGlue::key(const QKeyEvent* e, bool down) {
    makeCurrent();
    ImGuiIO& io = ImGui::GetIO();
    for (int i = 0; i < static_cast<int>(std::size(key_table)); ++i)
        if (key_table[i].qt == e->key()) io.KeysDown[i] = down;
    const Qt::KeyboardModifiers m = e->modifiers();
    io.KeyCtrl = m.testFlag(Qt::ControlModifier);
    io.KeyShift = m.testFlag(Qt::ShiftModifier);
    io.KeyAlt = m.testFlag(Qt::AltModifier);
    io.KeySuper = m.testFlag(Qt::MetaModifier);
    if (down && !e->text().isEmpty() && e->text().at(0).isPrint()) io.AddInputCharactersUTF8(e->text().toUtf8().constData());
    m_sinceInput.restart();
}

bool ImGuiQtGlue::wantsMouse() const {
    makeCurrent();
    return ImGui::GetIO().WantCaptureMouse;
}

bool ImGuiQtGlue::wantsKeyboard() const {
    makeCurrent();
    return ImGui::GetIO().WantCaptureKeyboard;
}

bool ImGuiQtGlue::needsMoreFrames() const {
    return m_sinceInput.elapsed() < 300 || m_pressedSinceFrame[0] || m_pressedSinceFrame[1] || m_pressedSinceFrame[2];
}

}  // namespace sl::views

#endif

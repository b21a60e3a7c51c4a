// HeatmapCanvas, Dear ImGui overlay: colour-scale and zoom controls plus the hover inspector. Runs inside
// paintGL with the canvas' own ImGui context current; changes go through the same setters the Qt
// controls use, so both stay in sync through colorScaleChanged().
#include "sparselens/views/heatmap_canvas.h"

#ifdef SPARSELENS_WITH_IMGUI

#include <cmath>

#include <imgui.h>

#include "imgui_qt_glue.h"

namespace sl::views {

void HeatmapCanvas::drawOverlay() {
    // Closed, the overlay is one small "View" button in the bottom-right corner: the top rows are the
    // prompt, which the old title bar at the top-left covered. Open, the controls sit just above it.
    const ImGuiIO& io0 = ImGui::GetIO();
    const ImVec2 corner(io0.DisplaySize.x - 6.0f, io0.DisplaySize.y - 6.0f);
    const ImGuiWindowFlags fixed = ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_AlwaysAutoResize |
                                   ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoCollapse;
    ImGui::SetNextWindowPos(corner, ImGuiCond_Always, ImVec2(1.0f, 1.0f));
    ImGui::SetNextWindowBgAlpha(0.85f);
    ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(3, 3));
    float buttonHeight = 0;
    if (ImGui::Begin("##view-toggle", nullptr, fixed | ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoScrollbar)) {
        if (ImGui::ArrowButton("##view-arrow", m_overlayOpen ? ImGuiDir_Down : ImGuiDir_Up)) m_overlayOpen = !m_overlayOpen;
        ImGui::SameLine(0, 3);
        if (ImGui::Button("View")) m_overlayOpen = !m_overlayOpen;
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("colour map, scale and zoom (H hides)");
        buttonHeight = ImGui::GetWindowHeight();
        const ImVec2 at = ImGui::GetWindowPos(), size = ImGui::GetWindowSize();
        m_overlayButton = QRect(static_cast<int>(at.x), static_cast<int>(at.y), static_cast<int>(size.x),
                                static_cast<int>(size.y));
    }
    ImGui::End();
    ImGui::PopStyleVar();

    const bool open = m_overlayOpen;  // Begin() may clear m_overlayOpen (its close button)
    if (open) {
        ImGui::SetNextWindowPos(ImVec2(corner.x, corner.y - buttonHeight - 4.0f), ImGuiCond_Always, ImVec2(1.0f, 1.0f));
        ImGui::SetNextWindowBgAlpha(0.9f);
    }
    if (open && ImGui::Begin("View", &m_overlayOpen, fixed)) {
        int cm = static_cast<int>(m_cmap);
        const char* names[colormap_count];
        for (int i = 0; i < colormap_count; ++i) names[i] = colormap_name(static_cast<colormap>(i)).data();
        ImGui::SetNextItemWidth(140);
        if (ImGui::Combo("colour map", &cm, names, colormap_count)) setColormap(static_cast<colormap>(cm));

        bool log = m_log;
        if (ImGui::Checkbox("log scale", &log)) setLogScale(log);
        if (m_log) {
            float dec = m_decades;
            ImGui::SetNextItemWidth(140);
            if (ImGui::SliderFloat("decades", &dec, 0.5f, 8.0f, "%.1f")) setLogDecades(dec);
        }
        bool automax = m_autoScale;
        if (ImGui::Checkbox("auto max", &automax)) setAutoScale(automax);
        ImGui::SameLine();
        ImGui::TextDisabled(m_mode == heatmap_mode::relative ? "(1 = row max)" : "(p99.9 = %.3g)",
                            static_cast<double>(m_autoMax));
        float mx = scaleMax();
        const float hi = m_mode == heatmap_mode::relative ? 1.0f : std::max(m_autoMax, 1e-6f) * 100.0f;
        ImGui::SetNextItemWidth(140);
        if (ImGui::SliderFloat("scale max", &mx, hi * 1e-6f, hi, "%.4g", ImGuiSliderFlags_Logarithmic)) setScaleMax(mx);

        ImGui::Separator();
        if (ImGui::Button(" + ")) zoomAt(QPointF(width() / 2.0, height() / 2.0), 1.25, 1.25);
        ImGui::SameLine();
        if (ImGui::Button(" - ")) zoomAt(QPointF(width() / 2.0, height() / 2.0), 0.8, 0.8);
        ImGui::SameLine();
        if (ImGui::Button("reset view")) resetView();
        if (m_snap)
            ImGui::Text("%.3g x %.3g px per cell, %d x %d", m_scale.x(), m_scale.y(), m_snap->n_tokens, m_snap->width);
        ImGui::TextDisabled("wheel: zoom (shift: rows, ctrl: columns), drag: pan");
    }
    if (open) ImGui::End();

    const ImGuiIO& io = ImGui::GetIO();
    if (m_hover && !io.WantCaptureMouse && !m_dragging) {
        const heatmap_cell& c = *m_hover;
        ImGui::BeginTooltip();
        ImGui::Text("token %d  (%s)", c.token, c.in_prompt ? "prompt" : "generated");
        if (c.neuron != c.column)
            ImGui::Text("neuron %d  at column %d", c.neuron, c.column);
        else
            ImGui::Text("neuron %d", c.neuron);
        ImGui::Text("value %+.5g", static_cast<double>(c.value));
        if (c.row_max > 0.0f) ImGui::Text("|v| / row max %.3f", static_cast<double>(std::fabs(c.value) / c.row_max));
        if (m_maskValid) {
            if (c.kept)
                ImGui::TextColored(ImVec4(0.5f, 1.0f, 0.5f, 1.0f), "computed by the kernels");
            else
                ImGui::TextColored(ImVec4(0.75f, 0.75f, 0.8f, 1.0f), "skipped by the kernels");
        }
        ImGui::EndTooltip();
    }
}

}  // namespace sl::views

#endif

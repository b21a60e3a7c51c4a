// Perceptual colour maps (viridis, magma, inferno) shared by the heatmap canvas, its legend and the ImGui overlay.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include <QColor>

namespace sl::views {

enum class colormap : uint8_t { viridis = 0, magma = 1, inferno = 2 };
inline constexpr int colormap_count = 3;

std::string_view colormap_name(colormap c);

// Colour at t in [0, 1] (clamped; NaN gives the low end), linearly interpolated between the map's
// control points in sRGB.
QColor colormap_color(colormap c, float t);

// n RGBA8 entries sampled at t = i / (n - 1): the lookup table the fragment shader indexes.
std::vector<uint8_t> colormap_lut_rgba(colormap c, int n = 256);

}  // namespace sl::views

// Control points of the matplotlib perceptual maps (van der Walt & Smith), ten evenly spaced samples each
// as published in the viridisLite palettes; interpolated linearly, which stays within ~1 ΔE of the full
// 256-entry tables because the maps are smooth by construction.
#include "sparselens/views/colormaps.h"

#include <algorithm>
#include <cmath>

namespace sl::views {
namespace {

using rgb = std::array<uint8_t, 3>;
constexpr int n_points = 10;

constexpr std::array<rgb, n_points> viridis_points{{{0x44, 0x01, 0x54}, {0x48, 0x28, 0x78}, {0x3E, 0x4A, 0x89},
                                                     {0x31, 0x68, 0x8E}, {0x26, 0x82, 0x8E}, {0x1F, 0x9E, 0x89},
                                                     {0x35, 0xB7, 0x79}, {0x6D, 0xCD, 0x59}, {0xB4, 0xDE, 0x2C},
                                                     {0xFD, 0xE7, 0x25}}};
constexpr std::array<rgb, n_points> magma_points{{{0x00, 0x00, 0x04}, {0x18, 0x0F, 0x3E}, {0x45, 0x10, 0x77},
                                                   {0x72, 0x1F, 0x81}, {0x9F, 0x2F, 0x7F}, {0xCD, 0x40, 0x71},
                                                   {0xF1, 0x60, 0x5D}, {0xFD, 0x95, 0x67}, {0xFE, 0xC9, 0x8D},
                                                   {0xFC, 0xFD, 0xBF}}};
constexpr std::array<rgb, n_points> inferno_points{{{0x00, 0x00, 0x04}, {0x1B, 0x0C, 0x42}, {0x4B, 0x0C, 0x6B},
                                                     {0x78, 0x1C, 0x6D}, {0xA5, 0x2C, 0x60}, {0xCF, 0x44, 0x46},
                                                     {0xED, 0x69, 0x25}, {0xFB, 0x9A, 0x06}, {0xF7, 0xD0, 0x3C},
                                                     {0xFC, 0xFF, 0xA4}}};

const std::array<rgb, n_points>& points(colormap c) {
    switch (c) {
        case colormap::magma: return magma_points;
        case colormap::inferno: return inferno_points;
        case colormap::viridis: break;
    }
    return viridis_points;
}

}  // namespace

std::string_view colormap_name(colormap c) {
    switch (c) {
        case colormap::viridis: return "viridis";
        case colormap::magma: return "magma";
        case colormap::inferno: return "inferno";
    }
    return "?";
}

QColor colormap_color(colormap c, float t) {
    if (!(t > 0.0f)) t = 0.0f;  // also catches NaN
    t = std::min(t, 1.0f);
    const auto& p = points(c);
    const float x = t * static_cast<float>(n_points - 1);
    const int i = std::min(static_cast<int>(x), n_points - 2);
    const float f = x - static_cast<float>(i);
    auto mix = [&](int k) {
        return static_cast<int>(std::lround(p[i][k] + (static_cast<float>(p[i + 1][k]) - p[i][k]) * f));
    };
    return QColor(mix(0), mix(1), mix(2));
}

std::vector<uint8_t> colormap_lut_rgba(colormap c, int n) {
    n = std::max(n, 2);
    std::vector<uint8_t> lut(static_cast<size_t>(n) * 4);
    for (int i = 0; i < n; ++i) {
        const QColor q = colormap_color(c, static_cast<float>(i) / static_cast<float>(n - 1));
        lut[i * 4 + 0] = static_cast<uint8_t>(q.red());
        lut[i * 4 + 1] = static_cast<uint8_t>(q.green());
        lut[i * 4 + 2] = static_cast<uint8_t>(q.blue());
        lut[i * 4 + 3] = 255;
    }
    return lut;
}

}  // namespace sl::views

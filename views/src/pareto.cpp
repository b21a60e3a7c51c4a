// Pareto front: sort by x (best first), sweep keeping the lowest y seen.
#include "sparselens/views/pareto.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sl::views {

std::vector<size_t> pareto_front(std::span<const xy_point> points, x_goal goal) {
    const double sign = goal == x_goal::maximise ? 1.0 : -1.0;  // compare on sign * x, larger is better
    std::vector<size_t> order;
    order.reserve(points.size());
    for (size_t i = 0; i < points.size(); ++i)
        if (std::isfinite(points[i].x) && std::isfinite(points[i].y)) order.push_back(i);
    // Best x first; equal x: lowest y first, then the earliest index (so the first of duplicates wins).
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        const double xa = sign * points[a].x, xb = sign * points[b].x;
        if (xa != xb) return xa > xb;
        return points[a].y < points[b].y;
    });
    std::vector<size_t> front;
    double best_y = std::numeric_limits<double>::infinity();
    for (size_t i : order)
        if (points[i].y < best_y) {  // every point before it has x at least as good and y no lower
            best_y = points[i].y;
            front.push_back(i);
        }
    std::sort(front.begin(), front.end(), [&](size_t a, size_t b) { return points[a].x < points[b].x; });
    return front;
}

}  // namespace sl::views

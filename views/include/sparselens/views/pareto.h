// Pareto fronts of 2-D trade-off points (throughput or density against an error metric) for the
// Trade-offs panel; plain C++ so it is unit-tested without a display.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace sl::views {

struct xy_point {
    double x = 0, y = 0;
};

enum class x_goal : unsigned char { maximise, minimise };  // throughput axes / density axis

// Indices of the non-dominated points, ordered by increasing x. y is always minimised. A point is
// dominated when another one is at least as good on both axes and strictly better on one; of several
// identical points only the first is kept. Points with a non-finite coordinate never enter the front.
std::vector<size_t> pareto_front(std::span<const xy_point> points, x_goal goal);

}  // namespace sl::views

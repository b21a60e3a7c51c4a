// pareto_front: non-dominated points for both x goals, ties, duplicates and non-finite values.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "sparselens/views/pareto.h"

using sl::views::pareto_front;
using sl::views::x_goal;
using sl::views::xy_point;

namespace {

// Brute force: i is on the front when no j dominates it and no earlier j is identical.
std::vector<size_t> naive_front(const std::vector<xy_point>& p, x_goal g) {
    const double s = g == x_goal::maximise ? 1 : -1;
    std::vector<size_t> out;
    for (size_t i = 0; i < p.size(); ++i) {
        if (!std::isfinite(p[i].x) || !std::isfinite(p[i].y)) continue;
        bool dominated = false;
        for (size_t j = 0; j < p.size() && !dominated; ++j) {
            if (j == i || !std::isfinite(p[j].x) || !std::isfinite(p[j].y)) continue;
            const bool no_worse = s * p[j].x >= s * p[i].x && p[j].y <= p[i].y;
            const bool better = s * p[j].x > s * p[i].x || p[j].y < p[i].y;
            dominated = (no_worse && better) || (j < i && p[j].x == p[i].x && p[j].y == p[i].y);
        }
        if (!dominated) out.push_back(i);
    }
    std::sort(out.begin(), out.end(), [&](size_t a, size_t b) { return p[a].x < p[b].x; });
    return out;
}

}  // namespace

TEST(Pareto, ThroughputAxisMaximisesX) {
    // (tok/s, ΔPPL): 3 is dominated by 1 (faster and more accurate); 4 by 2.
    const std::vector<xy_point> p = {{10, 0.5}, {20, 0.1}, {30, 0.4}, {15, 0.6}, {25, 0.45}};
    EXPECT_EQ(pareto_front(p, x_goal::maximise), (std::vector<size_t>{1, 2}));
}

TEST(Pareto, DensityAxisMinimisesX) {
    const std::vector<xy_point> p = {{0.3, 0.9}, {0.5, 0.2}, {0.7, 0.05}, {0.6, 0.3}, {0.9, 0.05}};
    EXPECT_EQ(pareto_front(p, x_goal::minimise), (std::vector<size_t>{0, 1, 2}));
}

TEST(Pareto, TiesDuplicatesAndNonFinite) {
    const std::vector<xy_point> p = {{1, 1}, {1, 1}, {1, 2}, {2, 1}, {NAN, 0}, {3, INFINITY}, {0.5, 0.5}};
    // Same y at larger x dominates (1,1); duplicates keep the first; NaN/inf never enter.
    EXPECT_EQ(pareto_front(p, x_goal::maximise), (std::vector<size_t>{6, 3}));
    EXPECT_EQ(pareto_front(p, x_goal::minimise), (std::vector<size_t>{6}));
    EXPECT_TRUE(pareto_front(std::vector<xy_point>{}, x_goal::maximise).empty());
    EXPECT_EQ(pareto_front(std::vector<xy_point>{{4, 4}}, x_goal::minimise), (std::vector<size_t>{0}));
}

TEST(Pareto, MatchesBruteForceOnRandomClouds) {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 200; ++trial) {
        std::vector<xy_point> p(1 + rng() % 40);
        for (auto& q : p) q = {static_cast<double>(rng() % 12), static_cast<double>(rng() % 12) / 4};  // many ties
        for (x_goal g : {x_goal::maximise, x_goal::minimise}) {
            const auto front = pareto_front(p, g);
            auto expect = naive_front(p, g);
            ASSERT_EQ(front.size(), expect.size()) << "trial " << trial;
            for (size_t k = 0; k < front.size(); ++k) {  // equal x on the front is impossible, so the order is unique
                EXPECT_EQ(front[k], expect[k]) << "trial " << trial;
            }
        }
    }
}

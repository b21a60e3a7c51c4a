// magnitude_histogram inversion against exact quantiles, edge cases, and calibration queries on hand-made data.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sparselens/core/calibration.h"

namespace {

double fraction_at_least(const std::vector<float>& sorted_abs, float t) {
    const auto it = std::lower_bound(sorted_abs.begin(), sorted_abs.end(), t);
    return static_cast<double>(sorted_abs.end() - it) / static_cast<double>(sorted_abs.size());
}

struct dist_case {
    const char* name;
    std::vector<float> values;
};

std::vector<dist_case> distributions() {
    std::mt19937 rng(123);
    std::vector<dist_case> out;
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::lognormal_distribution<float> lognormal(0.0f, 2.5f);
    std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
    std::exponential_distribution<float> expo(40.0f);
    dist_case n{"normal", {}}, l{"lognormal", {}}, u{"uniform", {}}, e{"exp-with-zeros", {}}, mix{"massive-outliers", {}};
    for (int i = 0; i < 200000; ++i) {
        n.values.push_back(normal(rng));
        l.values.push_back(lognormal(rng) * (i % 2 ? 1.0f : -1.0f));
        u.values.push_back(uniform(rng));
        e.values.push_back(i % 5 == 0 ? 0.0f : expo(rng));
        mix.values.push_back(i % 1000 == 0 ? 3000.0f * normal(rng) : 1e-3f * normal(rng));
    }
    out = {n, l, u, e, mix};
    return out;
}

TEST(MagnitudeHistogram, InvertsDensityAgainstExactQuantiles) {
    for (int bits : {5, 7, 9}) {
        for (const dist_case& dc : distributions()) {
            sl::magnitude_histogram h(bits);
            h.add_abs(dc.values);
            std::vector<float> sorted(dc.values.size());
            std::transform(dc.values.begin(), dc.values.end(), sorted.begin(), [](float v) { return std::fabs(v); });
            std::sort(sorted.begin(), sorted.end());
            // Coarser bins give larger interpolation error; 128 bins/octave (the default) must stay
            // well inside the 0.5% contract.
            const double tol = bits >= 7 ? 0.001 : 0.004;
            for (float d = 0.01f; d < 1.0f; d += 0.01f) {
                const float t = h.threshold_for_density(d);
                if (dc.name == std::string("exp-with-zeros") && d > 0.8f) {
                    // Only 80% are non-zero: asking for more keeps every non-zero entry.
                    EXPECT_EQ(t, std::numeric_limits<float>::denorm_min());
                    EXPECT_NEAR(fraction_at_least(sorted, t), 0.8, 1e-9);
                    continue;
                }
                EXPECT_NEAR(fraction_at_least(sorted, t), d, tol) << dc.name << " bits " << bits << " d " << d;
                const float q = sorted[sorted.size() - static_cast<size_t>(std::lround(d * sorted.size()))];
                EXPECT_NEAR(h.density_at_threshold(q), fraction_at_least(sorted, q), tol) << dc.name << " d " << d;
            }
            EXPECT_EQ(h.count(), dc.values.size());
            EXPECT_EQ(h.max_abs(), sorted.back());
        }
    }
}

TEST(MagnitudeHistogram, EdgesZerosAndNonFinite) {
    sl::magnitude_histogram h;
    EXPECT_EQ(h.count(), 0u);
    EXPECT_EQ(h.threshold_for_density(0.5f), 0.0f);
    EXPECT_EQ(h.density_at_threshold(1.0f), 0.0f);
    h.add_abs(std::vector<float>{0.0f, -0.0f, 1.0f, -2.0f, std::nanf(""), std::numeric_limits<float>::infinity(), 4.0f});
    EXPECT_EQ(h.count(), 5u);
    EXPECT_EQ(h.zeros(), 2u);
    EXPECT_EQ(h.nonfinite(), 2u);
    EXPECT_EQ(h.max_abs(), 4.0f);
    EXPECT_EQ(h.threshold_for_density(1.0f), 0.0f);
    EXPECT_EQ(h.threshold_for_density(1.5f), 0.0f);
    EXPECT_TRUE(std::isinf(h.threshold_for_density(0.0f)));
    EXPECT_TRUE(std::isinf(h.threshold_for_density(-1.0f)));
    EXPECT_EQ(h.density_at_threshold(0.0f), 1.0f);
    EXPECT_EQ(h.density_at_threshold(-3.0f), 1.0f);
    EXPECT_EQ(h.density_at_threshold(5.0f), 0.0f);
    EXPECT_FLOAT_EQ(h.density_at_threshold(std::numeric_limits<float>::denorm_min()), 0.6f);
    // Point masses (1, 2, 4, each 20%): inside a bin the histogram assumes a uniform spread, so its
    // own read-back is consistent; the top mass is squeezed to a point by the maximum.
    for (float d : {0.25f, 0.3f, 0.45f, 0.55f, 0.6f}) EXPECT_NEAR(h.density_at_threshold(h.threshold_for_density(d)), d, 1e-5);
    EXPECT_EQ(h.threshold_for_density(0.1f), 4.0f);
    EXPECT_FLOAT_EQ(h.density_at_threshold(4.0f), 0.2f);
    EXPECT_EQ(h.threshold_for_density(0.7f), std::numeric_limits<float>::denorm_min());
}

TEST(MagnitudeHistogram, MergeTrimAndAssign) {
    const auto dists = distributions();
    sl::magnitude_histogram all, a, b;
    all.add_abs(dists[1].values);
    all.add_abs(dists[3].values);
    a.add_abs(dists[1].values);
    b.add_abs(dists[3].values);
    a.merge(b);
    a.trim();
    all.trim();
    EXPECT_EQ(a, all);
    for (float d : {0.1f, 0.5f, 0.9f}) EXPECT_EQ(a.threshold_for_density(d), all.threshold_for_density(d));

    sl::magnitude_histogram c;
    ASSERT_TRUE(c.assign(a.octave_bits(), a.first_bin(), a.counts(), a.zeros(), a.nonfinite(), a.max_abs()));
    EXPECT_EQ(c, a);
    EXPECT_FALSE(c.assign(3, 0, {}, 0, 0, 0.0f));                        // resolution out of range
    EXPECT_FALSE(c.assign(7, 0xffffffu, {1}, 0, 0, 1.0f));                // past the float range
    EXPECT_FALSE(c.assign(7, a.first_bin(), a.counts(), 0, 0, 1e30f));    // max outside the top bin
    EXPECT_FALSE(c.assign(7, 0, {}, 3, 0, 2.0f));                         // max without non-zero entries
    EXPECT_FALSE(c.assign(7, 0, {~0ull, 2}, 0, 0, 0.0f));                 // count overflow
    EXPECT_EQ(c, a);  // failed assigns leave it untouched
}

TEST(CalibrationNames, SitesAliasTheirTensor) {
    using sl::site;
    EXPECT_EQ(sl::site_slot(site::q_in), sl::hist_slot::attn_in);
    EXPECT_EQ(sl::site_slot(site::v_in), sl::hist_slot::attn_in);
    EXPECT_EQ(sl::site_slot(site::o_in), sl::hist_slot::attn_out);
    EXPECT_EQ(sl::site_slot(site::up_in), sl::hist_slot::mlp_in);
    EXPECT_EQ(sl::site_slot(site::down_in), sl::hist_slot::glu);
    EXPECT_EQ(sl::site_slot(site::glu_abs), sl::hist_slot::glu);
    EXPECT_EQ(sl::site_slot(site::chess_score), sl::hist_slot::chess_score);
    for (int i = 0; i < sl::site_count; ++i) {
        site s{};
        ASSERT_TRUE(sl::site_from_name(sl::site_name(static_cast<site>(i)), s));
        EXPECT_EQ(static_cast<int>(s), i);
    }
    site s{};
    EXPECT_FALSE(sl::site_from_name("nope", s));
}

TEST(CalibrationHash, Fnv1a64KnownValues) {
    EXPECT_EQ(sl::fnv1a64("", 0), 0xcbf29ce484222325ull);
    EXPECT_EQ(sl::fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
    EXPECT_EQ(sl::fnv1a64("foobar", 6), 0x85944171f73967e8ull);
}

TEST(CalibrationQueries, HeavyHittersAndChessThresholdsOnHandMadeData) {
    sl::calibration cal;
    cal.layers.resize(1);
    sl::layer_calibration& l = cal.layers[0];
    l.heavy_hitter = {1.0f, 5.0f, 3.0f, 5.0f, 0.0f, 2.0f, 2.0f, 1.0f, 0.5f, 0.5f};
    // Ties go to the lower index.
    EXPECT_EQ(cal.heavy_hitters(0, 0.3f), (std::vector<int32_t>{1, 3, 2}));
    EXPECT_EQ(cal.heavy_hitters(0, 0.5f), (std::vector<int32_t>{1, 3, 2, 5, 6}));
    EXPECT_TRUE(cal.heavy_hitters(0, 0.0f).empty());
    EXPECT_EQ(cal.heavy_hitters(0, 2.0f).size(), 10u);
    EXPECT_NEAR(cal.heavy_hitter_share(0, 0.2f), 10.0 / 20.0, 1e-6);
    EXPECT_NEAR(cal.heavy_hitter_share(0, 1.0f), 1.0, 1e-6);

    // CHESS: scores E_i * |g_i| for two channels; thresholds divide the global one by E_i.
    l.mean_abs_up = {2.0f, 0.5f, 0.0f};
    sl::magnitude_histogram& h = l.hist[static_cast<size_t>(sl::hist_slot::chess_score)];
    std::vector<float> scores;
    for (int i = 1; i <= 1000; ++i) scores.push_back(static_cast<float>(i) * 0.01f);
    h.add_abs(scores);
    const float big_t = cal.threshold_for_density(0, sl::site::chess_score, 0.25f);
    EXPECT_NEAR(big_t, 7.5f, 0.05f);
    const std::vector<float> t = cal.chess_channel_thresholds(0, 0.25f);
    ASSERT_EQ(t.size(), 3u);
    EXPECT_FLOAT_EQ(t[0], big_t / 2.0f);
    EXPECT_FLOAT_EQ(t[1], big_t / 0.5f);
    EXPECT_TRUE(std::isinf(t[2]));  // a channel whose up projection is always zero contributes nothing
    for (float v : cal.chess_channel_thresholds(0, 1.0f)) EXPECT_EQ(v, 0.0f);
    for (float v : cal.chess_channel_thresholds(0, 0.0f)) EXPECT_TRUE(std::isinf(v));
}

}  // namespace

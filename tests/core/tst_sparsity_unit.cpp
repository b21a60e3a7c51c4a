// Selection rules on hand-made activations: top-k ties, NaN, all-zero, thresholds, densities, LFU stand-in.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "sparselens/core/residency.h"
#include "sparselens/core/sparsity.h"

namespace {

using v32 = std::vector<int32_t>;

TEST(TopK, PicksLargestSortedAscending) {
    std::vector<int32_t> out;
    sl::top_k_indices(std::vector<float>{0.1f, 5.0f, -3.0f, 4.0f, 2.0f}, 2, out);
    EXPECT_EQ(out, (v32{1, 3}));
}

TEST(TopK, TiesGoToLowerIndex) {
    std::vector<int32_t> out;
    sl::top_k_indices(std::vector<float>{1, 2, 2, 2, 1}, 2, out);
    EXPECT_EQ(out, (v32{1, 2}));
    sl::top_k_indices(std::vector<float>{0, 0, 0, 0}, 3, out);  // all-zero input: first k
    EXPECT_EQ(out, (v32{0, 1, 2}));
}

TEST(TopK, NaNRanksLast) {
    std::vector<int32_t> out;
    sl::top_k_indices(std::vector<float>{NAN, 1.0f, NAN, 0.5f}, 2, out);
    EXPECT_EQ(out, (v32{1, 3}));
    sl::top_k_indices(std::vector<float>{NAN, 1.0f, NAN, 0.5f}, 3, out);
    EXPECT_EQ(out, (v32{0, 1, 3}));
}

TEST(TopK, KClampedAndFullDensityIsAll) {
    std::vector<int32_t> out;
    sl::top_k_indices(std::vector<float>{1, 2}, 5, out);
    EXPECT_EQ(out, (v32{0, 1}));
    sl::top_k_indices(std::vector<float>{1, 2}, -1, out);
    EXPECT_TRUE(out.empty());
    sl::index_mask m;
    sl::top_k_mask(std::vector<float>{1, 2, 3}, 3, m);
    EXPECT_TRUE(m.all);
    sl::top_k_mask(std::vector<float>{1, 2, 3}, 0, m);
    EXPECT_FALSE(m.all);
    EXPECT_EQ(m.count(3), 0);
}

// The ranking spelled out (larger first, NaN last, -0 == +0, lower index first among equals), sorted: the
// fast top_k_indices must pick exactly this set.
v32 top_k_reference(const std::vector<float>& s, int64_t k) {
    v32 idx(s.size());
    for (size_t i = 0; i < s.size(); ++i) idx[i] = static_cast<int32_t>(i);
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) {
        const float sa = s[static_cast<size_t>(a)], sb = s[static_cast<size_t>(b)];
        if (std::isnan(sa) != std::isnan(sb)) return std::isnan(sb);
        return !std::isnan(sa) && sa > sb;
    });
    idx.resize(static_cast<size_t>(std::clamp<int64_t>(k, 0, static_cast<int64_t>(s.size()))));
    std::sort(idx.begin(), idx.end());
    return idx;
}

TEST(TopK, EqualsTheRankingOnRandomScoresWithTiesZerosInfAndNaN) {
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> kind(0, 9), small(-3, 3);
    std::normal_distribution<float> nd;
    std::vector<int32_t> out;
    for (int trial = 0; trial < 400; ++trial) {
        const int64_t n = 1 + trial % 97 * 7;
        std::vector<float> s(static_cast<size_t>(n));
        for (float& v : s) {
            const int c = kind(rng);
            v = c == 0 ? NAN : c == 1 ? -0.0f : c == 2 ? 0.0f : c == 3 ? -INFINITY : c == 4 ? INFINITY
                : c < 7 ? static_cast<float>(small(rng)) : nd(rng);
        }
        for (int64_t k : {int64_t{0}, int64_t{1}, n / 3, n / 2, n - 1, n}) {
            sl::top_k_indices(s, k, out);
            ASSERT_EQ(out, top_k_reference(s, k)) << "n=" << n << " k=" << k << " trial " << trial;
        }
    }
}

// Long score vectors as the engine ranks them (|GLU| of 8192 neurons; many equal values; one value
// everywhere), where the k-th best key's 11-bit bucket (and its 8-bit sub-bucket) holds from a few to
// all of the scores.
TEST(TopK, EqualsTheRankingOnLongVectors) {
    std::mt19937 rng(9);
    std::normal_distribution<float> nd;
    std::uniform_int_distribution<int> few(0, 5);
    std::vector<int32_t> out;
    for (int kind = 0; kind < 4; ++kind) {
        for (const int64_t n : {int64_t{2048}, int64_t{8192}, int64_t{14336}}) {
            std::vector<float> s(static_cast<size_t>(n));
            for (size_t i = 0; i < s.size(); ++i)
                s[i] = kind == 0   ? std::fabs(nd(rng))
                       : kind == 1 ? static_cast<float>(few(rng)) * 0.25f          // heavy ties
                       : kind == 2 ? 1.0f + static_cast<float>(i % 7) * 1e-7f      // one bucket
                                   : (i % 11 == 0 ? NAN : nd(rng) * 1e-30f);       // NaN, denormal range
            for (const double d : {0.01, 0.1, 0.5, 0.9}) {
                const auto k = static_cast<int64_t>(d * static_cast<double>(n));
                sl::top_k_indices(s, k, out);
                ASSERT_EQ(out, top_k_reference(s, k)) << "kind " << kind << " n=" << n << " k=" << k;
            }
        }
    }
}

TEST(Threshold, AbsoluteValueAndNaN) {
    sl::index_mask m;
    sl::threshold_mask(std::vector<float>{-2.0f, 0.5f, NAN, 1.0f, -0.99f}, 1.0f, m);
    EXPECT_FALSE(m.all);
    EXPECT_EQ(m.idx, (v32{0, 3}));
    sl::threshold_mask(std::vector<float>{-2.0f, 0.0f}, 0.0f, m);  // threshold 0 keeps everything
    EXPECT_TRUE(m.all);
}

TEST(DensityToK, RoundsAndClamps) {
    EXPECT_EQ(sl::density_to_k(0.5f, 172), 86);
    EXPECT_EQ(sl::density_to_k(0.0f, 172), 0);
    EXPECT_EQ(sl::density_to_k(1.5f, 10), 10);
    EXPECT_EQ(sl::density_to_k(NAN, 10), 0);
}

TEST(Masks, IntersectAndDensity) {
    sl::index_mask a, b, out;
    a.all = false;
    a.idx = {1, 3, 5, 7};
    b.all = false;
    b.idx = {3, 4, 5};
    sl::intersect_masks(a, b, out);
    EXPECT_EQ(out.idx, (v32{3, 5}));
    sl::index_mask all;
    sl::intersect_masks(all, a, out);
    EXPECT_EQ(out.idx, a.idx);

    sl::layer_masks m;
    m.reset();
    m.gate_in.all = false;
    m.gate_in.idx = {0, 1};  // 2 of 8 inputs
    m.up_in = m.gate_in;
    m.down_in.all = false;
    m.down_in.idx = {0, 2, 4, 6, 8};  // 5 of 10 neurons
    const sl::layer_density d = sl::masks_density(m, 8, 10, false);
    EXPECT_FLOAT_EQ(d.d[static_cast<int>(sl::proj::gate)], 0.25f);
    EXPECT_FLOAT_EQ(d.d[static_cast<int>(sl::proj::up)], 0.25f);
    EXPECT_FLOAT_EQ(d.d[static_cast<int>(sl::proj::down)], 0.5f);
    EXPECT_FLOAT_EQ(d.mlp(), (0.25f + 0.25f + 0.5f) / 3);
    EXPECT_FLOAT_EQ(d.attention(8, 4), 1.0f);

    // Gate pruning: up rows and down columns follow neurons_post.
    m.reset();
    m.neurons_post.all = false;
    m.neurons_post.idx = {1, 2};
    const sl::layer_density g = sl::masks_density(m, 8, 10, false);
    EXPECT_FLOAT_EQ(g.d[static_cast<int>(sl::proj::gate)], 1.0f);
    EXPECT_FLOAT_EQ(g.d[static_cast<int>(sl::proj::up)], 0.2f);
    EXPECT_FLOAT_EQ(g.d[static_cast<int>(sl::proj::down)], 0.2f);
    const sl::layer_density u = sl::masks_density(m, 8, 10, true);
    EXPECT_FLOAT_EQ(u.d[static_cast<int>(sl::proj::gate)], 0.2f);
    EXPECT_FLOAT_EQ(u.d[static_cast<int>(sl::proj::up)], 1.0f);
}

// The merge-based intersection count against a naive membership count, over random masks with every
// combination of "all" and explicit lists.
TEST(MasksDensity, MatchesNaiveCountOnRandomMasks) {
    std::mt19937 rng(7);
    const int64_t hidden = 97, dim = 16;
    auto random_mask = [&](sl::index_mask& m) {
        if (rng() % 4 == 0) {
            m.set_all();
            return;
        }
        m.set_none();
        const uint32_t keep = rng() % 100;
        for (int32_t i = 0; i < hidden; ++i)
            if (rng() % 100 < keep) m.idx.push_back(i);
    };
    for (int trial = 0; trial < 500; ++trial) {
        sl::layer_masks m;
        m.reset();
        random_mask(m.neurons_pre);
        random_mask(m.neurons_post);
        random_mask(m.down_in);
        int64_t both = 0, all3 = 0;
        for (int32_t i = 0; i < hidden; ++i) {
            const bool b = m.neurons_pre.contains(i) && m.neurons_post.contains(i);
            both += b;
            all3 += b && m.down_in.contains(i);
        }
        const sl::layer_density d = sl::masks_density(m, dim, hidden, false);
        ASSERT_FLOAT_EQ(d.d[static_cast<int>(sl::proj::up)], static_cast<float>(both) / hidden) << trial;
        ASSERT_FLOAT_EQ(d.d[static_cast<int>(sl::proj::down)], static_cast<float>(all3) / hidden) << trial;
    }
}

TEST(LfuResidency, KeepsMostFrequentWithinCapacity) {
    sl::lfu_residency r(1, 4, 4, 0.5f);  // 2 of 4 units per group
    sl::layer_masks m;
    m.reset();
    m.gate_in.all = false;
    m.down_in.all = false;
    auto use = [&](v32 in, int pos) {
        m.gate_in.idx = in;
        m.down_in.idx = in;
        r.on_token(0, pos, m);
    };
    use({0, 1}, 0);
    use({0, 2}, 1);
    use({0, 2}, 2);
    const uint8_t* res = r.resident_inputs(0);
    EXPECT_EQ(std::vector<uint8_t>(res, res + 4), (std::vector<uint8_t>{1, 0, 1, 0}));
    const uint8_t* neu = r.resident_neurons(0);
    EXPECT_EQ(std::vector<uint8_t>(neu, neu + 4), (std::vector<uint8_t>{1, 0, 1, 0}));
    // First touches are misses; token 3 hits 0 and 2 (resident after token 2), misses 3.
    const uint64_t misses_before = r.misses();
    use({0, 2, 3}, 3);
    EXPECT_EQ(r.misses() - misses_before, 2u);  // unit 3 in inputs and in neurons
    r.reset();
    EXPECT_EQ(r.resident_inputs(0)[0], 0);
}

// The resident sets against a spelled-out LFU: every unit's (touches, last touch) since reset, all units
// sorted by touches, then last touch (both descending), then index; the first `capacity` that were ever
// touched are resident. A neuron is touched when down_in, neurons_pre and neurons_post all hold it. Random
// masks of every density, capacities from 0 to all units, a reset midway.
TEST(LfuResidency, MatchesSortedReference) {
    std::mt19937 rng(7);
    for (const float frac : {0.0f, 0.1f, 0.37f, 0.5f, 0.9f, 1.0f}) {
        const int32_t dim = 40, hidden = 97;
        sl::lfu_residency r(2, dim, hidden, frac);
        std::vector<std::vector<uint32_t>> freq(4);
        std::vector<std::vector<int32_t>> last(4);
        auto clear = [&] {
            for (int g = 0; g < 4; ++g) {
                const int32_t n = g % 2 ? hidden : dim;
                freq[g].assign(static_cast<size_t>(n), 0);
                last[g].assign(static_cast<size_t>(n), -1);
            }
        };
        clear();
        for (int32_t pos = 0; pos < 60; ++pos) {
            if (pos == 30) {
                r.reset();
                clear();
            }
            for (int32_t layer = 0; layer < 2; ++layer) {
                sl::layer_masks m;
                m.reset();
                const double d = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
                auto pick = [&](int32_t n, sl::index_mask& out) {
                    out.all = d > 0.95;
                    out.idx.clear();
                    for (int32_t i = 0; i < n && !out.all; ++i)
                        if (std::uniform_real_distribution<double>(0.0, 1.0)(rng) < d) out.idx.push_back(i);
                };
                pick(dim, m.gate_in);
                pick(hidden, m.down_in);
                if (pos % 3 == 1) pick(hidden, m.neurons_pre);  // a neuron is used when it is in all three
                if (pos % 5 == 2) pick(hidden, m.neurons_post);
                r.on_token(layer, pos, m);
                sl::index_mask neurons;
                neurons.all = false;
                for (int32_t i = 0; i < hidden; ++i)
                    if (m.down_in.contains(i) && m.neurons_pre.contains(i) && m.neurons_post.contains(i))
                        neurons.idx.push_back(i);
                for (int g = 0; g < 2; ++g) {
                    const sl::index_mask& used = g == 0 ? m.gate_in : neurons;
                    const int32_t n = g == 0 ? dim : hidden;
                    std::vector<uint32_t>& f = freq[static_cast<size_t>(2 * layer + g)];
                    std::vector<int32_t>& t = last[static_cast<size_t>(2 * layer + g)];
                    for (int32_t i = 0; i < n; ++i)
                        if (std::binary_search(used.idx.begin(), used.idx.end(), i) || (g == 0 && used.all)) {
                            ++f[static_cast<size_t>(i)];
                            t[static_cast<size_t>(i)] = pos;
                        }
                    std::vector<int32_t> order(static_cast<size_t>(n));
                    for (int32_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
                    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
                        const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
                        if (f[ua] != f[ub]) return f[ua] > f[ub];
                        if (t[ua] != t[ub]) return t[ua] > t[ub];
                        return a < b;
                    });
                    const auto cap = static_cast<int32_t>(std::lround(frac * n));
                    std::vector<uint8_t> want(static_cast<size_t>(n), 0);
                    for (int32_t k = 0; k < cap; ++k) {
                        const auto u = static_cast<size_t>(order[static_cast<size_t>(k)]);
                        if (f[u] > 0) want[u] = 1;
                    }
                    const uint8_t* got = g == 0 ? r.resident_inputs(layer) : r.resident_neurons(layer);
                    ASSERT_EQ(std::vector<uint8_t>(got, got + n), want)
                        << "capacity " << frac << " position " << pos << " layer " << layer << (g ? " neurons" : " inputs");
                }
            }
        }
    }
}

}  // namespace

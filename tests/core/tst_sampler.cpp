// Sampling rules on hand-made distributions: argmax ties, temperature, nucleus cut-off, determinism.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "sparselens/core/sampler.h"

namespace {

TEST(Sampler, GreedyPicksFirstMaximumAndIgnoresNaN) {
    std::vector<float> l{0.5f, 2.0f, NAN, 2.0f, -1.0f};
    sl::sampler_params p;
    p.temperature = 0.0f;
    sl::sampler s(5, p);
    EXPECT_EQ(s.sample(l.data()), 1);
    EXPECT_EQ(sl::sampler::argmax(std::vector<float>{NAN, 1.0f, 3.0f}), 2);
}

TEST(Sampler, MultinomialFrequenciesFollowSoftmax) {
    const std::vector<float> logits{0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f)};
    sl::sampler_params p;
    p.temperature = 1.0f;
    p.top_p = 1.0f;  // plain multinomial
    p.seed = 42;
    sl::sampler s(4, p);
    std::vector<int> counts(4, 0);
    constexpr int n = 200000;
    for (int i = 0; i < n; ++i) {
        std::vector<float> l = logits;
        counts[static_cast<size_t>(s.sample(l.data()))]++;
    }
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(counts[static_cast<size_t>(k)] / double(n), (k + 1) / 10.0, 0.005) << k;
}

TEST(Sampler, TopPNeverLeavesTheNucleus) {
    // probabilities 0.5, 0.3, 0.15, 0.05: the nucleus for p = 0.7 is {0, 1}
    const std::vector<float> logits{std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
    sl::sampler_params p;
    p.temperature = 1.0f;
    p.top_p = 0.7f;
    p.seed = 7;
    sl::sampler s(4, p);
    int zero = 0;
    constexpr int n = 50000;
    for (int i = 0; i < n; ++i) {
        std::vector<float> l = logits;
        const int32_t t = s.sample(l.data());
        ASSERT_TRUE(t == 0 || t == 1) << t;
        zero += t == 0;
    }
    EXPECT_NEAR(zero / double(n), 0.5 / 0.8, 0.01);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDiffers) {
    std::vector<float> base(64);
    for (size_t i = 0; i < base.size(); ++i) base[i] = std::sin(float(i));
    auto run = [&](uint64_t seed) {
        sl::sampler_params p;
        p.temperature = 1.0f;
        p.top_p = 0.95f;
        p.seed = seed;
        sl::sampler s(64, p);
        std::vector<int32_t> out;
        for (int i = 0; i < 100; ++i) {
            std::vector<float> l = base;
            out.push_back(s.sample(l.data()));
        }
        return out;
    };
    EXPECT_EQ(run(1), run(1));
    EXPECT_NE(run(1), run(2));
}

TEST(Sampler, SoftmaxIsStableForLargeLogits) {
    std::vector<float> l{1000.0f, 1000.0f, -1000.0f};
    sl::softmax(l);
    EXPECT_FLOAT_EQ(l[0], 0.5f);
    EXPECT_FLOAT_EQ(l[1], 0.5f);
    EXPECT_FLOAT_EQ(l[2], 0.0f);
}

}  // namespace

// Mask-selection compresses (kernels::select_*) against one-element-at-a-time references, on every ISA:
// lengths around the 8- and 16-lane steps, duplicate keys, unsigned keys above 2^31, NaN/inf/-0 values,
// strict and non-strict and per-element thresholds; nothing written past the n entries of the input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernel_test_util.h"
#include "sparselens/kernels/select.h"

namespace {

using namespace sl::kernel_test;
namespace k = sl::kernels;

constexpr int32_t k_canary = -777;

// A buffer of n entries followed by canaries; intact() says whether the canaries survived.
template <typename T>
struct guarded {
    std::vector<T> v;
    explicit guarded(int64_t n) : v(static_cast<size_t>(n + 32), static_cast<T>(k_canary)) {}
    T* data() { return v.data(); }
    bool intact(int64_t n) const {
        for (size_t i = static_cast<size_t>(n); i < v.size(); ++i)
            if (v[i] != static_cast<T>(k_canary)) return false;
        return true;
    }
};

const int64_t k_lengths[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 2048, 8195};

TEST(Select, AtLeastAndBucketEqualTheReferenceOnEveryIsa) {
    isa_guard guard;
    for (int64_t n : k_lengths) {
        reseed(static_cast<uint64_t>(n) + 11);
        std::vector<uint32_t> keys(static_cast<size_t>(n));
        for (uint32_t& x : keys) x = (next_u64() % 4 == 0) ? 0x80000000u + static_cast<uint32_t>(next_u64() % 5) * 1000u
                                                          : static_cast<uint32_t>(next_u64());
        const uint32_t thresholds[] = {0u, 1u, 0x80000000u, 0x80000000u + 2000u, keys.empty() ? 5u : keys[0],
                                       0xffffffffu};
        for (k::isa i : isas()) {
            k::set_active_isa(i);
            for (uint32_t t : thresholds) {
                std::vector<int32_t> ref;
                for (int64_t j = 0; j < n; ++j)
                    if (keys[static_cast<size_t>(j)] >= t) ref.push_back(static_cast<int32_t>(j));
                guarded<int32_t> out(n);
                const int64_t c = k::select_at_least(keys.data(), n, t, out.data());
                ASSERT_EQ(c, static_cast<int64_t>(ref.size())) << k::isa_name(i) << " n " << n << " t " << t;
                EXPECT_TRUE(std::equal(ref.begin(), ref.end(), out.v.begin())) << k::isa_name(i) << " n " << n;
                EXPECT_TRUE(out.intact(n)) << k::isa_name(i) << " wrote past n entries, n " << n;
            }
            for (int shift : {0, 20, 31}) {
                const uint32_t b = keys.empty() ? 1u : keys[static_cast<size_t>(n / 2)] >> shift;
                std::vector<uint32_t> ref;
                for (uint32_t x : keys)
                    if (x >> shift == b) ref.push_back(x);
                guarded<uint32_t> out(n);
                const int64_t c = k::select_bucket(keys.data(), n, shift, b, out.data());
                ASSERT_EQ(c, static_cast<int64_t>(ref.size())) << k::isa_name(i) << " n " << n << " shift " << shift;
                EXPECT_TRUE(std::equal(ref.begin(), ref.end(), out.v.begin())) << k::isa_name(i) << " n " << n;
                EXPECT_TRUE(out.intact(n)) << k::isa_name(i) << " wrote past n entries, n " << n;
            }
        }
    }
}

TEST(Select, AbsThresholdsEqualTheReferenceWithNaNInfAndSignedZeros) {
    isa_guard guard;
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    for (int64_t n : k_lengths) {
        reseed(static_cast<uint64_t>(n) + 23);
        std::vector<float> v(static_cast<size_t>(n)), tv(static_cast<size_t>(n));
        const float specials[] = {nan, -nan, inf, -inf, 0.0f, -0.0f, 0.5f, -0.5f};
        for (size_t j = 0; j < v.size(); ++j) {
            v[j] = next_u64() % 5 == 0 ? specials[next_u64() % 8] : gaussish();
            tv[j] = next_u64() % 7 == 0 ? specials[next_u64() % 8] : std::fabs(gaussish());
        }
        for (k::isa i : isas()) {
            k::set_active_isa(i);
            for (bool strict : {false, true}) {
                for (bool per_element : {false, true}) {
                    const float t0 = 0.5f;
                    std::vector<int32_t> ref;
                    for (int64_t j = 0; j < n; ++j) {
                        const float a = std::fabs(v[static_cast<size_t>(j)]);
                        const float t = per_element ? tv[static_cast<size_t>(j)] : t0;
                        if (strict ? a > t : a >= t) ref.push_back(static_cast<int32_t>(j));
                    }
                    guarded<int32_t> out(n);
                    const int64_t c =
                        k::select_abs(v.data(), n, t0, per_element ? tv.data() : nullptr, strict, out.data());
                    SCOPED_TRACE(::testing::Message() << k::isa_name(i) << " n " << n << " strict " << strict
                                                      << " per element " << per_element);
                    ASSERT_EQ(c, static_cast<int64_t>(ref.size()));
                    EXPECT_TRUE(std::equal(ref.begin(), ref.end(), out.v.begin()));
                    EXPECT_TRUE(out.intact(n));
                }
            }
        }
    }
}

}  // namespace

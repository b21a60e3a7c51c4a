// Causal GQA attention (kernels::attention_causal) against a double-precision reference, on every ISA
// build (portable and AVX-512 must agree bit for bit), with head widths that exercise the 16-lane tail,
// soft-capping, sliding windows and prefill chunks that start past position 0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernel_test_util.h"
#include "sparselens/kernels/attention.h"

namespace {

using namespace sl::kernel_test;
namespace k = sl::kernels;

struct att_case {
    int32_t heads, kv_heads, head_dim, pos0, n;
    float softcap;
    int32_t window;
};

// out[t, h] in double, straight from the definition in attention.h.
std::vector<double> reference(const att_case& c, const std::vector<float>& q, const std::vector<float>& kc,
                              const std::vector<float>& vc) {
    const int32_t qs = c.heads * c.head_dim, kvs = c.kv_heads * c.head_dim, group = c.heads / c.kv_heads;
    std::vector<double> out(static_cast<size_t>(c.n) * qs, 0.0);
    for (int32_t t = 0; t < c.n; ++t)
        for (int32_t h = 0; h < c.heads; ++h) {
            const int32_t g = h / group, n_pos = c.pos0 + t + 1;
            const int32_t first = c.window > 0 ? std::max(0, n_pos - c.window) : 0;
            std::vector<double> s(static_cast<size_t>(n_pos), 0.0);
            double mx = -INFINITY;
            for (int32_t p = first; p < n_pos; ++p) {
                double d = 0.0;
                for (int32_t i = 0; i < c.head_dim; ++i)
                    d += double(q[t * qs + h * c.head_dim + i]) * kc[p * kvs + g * c.head_dim + i];
                d /= std::sqrt(double(c.head_dim));
                if (c.softcap > 0) d = c.softcap * std::tanh(d / c.softcap);
                s[p] = d;
                mx = std::max(mx, d);
            }
            double sum = 0.0;
            for (int32_t p = first; p < n_pos; ++p) sum += (s[p] = std::exp(s[p] - mx));
            for (int32_t p = first; p < n_pos; ++p)
                for (int32_t i = 0; i < c.head_dim; ++i)
                    out[t * qs + h * c.head_dim + i] += s[p] / sum * vc[p * kvs + g * c.head_dim + i];
        }
    return out;
}

TEST(attention, matches_double_reference_and_is_identical_across_isas) {
    const att_case cases[] = {{32, 8, 64, 0, 1, 0, 0},   {32, 8, 64, 127, 1, 0, 0}, {8, 2, 80, 5, 24, 0, 0},
                              {4, 4, 8, 0, 9, 0, 0},     {6, 3, 48, 40, 7, 50.0f, 0}, {4, 1, 32, 30, 12, 0, 16},
                              {2, 2, 256, 3, 4, 0, 0},
                              // GQA groups split into parts: 32 heads per KV head (> 16 per call), one KV head
                              // for a single token (parts grow to give 2 threads work), head_dim 24 (tails)
                              {64, 2, 32, 50, 1, 0, 0},  {8, 1, 64, 20, 1, 0, 0},   {6, 1, 24, 70, 1, 30.0f, 0},
                              {12, 3, 40, 100, 2, 0, 33}};
    isa_guard guard;
    for (const att_case& c : cases) {
        SCOPED_TRACE(::testing::Message() << c.heads << "/" << c.kv_heads << " heads of " << c.head_dim << ", pos0 "
                                          << c.pos0 << ", n " << c.n << ", softcap " << c.softcap << ", window " << c.window);
        reseed(static_cast<uint64_t>(c.head_dim * 131 + c.pos0 * 7 + c.n));
        const int32_t qs = c.heads * c.head_dim, kvs = c.kv_heads * c.head_dim, total = c.pos0 + c.n;
        std::vector<float> q(static_cast<size_t>(c.n) * qs), kc(static_cast<size_t>(total) * kvs), vc(kc.size());
        for (float& f : q) f = 2.0f * gaussish();
        for (float& f : kc) f = gaussish();
        for (float& f : vc) f = gaussish();
        const std::vector<double> ref = reference(c, q, kc, vc);
        k::attention_shape shape{c.heads, c.kv_heads, c.head_dim};
        shape.softcap = c.softcap;
        shape.window = c.window;
        std::vector<float> first;
        for (k::isa i : isas()) {
            k::set_active_isa(i);
            for (int threads : {1, 2}) {
                std::vector<float> out(q.size(), -1.0f), scores(static_cast<size_t>(k::attention_scratch_floats(shape, threads, total)));
                k::attention_causal(q.data(), kc.data(), vc.data(), c.pos0, c.n, shape, out.data(), scores.data(), threads);
                for (size_t j = 0; j < out.size(); ++j) ASSERT_NEAR(out[j], ref[j], 2e-5 * (1.0 + std::fabs(ref[j]))) << j;
                if (first.empty()) first = out;
                EXPECT_EQ(0, std::memcmp(first.data(), out.data(), out.size() * 4))
                    << k::isa_name(i) << ", " << threads << " threads: not bit-identical to the first run";
                // The same cache head-major ([kv_heads, total + 3 spare positions, head_dim]): the same bits.
                const int32_t cap = total + 3;
                std::vector<float> kh(static_cast<size_t>(c.kv_heads) * cap * c.head_dim, NAN), vh(kh.size(), NAN);
                for (int32_t p = 0; p < total; ++p)
                    for (int32_t g = 0; g < c.kv_heads; ++g)
                        for (int32_t e = 0; e < c.head_dim; ++e) {
                            const size_t from = static_cast<size_t>(p) * kvs + g * c.head_dim + e;
                            const size_t to = (static_cast<size_t>(g) * cap + p) * c.head_dim + e;
                            kh[to] = kc[from];
                            vh[to] = vc[from];
                        }
                k::attention_shape hm = shape;
                hm.kv_pos_stride = c.head_dim;
                hm.kv_head_stride = static_cast<int64_t>(cap) * c.head_dim;
                std::vector<float> out_h(q.size(), -1.0f);
                k::attention_causal(q.data(), kh.data(), vh.data(), c.pos0, c.n, hm, out_h.data(), scores.data(),
                                    threads);
                EXPECT_EQ(0, std::memcmp(first.data(), out_h.data(), out_h.size() * 4))
                    << k::isa_name(i) << ", " << threads << " threads: head-major cache not bit-identical";
            }
        }
    }
}

using glu_kernel = void (*)(float* y, const float* gate, const float* up, int64_t n);

// A GLU kernel's shared checks: every length from 1 to 17 (tails through padded vectors) gives the same
// elements as the whole call `whole` did, nothing is written past the end, and of (NaN, +inf, -inf)
// times (1, 2, 0.5) the first stays NaN, the second is +inf and the third 0 (act(-inf) = 0, not NaN).
void expect_glu_tails_and_edges(glu_kernel f, const std::vector<float>& g, const std::vector<float>& u,
                                const std::vector<float>& whole) {
    for (int64_t len = 1; len <= 17; ++len) {
        std::vector<float> part(static_cast<size_t>(len) + 1, -7.0f);
        f(part.data(), g.data() + 3, u.data() + 3, len);
        EXPECT_EQ(0, std::memcmp(part.data(), whole.data() + 3, static_cast<size_t>(len) * 4)) << len;
        EXPECT_EQ(part[static_cast<size_t>(len)], -7.0f) << "wrote past the end, length " << len;
    }
    const float nan = std::nanf(""), gi[3] = {nan, INFINITY, -INFINITY}, ui[3] = {1.0f, 2.0f, 0.5f};
    float yi[3];
    f(yi, gi, ui, 3);
    EXPECT_TRUE(std::isnan(yi[0]));
    EXPECT_EQ(yi[1], INFINITY);
    EXPECT_EQ(yi[2], 0.0f) << "act(-inf) * 0.5";
}

// Inputs of the GLU tests: 4000 gaussians times `spread` (u gaussian), a sweep over [-100, 100] in steps
// of 0.37 (u = 1.5: the clamp edges and past them) and the special gate values given (u = -2).
void glu_inputs(uint64_t seed, float spread, std::initializer_list<float> specials, std::vector<float>& g,
                std::vector<float>& u) {
    reseed(seed);
    for (int i = 0; i < 4000; ++i) {
        g.push_back(spread * gaussish());
        u.push_back(gaussish());
    }
    for (float e = -100.0f; e <= 100.0f; e += 0.37f) {
        g.push_back(e);
        u.push_back(1.5f);
    }
    for (float v : specials) {
        g.push_back(v);
        u.push_back(-2.0f);
    }
}

// SwiGLU (kernels::swiglu, a vector exp since stop 22) against silu in double: within 4 ulp-ish relative
// error over the range activations take and far beyond it, the same bits on every ISA build and for every
// length (tails go through the same lanes), NaN passed through, and the saturated ends (g -> +inf: g * u;
// g below -80, -inf included: 0, where the true value is under 2e-33 |u|) without overflow to NaN.
TEST(swiglu, matches_double_reference_and_is_identical_across_isas) {
    isa_guard guard;
    std::vector<float> g, u;
    glu_inputs(77, 8.0f, {0.0f, -0.0f, 80.0f, -80.0f, 80.01f, -80.01f, 87.3f, -87.3f, 1e-30f, -1e-30f, 1e38f, -1e38f}, g,
               u);
    const size_t n = g.size();
    std::vector<float> first;
    for (k::isa i : isas()) {
        k::set_active_isa(i);
        std::vector<float> y(n, -7.0f);
        k::swiglu(y.data(), g.data(), u.data(), static_cast<int64_t>(n));
        for (size_t j = 0; j < n; ++j) {
            const double ref = double(g[j]) / (1.0 + std::exp(-double(g[j]))) * u[j];
            ASSERT_NEAR(y[j], ref, 5e-7 * std::fabs(ref) + 1e-32) << k::isa_name(i) << " g = " << g[j];
        }
        if (first.empty()) first = y;
        EXPECT_EQ(0, std::memcmp(first.data(), y.data(), n * 4)) << k::isa_name(i) << ": not bit-identical";
        expect_glu_tails_and_edges(k::swiglu, g, u, first);
    }
}

// GeGLU (kernels::geglu, the vector exp in GELU's sigmoid form since stop 23) against GELU in double, in
// the same sigmoid form 0.5 (1 + tanh z) = 1 / (1 + e^-2z) (in the tanh form double itself keeps only
// ~3 digits of 1 + tanh z at g = -6.6): relative error within a few ulp plus what the exp's argument
// a = -2z carries (|a| ulp: a is rounded, and GELU of a negative g scales with e^-a), the same bits on
// every ISA build and for every length, NaN passed through, g -> +inf giving g * u and g below about -9.3 (a > 80), -inf included,
// giving 0 where the true value is under 2e-34 |g u|.
TEST(geglu, matches_double_reference_and_is_identical_across_isas) {
    isa_guard guard;
    std::vector<float> g, u;  // the clamp edge is at g = -9.3 here
    glu_inputs(78, 4.0f,
               {0.0f, -0.0f, -9.2f, -9.3f, -9.4f, 80.0f, -80.0f, 1e-30f, -1e-30f, 1e19f, -1e19f, 1e38f, -1e38f}, g, u);
    const size_t n = g.size();
    constexpr double k = 0.79788456080286535588;  // sqrt(2 / pi)
    std::vector<float> first;
    for (k::isa i : isas()) {
        k::set_active_isa(i);
        std::vector<float> y(n, -7.0f);
        k::geglu(y.data(), g.data(), u.data(), static_cast<int64_t>(n));
        for (size_t j = 0; j < n; ++j) {
            const double gd = g[j], z = k * gd * (1.0 + 0.044715 * gd * gd);
            const double ref = gd / (1.0 + std::exp(-2.0 * z)) * u[j];
            const double tol = (6e-7 + 1.2e-7 * std::min(std::fabs(2.0 * z), 200.0)) * std::fabs(ref) + 1e-32;
            ASSERT_NEAR(y[j], ref, tol) << k::isa_name(i) << " g = " << g[j];
        }
        if (first.empty()) first = y;
        EXPECT_EQ(0, std::memcmp(first.data(), y.data(), n * 4)) << k::isa_name(i) << ": not bit-identical";
        expect_glu_tails_and_edges(k::geglu, g, u, first);
        std::vector<float> alone(n, -7.0f);  // up == nullptr multiplies by 1
        k::geglu(alone.data(), g.data(), nullptr, static_cast<int64_t>(n));
        for (size_t j = 0; j < n; ++j) {
            const double gd = g[j], z = k * gd * (1.0 + 0.044715 * gd * gd);
            const double ref = gd / (1.0 + std::exp(-2.0 * z));
            const double tol = (6e-7 + 1.2e-7 * std::min(std::fabs(2.0 * z), 200.0)) * std::fabs(ref) + 1e-32;
            ASSERT_NEAR(alone[j], ref, tol) << " g = " << g[j];
        }
    }
}

// Soft-capping (kernels::softcap, cap * tanh(x / cap) through the vector exp since stop 23) against tanh in
// double: within ~6 ulp over the range logits and scores take (the series below |x / cap| = 0.125, the
// exp form above it), the same bits on every ISA and for every length, in place, +-inf to +-cap, NaN kept.
TEST(softcap, matches_double_reference_and_is_identical_across_isas) {
    isa_guard guard;
    reseed(79);
    std::vector<float> x;
    for (int i = 0; i < 3000; ++i) x.push_back(40.0f * gaussish());
    for (int i = 0; i < 1000; ++i) x.push_back(0.5f * gaussish());
    for (float e = -2000.0f; e <= 2000.0f; e += 3.7f) x.push_back(e);
    for (float v : {0.0f, -0.0f, 3.75f, -3.75f, 3.7501f, 1e-30f, -1e-30f, 1e-45f, 1200.0f, -1200.0f, 1e38f, -1e38f})
        x.push_back(v);
    const size_t n = x.size();
    for (float cap : {30.0f, 50.0f}) {
        std::vector<float> first;
        for (k::isa i : isas()) {
            k::set_active_isa(i);
            std::vector<float> y(n, -7.0f);
            k::softcap(y.data(), x.data(), static_cast<int64_t>(n), cap);
            for (size_t j = 0; j < n; ++j) {
                const double ref = cap * std::tanh(double(x[j]) / cap);
                ASSERT_NEAR(y[j], ref, 7e-7 * std::fabs(ref) + 1e-44) << k::isa_name(i) << " x = " << x[j] << ", cap " << cap;
            }
            if (first.empty()) first = y;
            EXPECT_EQ(0, std::memcmp(first.data(), y.data(), n * 4)) << k::isa_name(i) << ": not bit-identical";
            std::vector<float> in_place = x;
            k::softcap(in_place.data(), in_place.data(), static_cast<int64_t>(n), cap);
            EXPECT_EQ(0, std::memcmp(first.data(), in_place.data(), n * 4)) << "in place";
            for (int64_t len = 1; len <= 17; ++len) {
                std::vector<float> part(static_cast<size_t>(len) + 1, -7.0f);
                k::softcap(part.data(), x.data() + 5, len, cap);
                EXPECT_EQ(0, std::memcmp(part.data(), first.data() + 5, static_cast<size_t>(len) * 4)) << len;
                EXPECT_EQ(part[static_cast<size_t>(len)], -7.0f) << "wrote past the end, length " << len;
            }
            const float xi[3] = {std::nanf(""), INFINITY, -INFINITY};
            float yi[3];
            k::softcap(yi, xi, 3, cap);
            EXPECT_TRUE(std::isnan(yi[0]));
            EXPECT_EQ(yi[1], cap);
            EXPECT_EQ(yi[2], -cap);
        }
    }
}

}  // namespace

// Cache policies against a brute-force reference (plain sets and linear scans), hand-made traces with
// hand-computed answers, Belady's optimality and the pinned / capacity invariants.
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "sparselens/sim/cache.h"

namespace {

using sl::sim::access_stats;
using sl::sim::cache_config;
using sl::sim::cache_policy;
using sl::sim::never_used;
using sl::sim::stream_cache;
using tokens_t = std::vector<std::vector<uint32_t>>;

// ---- reference: the rules of docs/simulator.md written as directly as possible -----------------

struct ref_step {
    uint32_t hits = 0, misses = 0, inserted = 0, evicted = 0;
    std::set<uint32_t> missed;
    std::set<uint32_t> resident;          // pinned included
    std::multiset<uint32_t> belady_keys;  // next use of every dynamic resident (Belady only)
};

uint32_t ref_next_use(const tokens_t& tr, uint32_t id, uint32_t after) {
    for (uint32_t t = after + 1; t < tr.size(); ++t)
        if (std::find(tr[t].begin(), tr[t].end(), id) != tr[t].end()) return t;
    return never_used;
}

std::vector<ref_step> reference(const tokens_t& tr, const cache_config& c) {
    const std::set<uint32_t> pinned(c.pinned.begin(), c.pinned.end());
    const uint32_t cap = c.policy == cache_policy::none ? 0 : c.capacity - static_cast<uint32_t>(pinned.size());
    std::set<uint32_t> R;
    std::map<uint32_t, uint32_t> last, cnt;
    std::vector<ref_step> out;
    for (uint32_t t = 0; t < tr.size(); ++t) {
        ref_step st;
        std::vector<uint32_t> A;
        for (uint32_t id : tr[t]) {
            if (pinned.count(id))
                ++st.hits;
            else
                A.push_back(id);
        }
        std::vector<uint32_t> hit, miss;
        for (uint32_t id : A) (R.count(id) ? hit : miss).push_back(id);
        st.hits += static_cast<uint32_t>(hit.size());
        st.misses = static_cast<uint32_t>(miss.size());
        st.missed.insert(miss.begin(), miss.end());
        for (uint32_t id : A) {
            last[id] = t;
            ++cnt[id];
        }
        const std::set<uint32_t> Aset(A.begin(), A.end());
        if (c.policy == cache_policy::belady) {
            // Keep the cap units with the soonest next use; ties keep residents, then lower ids.
            struct cand {
                uint32_t key, is_miss, id;
            };
            std::vector<cand> cs;
            for (uint32_t id : R) cs.push_back({ref_next_use(tr, id, t), 0, id});  // hits re-keyed too
            for (uint32_t id : miss) cs.push_back({ref_next_use(tr, id, t), 1, id});
            std::sort(cs.begin(), cs.end(), [](const cand& a, const cand& b) {
                return std::tie(a.key, a.is_miss, a.id) < std::tie(b.key, b.is_miss, b.id);
            });
            std::set<uint32_t> S;
            for (size_t i = 0; i < cs.size() && i < cap; ++i) {
                S.insert(cs[i].id);
                st.belady_keys.insert(cs[i].key);
                st.inserted += cs[i].is_miss;
            }
            for (uint32_t id : R) st.evicted += !S.count(id);
            R = S;
        } else if (c.policy != cache_policy::none) {
            if (c.policy == cache_policy::window) {
                for (auto it = R.begin(); it != R.end();) {
                    if (!Aset.count(*it) && last[*it] + c.window_tokens <= t) {
                        it = R.erase(it);
                        ++st.evicted;
                    } else {
                        ++it;
                    }
                }
            }
            auto evict_one = [&] {  // smallest key among non-active residents
                uint32_t best = never_used;
                for (uint32_t id : R) {
                    if (Aset.count(id)) continue;
                    if (best == never_used) {
                        best = id;
                        continue;
                    }
                    const bool lfu = c.policy == cache_policy::lfu;
                    auto k = [&](uint32_t x) { return std::make_tuple(lfu ? cnt[x] : 0u, last[x], x); };
                    if (k(id) < k(best)) best = id;
                }
                R.erase(best);
                ++st.evicted;
            };
            if (A.size() <= cap) {
                while (R.size() + miss.size() > cap) evict_one();
                R.insert(miss.begin(), miss.end());
                st.inserted = st.misses;
            } else {
                while (R.size() > hit.size()) evict_one();
                std::vector<uint32_t> order = miss;
                if (c.policy == cache_policy::lfu)
                    std::stable_sort(order.begin(), order.end(),
                                     [&](uint32_t a, uint32_t b) { return cnt[a] > cnt[b]; });
                for (uint32_t i = 0; i < cap - hit.size(); ++i) R.insert(order[i]);
                st.inserted = cap - static_cast<uint32_t>(hit.size());
            }
        }
        st.resident = R;
        st.resident.insert(pinned.begin(), pinned.end());
        out.push_back(st);
    }
    return out;
}

// ---- the implementation under test, recording the same things --------------------------------

std::vector<uint32_t> next_use_of(const tokens_t& tr, uint32_t t) {
    std::vector<uint32_t> nu;
    for (uint32_t id : tr[t]) nu.push_back(ref_next_use(tr, id, t));
    return nu;
}

struct run_result {
    std::vector<ref_step> steps;
    uint64_t hits = 0;
};

run_result run(const tokens_t& tr, uint32_t n_units, const cache_config& c) {
    stream_cache cache(n_units, c);
    run_result r;
    std::vector<uint32_t> misses;
    for (uint32_t t = 0; t < tr.size(); ++t) {
        const std::vector<uint32_t> nu =
            c.policy == cache_policy::belady ? next_use_of(tr, t) : std::vector<uint32_t>{};
        const access_stats a = cache.access(t, tr[t], nu.empty() ? nullptr : nu.data(), misses);
        ref_step st;
        st.hits = a.hits;
        st.misses = a.misses;
        st.inserted = a.inserted;
        st.evicted = a.evicted;
        st.missed.insert(misses.begin(), misses.end());
        EXPECT_TRUE(std::is_sorted(misses.begin(), misses.end()));
        for (uint32_t id = 0; id < n_units; ++id)
            if (cache.resident(id)) st.resident.insert(id);
        // Budget: never more units than the capacity, after every token.
        EXPECT_LE(cache.n_resident(), c.capacity) << "token " << t;
        EXPECT_EQ(cache.n_resident(), st.resident.size());
        for (uint32_t p : c.pinned) EXPECT_TRUE(cache.resident(p)) << "pinned unit " << p << " evicted at token " << t;
        r.hits += a.hits;
        r.steps.push_back(st);
    }
    return r;
}

uint32_t belady_key_of(const tokens_t& tr, uint32_t id, uint32_t t) {
    // Next use strictly after t: the key a resident carries once token t is done.
    return ref_next_use(tr, id, t);
}

void compare(const tokens_t& tr, uint32_t n_units, const cache_config& c, const std::string& what) {
    const std::vector<ref_step> want = reference(tr, c);
    const run_result got = run(tr, n_units, c);
    ASSERT_EQ(want.size(), got.steps.size());
    for (size_t t = 0; t < want.size(); ++t) {
        const ref_step& w = want[t];
        const ref_step& g = got.steps[t];
        SCOPED_TRACE(what + " token " + std::to_string(t));
        ASSERT_EQ(g.hits, w.hits);
        ASSERT_EQ(g.misses, w.misses);
        if (c.policy == cache_policy::belady) {
            // Units with equal next use are interchangeable: which of them is kept is a tie-break that
            // moves inserted/evicted counts and miss ids but never hits, misses or the kept keys.
            ASSERT_EQ(int64_t{g.inserted} - g.evicted, int64_t{w.inserted} - w.evicted);
            std::multiset<uint32_t> keys;
            for (uint32_t id : g.resident)
                if (std::find(c.pinned.begin(), c.pinned.end(), id) == c.pinned.end())
                    keys.insert(belady_key_of(tr, id, static_cast<uint32_t>(t)));
            ASSERT_EQ(keys, w.belady_keys);
        } else {
            ASSERT_EQ(g.inserted, w.inserted);
            ASSERT_EQ(g.evicted, w.evicted);
            ASSERT_EQ(g.missed, w.missed);
            ASSERT_EQ(g.resident, w.resident);
        }
    }
}

tokens_t random_trace(std::mt19937& rng, uint32_t n_units, uint32_t n_tokens, double density, double persistence) {
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<double> pop(n_units);
    for (double& p : pop) p = std::min(1.0, density * 2 * u(rng) * u(rng) * 2);  // skewed popularity
    std::vector<bool> on(n_units, false);
    tokens_t tr(n_tokens);
    for (uint32_t t = 0; t < n_tokens; ++t) {
        for (uint32_t i = 0; i < n_units; ++i) {
            if (t == 0 || u(rng) >= persistence) on[i] = u(rng) < pop[i];
            if (on[i]) tr[t].push_back(i);
        }
    }
    return tr;
}

const cache_policy all_policies[] = {cache_policy::none, cache_policy::lru, cache_policy::lfu, cache_policy::belady,
                                     cache_policy::window};

// ---- hand-made traces with hand-computed answers -----------------------------------------------

uint64_t total_hits(const tokens_t& tr, uint32_t n, cache_config c) {
    return run(tr, n, c).hits;
}

TEST(SimPolicies, CyclicTraceDefeatsLruAndLfuButNotBelady) {
    const tokens_t tr = {{0}, {1}, {2}, {0}, {1}, {2}};
    cache_config c;
    c.capacity = 2;
    c.policy = cache_policy::lru;
    EXPECT_EQ(total_hits(tr, 4, c), 0u);
    c.policy = cache_policy::lfu;
    EXPECT_EQ(total_hits(tr, 4, c), 0u);
    c.policy = cache_policy::belady;  // bypasses unit 2 at token 2, then hits 0 and 1
    EXPECT_EQ(total_hits(tr, 4, c), 2u);
    c.policy = cache_policy::none;
    EXPECT_EQ(total_hits(tr, 4, c), 0u);
}

TEST(SimPolicies, LruEvictsLeastRecentThenLowestId) {
    const tokens_t tr = {{0, 1}, {0, 2}, {0, 1}, {3}};
    cache_config c;
    c.policy = cache_policy::lru;
    c.capacity = 2;
    const run_result r = run(tr, 4, c);
    EXPECT_EQ(r.hits, 2u);  // unit 0 at tokens 1 and 2
    EXPECT_EQ(r.steps[1].evicted, 1u);
    EXPECT_EQ(r.steps[3].resident, (std::set<uint32_t>{1, 3}));  // 0 and 1 tie on recency: 0 goes
}

TEST(SimPolicies, LfuKeepsTheFrequentUnit) {
    // Unit 0 is used three times, 1 and 2 once each: LFU keeps 0 where LRU drops it.
    const tokens_t tr = {{0}, {0}, {0}, {1}, {2}, {0}};
    cache_config c;
    c.capacity = 2;
    c.policy = cache_policy::lfu;
    EXPECT_EQ(total_hits(tr, 3, c), 3u);  // tokens 1, 2 and 5
    c.policy = cache_policy::lru;
    EXPECT_EQ(total_hits(tr, 3, c), 2u);  // tokens 1, 2; 0 is evicted at token 4
}

TEST(SimPolicies, OverflowStreamsWithoutCaching) {
    const tokens_t tr = {{0, 1, 2, 3}, {2, 3, 4}};
    cache_config c;
    c.policy = cache_policy::lru;
    c.capacity = 2;
    const run_result r = run(tr, 5, c);
    EXPECT_EQ(r.steps[0].misses, 4u);
    EXPECT_EQ(r.steps[0].inserted, 2u);  // 0 and 1 cached, 2 and 3 streamed
    EXPECT_EQ(r.steps[0].resident, (std::set<uint32_t>{0, 1}));
    EXPECT_EQ(r.steps[1].hits, 0u);
    EXPECT_EQ(r.steps[1].evicted, 2u);   // every non-active unit makes room
    EXPECT_EQ(r.steps[1].inserted, 2u);  // 2 and 3; 4 overflows
    EXPECT_EQ(r.steps[1].resident, (std::set<uint32_t>{2, 3}));
}

TEST(SimPolicies, WindowKeepsOnlyRecentTokens) {
    const tokens_t tr = {{0}, {1}, {2}, {1}};
    cache_config c;
    c.policy = cache_policy::window;
    c.capacity = 10;
    c.window_tokens = 2;
    const run_result r = run(tr, 10, c);
    EXPECT_EQ(r.steps[1].resident, (std::set<uint32_t>{0, 1}));
    EXPECT_EQ(r.steps[2].resident, (std::set<uint32_t>{1, 2}));  // 0 last used 2 tokens ago
    EXPECT_EQ(r.steps[2].evicted, 1u);
    EXPECT_EQ(r.steps[3].hits, 1u);
}

TEST(SimPolicies, PinnedUnitsAreHitsAndTakeCapacity) {
    const tokens_t tr = {{0, 5}, {1, 5}, {0}};
    cache_config c;
    c.policy = cache_policy::lru;
    c.capacity = 2;
    c.pinned = {5};
    const run_result r = run(tr, 6, c);
    EXPECT_EQ(r.hits, 2u);  // only the pinned unit hits: one dynamic slot, 0 and 1 alternate
    EXPECT_EQ(r.steps[2].resident, (std::set<uint32_t>{0, 5}));
}

TEST(SimPolicies, ConfigValidationRejectsBadSettings) {
    cache_config c;
    c.capacity = 5;
    EXPECT_FALSE(sl::sim::cache_config_validate(c, 4, "s").ok());
    c.capacity = 2;
    c.pinned = {1, 2, 3};
    EXPECT_FALSE(sl::sim::cache_config_validate(c, 4, "s").ok());
    c.pinned = {2, 1};
    EXPECT_FALSE(sl::sim::cache_config_validate(c, 4, "s").ok());
    c.pinned = {9};
    EXPECT_FALSE(sl::sim::cache_config_validate(c, 4, "s").ok());
    c.pinned = {};
    c.policy = cache_policy::window;
    c.window_tokens = 0;
    EXPECT_FALSE(sl::sim::cache_config_validate(c, 4, "s").ok());
    c.window_tokens = 3;
    EXPECT_TRUE(sl::sim::cache_config_validate(c, 4, "s").ok());
}

// ---- every policy against the reference on random and clustered traces --------------------------

TEST(SimPolicies, MatchReferenceOnRandomTraces) {
    for (uint32_t seed = 1; seed <= 60; ++seed) {
        std::mt19937 rng(seed);
        const uint32_t n = 8 + rng() % 40;
        const uint32_t T = 10 + rng() % 40;
        const double density = 0.05 + 0.5 * (rng() % 100) / 100.0;
        const double persistence = seed % 2 ? 0.0 : 0.8;
        const tokens_t tr = random_trace(rng, n, T, density, persistence);
        for (cache_policy p : all_policies) {
            for (int pinned = 0; pinned < 2; ++pinned) {
                cache_config c;
                c.policy = p;
                c.capacity = rng() % (n + 1);
                c.window_tokens = 1 + rng() % 4;
                if (pinned && c.capacity > 0) {
                    std::vector<uint32_t> ids(n);
                    for (uint32_t i = 0; i < n; ++i) ids[i] = i;
                    std::shuffle(ids.begin(), ids.end(), rng);
                    ids.resize(rng() % (c.capacity + 1));
                    std::sort(ids.begin(), ids.end());
                    c.pinned = ids;
                }
                compare(tr, n, c,
                        std::string(sl::sim::cache_policy_name(p)) + " seed " + std::to_string(seed) + " cap " +
                            std::to_string(c.capacity) + " pinned " + std::to_string(c.pinned.size()));
                if (HasFatalFailure()) return;
            }
        }
    }
}

TEST(SimPolicies, BeladyHitsAtLeastEveryOtherPolicy) {
    for (uint32_t seed = 100; seed < 400; ++seed) {
        std::mt19937 rng(seed);
        const uint32_t n = 16 + rng() % 64;
        const uint32_t T = 20 + rng() % 60;
        const double density = 0.05 + 0.6 * (rng() % 100) / 100.0;
        const tokens_t tr = random_trace(rng, n, T, density, seed % 3 == 0 ? 0.0 : 0.5 + 0.4 * (seed % 5) / 4.0);
        const uint32_t cap = rng() % (n + 1);
        cache_config opt;
        opt.policy = cache_policy::belady;
        opt.capacity = cap;
        const uint64_t best = total_hits(tr, n, opt);
        for (cache_policy p : all_policies) {
            for (uint32_t w : {1u, 3u}) {
                cache_config c;
                c.policy = p;
                c.capacity = cap;
                c.window_tokens = w;
                EXPECT_GE(best, total_hits(tr, n, c)) << sl::sim::cache_policy_name(p) << " seed " << seed;
                if (cap > 1) {
                    // Pinned units are preloaded (their first use hits), so a cold Belady is no bound for
                    // them; Belady over the same pinned set is: it is optimal for the dynamic part.
                    std::vector<uint32_t> cnt(n, 0);
                    for (const auto& a : tr)
                        for (uint32_t id : a) ++cnt[id];
                    std::vector<uint32_t> ids(n);
                    for (uint32_t i = 0; i < n; ++i) ids[i] = i;
                    std::stable_sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) { return cnt[a] > cnt[b]; });
                    ids.resize(cap / 2);
                    std::sort(ids.begin(), ids.end());
                    c.pinned = ids;
                    cache_config opt_pinned = opt;
                    opt_pinned.pinned = ids;
                    EXPECT_GE(total_hits(tr, n, opt_pinned), total_hits(tr, n, c))
                        << sl::sim::cache_policy_name(p) << " pinned, seed " << seed;
                }
            }
        }
    }
}

TEST(SimPolicies, LongRunsStayConsistentAcrossCompaction) {
    // Long traces over few units drive the lazy queues through their compaction paths.
    std::mt19937 rng(7);
    const uint32_t n = 64;
    const tokens_t tr = random_trace(rng, n, 3000, 0.3, 0.5);
    for (cache_policy p : {cache_policy::lru, cache_policy::lfu, cache_policy::window}) {
        for (uint32_t cap : {20u, 60u, 64u}) {  // evicting constantly, rarely, never (queues fill with stale entries)
            cache_config c;
            c.policy = p;
            c.capacity = cap;
            c.window_tokens = 40;
            compare(tr, n, c, std::string(sl::sim::cache_policy_name(p)) + " cap " + std::to_string(cap));
        }
    }
}

}  // namespace

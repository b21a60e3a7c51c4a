// The simulator as a whole: the cost of a hand-made token computed by hand, online stepping equal to
// replay, replay of dense/static traces equal to analytic mode, the DRAM budget after every token for
// every policy, the GUI snapshot / DIP-CA cache state, threads, cancellation and input errors.
#include <cmath>
#include <numeric>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "sparselens/sim/simulator.h"
#include "sparselens/sim/synthetic.h"

namespace {

using namespace sl::sim;

const cache_policy all_policies[] = {cache_policy::none, cache_policy::lru, cache_policy::lfu, cache_policy::belady,
                                     cache_policy::window};

// 2 layers, dim 64, hidden 16, fp16 weights: a 64-weight row is 128 bytes, a neuron bundle 384.
model_shape toy() {
    model_shape s;
    s.name = "toy";
    s.dim = 64;
    s.hidden_dim = 16;
    s.n_layers = 2;
    s.n_heads = 1;
    s.n_kv_heads = 1;
    s.vocab_size = 8;
    return s;
}

model_shape small() {
    model_shape s = toy();
    s.name = "small";
    s.hidden_dim = 172;
    s.n_layers = 5;
    s.n_heads = 8;
    s.n_kv_heads = 4;
    s.vocab_size = 512;
    return s;
}

sim_params toy_params(uint32_t units_per_layer_cache) {
    sim_params p = sim_default_params();
    p.quant = quant_default(16);
    p.context_tokens = 0;
    const auto mm = memory_map_build(toy(), p.quant, mlp_layout{}, 0).value();
    p.device.dram_bytes = mm.resident_bytes() + 2 * units_per_layer_cache * 384;
    p.device.dram_bandwidth = 1000;
    p.device.flash_bandwidth = 100;
    p.device.flash_page_bytes = 256;
    p.device.overlap_io_compute = false;
    return p;
}

TEST(SimReplay, CostOfAHandMadeTokenByHand) {
    EXPECT_EQ(flash_run_bytes(0, 3, 384, 256), 5u * 256);  // bytes [0, 1152): pages 0..4
    EXPECT_EQ(flash_run_bytes(5, 2, 384, 256), 4u * 256);  // [1920, 2688): pages 7..10
    EXPECT_EQ(flash_run_bytes(9, 1, 384, 256), 2u * 256);  // [3456, 3840): pages 13..14
    EXPECT_EQ(flash_run_bytes(9, 1, 384, 0), 384u);
    EXPECT_EQ(flash_run_bytes(4, 0, 384, 256), 0u);

    sim_params p = toy_params(4);
    p.policy = cache_policy::lru;
    simulator sim = simulator::create(toy(), mlp_layout{}, p).value();
    EXPECT_EQ(sim.alloc().stream_capacity, (std::vector<uint32_t>{4, 4}));
    const uint64_t static_read = sim.map().per_token_static_read_bytes();
    // Layer 0: 6 active, none cached: runs {0,1,2} {5,6} {9}; 4 get cached. Layer 1: nothing.
    const token_report t0 = sim.step(std::vector<std::vector<uint32_t>>{{0, 1, 2, 5, 6, 9}, {}}).value();
    EXPECT_EQ(t0.misses, 6u);
    EXPECT_EQ(t0.hits, 0u);
    EXPECT_EQ(t0.flash_bytes, 1280u + 1024u + 512u);
    EXPECT_EQ(t0.flash_reads, 3u);
    EXPECT_EQ(t0.dram_bytes, static_read);
    // 0, 1, 2, 5 were cached (lowest ids on overflow): of {1, 2, 3}, 1 and 2 hit; 3 evicts unit 0 (LRU, lower id).
    const token_report t1 = sim.step(std::vector<std::vector<uint32_t>>{{1, 2, 3}, {15}}).value();
    EXPECT_EQ(t1.hits, 2u);
    EXPECT_EQ(t1.misses, 2u);
    EXPECT_EQ(t1.flash_bytes, 2u * 256 + 2u * 256);  // unit 3: [1152, 1536) pages 4..5; unit 15: [5760, 6144) 22..23
    EXPECT_EQ(t1.flash_reads, 2u);
    EXPECT_EQ(t1.dram_bytes, static_read + 2 * 384);
    EXPECT_DOUBLE_EQ(t1.dram_time_s, double(static_read + 768) / 1000);
    EXPECT_DOUBLE_EQ(t1.flash_time_s, 1024.0 / 100);
    EXPECT_DOUBLE_EQ(t1.latency_s, t1.dram_time_s + t1.flash_time_s);  // no overlap

    const run_report r = sim.report();
    EXPECT_EQ(r.n_tokens, 2u);
    EXPECT_DOUBLE_EQ(r.tokens_per_s, 2.0 / (t0.latency_s + t1.latency_s));
    EXPECT_DOUBLE_EQ(r.hit_rate, 2.0 / 10.0);
    EXPECT_EQ(r.streams[0].hits, 2u);
    EXPECT_EQ(r.streams[1].misses, 1u);
}

TEST(SimReplay, PageRoundingForAnyPageSize) {
    // The power-of-two fast path, a page size that is not one, and byte-exact reads agree with the
    // per-run formula.
    const std::vector<uint32_t> ids = {0, 1, 2, 5, 6, 9, 12, 13, 14, 15};
    for (uint32_t page : {0u, 1u, 256u, 4096u, 3000u, 384u, 1000u}) {
        sim_params p = toy_params(0);
        p.policy = cache_policy::none;
        p.device.flash_page_bytes = page;
        simulator sim = simulator::create(toy(), mlp_layout{}, p).value();
        const token_report t = sim.step(std::vector<std::vector<uint32_t>>{ids, {}}).value();
        const uint64_t want = flash_run_bytes(0, 3, 384, page) + flash_run_bytes(5, 2, 384, page) +
                              flash_run_bytes(9, 1, 384, page) + flash_run_bytes(12, 4, 384, page);
        EXPECT_EQ(t.flash_bytes, want) << "page " << page;
        EXPECT_EQ(t.flash_reads, 4u);
    }
    EXPECT_EQ(flash_run_bytes(5, 2, 384, 3000), 3000u);  // [1920, 2688) inside page 0
    EXPECT_EQ(flash_run_bytes(7, 2, 384, 3000), 6000u);  // [2688, 3456) crosses into page 1
}

TEST(SimReplay, LatencyRule) {
    device_profile d = sim_default_params().device;
    d.dram_bandwidth = 100;
    d.flash_bandwidth = 10;
    d.overlap_io_compute = true;
    EXPECT_DOUBLE_EQ(token_cost(d, 1000, 50, 2).latency_s, 10.0);  // max(10, 5)
    d.overlap_io_compute = false;
    EXPECT_DOUBLE_EQ(token_cost(d, 1000, 50, 2).latency_s, 15.0);
    d.flash_read_latency_s = 0.5;
    EXPECT_DOUBLE_EQ(token_cost(d, 1000, 50, 2).flash_time_s, 6.0);
    d.flash_iops = 0.25;  // 2 reads need 8 s: the IOPS ceiling dominates the 5 s transfer
    EXPECT_DOUBLE_EQ(token_cost(d, 1000, 50, 2).flash_time_s, 9.0);
    // Work done while the reads are in flight hides under them (no device overlap: dram + max(flash, work)).
    d.flash_iops = 0;
    EXPECT_DOUBLE_EQ(token_cost(d, 1000, 50, 2, 0, 0, 4.0).latency_s, 16.0);     // 10 + max(6, 4)
    EXPECT_DOUBLE_EQ(token_cost(d, 1000, 50, 2, 0, 0, 7.5).latency_s, 17.5);     // 10 + max(6, 7.5)
    EXPECT_DOUBLE_EQ(token_cost(d, 1000, 50, 2, 12.0, 0, 4.0).latency_s, 18.0);  // compute 12 > DRAM 10
    d.overlap_io_compute = true;  // the device overlaps everything: unchanged max(dram, flash)
    EXPECT_DOUBLE_EQ(token_cost(d, 1000, 50, 2, 0, 0, 4.0).latency_s, 10.0);
}

trace small_trace(uint32_t tokens, const mlp_layout& l, double density = 0.3, uint64_t seed = 1) {
    synthetic_params sp;
    sp.n_tokens = tokens;
    sp.density = density;
    sp.persistence = 0.6;
    sp.skew = 1.0;
    sp.seed = seed;
    return trace_synthetic(small(), l, sp).value();
}

sim_params small_params(const mlp_layout& l, double cache_fraction) {
    sim_params p = sim_default_params();
    p.context_tokens = 16;
    const auto mm = memory_map_build(small(), p.quant, l, p.context_tokens).value();
    p.device.dram_bytes = mm.resident_bytes() + static_cast<uint64_t>(cache_fraction * double(mm.mlp_dynamic_bytes));
    return p;
}

TEST(SimReplay, OnlineSteppingEqualsReplay) {
    const mlp_layout l = layout_parse("dip").value();
    const trace t = small_trace(40, l);
    for (cache_policy pol : all_policies) {
        if (pol == cache_policy::belady) continue;  // offline only
        sim_params p = small_params(l, 0.25);
        p.policy = pol;
        p.window_tokens = 3;
        p.keep_stream_tokens = true;
        const run_report rep = replay(t, p).value();
        simulator sim = simulator::create(t.shape, t.layout, p).value();
        for (uint32_t tok = 0; tok < t.n_tokens; ++tok) {
            std::vector<std::span<const uint32_t>> masks;
            for (uint32_t s = 0; s < t.n_streams(); ++s) masks.push_back(t.active(tok, s));
            const token_report a = sim.step(masks).value();
            const token_report& b = rep.tokens[tok];
            ASSERT_EQ(a.hits, b.hits) << cache_policy_name(pol) << " token " << tok;
            ASSERT_EQ(a.misses, b.misses);
            ASSERT_EQ(a.evicted, b.evicted);
            ASSERT_EQ(a.flash_bytes, b.flash_bytes);
            ASSERT_EQ(a.flash_reads, b.flash_reads);
            ASSERT_EQ(a.dram_bytes, b.dram_bytes);
            ASSERT_DOUBLE_EQ(a.latency_s, b.latency_s);
            const cache_snapshot snap = sim.snapshot();
            for (uint32_t s = 0; s < t.n_streams(); ++s)
                ASSERT_EQ(snap.streams[s].n_resident, rep.stream_tokens[size_t{tok} * t.n_streams() + s].n_resident);
        }
        const run_report on = sim.report();
        EXPECT_DOUBLE_EQ(on.tokens_per_s, rep.tokens_per_s);
        EXPECT_DOUBLE_EQ(on.hit_rate, rep.hit_rate);
    }
}

TEST(SimReplay, NoPolicyExceedsTheDramBudget) {
    const mlp_layout l = layout_parse("dip").value();  // two unit sizes per layer
    for (uint64_t seed : {1u, 2u, 3u}) {
        const trace t = small_trace(60, l, 0.2 + 0.2 * double(seed), seed);
        for (cache_policy pol : all_policies) {
            for (double frac : {0.05, 0.3, 0.9}) {
                sim_params p = small_params(l, frac);
                p.policy = pol;
                p.keep_stream_tokens = true;
                if (seed == 2) {  // pinned heavy hitters take part of every cache
                    const allocation a =
                        allocate(memory_map_build(small(), p.quant, l, p.context_tokens).value(), p.device.dram_bytes)
                            .value();
                    for (uint32_t s = 0; s < t.n_streams(); ++s)
                        p.pinned.push_back(trace_top_units(t, s, a.stream_capacity[s] / 3));
                }
                const run_report r = replay(t, p).value();
                const uint32_t S = t.n_streams();
                for (uint32_t tok = 0; tok < t.n_tokens; ++tok) {
                    uint64_t bytes = 0;
                    for (uint32_t s = 0; s < S; ++s) {
                        const stream_token_stats& x = r.stream_tokens[size_t{tok} * S + s];
                        ASSERT_LE(x.n_resident, r.alloc.stream_capacity[s]);
                        bytes += uint64_t{x.n_resident} * r.map.stream_group(s).unit_bytes;
                    }
                    ASSERT_LE(bytes, r.alloc.cache_bytes) << cache_policy_name(pol) << " token " << tok;
                    ASSERT_LE(r.map.resident_bytes() + bytes, p.device.dram_bytes);
                }
            }
        }
    }
}

TEST(SimReplay, SnapshotAndCacheStateForTheGuiAndDipCa) {
    const mlp_layout l = layout_parse("dip").value();
    const trace t = small_trace(10, l);
    sim_params p = small_params(l, 0.5);
    p.policy = cache_policy::lfu;
    p.pinned.assign(t.n_streams(), {});
    p.pinned[0] = {3, 7};
    simulator sim = simulator::create(t.shape, t.layout, p).value();
    for (uint32_t tok = 0; tok < t.n_tokens; ++tok) {
        std::vector<std::vector<uint32_t>> masks;
        for (uint32_t s = 0; s < t.n_streams(); ++s)
            masks.emplace_back(t.active(tok, s).begin(), t.active(tok, s).end());
        const token_report tr = sim.step(masks).value();
        const cache_snapshot snap = sim.snapshot();
        EXPECT_EQ(snap.token, tok + 1);
        uint64_t hits = 0;
        for (uint32_t s = 0; s < t.n_streams(); ++s) {
            const stream_snapshot& x = snap.streams[s];
            hits += x.hits;
            const unit_bitset b = sim.cache_state(s / 2, s % 2);
            EXPECT_EQ(b.count(), x.n_resident);
            uint32_t pop = 0;
            for (uint64_t w : x.resident_bits) pop += static_cast<uint32_t>(__builtin_popcountll(w));
            EXPECT_EQ(pop, x.n_resident);
            EXPECT_EQ(b.words, x.resident_bits);
            // The current token's units are cached whenever they fit: DIP-CA sees them as c = 1.
            if (masks[s].size() <= x.capacity) {
                for (uint32_t id : masks[s]) EXPECT_TRUE(b.test(id)) << "stream " << s << " unit " << id;
            }
        }
        EXPECT_EQ(hits, tr.hits);
        EXPECT_TRUE(sim.cache_state(0, 0).test(3));
        EXPECT_TRUE(sim.cache_state(0, 0).test(7));
    }
    const cache_snapshot light = sim.snapshot(false);
    EXPECT_TRUE(light.streams[0].resident_bits.empty());
}

trace fixed_trace(const mlp_layout& l, uint32_t tokens, double density) {
    trace t = trace_create(small(), l, "fixed").value();
    for (uint32_t tok = 0; tok < tokens; ++tok) {
        std::vector<std::vector<uint32_t>> m(t.n_streams());
        for (uint32_t s = 0; s < t.n_streams(); ++s) {
            m[s].resize(static_cast<size_t>(std::llround(density * t.stream_units(s))));
            std::iota(m[s].begin(), m[s].end(), 0u);
        }
        EXPECT_TRUE(trace_append_token(t, m).ok());
    }
    return t;
}

TEST(SimReplay, AnalyticEqualsReplayOfDenseAndStaticTraces) {
    for (const char* layout : {"bundle", "dip"}) {
        const mlp_layout l = layout_parse(layout).value();
        for (double density : {1.0, 0.4}) {
            const trace t = fixed_trace(l, 6, density);
            for (cache_policy pol : all_policies) {
                for (double frac : {0.1, 0.6, 1.2}) {
                    sim_params p = small_params(l, frac);
                    p.policy = pol;
                    p.warmup_tokens = 1;  // analytic mode is the warm steady state
                    const run_report rep = replay(t, p).value();
                    const run_report ana =
                        analytic(small(), l, p, density == 1.0 ? "dense" : "static", density).value();
                    SCOPED_TRACE(std::string(layout) + " " + cache_policy_name(pol) + " density " +
                                 std::to_string(density) + " cache " + std::to_string(frac));
                    EXPECT_NEAR(rep.tokens_per_s, ana.tokens_per_s, 1e-9 * ana.tokens_per_s);
                    EXPECT_DOUBLE_EQ(rep.hit_rate, ana.hit_rate);
                    EXPECT_DOUBLE_EQ(rep.flash_bytes_per_token, ana.flash_bytes_per_token);
                    EXPECT_DOUBLE_EQ(rep.dram_bytes_per_token, ana.dram_bytes_per_token);
                }
            }
        }
    }
    EXPECT_FALSE(analytic(small(), mlp_layout{}, sim_default_params(), "dip", 0.5).ok());
    EXPECT_FALSE(analytic(small(), mlp_layout{}, sim_default_params(), "static", 1.5).ok());
}

TEST(SimReplay, ResidentPartTooLargeStreamsTheExcess) {
    sim_params p = sim_default_params();
    const auto mm = memory_map_build(small(), p.quant, mlp_layout{}, p.context_tokens).value();
    p.device.dram_bytes = mm.resident_bytes() / 2;
    const run_report r = analytic(small(), mlp_layout{}, p, "dense").value();
    EXPECT_FALSE(r.alloc.fits);
    EXPECT_FALSE(r.warning.empty());
    const uint64_t overflow = mm.resident_bytes() - p.device.dram_bytes;
    EXPECT_EQ(r.tokens[0].flash_bytes, overflow + 5 * flash_run_bytes(0, 172, mm.groups[0].unit_bytes, 4096));
    EXPECT_EQ(r.tokens[0].dram_bytes, mm.per_token_static_read_bytes() - overflow);
}

TEST(SimReplay, MissWeightedAllocationHelpsUnevenLayers) {
    // Layer 0 churns through many units; the others reuse a small fixed set that a sliver of cache
    // holds. Splitting the cache by measured misses moves bytes to layer 0 and raises the hit rate.
    trace t = trace_create(small(), mlp_layout{}, "uneven").value();
    std::mt19937 rng(5);
    for (uint32_t tok = 0; tok < 80; ++tok) {
        std::vector<std::vector<uint32_t>> m(5);
        for (uint32_t i = 0; i < 172; ++i)
            if (rng() % 100 < 50) m[0].push_back(i);
        for (uint32_t l = 1; l < 5; ++l)
            for (uint32_t i = 0; i < 8; ++i) m[l].push_back(i * 3);
        ASSERT_TRUE(trace_append_token(t, m).ok());
    }
    sim_params p = small_params(mlp_layout{}, 0.25);
    p.policy = cache_policy::lru;
    const run_report uniform = replay(t, p).value();
    p.layer_weights = layer_weights_from_misses(uniform);
    ASSERT_EQ(p.layer_weights.size(), 5u);
    EXPECT_GT(p.layer_weights[0], 10 * p.layer_weights[1]);
    const run_report weighted = replay(t, p).value();
    EXPECT_GT(weighted.alloc.stream_capacity[0], uniform.alloc.stream_capacity[0]);
    EXPECT_GT(weighted.hit_rate, uniform.hit_rate);
    EXPECT_GT(weighted.tokens_per_s, uniform.tokens_per_s);
}

TEST(SimReplay, SweepIsIndependentOfThreadCount) {
    const mlp_layout l = layout_parse("dip").value();
    const trace t = small_trace(30, l);
    std::vector<sim_params> settings;
    for (cache_policy pol : all_policies) {
        for (double frac : {0.1, 0.5}) {
            settings.push_back(small_params(l, frac));
            settings.back().policy = pol;
        }
    }
    const auto one = sweep(t, settings, 1).value();
    const auto many = sweep(t, settings, 3).value();
    ASSERT_EQ(one.size(), settings.size());
    for (size_t i = 0; i < one.size(); ++i) {
        EXPECT_EQ(one[i].tokens_per_s, many[i].tokens_per_s);
        EXPECT_EQ(one[i].hit_rate, many[i].hit_rate);
        for (size_t s = 0; s < one[i].streams.size(); ++s) EXPECT_EQ(one[i].streams[s].hits, many[i].streams[s].hits);
    }
    settings[3].window_tokens = 0;
    settings[3].policy = cache_policy::window;
    auto bad = sweep(t, settings, 2);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.message().find("setting 3"), std::string::npos) << bad.message();
}

TEST(SimReplay, ProgressCanCancel) {
    const trace t = small_trace(20, mlp_layout{});
    sim_params p = small_params(mlp_layout{}, 0.3);
    p.threads = 1;  // deterministic number of progress calls
    int calls = 0;
    auto r = replay(t, p, [&](float f) {
        EXPECT_GE(f, 0.0f);
        EXPECT_LE(f, 1.0f);
        return ++calls < 2;
    });
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.cancelled());
    for (uint32_t threads : {1u, 3u}) {  // the caller sees progress reach 1 however the jobs were shared
        p.threads = threads;
        float last = 0;
        ASSERT_TRUE(replay(t, p, [&](float f) { return (last = f), true; }).ok());
        EXPECT_FLOAT_EQ(last, 1.0f);
    }
}

TEST(SimReplay, BadInputsAreErrors) {
    sim_params p = small_params(mlp_layout{}, 0.3);
    p.policy = cache_policy::belady;
    auto no = simulator::create(small(), mlp_layout{}, p);
    ASSERT_FALSE(no.ok());
    EXPECT_NE(no.message().find("belady"), std::string::npos);

    p.policy = cache_policy::lru;
    simulator sim = simulator::create(small(), mlp_layout{}, p).value();
    EXPECT_FALSE(sim.step(std::vector<std::vector<uint32_t>>(4)).ok());  // 5 streams
    std::vector<std::vector<uint32_t>> m(5);
    m[2] = {4, 2};
    EXPECT_FALSE(sim.step(m).ok());
    m[2] = {172};
    EXPECT_FALSE(sim.step(m).ok());
    EXPECT_EQ(sim.n_tokens(), 0u);  // rejected tokens leave no trace

    sim_params q = small_params(mlp_layout{}, 0.3);
    q.pinned.assign(3, {});  // 5 streams
    EXPECT_FALSE(simulator::create(small(), mlp_layout{}, q).ok());
    q.pinned.assign(5, {});
    q.pinned[1] = {1000};
    EXPECT_FALSE(simulator::create(small(), mlp_layout{}, q).ok());
    q = small_params(mlp_layout{}, 0.3);
    q.device.flash_bandwidth = 0;
    EXPECT_FALSE(simulator::create(small(), mlp_layout{}, q).ok());
    q = small_params(mlp_layout{}, 0.3);
    q.quant.bits = 0;
    EXPECT_FALSE(simulator::create(small(), mlp_layout{}, q).ok());
}

}  // namespace

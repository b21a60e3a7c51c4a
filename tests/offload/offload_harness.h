// Shared by the offload tests: a fixture (model, hash, tokens), packs in the build folder (O_DIRECT needs a
// real file system, not tmpfs), and the check that an offloaded run is bit-identical to the in-RAM run
// with caches of the same capacities while the simulator fed the same masks counts the same reads.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "sparselens/core/context.h"
#include "sparselens/core/methods.h"
#include "sparselens/sim/offload_pack.h"
#include "sparselens/sim/offload_pass.h"
#include "sparselens/sim/offload_runtime.h"
#include "sparselens/sim/residency.h"

namespace sl::test::offload_harness {

using namespace sl::offload;

// A model file, its hash and the token ids every run decodes; `tag` names its scratch packs.
struct fixture {
    model m;
    std::string model_path, sha, tag;
    std::vector<int32_t> tokens;
};

inline std::string scratch(const std::string& name) { return (std::filesystem::path(SL_OFFLOAD_SCRATCH) / name).string(); }

// A pack of `layout` for the fixture's model.
inline std::string pack_for(const fixture& f, const std::string& layout) {
    const std::string path = scratch(f.tag + "." + layout + ".slpack");
    const sim::mlp_layout l = sim::layout_parse(layout).value();
    const outcome w = pack_write(f.m, f.model_path, l, path);
    EXPECT_TRUE(w.ok()) << w.message();
    return path;
}

inline method_config method_cfg(const std::string& name, float pin_fraction = 0.0f) {
    method_config c;
    c.name = name;
    c.density = name == "glu" ? 0.9f : 0.5f;  // GLU's down keep is 3 * density - 2
    c.gamma = 0.2f;
    c.pin_fraction = pin_fraction;
    return c;
}

inline std::unique_ptr<sparsity_method> method(const fixture& f, const std::string& name, float pin_fraction = 0.0f,
                                               const calibration* cal = nullptr) {
    return make_method(method_cfg(name, pin_fraction), f.m, cal).value();
}

struct built {
    std::unique_ptr<offload_runtime> rt;
    std::string error;
};

inline built make_runtime(const fixture& f, const std::string& pack, const sparsity_method& meth, uint64_t dram, int32_t n_ctx,
                   const std::string& io = "auto", int32_t gap = -1,
                   std::vector<std::vector<uint32_t>> pinned = {}) {
    built b;
    auto p = pack_open(pack, f.m, f.sha);
    if (!p) {
        b.error = p.message();
        return b;
    }
    offload_params op;
    op.dram_bytes = dram;
    op.policy = sim::cache_policy::lfu;
    op.n_ctx = n_ctx;
    op.io_backend = io;
    op.merge_gap_pages = gap;
    op.pinned = std::move(pinned);
    auto rt = offload_runtime::create(f.m, *p, meth.traits(), op);
    if (!rt) {
        b.error = rt.message();
        return b;
    }
    b.rt = std::move(*rt);
    return b;
}

// The resident part of a run of `meth` on `pack` (an allocation with no budget fails and reports it).
inline uint64_t resident_of(const fixture& f, const std::string& pack, const sparsity_method& meth, int32_t n_ctx) {
    built b = make_runtime(f, pack, meth, 1, n_ctx);
    EXPECT_TRUE(b.rt) << b.error;
    const outcome a = b.rt->allocate(0);
    EXPECT_FALSE(a.ok());
    EXPECT_NE(a.message().find("below the resident part"), std::string::npos) << a.message();
    return b.rt->resident().total();
}

// Returns the reads per token (the runtime's and the simulator's, which must agree). With pin_fraction > 0
// the method pins the calibration's heavy hitters and the caches pin the same units.
inline double expect_identical_to_in_ram(const fixture& f, const std::string& name, const std::string& layout,
                                         const std::string& io, int32_t gap = -1, float pin_fraction = 0.0f,
                                         const calibration* cal = nullptr) {
    const std::string pack = pack_for(f, layout);
    auto m_ram = method(f, name, pin_fraction, cal), m_off = method(f, name, pin_fraction, cal);
    sim::deploy_config dc;
    dc.method = method_cfg(name, pin_fraction);
    auto pinned = pinned_units(dc, cal, f.m, pack_open(pack, f.m, f.sha).value());
    EXPECT_TRUE(pinned.ok()) << pinned.message();
    std::vector<std::vector<uint32_t>> pin_sets;
    if (pinned.ok()) pin_sets = std::move(*pinned);
    const int32_t n_ctx = 64;
    const uint64_t mlp = pack_open(pack, f.m, f.sha)->mlp_bytes();
    const uint64_t budget = resident_of(f, pack, *m_off, n_ctx) + mlp * 3 / 10;  // caches: 30% of the MLP

    built b = make_runtime(f, pack, *m_off, budget, n_ctx, io, gap, std::move(pin_sets));
    if (!b.rt) {
        ADD_FAILURE() << b.error;
        return 0;
    }
    offload_runtime& rt = *b.rt;
    context_params cp = context_default_params();
    cp.n_ctx = n_ctx;
    context off = context::create(f.m, cp).value();
    off.set_mlp_source(&rt);
    off.set_method(m_off.get());
    if (!rt.allocate(off.layout_bytes()).ok()) {
        ADD_FAILURE() << "allocate failed";
        return 0;
    }
    off.set_residency(&rt);
    EXPECT_LE(rt.resident().total() + rt.cache_capacity_bytes(), budget);

    // In RAM: the same method against the simulator's cache with the same capacities; a second simulator
    // follows the offloaded run.
    sim::sim_params base = sim::sim_default_params();
    base.policy = sim::cache_policy::lfu;
    base.device.flash_merge_gap_pages = gap;
    const sim::sim_params sp = offload_sim_params(rt, base);
    auto sim_ram = sim::sim_residency::create(sim::shape_from_model(f.m), rt.map().layout, sp).value();
    auto sim_off = sim::sim_residency::create(sim::shape_from_model(f.m), rt.map().layout, sp).value();
    EXPECT_EQ(sim_ram->sim().alloc().stream_capacity, rt.alloc().stream_capacity);
    rt.forward_to(sim_off.get());
    context ram = context::create(f.m, cp).value();
    ram.set_method(m_ram.get());
    ram.set_residency(sim_ram.get());

    const size_t vocab = static_cast<size_t>(f.m.hp.vocab_size);
    for (size_t pos = 0; pos < f.tokens.size(); ++pos) {
        const float* a = ram.decode(f.tokens[pos], static_cast<int32_t>(pos));
        std::vector<float> want(a, a + vocab);
        const float* o = off.decode(f.tokens[pos], static_cast<int32_t>(pos));
        if (!rt.last_error().empty() || rt.tokens().size() != pos + 1) {
            ADD_FAILURE() << "position " << pos << ": " << rt.last_error();
            return 0;
        }
        if (std::memcmp(want.data(), o, vocab * sizeof(float)) != 0) {
            ADD_FAILURE() << name << ": logits differ at position " << pos;
            return 0;
        }
        EXPECT_LE(rt.tokens().back().cache_bytes, rt.cache_capacity_bytes()) << "cache over budget at " << pos;
    }
    uint64_t hits = 0, misses = 0, bytes = 0, runs = 0, sim_bytes = 0, sim_hits = 0, sim_reads = 0;
    for (const offload_token& t : rt.tokens()) {
        hits += t.hits;
        misses += t.misses;
        bytes += t.bytes_read;
        runs += t.runs;
    }
    const sim::run_report sr = sim_off->sim().report();
    for (const sim::token_report& t : sr.tokens) {
        sim_bytes += t.flash_bytes;
        sim_hits += t.hits;
        sim_reads += t.flash_reads;
    }
    EXPECT_EQ(runs, sim_reads) << "the runtime's reads must be the simulator's";
    EXPECT_GT(misses, hits / 10) << "the budget should force misses";
    EXPECT_EQ(hits, sim_hits);
    EXPECT_EQ(bytes, sim_bytes) << "O_DIRECT bytes read must equal the simulator's page-rounded flash bytes";
    EXPECT_LE(rt.peak_cache_bytes(), rt.cache_capacity_bytes());
    EXPECT_EQ(rt.pinned_misses(), 0u) << "a pinned unit was read again after the first load";
    if (pin_fraction > 0) {
        // Pinned neurons are active every token and never read after allocate(): hits at least |P| per token.
        EXPECT_GT(rt.pinned_units(), 0u);
        EXPECT_GT(rt.pinned_bytes(), 0u);
        EXPECT_GE(hits, rt.pinned_units() * rt.tokens().size());
    }
    std::printf("%s (%s, %s): hit rate %.3f, %.0f bytes read per token\n", name.c_str(), layout.c_str(), rt.io_backend(),
                double(hits) / double(hits + misses), double(bytes) / double(rt.tokens().size()));
    return double(runs) / double(rt.tokens().size());
}

}  // namespace sl::test::offload_harness

// The offload runtime through the real engine on stories260K (label model): packs written and read back,
// DIP / DIP-CA / GLU with their MLP weights read from the pack under a tiny budget (forced misses) give
// bit-identical logits to the in-RAM run with the same cache, the cache never exceeds its budget, the
// simulator fed the same masks counts the same hits and flash bytes, and every fault is a clear error.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "sparselens/core/context.h"
#include "sparselens/core/fingerprint.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/tokenizer.h"
#include "sparselens/sim/offload_pack.h"
#include "sparselens/sim/offload_probe.h"
#include "sparselens/sim/offload_runtime.h"
#include "sparselens/sim/residency.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace sl;
using namespace sl::offload;

struct fixture {
    model m;
    std::string model_path, sha;
    std::vector<int32_t> tokens;
};

const fixture& fx() {
    static const fixture f = [] {
        fixture x;
        x.model_path = test::shared_path("models/stories260K_f32.bin");
        x.m = model_load(x.model_path).value();
        x.sha = sha256_file(x.model_path).value();
        const auto tok = tokenizer::from_llama2c_file(test::shared_path("models/tok512.bin"), x.m.hp.vocab_size);
        std::ifstream in(test::shared_path("text/tinystories_sample.txt"));
        std::stringstream ss;
        ss << in.rdbuf();
        x.tokens = tok->encode(ss.str().substr(0, 600), true, false);
        if (x.tokens.size() > 48) x.tokens.resize(48);
        return x;
    }();
    return f;
}

std::string scratch(const std::string& name) { return (fs::path(SL_OFFLOAD_SCRATCH) / name).string(); }

// A pack of `layout` for stories260K (written once per layout).
std::string pack_for(const std::string& layout) {
    const std::string path = scratch("s260k." + layout + ".slpack");
    const sim::mlp_layout l = sim::layout_parse(layout).value();
    const outcome w = pack_write(fx().m, fx().model_path, l, path);
    EXPECT_TRUE(w.ok()) << w.message();
    return path;
}

std::unique_ptr<sparsity_method> method(const std::string& name) {
    method_config c;
    c.name = name;
    c.density = name == "glu" ? 0.9f : 0.5f;  // GLU's down keep is 3 * density - 2
    c.gamma = 0.2f;
    return make_method(c, fx().m, nullptr).value();
}

struct built {
    std::unique_ptr<offload_runtime> rt;
    std::string error;
};

built make_runtime(const std::string& pack, const sparsity_method& meth, uint64_t dram, int32_t n_ctx,
                   const std::string& io = "auto", int32_t gap = -1) {
    built b;
    auto p = pack_open(pack, fx().m, fx().sha);
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
    auto rt = offload_runtime::create(fx().m, *p, meth.traits(), op);
    if (!rt) {
        b.error = rt.message();
        return b;
    }
    b.rt = std::move(*rt);
    return b;
}

// The resident part of a run of `meth` on `pack` (an allocation with no budget fails and reports it).
uint64_t resident_of(const std::string& pack, const sparsity_method& meth, int32_t n_ctx) {
    built b = make_runtime(pack, meth, 1, n_ctx);
    EXPECT_TRUE(b.rt) << b.error;
    const outcome a = b.rt->allocate(0);
    EXPECT_FALSE(a.ok());
    EXPECT_NE(a.message().find("below the resident part"), std::string::npos) << a.message();
    return b.rt->resident().total();
}

// Returns the reads per token (the runtime's and the simulator's, which must agree).
double expect_identical_to_in_ram(const std::string& name, const std::string& layout, const std::string& io,
                                  int32_t gap = -1) {
    const fixture& f = fx();
    const std::string pack = pack_for(layout);
    auto m_ram = method(name), m_off = method(name);
    const int32_t n_ctx = 64;
    const uint64_t mlp = pack_open(pack, f.m, f.sha)->mlp_bytes();
    const uint64_t budget = resident_of(pack, *m_off, n_ctx) + mlp * 3 / 10;  // caches: 30% of the MLP

    built b = make_runtime(pack, *m_off, budget, n_ctx, io, gap);
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
    std::printf("%s (%s, %s): hit rate %.3f, %.0f bytes read per token\n", name.c_str(), layout.c_str(), rt.io_backend(),
                double(hits) / double(hits + misses), double(bytes) / double(rt.tokens().size()));
    return double(runs) / double(rt.tokens().size());
}

TEST(Offload, DipIsBitIdenticalToInRam) { expect_identical_to_in_ram("dip", "dip", "auto"); }
TEST(Offload, DipCaReadsTheRealCacheAndIsBitIdentical) { expect_identical_to_in_ram("dip-ca", "dip", "auto"); }
TEST(Offload, MergedRunsAreFewerReadsAndStillBitIdentical) {
    // DIP's masks do not depend on the cache, so the three runs miss the same units: merging runs that
    // share a page, then gaps of up to 3 pages, can only lower the number of reads.
    const double none = expect_identical_to_in_ram("dip", "dip", "auto", -1);
    const double shared = expect_identical_to_in_ram("dip", "dip", "auto", 0);
    const double gaps = expect_identical_to_in_ram("dip", "dip", "pread", 3);
    EXPECT_LT(shared, none);
    EXPECT_LT(gaps, shared);
}

TEST(Offload, PlanReadsMatchesABruteForceReference) {
    std::mt19937 rng(7);
    std::vector<sim::page_run> runs;
    for (int iter = 0; iter < 300; ++iter) {
        const uint64_t unit = 1 + rng() % 9000;
        const int32_t gap = static_cast<int32_t>(rng() % 5) - 1;
        std::vector<uint32_t> miss;
        for (uint32_t u = 0; u < 400; ++u)
            if (rng() % 3 == 0) miss.push_back(u);
        sim::plan_reads(miss, unit, 4096, gap, runs);
        // Reference: pages of each unit; reads are maximal groups of needed pages whose holes are at most
        // `gap` pages (gap -1: one read per run of consecutive units, shared pages read twice).
        std::vector<std::pair<uint64_t, uint64_t>> want;  // [first, end) pages
        for (size_t i = 0; i < miss.size();) {
            size_t j = i + 1;
            while (j < miss.size() && miss[j] == miss[j - 1] + 1) ++j;
            const uint64_t p0 = miss[i] * unit / 4096, p1 = ((miss[j - 1] + 1) * unit - 1) / 4096 + 1;
            if (gap >= 0 && !want.empty() && p0 <= want.back().second + static_cast<uint64_t>(gap))
                want.back().second = std::max(want.back().second, p1);
            else
                want.emplace_back(p0, p1);
            i = j;
        }
        ASSERT_EQ(runs.size(), want.size());
        uint32_t covered = 0;
        for (size_t r = 0; r < runs.size(); ++r) {
            EXPECT_EQ(runs[r].first_page, want[r].first);
            EXPECT_EQ(runs[r].first_page + runs[r].n_pages, want[r].second);
            EXPECT_EQ(runs[r].first_miss, covered);
            for (uint32_t k = runs[r].first_miss; k < runs[r].end_miss; ++k) {  // every miss inside its read
                EXPECT_GE(miss[k] * unit, runs[r].first_page * 4096);
                EXPECT_LE((miss[k] + 1) * unit, (runs[r].first_page + runs[r].n_pages) * 4096);
            }
            covered = runs[r].end_miss;
        }
        EXPECT_EQ(covered, miss.size());
        if (gap >= 0)
            for (size_t r = 1; r < runs.size(); ++r)
                EXPECT_GT(runs[r].first_page, runs[r - 1].first_page + runs[r - 1].n_pages + gap);
    }
}

TEST(Offload, PreadFallbackGivesTheSameRun) { expect_identical_to_in_ram("dip-ca", "dip", "pread"); }
TEST(Offload, GluWithStaticGateAndUp) { expect_identical_to_in_ram("glu", "down_column", "auto"); }

TEST(Offload, PackRoundTripsAndNamesItsModel) {
    const std::string pack = pack_for("bundle");
    auto p = pack_open(pack, fx().m, fx().sha);
    ASSERT_TRUE(p.ok()) << p.message();
    EXPECT_EQ(p->layout, "neuron_bundle");
    EXPECT_EQ(p->groups[0].unit_bytes, 3u * 64u * 4u);
    EXPECT_TRUE(pack_verify(*p).ok());
    const auto other = pack_open(pack, fx().m, std::string(64, 'a'));
    ASSERT_FALSE(other.ok());
    EXPECT_NE(other.message().find("another model file"), std::string::npos) << other.message();
}

TEST(Offload, TruncatedAndModifiedPacksAreOneLineErrors) {
    const std::string pack = pack_for("dip");
    const std::string cut = scratch("cut.slpack"), mod = scratch("mod.slpack");
    fs::copy_file(pack, cut, fs::copy_options::overwrite_existing);
    fs::resize_file(cut, fs::file_size(cut) - 4096);
    const auto t = pack_open(cut, fx().m, fx().sha);
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.message().find("truncated"), std::string::npos) << t.message();
    EXPECT_EQ(t.message().find('\n'), std::string::npos);

    fs::copy_file(pack, mod, fs::copy_options::overwrite_existing);
    auto p = pack_open(mod, fx().m, fx().sha).value();
    {
        std::fstream f(mod, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(p.region(2, 1).offset + 100));
        f.put('\x7f');
    }
    const outcome v = pack_verify(p);
    ASSERT_FALSE(v.ok());
    EXPECT_NE(v.message().find("checksum mismatch in layer 2"), std::string::npos) << v.message();

    std::vector<uint8_t> junk(8192, 'x');
    const std::string foreign = test::write_temp("foreign.slpack", junk);
    const auto fo = pack_open(foreign, fx().m, fx().sha);
    ASSERT_FALSE(fo.ok());
    EXPECT_NE(fo.message().find("not a SparseLens MLP pack"), std::string::npos);
}

TEST(Offload, PackThatShrinksDuringTheRunStopsWithAnError) {
    const std::string pack = pack_for("dip");
    const std::string shrink = scratch("shrink.slpack");
    fs::copy_file(pack, shrink, fs::copy_options::overwrite_existing);
    auto m = method("dip");
    const int32_t n_ctx = 32;
    const uint64_t budget = resident_of(shrink, *m, n_ctx) + 4096;
    built b = make_runtime(shrink, *m, budget, n_ctx);
    ASSERT_TRUE(b.rt) << b.error;
    context_params cp = context_default_params();
    cp.n_ctx = n_ctx;
    context ctx = context::create(fx().m, cp).value();
    ctx.set_mlp_source(b.rt.get());
    ctx.set_method(m.get());
    ASSERT_TRUE(b.rt->allocate(ctx.layout_bytes()).ok());
    ctx.set_residency(b.rt.get());
    ctx.decode(fx().tokens[0], 0);
    ASSERT_TRUE(b.rt->last_error().empty()) << b.rt->last_error();
    fs::resize_file(shrink, b.rt->pack().data_offset);  // everything after the index is gone
    ctx.decode(fx().tokens[1], 1);
    const std::string e = b.rt->last_error();
    EXPECT_NE(e.find("short read"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos);
}

TEST(Offload, MethodTheLayoutCannotFeedIsRefused) {
    const std::string pack = pack_for("input_column_pair");
    auto m = method("glu");
    built b = make_runtime(pack, *m, 1ull << 30, 32);
    ASSERT_FALSE(b.rt);
    EXPECT_NE(b.error.find("does not store"), std::string::npos) << b.error;
}

TEST(Offload, ProbeWritesAValidProfileAndRemovesItsScratchFile) {
    probe_params p;
    p.file_bytes = 16u << 20;
    p.dir = scratch("probe");
    p.read_sizes = {4096, 1u << 20};
    p.depths = {1, 4};
    p.seconds_per_point = 0.05;
    const auto r = probe_device(p);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r->random.size(), 4u);
    for (const probe_point& pt : r->random) EXPECT_GT(pt.iops, 0.0);
    EXPECT_TRUE(sim::device_validate(r->profile, "probe").ok());
    EXPECT_EQ(r->profile.flash_page_bytes, 4096u);
    EXPECT_TRUE(fs::is_empty(p.dir)) << "the scratch file must be removed";

    probe_params cancel = p;
    cancel.progress = [](float f) { return f < 0.1f; };
    const auto c = probe_device(cancel);
    ASSERT_FALSE(c.ok());
    EXPECT_TRUE(c.cancelled());
    EXPECT_TRUE(fs::is_empty(p.dir));
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

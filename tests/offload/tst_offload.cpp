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

#include "offload_harness.h"
#include "sparselens/core/calibration.h"
#include "sparselens/core/context.h"
#include "sparselens/core/fingerprint.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/tokenizer.h"
#include "sparselens/sim/offload_pack.h"
#include "sparselens/sim/offload_probe.h"
#include "sparselens/sim/offload_runtime.h"
#include "sparselens/sim/residency.h"
#include "sparselens/sim/simulator.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace sl;
using namespace sl::offload;
using namespace sl::test::offload_harness;

const fixture& fx() {
    static const fixture f = [] {
        fixture x;
        x.tag = "s260k";
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

TEST(Offload, DipIsBitIdenticalToInRam) {
    expect_identical_to_in_ram(fx(), "dip", "dip", "auto");
}
TEST(Offload, DipCaReadsTheRealCacheAndIsBitIdentical) {
    expect_identical_to_in_ram(fx(), "dip-ca", "dip", "auto");
}
TEST(Offload, MergedRunsAreFewerReadsAndStillBitIdentical) {
    // DIP's masks do not depend on the cache, so the three runs miss the same units: merging runs that
    // share a page, then gaps of up to 3 pages, can only lower the number of reads.
    const double none = expect_identical_to_in_ram(fx(), "dip", "dip", "auto", -1);
    const double shared = expect_identical_to_in_ram(fx(), "dip", "dip", "auto", 0);
    const double gaps = expect_identical_to_in_ram(fx(), "dip", "dip", "pread", 3);
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
        if (gap >= 0) {
            for (size_t r = 1; r < runs.size(); ++r)
                EXPECT_GT(runs[r].first_page, runs[r - 1].first_page + runs[r - 1].n_pages + gap);
        }
    }
}

TEST(Offload, GriffinReadsTheNextLayerWhileThisOneComputes) {
    // GRIFFIN fixes its experts after the prompt: the offloaded run (unfused kernels on staged bundles)
    // starts each next layer's reads during the layer before, reads exactly what the simulator counts,
    // and generates the in-RAM (fused) run's tokens.
    const std::string pack = pack_for(fx(), "bundle");
    sim::deploy_config dc;
    dc.method = method_cfg("griffin");
    dc.policy = sim::cache_policy::lfu;
    auto off = method(fx(), "griffin"), ram = method(fx(), "griffin");
    const std::vector<int32_t> prompt(fx().tokens.begin(), fx().tokens.begin() + 12);
    pass_request q;
    q.m = &fx().m;
    q.model_sha256 = fx().sha;
    q.config = &dc;
    q.method = off.get();
    q.pack_path = pack;
    q.budget_mlp_share = 0.3;  // below GRIFFIN's 50% experts: every token misses
    q.device = sim::sim_default_params().device;
    q.device.overlap_io_compute = false;
    q.prompt = prompt;
    q.steps = 40;
    q.sampling.temperature = 0;
    q.threads = 1;
    const auto r = offload_pass(q);
    ASSERT_TRUE(r.ok()) << r.message();
    const int32_t layers = static_cast<int32_t>(fx().m.layers.size());
    EXPECT_EQ(r->prefetched_layers, static_cast<uint64_t>((layers - 1) * r->n_decoded));
    EXPECT_GT(r->bytes_per_token, 0.0);
    EXPECT_DOUBLE_EQ(r->bytes_per_token, r->sim_bytes_per_token);
    EXPECT_DOUBLE_EQ(r->hit_rate, r->sim_hit_rate);
    EXPECT_LE(r->peak_cache, r->cache_capacity);
    // Every O_DIRECT read reaches the device (the page cache served none of them): the process's
    // read_bytes holds them all. It may hold a few more pages: /proc/self/io also counts page-ins of
    // the mapped fixture by any thread (seen once under ctest -j2: +8 KiB).
    EXPECT_GE(r->proc_read_bytes, r->bytes_total);
    EXPECT_LE(r->proc_read_bytes, r->bytes_total + (256u << 10));

    context_params cp = context_default_params();
    cp.n_ctx = q.steps;
    cp.n_threads = 1;
    context ctx = context::create(fx().m, cp).value();
    ctx.set_method(ram.get());
    generate_params gp = generate_default_params();
    gp.steps = q.steps;
    gp.sampling.temperature = 0;
    const auto g = generate(ctx, prompt, gp, [](const generate_step&) { return true; });
    ASSERT_TRUE(g.ok()) << g.message();
    EXPECT_EQ(g->tokens, r->tokens) << "same experts, same greedy tokens (the kernels differ only in f32 order)";
}

TEST(Offload, PinnedHeavyHittersStayInTheCache) {
    // DIP and DIP-CA pinning 10% of the neurons (the calibration's heavy hitters): the caches hold them
    // from the first token, they never miss, and the run stays bit-identical with the simulator's counts.
    calibration_params cp = calibration_default_params();
    cp.n_ctx = 64;
    cp.max_tokens = 256;
    std::vector<int32_t> text;
    while (text.size() < 256) text.insert(text.end(), fx().tokens.begin(), fx().tokens.end());
    const calibration cal = calibrate(fx().m, text, cp).value();
    expect_identical_to_in_ram(fx(), "dip", "dip", "auto", 3, 0.1f, &cal);
    expect_identical_to_in_ram(fx(), "dip-ca", "dip", "auto", -1, 0.1f, &cal);
}

TEST(Offload, PreadFallbackGivesTheSameRun) {
    expect_identical_to_in_ram(fx(), "dip-ca", "dip", "pread");
}
TEST(Offload, GluWithStaticGateAndUp) {
    expect_identical_to_in_ram(fx(), "glu", "down_column", "auto");
}

TEST(Offload, PackRoundTripsAndNamesItsModel) {
    const std::string pack = pack_for(fx(), "bundle");
    auto p = pack_open(pack, fx().m, fx().sha);
    ASSERT_TRUE(p.ok()) << p.message();
    EXPECT_EQ(p->layout, "neuron_bundle");
    EXPECT_EQ(p->groups[0].max_unit_bytes, 3u * 64u * 4u);
    EXPECT_EQ(p->region(1, 0).unit_bytes, 3u * 64u * 4u);
    EXPECT_TRUE(pack_verify(*p).ok());
    const auto other = pack_open(pack, fx().m, std::string(64, 'a'));
    ASSERT_FALSE(other.ok());
    EXPECT_NE(other.message().find("another model file"), std::string::npos) << other.message();
}

TEST(Offload, TruncatedAndModifiedPacksAreOneLineErrors) {
    const std::string pack = pack_for(fx(), "dip");
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

    // A pack of an older format version (here 1: one unit size per group) is stale: one line asking to pack again.
    const std::string old = scratch("v1.slpack");
    fs::copy_file(pack, old, fs::copy_options::overwrite_existing);
    {
        std::fstream f(old, std::ios::in | std::ios::out | std::ios::binary);
        const uint32_t v1 = 1;
        f.seekp(8);
        f.write(reinterpret_cast<const char*>(&v1), sizeof v1);
    }
    const auto st = pack_open(old, fx().m, fx().sha);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("stale pack"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("sparselens pack"), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos);
}

TEST(Offload, PackThatShrinksDuringTheRunStopsWithAnError) {
    const std::string pack = pack_for(fx(), "dip");
    const std::string shrink = scratch("shrink.slpack");
    fs::copy_file(pack, shrink, fs::copy_options::overwrite_existing);
    auto m = method(fx(), "dip");
    const int32_t n_ctx = 32;
    const uint64_t budget = resident_of(fx(), shrink, *m, n_ctx) + 4096;
    built b = make_runtime(fx(), shrink, *m, budget, n_ctx);
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
    const std::string pack = pack_for(fx(), "input_column_pair");
    auto m = method(fx(), "glu");
    built b = make_runtime(fx(), pack, *m, 1ull << 30, 32);
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

TEST(Offload, ProbeOfAnExistingFileIsReadOnly) {
    // A pack probed just before a run (run/eval --offload --probe): read where it lies, never written.
    const std::string dir = scratch("probe-file"), path = dir + "/pack.bin";
    fs::create_directories(dir);
    std::vector<char> bytes(3u << 20);
    std::mt19937 rng(7);
    for (char& c : bytes) c = static_cast<char>(rng());
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    const auto before = fs::last_write_time(path);
    probe_params p = probe_pack_params(path, 0.05);
    EXPECT_EQ(p.read_sizes.back(), 1u << 20);
    const auto r = probe_device(p);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r->random.size(), 4u);  // 4 KiB and 1 MiB at depths 1 and 32
    EXPECT_GT(r->profile.flash_bandwidth, 0.0);
    EXPECT_EQ(r->profile.dram_bandwidth, 0.0);  // flash only: the run keeps its profile's DRAM figures
    const sim::device_profile merged = with_probed_flash(sim::sim_default_params().device, r->profile);
    EXPECT_EQ(merged.flash_bandwidth, r->profile.flash_bandwidth);
    EXPECT_EQ(merged.dram_bandwidth, sim::sim_default_params().device.dram_bandwidth);
    EXPECT_TRUE(sim::device_validate(merged, "probe").ok());
    EXPECT_EQ(fs::last_write_time(path), before);
    std::ifstream in(path, std::ios::binary);
    std::vector<char> after(bytes.size());
    in.read(after.data(), static_cast<std::streamsize>(after.size()));
    EXPECT_EQ(after, bytes);
    EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1) << "no scratch file";

    // A small pack (stories260K's is < 1 MiB) is probed with reads that fit it; a file smaller than the
    // reads asked for is one line.
    fs::resize_file(path, 300 * 1024);
    p = probe_pack_params(path, 0.05);
    EXPECT_EQ(p.read_sizes.back(), 256u * 1024u);
    const auto small = probe_device(p);
    EXPECT_TRUE(small.ok()) << small.message();
    p.read_sizes = {4096, 1u << 20};
    const auto too_small = probe_device(p);
    ASSERT_FALSE(too_small.ok());
    EXPECT_NE(too_small.message().find("too small"), std::string::npos) << too_small.message();
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

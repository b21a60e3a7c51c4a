// Trace files: round trips, every truncation of the header and a spread through the payload, bit flips,
// and lying headers with valid checksums — always a one-line error, never a crash or a huge allocation.
// Also appending with validation, heavy hitters and the synthetic generator.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "sparselens/sim/synthetic.h"
#include "sparselens/sim/trace.h"
#include "test_support.h"

namespace {

using namespace sl::sim;

model_shape small_shape() {
    model_shape s;
    s.name = "tiny";
    s.dim = 64;
    s.hidden_dim = 172;
    s.n_layers = 3;
    s.n_heads = 8;
    s.n_kv_heads = 4;
    s.vocab_size = 512;
    s.tied_embeddings = true;
    return s;
}

trace sample(uint32_t tokens = 12) {
    synthetic_params sp;
    sp.n_tokens = tokens;
    sp.density = 0.4;
    sp.persistence = 0.5;
    sp.skew = 1.0;
    return trace_synthetic(small_shape(), layout_parse("dip").value(), sp).value();
}

// Bitwise CRC-32 (IEEE), independent of the library's table version.
uint32_t crc32_ref(const uint8_t* p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; ++i) {
        c ^= p[i];
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

uint32_t rd32(const std::vector<uint8_t>& b, size_t at) {
    uint32_t v;
    std::memcpy(&v, b.data() + at, 4);
    return v;
}
void wr32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
    std::memcpy(b.data() + at, &v, 4);
}
void wr64(std::vector<uint8_t>& b, size_t at, uint64_t v) {
    std::memcpy(b.data() + at, &v, 8);
}

// Recomputes both checksums so that only the lie under test remains.
void reseal(std::vector<uint8_t>& b) {
    const uint32_t hb = rd32(b, 12);
    wr64(b, 56, b.size() - hb);
    wr32(b, 64, crc32_ref(b.data() + hb, b.size() - hb));
    wr32(b, hb - 4, crc32_ref(b.data(), hb - 4));
}

bool same(const trace& a, const trace& b) {
    return a.n_tokens == b.n_tokens && a.ids == b.ids && a.offsets == b.offsets && a.label == b.label &&
           a.layout.groups == b.layout.groups && a.shape.name == b.shape.name && a.shape.dim == b.shape.dim &&
           a.shape.hidden_dim == b.shape.hidden_dim && a.shape.n_layers == b.shape.n_layers &&
           a.shape.n_heads == b.shape.n_heads && a.shape.n_kv_heads == b.shape.n_kv_heads &&
           a.shape.vocab_size == b.shape.vocab_size && a.shape.tied_embeddings == b.shape.tied_embeddings;
}

void expect_error(const std::vector<uint8_t>& b, const std::string& what) {
    auto r = trace_decode(b.data(), b.size(), "t.sltrace");
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.message().rfind("t.sltrace: ", 0), 0u) << r.message();
    EXPECT_EQ(r.message().find('\n'), std::string::npos) << r.message();
}

TEST(SimTrace, RoundTripInMemoryAndOnDisk) {
    const trace t = sample();
    ASSERT_GT(t.n_accesses(), 100u);
    const std::vector<uint8_t> b = trace_encode(t);
    EXPECT_EQ(rd32(b, 8), trace_format_version);
    auto d = trace_decode(b.data(), b.size(), "mem");
    ASSERT_TRUE(d.ok()) << d.message();
    EXPECT_TRUE(same(t, *d));

    const std::string path = sl::test::write_temp("roundtrip.sltrace", {});
    ASSERT_TRUE(trace_write(path, t).ok());
    auto f = trace_read(path);
    ASSERT_TRUE(f.ok()) << f.message();
    EXPECT_TRUE(same(t, *f));
    std::remove(path.c_str());

    trace empty = trace_create(small_shape(), mlp_layout{}, "").value();
    const std::vector<uint8_t> e = trace_encode(empty);
    auto de = trace_decode(e.data(), e.size(), "empty");
    ASSERT_TRUE(de.ok()) << de.message();
    EXPECT_EQ(de->n_tokens, 0u);
    EXPECT_EQ(de->offsets.size(), 1u);
}

TEST(SimTrace, EveryTruncationIsAnError) {
    const std::vector<uint8_t> b = trace_encode(sample());
    const size_t header = rd32(b, 12);
    for (size_t n = 0; n < b.size(); n += (n < header + 64 ? 1 : 97)) {
        std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<ptrdiff_t>(n));
        expect_error(cut, "truncated at " + std::to_string(n));
        if (HasFatalFailure()) return;
    }
    std::vector<uint8_t> longer = b;
    longer.push_back(0);
    expect_error(longer, "trailing byte");
}

TEST(SimTrace, EveryBitFlipIsAnError) {
    const std::vector<uint8_t> b = trace_encode(sample(4));
    std::mt19937 rng(3);
    for (size_t at = 0; at < b.size(); ++at) {
        // Every bit of the header, one random bit per payload byte.
        const bool in_header = at < rd32(b, 12);
        for (int bit = 0; bit < 8; ++bit) {
            if (!in_header && bit != static_cast<int>(rng() % 8)) continue;
            std::vector<uint8_t> f = b;
            f[at] ^= static_cast<uint8_t>(1u << bit);
            expect_error(f, "flip at byte " + std::to_string(at) + " bit " + std::to_string(bit));
            if (HasFatalFailure()) return;
        }
    }
}

TEST(SimTrace, LyingHeadersWithValidChecksums) {
    const std::vector<uint8_t> good = trace_encode(sample(4));
    auto lie = [&](const std::string& what, auto&& edit) {
        std::vector<uint8_t> b = good;
        edit(b);
        reseal(b);
        expect_error(b, what);
    };
    lie("version", [](std::vector<uint8_t>& b) { wr32(b, 8, 2); });
    lie("huge token count", [](std::vector<uint8_t>& b) { wr32(b, 52, 0xffffffffu); });
    lie("more tokens than stored", [](std::vector<uint8_t>& b) { wr32(b, 52, rd32(b, 52) + 1); });
    lie("fewer tokens than stored", [](std::vector<uint8_t>& b) { wr32(b, 52, rd32(b, 52) - 1); });
    lie("zero dim", [](std::vector<uint8_t>& b) { wr32(b, 16, 0); });
    lie("negative layers", [](std::vector<uint8_t>& b) { wr32(b, 24, 0x80000000u); });
    lie("heads not dividing dim", [](std::vector<uint8_t>& b) { wr32(b, 28, 7); });
    lie("hidden smaller than ids", [](std::vector<uint8_t>& b) { wr32(b, 20, 3); });
    lie("no groups", [](std::vector<uint8_t>& b) { b[45] = 0; });
    lie("five groups", [](std::vector<uint8_t>& b) { b[45] = 5; });
    lie("unknown unit kind", [](std::vector<uint8_t>& b) { b[48] = 200; });
    lie("overlapping groups", [](std::vector<uint8_t>& b) { b[49] = static_cast<uint8_t>(unit_kind::up_column); });
    lie("flags", [](std::vector<uint8_t>& b) { b[44] = 6; });
    lie("header length", [](std::vector<uint8_t>& b) { wr32(b, 12, rd32(b, 12) + 1); });
    lie("label length", [](std::vector<uint8_t>& b) { wr32(b, 70, 1u << 30); });

    // Payload lies: a count above the stream's units, an id out of range, an over-long varint.
    const size_t hb = rd32(good, 12);
    auto payload_lie = [&](const std::string& what, std::vector<uint8_t> payload) {
        std::vector<uint8_t> b(good.begin(), good.begin() + static_cast<ptrdiff_t>(hb));
        wr32(b, 52, 1);
        b.insert(b.end(), payload.begin(), payload.end());
        reseal(b);
        expect_error(b, what);
    };
    // One token, 6 streams (3 layers x 2 groups); stream 0 has 64 units, stream 1 has 172.
    std::vector<uint8_t> ok_rows = {0, 0, 0, 0, 0, 0};
    {
        std::vector<uint8_t> b(good.begin(), good.begin() + static_cast<ptrdiff_t>(hb));
        wr32(b, 52, 1);
        b.insert(b.end(), ok_rows.begin(), ok_rows.end());
        reseal(b);
        auto r = trace_decode(b.data(), b.size(), "t.sltrace");
        ASSERT_TRUE(r.ok()) << r.message();  // the harness itself builds valid files
    }
    payload_lie("count above units", {65, 0, 0, 0, 0, 0});
    payload_lie("id out of range", {1, 64, 0, 0, 0, 0, 0});
    payload_lie("gap out of range", {2, 10, 60, 0, 0, 0, 0, 0});
    payload_lie("over-long varint", {1, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0, 0, 0, 0});
    payload_lie("varint running off the end", {1, 0x80});
    payload_lie("count larger than the bytes left", {60, 1});
    payload_lie("rows missing", {0, 0, 0});
    payload_lie("unused bytes", {0, 0, 0, 0, 0, 0, 0});
}

TEST(SimTrace, RandomCorruptionBehindValidChecksums) {
    // Mutations the checksums would catch are resealed, so the structural checks must hold alone:
    // every outcome is either a clean error or a trace that passes full validation.
    const std::vector<uint8_t> good = trace_encode(sample(6));
    const size_t hb = rd32(good, 12);
    std::mt19937 rng(11);
    int accepted = 0;
    for (int iter = 0; iter < 3000; ++iter) {
        std::vector<uint8_t> b = good;
        const int edits = 1 + static_cast<int>(rng() % 4);
        for (int e = 0; e < edits; ++e) {
            const size_t at = rng() % b.size();
            if (at >= 12 && at < 16) continue;  // keep the header length: reseal needs it
            b[at] = static_cast<uint8_t>(rng());
        }
        if (rng() % 4 == 0) b.resize(hb + rng() % (b.size() - hb + 1));
        reseal(b);
        auto r = trace_decode(b.data(), b.size(), "t.sltrace");
        if (r.ok()) {
            ++accepted;
            EXPECT_TRUE(trace_validate(*r).ok()) << "iteration " << iter;
        } else {
            EXPECT_EQ(r.message().rfind("t.sltrace: ", 0), 0u) << r.message();
        }
    }
    EXPECT_LT(accepted, 3000);
}

TEST(SimTrace, AppendValidatesMasks) {
    trace t = trace_create(small_shape(), layout_parse("dip").value(), "x").value();
    ASSERT_EQ(t.n_streams(), 6u);
    std::vector<std::vector<uint32_t>> m(6);
    m[0] = {1, 5, 63};
    m[1] = {0, 171};
    ASSERT_TRUE(trace_append_token(t, m).ok());
    EXPECT_EQ(t.n_tokens, 1u);
    EXPECT_EQ(std::vector<uint32_t>(t.active(0, 0).begin(), t.active(0, 0).end()), m[0]);
    EXPECT_EQ(t.active(0, 2).size(), 0u);

    auto rejects = [&](std::vector<std::vector<uint32_t>> bad, const std::string& what) {
        const trace before = t;
        auto r = trace_append_token(t, bad);
        EXPECT_FALSE(r.ok()) << what;
        EXPECT_TRUE(same(before, t)) << what << ": trace modified";
    };
    rejects(std::vector<std::vector<uint32_t>>(5), "too few streams");
    auto bad = m;
    bad[0] = {64};
    rejects(bad, "id = units");
    bad = m;
    bad[1] = {5, 3};
    rejects(bad, "descending");
    bad = m;
    bad[3] = {7, 7};
    rejects(bad, "duplicate");
    EXPECT_TRUE(trace_validate(t).ok());
    t.ids[0] = 1000;
    EXPECT_FALSE(trace_validate(t).ok());
    t.ids[0] = 1;
    t.offsets.back() += 1;
    EXPECT_FALSE(trace_validate(t).ok());
}

TEST(SimTrace, TopUnitsAreTheMostFrequent) {
    trace t = trace_create(small_shape(), mlp_layout{}, "").value();
    for (auto ids : {std::vector<uint32_t>{1, 2, 3}, {2, 3}, {3, 9}, {9}}) {
        std::vector<std::vector<uint32_t>> m(3);
        m[1] = ids;
        ASSERT_TRUE(trace_append_token(t, m).ok());
    }
    EXPECT_EQ(trace_top_units(t, 1, 2), (std::vector<uint32_t>{2, 3}));  // 3 x3, then 2 and 9 tie: 2
    EXPECT_EQ(trace_top_units(t, 1, 3), (std::vector<uint32_t>{2, 3, 9}));
    EXPECT_TRUE(trace_top_units(t, 0, 0).empty());
}

TEST(SimTrace, SyntheticMasksHaveTheRequestedStatistics) {
    synthetic_params sp;
    sp.n_tokens = 200;
    sp.density = 0.25;
    const trace iid = trace_synthetic(small_shape(), mlp_layout{}, sp).value();
    EXPECT_TRUE(trace_validate(iid).ok());
    const double density = double(iid.n_accesses()) / (200.0 * 3 * 172);
    EXPECT_NEAR(density, 0.25, 0.01);

    auto overlap = [](const trace& t) {  // fraction of a token's units active in the previous token too
        uint64_t both = 0, total = 0;
        for (uint32_t tok = 1; tok < t.n_tokens; ++tok) {
            auto a = t.active(tok, 0), p = t.active(tok - 1, 0);
            std::vector<uint32_t> inter;
            std::set_intersection(a.begin(), a.end(), p.begin(), p.end(), std::back_inserter(inter));
            both += inter.size();
            total += a.size();
        }
        return double(both) / double(total);
    };
    sp.persistence = 0.8;
    const trace sticky = trace_synthetic(small_shape(), mlp_layout{}, sp).value();
    EXPECT_NEAR(overlap(iid), 0.25, 0.03);
    EXPECT_GT(overlap(sticky), 0.8);
    const trace again = trace_synthetic(small_shape(), mlp_layout{}, sp).value();
    EXPECT_EQ(again.ids, sticky.ids);  // deterministic for a seed
    sp.density = 1.5;
    EXPECT_FALSE(trace_synthetic(small_shape(), mlp_layout{}, sp).ok());
}

}  // namespace

// Appending grows the id array geometrically: a recorded trace is copied O(log n) times, not once per
// token (an exact reserve per token made recording quadratic; the GUI's tunes spent their time there).
TEST(SimTrace, AppendReallocatesLogarithmically) {
    trace t = trace_create(small_shape(), layout_parse("dip").value(), "x").value();
    std::vector<std::vector<uint32_t>> m(t.n_streams());
    for (uint32_t s = 0; s < t.n_streams(); ++s)
        for (uint32_t u = 0; u < t.stream_units(s); u += 3) m[s].push_back(u);
    int reallocations = 0;
    size_t capacity = t.ids.capacity();
    for (int tok = 0; tok < 2000; ++tok) {
        ASSERT_TRUE(trace_append_token(t, m).ok());
        if (t.ids.capacity() != capacity) ++reallocations, capacity = t.ids.capacity();
    }
    EXPECT_LE(reallocations, 16);
    EXPECT_EQ(std::vector<uint32_t>(t.active(1999, 1).begin(), t.active(1999, 1).end()), m[1]);
}

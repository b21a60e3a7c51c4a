// Online simulator: one token of masks at a time, cache state readable between tokens (DIP-CA).
#include <cassert>

#include "sim_internal.h"

namespace sl::sim {

struct simulator::impl {
    detail::sim_setup su;
    std::vector<stream_cache> caches;
    std::vector<stream_token_stats> last;  // per stream, the last token
    std::vector<token_report> tokens;
    std::vector<stream_report> sums;  // tokens after the warm-up
    std::vector<uint32_t> misses;
    uint32_t t = 0;
};

simulator::simulator() : m(std::make_unique<impl>()) {}
simulator::~simulator() = default;
simulator::simulator(simulator&&) noexcept = default;
simulator& simulator::operator=(simulator&&) noexcept = default;

result<simulator> simulator::create(const model_shape& shape, const mlp_layout& layout, const sim_params& p) {
    auto su = detail::setup_build(shape, layout, p, false);
    if (!su) return su.err();
    simulator sim;
    impl& s = *sim.m;
    s.su = std::move(su).value();
    const uint32_t S = s.su.n_streams();
    s.caches.reserve(S);
    for (uint32_t i = 0; i < S; ++i) s.caches.emplace_back(s.su.units[i], s.su.configs[i]);
    s.last.resize(S);
    s.sums = detail::stream_sums_init(s.su);
    return sim;
}

result<token_report> simulator::step(std::span<const std::span<const uint32_t>> masks) {
    impl& s = *m;
    const uint32_t S = s.su.n_streams();
    if (masks.size() != S)
        return error{"simulator: " + std::to_string(masks.size()) + " masks for " + std::to_string(S) + " streams"};
    if (s.t == never_used - 1) return error{"simulator: token counter exhausted"};
    for (uint32_t st = 0; st < S; ++st) {
        const std::span<const uint32_t> a = masks[st];
        for (size_t i = 0; i < a.size(); ++i) {
            if (a[i] >= s.su.units[st] || (i > 0 && a[i] <= a[i - 1]))
                return error{"simulator: token " + std::to_string(s.t) + " stream " + std::to_string(st) +
                             ": unit ids must be ascending and below " + std::to_string(s.su.units[st])};
        }
    }
    const uint32_t page = s.su.p.device.flash_page_bytes;
    for (uint32_t st = 0; st < S; ++st) {
        const access_stats a = s.caches[st].access(s.t, masks[st], nullptr, s.misses);
        stream_token_stats& x = s.last[st];
        x.hits = a.hits;
        x.misses = a.misses;
        x.inserted = a.inserted;
        x.evicted = a.evicted;
        x.n_resident = s.caches[st].n_resident();
        detail::misses_to_reads(s.misses, s.su.unit_bytes[st], page, x, s.su.p.device.flash_merge_gap_pages);
        if (s.t >= s.su.p.warmup_tokens) detail::stream_sum_add(s.sums[st], x, s.su.unit_bytes[st]);
    }
    token_report r = detail::token_total(s.su, s.t, s.last);
    s.tokens.push_back(r);
    ++s.t;
    return r;
}

result<token_report> simulator::step(const std::vector<std::vector<uint32_t>>& masks) {
    std::vector<std::span<const uint32_t>> spans(masks.begin(), masks.end());
    return step(std::span<const std::span<const uint32_t>>(spans));
}

const uint8_t* simulator::resident_flags(uint32_t layer, uint32_t group) const {
    const uint32_t G = static_cast<uint32_t>(m->su.mm.groups.size());
    assert(layer < static_cast<uint32_t>(m->su.mm.shape.n_layers) && group < G);
    return m->caches[layer * G + group].resident_flags();
}

unit_bitset simulator::cache_state(uint32_t layer, uint32_t group) const {
    const uint32_t G = static_cast<uint32_t>(m->su.mm.groups.size());
    assert(layer < static_cast<uint32_t>(m->su.mm.shape.n_layers) && group < G);
    const stream_cache& c = m->caches[layer * G + group];
    unit_bitset b;
    b.n = c.n_units();
    b.words.assign((b.n + 63) / 64, 0);
    const uint8_t* f = c.resident_flags();
    for (uint32_t i = 0; i < b.n; ++i)
        if (f[i]) b.words[i >> 6] |= uint64_t{1} << (i & 63);
    return b;
}

cache_snapshot simulator::snapshot(bool with_bits) const {
    const impl& s = *m;
    cache_snapshot snap;
    snap.token = s.t;
    snap.n_groups = static_cast<uint32_t>(s.su.mm.groups.size());
    snap.streams.resize(s.caches.size());
    for (size_t i = 0; i < s.caches.size(); ++i) {
        stream_snapshot& x = snap.streams[i];
        const stream_cache& c = s.caches[i];
        x.capacity = c.capacity();
        x.n_resident = c.n_resident();
        x.hits = s.last[i].hits;
        x.misses = s.last[i].misses;
        x.inserted = s.last[i].inserted;
        x.evicted = s.last[i].evicted;
        if (with_bits) {
            x.resident_bits.assign((c.n_units() + 63) / 64, 0);
            const uint8_t* f = c.resident_flags();
            for (uint32_t u = 0; u < c.n_units(); ++u)
                if (f[u]) x.resident_bits[u >> 6] |= uint64_t{1} << (u & 63);
        }
    }
    return snap;
}

run_report simulator::report() const {
    return detail::report_build(m->su, "online", m->tokens, m->sums);
}

const memory_map& simulator::map() const {
    return m->su.mm;
}
const allocation& simulator::alloc() const {
    return m->su.alloc;
}
uint32_t simulator::n_tokens() const {
    return m->t;
}

}  // namespace sl::sim

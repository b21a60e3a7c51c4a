// stream_cache: policy-independent part (pinned units, dispatch) and the LRU / windowing policies.
#include <algorithm>
#include <cassert>
#include <cstring>

#include "cache_impl.h"

namespace sl::sim {

const char* cache_policy_name(cache_policy p) {
    switch (p) {
        case cache_policy::none:
            return "none";
        case cache_policy::lru:
            return "lru";
        case cache_policy::lfu:
            return "lfu";
        case cache_policy::belady:
            return "belady";
        case cache_policy::window:
            return "window";
    }
    return "?";
}

bool cache_policy_parse(const std::string& name, cache_policy& out) {
    for (cache_policy p :
         {cache_policy::none, cache_policy::lru, cache_policy::lfu, cache_policy::belady, cache_policy::window}) {
        if (name == cache_policy_name(p)) {
            out = p;
            return true;
        }
    }
    return false;
}

outcome cache_config_validate(const cache_config& c, uint32_t n_units, const std::string& origin) {
    if (c.capacity > n_units)
        return error{origin + ": capacity " + std::to_string(c.capacity) + " exceeds the " + std::to_string(n_units) +
                     " units"};
    if (c.policy == cache_policy::window && c.window_tokens == 0)
        return error{origin + ": the window policy needs window_tokens >= 1"};
    if (c.pinned.size() > c.capacity)
        return error{origin + ": " + std::to_string(c.pinned.size()) + " pinned units exceed the capacity of " +
                     std::to_string(c.capacity)};
    for (size_t i = 0; i < c.pinned.size(); ++i) {
        if (c.pinned[i] >= n_units)
            return error{origin + ": pinned unit " + std::to_string(c.pinned[i]) + " out of range"};
        if (i > 0 && c.pinned[i] <= c.pinned[i - 1]) return error{origin + ": pinned units must be strictly ascending"};
    }
    return {};
}

stream_cache::impl::impl(uint32_t units, const cache_config& c) : n_units(units), cfg(c) {
    res.assign(n_units, absent);
    n_pinned = static_cast<uint32_t>(cfg.pinned.size());
    for (uint32_t id : cfg.pinned) res[id] = pinned;
    cap = cfg.policy == cache_policy::none ? 0 : cfg.capacity - n_pinned;
    switch (cfg.policy) {
        case cache_policy::lru:
        case cache_policy::window:
            last.assign(n_units, never_used);
            break;
        case cache_policy::lfu:
            cnt.assign(n_units, 0);
            break;
        case cache_policy::belady:
            key.assign(n_units, never_used);
            break;
        case cache_policy::none:
            break;
    }
}

stream_cache::stream_cache(uint32_t n_units, const cache_config& c) : m(std::make_unique<impl>(n_units, c)) {
    assert(cache_config_validate(c, n_units, "stream_cache").ok());
}
stream_cache::~stream_cache() = default;
stream_cache::stream_cache(stream_cache&&) noexcept = default;
stream_cache& stream_cache::operator=(stream_cache&&) noexcept = default;

uint32_t stream_cache::n_units() const {
    return m->n_units;
}
uint32_t stream_cache::capacity() const {
    return m->cfg.capacity;
}
uint32_t stream_cache::n_resident() const {
    return m->count + m->n_pinned;
}
bool stream_cache::resident(uint32_t id) const {
    return id < m->n_units && m->res[id] != impl::absent;
}
const uint8_t* stream_cache::resident_flags() const {
    return m->res.data();
}

access_stats stream_cache::access(uint32_t token, std::span<const uint32_t> active, const uint32_t* next_use,
                                  std::vector<uint32_t>& misses) {
    impl& s = *m;
    misses.clear();
    uint32_t pinned_hits = 0;
    if (s.n_pinned > 0) {
        // Pinned units are hits and never enter the dynamic policy.
        s.filtered_ids.clear();
        s.filtered_next.clear();
        for (size_t i = 0; i < active.size(); ++i) {
            if (s.res[active[i]] == impl::pinned) {
                ++pinned_hits;
            } else {
                s.filtered_ids.push_back(active[i]);
                if (next_use) s.filtered_next.push_back(next_use[i]);
            }
        }
        active = s.filtered_ids;
        if (next_use) next_use = s.filtered_next.data();
    }
    access_stats st;
    switch (s.cfg.policy) {
        case cache_policy::none:
            misses.assign(active.begin(), active.end());
            st.misses = static_cast<uint32_t>(active.size());
            break;
        case cache_policy::lru:
        case cache_policy::window:
            st = s.access_lru(token, active, misses);
            break;
        case cache_policy::lfu:
            st = s.access_lfu(token, active, misses);
            break;
        case cache_policy::belady:
            st = s.access_belady(token, active, next_use, misses);
            break;
    }
    st.hits += pinned_hits;
    return st;
}

// ---- LRU and windowing -------------------------------------------------------------------------

uint32_t stream_cache::impl::lru_evict(uint32_t n) {
    uint32_t done = 0;
    while (done < n && seg_at < segs.size()) {
        const segment sg = segs[seg_at];
        const uint64_t end = seg_at + 1 < segs.size() ? segs[seg_at + 1].start : log.size();
        while (cursor < end && done < n) {
            const uint32_t id = log[cursor++];
            if (res[id] == cached && last[id] == sg.token) {
                res[id] = absent;
                --count;
                ++done;
            }
        }
        if (cursor == end) ++seg_at;
    }
    assert(done == n);  // every cached unit has one valid entry at or after the cursor
    return done;
}

uint32_t stream_cache::impl::lru_expire(uint32_t min_token) {
    uint32_t done = 0;
    while (seg_at < segs.size() && segs[seg_at].token < min_token) {
        const segment sg = segs[seg_at];
        const uint64_t end = seg_at + 1 < segs.size() ? segs[seg_at + 1].start : log.size();
        for (; cursor < end; ++cursor) {
            const uint32_t id = log[cursor];
            if (res[id] == cached && last[id] == sg.token) {
                res[id] = absent;
                --count;
                ++done;
            }
        }
        ++seg_at;
    }
    return done;
}

void stream_cache::impl::lru_compact() {
    // Drop the consumed prefix once it dominates.
    if (cursor > 4096 && cursor * 2 > log.size()) {
        log.erase(log.begin(), log.begin() + static_cast<ptrdiff_t>(cursor));
        segs.erase(segs.begin(), segs.begin() + static_cast<ptrdiff_t>(seg_at));
        for (segment& sg : segs) sg.start = sg.start > cursor ? sg.start - cursor : 0;
        cursor = 0;
        seg_at = 0;
    }
    // When stale entries pile up (units used again or evicted), squeeze them out in place: the valid
    // entries keep their order, so no sort is needed and the cost is linear in what is dropped.
    if (log.size() - cursor <= 8 * uint64_t{cap} + 1024) return;
    uint64_t w = 0;
    size_t ns = 0;
    for (size_t k = seg_at; k < segs.size(); ++k) {
        const segment sg = segs[k];
        const uint64_t begin = k == seg_at ? cursor : sg.start;
        const uint64_t end = k + 1 < segs.size() ? segs[k + 1].start : log.size();
        const uint64_t seg_start = w;
        for (uint64_t i = begin; i < end; ++i) {
            const uint32_t id = log[i];
            if (res[id] == cached && last[id] == sg.token) log[w++] = id;
        }
        if (w > seg_start) segs[ns++] = {sg.token, seg_start};
    }
    log.resize(w);
    segs.resize(ns);
    cursor = 0;
    seg_at = 0;
}

access_stats stream_cache::impl::access_lru(uint32_t t, std::span<const uint32_t> a, std::vector<uint32_t>& misses) {
    access_stats st;
    for (uint32_t id : a) {
        if (res[id] == cached)
            ++st.hits;
        else
            misses.push_back(id);
        last[id] = t;
    }
    st.misses = static_cast<uint32_t>(misses.size());
    if (cfg.policy == cache_policy::window && t + 1 > cfg.window_tokens)
        st.evicted += lru_expire(t + 1 - cfg.window_tokens);
    uint32_t n_ins = st.misses;
    if (st.hits + st.misses <= cap) {
        if (count + st.misses > cap) st.evicted += lru_evict(count + st.misses - cap);
    } else {
        st.evicted += lru_evict(count - st.hits);  // every non-active unit goes
        n_ins = cap - st.hits;                     // the lowest-id misses fill the cache
    }
    for (uint32_t i = 0; i < n_ins; ++i) res[misses[i]] = cached;
    count += n_ins;
    st.inserted = n_ins;
    if (count > 0 && !a.empty()) {
        segs.push_back({t, log.size()});
        for (uint32_t id : a)
            if (res[id] == cached) log.push_back(id);
        if (segs.back().start == log.size()) segs.pop_back();
    }
    lru_compact();
    return st;
}

}  // namespace sl::sim

// State of one stream cache. Every policy keeps a resident flag per unit plus lazily-invalidated
// queues instead of linked lists: O(1) amortised work per access, sequential memory traffic.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sparselens/sim/cache.h"

namespace sl::sim {

struct stream_cache::impl {
    // `fresh` = cached during the current Belady token (so evicting it again is not an eviction).
    enum : uint8_t { absent = 0, cached = 1, pinned = 2, fresh = 3 };

    uint32_t n_units = 0;
    cache_config cfg;
    uint32_t cap = 0;  // dynamic capacity (capacity minus pinned units)
    uint32_t n_pinned = 0;
    uint32_t count = 0;                                 // dynamic residents
    std::vector<uint8_t> res;                           // absent / cached / pinned per unit
    std::vector<uint32_t> filtered_ids, filtered_next;  // active minus pinned
    std::vector<uint32_t> scratch;

    // LRU, window: token of the last access (never_used before the first).
    std::vector<uint32_t> last;

    // LRU / window: a log of (resident) units appended per token; an entry is valid while the unit is
    // still cached and was not used since. Walking the log from `cursor` visits units in
    // (last use, id) order, which is exactly LRU's eviction order.
    struct segment {
        uint32_t token;
        uint64_t start;
    };
    std::vector<uint32_t> log;
    std::vector<segment> segs;
    uint64_t cursor = 0;
    size_t seg_at = 0;

    // LFU: FIFO queue per access count; entry valid while cached with that count.
    struct fifo {
        std::vector<uint32_t> ids;
        size_t head = 0;
    };
    std::vector<uint32_t> cnt;
    std::vector<fifo> buckets;
    uint32_t min_bucket = 0;
    uint64_t stored = 0;  // entries not yet popped, for compaction

    // Belady: stack per next-use token (+ one for never again); entry valid while cached with that key.
    std::vector<uint32_t> key;
    std::vector<std::vector<uint32_t>> by_next;
    std::vector<uint32_t> never_stack;
    uint32_t hi = 0;  // highest finite bucket that may hold a valid entry

    impl(uint32_t units, const cache_config& c);

    access_stats access_lru(uint32_t t, std::span<const uint32_t> a, std::vector<uint32_t>& misses);
    access_stats access_lfu(uint32_t t, std::span<const uint32_t> a, std::vector<uint32_t>& misses);
    access_stats access_belady(uint32_t t, std::span<const uint32_t> a, const uint32_t* next_use,
                               std::vector<uint32_t>& misses);

    // LRU helpers
    uint32_t lru_evict(uint32_t n);           // the n least recently used cached units
    uint32_t lru_expire(uint32_t min_token);  // every cached unit last used before min_token
    void lru_compact();
    // LFU helpers
    uint32_t lfu_evict(uint32_t n);
    void lfu_compact();
    // Belady helpers
    void belady_push(uint32_t id, uint32_t k);
    bool belady_max(uint32_t& id, uint32_t& k);  // furthest-next-use resident, left in place
    void belady_pop(uint32_t k);
};

}  // namespace sl::sim

// One MLP cache (one layer's unit group) under a replacement policy, fed one token's active set at a time.
// Semantics (docs/simulator.md, "Cache policies"): active resident units are hits; the others are
// read from flash. If the token's active set fits, every miss is cached (evicting non-active units in
// policy order); otherwise non-active units are all evicted, the cache is filled with active units
// and the overflow streams from flash without being cached. Belady may decline to cache a miss.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sparselens/core/result.h"

namespace sl::sim {

enum class cache_policy : uint8_t { none, lru, lfu, belady, window };
const char* cache_policy_name(cache_policy p);
bool cache_policy_parse(const std::string& name, cache_policy& out);

constexpr uint32_t never_used = 0xffffffffu;  // next-use / last-use sentinel

struct cache_config {
    cache_policy policy = cache_policy::lfu;
    uint32_t capacity = 0;         // units, pinned ones included
    uint32_t window_tokens = 5;    // window: keep units active in the last w tokens (this one included)
    std::vector<uint32_t> pinned;  // ascending unit ids always resident; size <= capacity
};

outcome cache_config_validate(const cache_config& c, uint32_t n_units, const std::string& origin);

struct access_stats {
    uint32_t hits = 0;
    uint32_t misses = 0;    // read from flash
    uint32_t inserted = 0;  // misses that were cached
    uint32_t evicted = 0;
    uint32_t overflow() const { return misses - inserted; }
};

class stream_cache {
public:
    // `c` must have passed cache_config_validate.
    stream_cache(uint32_t n_units, const cache_config& c);
    ~stream_cache();
    stream_cache(stream_cache&&) noexcept;
    stream_cache& operator=(stream_cache&&) noexcept;

    // One token: `active` strictly ascending ids < n_units; `token` strictly increasing across calls.
    // Belady needs `next_use[i]` = the next token in which active[i] is active again (never_used if
    // none); other policies ignore it. Missed ids are written to `misses` in ascending order.
    access_stats access(uint32_t token, std::span<const uint32_t> active, const uint32_t* next_use,
                        std::vector<uint32_t>& misses);

    uint32_t n_units() const;
    uint32_t capacity() const;
    uint32_t n_resident() const;  // pinned included
    bool resident(uint32_t id) const;
    const uint8_t* resident_flags() const;  // n_units bytes, non-zero = resident

private:
    struct impl;
    std::unique_ptr<impl> m;
};

}  // namespace sl::sim

// LFU: evict the cached unit with the fewest accesses this session (counted whether or not it was
// cached), ties by least recent use, then lower id. A FIFO queue per count gives that order for free:
// a unit enters the queue of its new count in the token it reaches it, in ascending id order.
#include <algorithm>
#include <cassert>

#include "cache_impl.h"

namespace sl::sim {

uint32_t stream_cache::impl::lfu_evict(uint32_t n) {
    uint32_t done = 0;
    while (done < n && min_bucket < buckets.size()) {
        fifo& q = buckets[min_bucket];
        while (q.head < q.ids.size() && done < n) {
            const uint32_t id = q.ids[q.head++];
            --stored;
            if (res[id] == cached && cnt[id] == min_bucket) {
                res[id] = absent;
                --count;
                ++done;
            }
        }
        if (q.head == q.ids.size()) {
            q.ids.clear();  // keeps its capacity for the next pushes; lfu_compact() releases idle ones
            q.head = 0;
            ++min_bucket;
        }
    }
    assert(done == n);
    return done;
}

void stream_cache::impl::lfu_compact() {
    // Squeeze stale entries out of every queue in place; valid entries keep their (last use, id) order.
    // Also release the memory of queues that shrank: a long online session passes through many counts.
    if (stored <= 8 * uint64_t{cap} + 1024) return;
    stored = 0;
    for (uint32_t c = 0; c < buckets.size(); ++c) {
        fifo& q = buckets[c];
        size_t w = 0;
        for (size_t i = q.head; i < q.ids.size(); ++i) {
            const uint32_t id = q.ids[i];
            if (res[id] == cached && cnt[id] == c) q.ids[w++] = id;
        }
        q.ids.resize(w);
        if (q.ids.capacity() > 2 * w + 64) q.ids.shrink_to_fit();
        q.head = 0;
        stored += w;
    }
}

access_stats stream_cache::impl::access_lfu(uint32_t t, std::span<const uint32_t> a, std::vector<uint32_t>& misses) {
    access_stats st;
    for (uint32_t id : a) {
        ++cnt[id];
        if (res[id] == cached)
            ++st.hits;
        else
            misses.push_back(id);
    }
    st.misses = static_cast<uint32_t>(misses.size());
    if (st.hits + st.misses <= cap) {
        if (count + st.misses > cap) st.evicted = lfu_evict(count + st.misses - cap);
        for (uint32_t id : misses) res[id] = cached;
        st.inserted = st.misses;
    } else {
        st.evicted = lfu_evict(count - st.hits);
        const uint32_t n_ins = cap - st.hits;
        // Overflow: cache the most frequently used misses (ties: lower id), stream the rest.
        scratch.assign(misses.begin(), misses.end());
        auto more_frequent = [&](uint32_t x, uint32_t y) { return cnt[x] != cnt[y] ? cnt[x] > cnt[y] : x < y; };
        if (n_ins < scratch.size())
            std::nth_element(scratch.begin(), scratch.begin() + n_ins, scratch.end(), more_frequent);
        for (uint32_t i = 0; i < n_ins; ++i) res[scratch[i]] = cached;
        st.inserted = n_ins;
    }
    count += st.inserted;
    // Counts after this token are at most t + 1. The eviction above may have moved the lowest queue
    // past a count this token's units now have, so every push may lower it again.
    if (buckets.size() < size_t{t} + 2) buckets.resize(size_t{t} + 2);
    fifo* b = buckets.data();
    uint32_t pushed = 0, lowest = min_bucket;
    for (uint32_t id : a) {  // ascending ids: FIFO order within a count is (last use, id)
        if (res[id] != cached) continue;
        const uint32_t c = cnt[id];
        b[c].ids.push_back(id);
        lowest = std::min(lowest, c);
        ++pushed;
    }
    min_bucket = lowest;
    stored += pushed;
    lfu_compact();
    return st;
}

}  // namespace sl::sim

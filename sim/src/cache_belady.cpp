// Belady's MIN with bypass (offline optimum): after each token the cache holds the units with the
// soonest next use among those cached or active; a miss used later than everything cached is streamed.
// Next-use keys are token indices, so a stack per key replaces the heap: O(1) amortised per access.
#include <cassert>

#include "cache_impl.h"

namespace sl::sim {

void stream_cache::impl::belady_push(uint32_t id, uint32_t k) {
    key[id] = k;
    if (k == never_used) {
        never_stack.push_back(id);
        return;
    }
    if (k >= by_next.size()) by_next.resize(size_t{k} + 1);
    by_next[k].push_back(id);
    if (k > hi) hi = k;
}

bool stream_cache::impl::belady_max(uint32_t& id, uint32_t& k) {
    auto valid = [&](uint32_t x, uint32_t kx) { return (res[x] == cached || res[x] == fresh) && key[x] == kx; };
    while (!never_stack.empty() && !valid(never_stack.back(), never_used)) never_stack.pop_back();
    if (!never_stack.empty()) {
        id = never_stack.back();
        k = never_used;
        return true;
    }
    for (;;) {
        if (hi < by_next.size()) {
            std::vector<uint32_t>& b = by_next[hi];
            while (!b.empty() && !valid(b.back(), hi)) b.pop_back();
            if (!b.empty()) {
                id = b.back();
                k = hi;
                return true;
            }
        }
        if (hi == 0) return false;
        --hi;
    }
}

void stream_cache::impl::belady_pop(uint32_t k) {
    if (k == never_used)
        never_stack.pop_back();
    else
        by_next[k].pop_back();
}

access_stats stream_cache::impl::access_belady(uint32_t t, std::span<const uint32_t> a, const uint32_t* next_use,
                                               std::vector<uint32_t>& misses) {
    assert(next_use != nullptr || a.empty());
    access_stats st;
    scratch.clear();  // next use of each miss, parallel to `misses`
    for (size_t i = 0; i < a.size(); ++i) {
        const uint32_t id = a[i];
        const uint32_t nu = next_use ? next_use[i] : never_used;
        assert(nu > t);
        if (res[id] == cached) {
            ++st.hits;
            belady_push(id, nu);  // hits compete with their new key before any miss is placed
        } else {
            misses.push_back(id);
            scratch.push_back(nu);
        }
    }
    st.misses = static_cast<uint32_t>(misses.size());
    for (size_t i = 0; i < misses.size(); ++i) {
        const uint32_t id = misses[i], nu = scratch[i];
        if (count < cap) {
            res[id] = fresh;
            ++count;
            ++st.inserted;
            belady_push(id, nu);
            continue;
        }
        uint32_t victim = 0, vk = 0;
        if (cap == 0 || !belady_max(victim, vk) || !(nu < vk)) continue;  // bypass: streamed, not cached
        belady_pop(vk);
        if (res[victim] == fresh)
            --st.inserted;  // cached a moment ago: it is overflow after all
        else
            ++st.evicted;
        res[victim] = absent;
        res[id] = fresh;
        ++st.inserted;
        belady_push(id, nu);
    }
    for (uint32_t id : misses)
        if (res[id] == fresh) res[id] = cached;
    // Keys equal to t were this token's hits, now re-keyed: the bucket holds only stale entries.
    if (t < by_next.size()) std::vector<uint32_t>().swap(by_next[t]);
    return st;
}

}  // namespace sl::sim

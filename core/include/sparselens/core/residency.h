// Which weight units are resident in DRAM, per layer: what DIP-CA re-weights by. The device simulator
// implements this interface; lfu_residency is the simple stand-in used without a simulator.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sparselens/core/model.h"
#include "sparselens/core/sparsity.h"

namespace sl {

class residency_source {
public:
    virtual ~residency_source() = default;
    // [dim] flags: gate/up input-column pairs cached for this layer (DIP's input pruning unit).
    virtual const uint8_t* resident_inputs(int32_t layer) const = 0;
    // [hidden] flags: down columns / neuron bundles cached for this layer.
    virtual const uint8_t* resident_neurons(int32_t layer) const = 0;
    // The engine reports each layer's final masks for a token; the cache updates for the next token.
    virtual void on_token(int32_t layer, int32_t pos, const layer_masks& masks) = 0;
    virtual void reset() = 0;
};

// Per-layer LFU caches holding a fixed fraction of each unit kind (ties broken by recency).
class lfu_residency : public residency_source {
public:
    lfu_residency(int32_t n_layers, int32_t dim, int32_t hidden, float capacity_fraction);

    const uint8_t* resident_inputs(int32_t layer) const override;
    const uint8_t* resident_neurons(int32_t layer) const override;
    void on_token(int32_t layer, int32_t pos, const layer_masks& masks) override;
    void reset() override;

    uint64_t hits() const { return m_hits; }
    uint64_t misses() const { return m_misses; }
    double hit_rate() const { return m_hits + m_misses ? double(m_hits) / double(m_hits + m_misses) : 0.0; }

private:
    struct cache {
        std::vector<uint8_t> resident;
        std::vector<uint32_t> freq;
        std::vector<int32_t> last_use;
        int32_t capacity = 0;
        int32_t size = 0;
    };
    void access(cache& c, const index_mask& used, int32_t pos);

    struct ranked {
        uint64_t key;  // frequency << 32 | (last use + 1)
        int32_t unit;
    };
    std::vector<cache> m_inputs, m_neurons;
    std::vector<ranked> m_rank;  // access()'s scratch, grown once
    index_mask m_pre_post, m_used;  // on_token's scratch
    uint64_t m_hits = 0, m_misses = 0;
};

// Whether a method's masks depend on the cache state (DIP-CA re-weights by it): it runs with a cache, and
// reproducing its masks needs the same one.
bool method_reads_cache(const std::string& method);

// DIP-CA's stand-in cache when no device simulator is in the loop: an lfu_residency holding
// `cache_fraction` of each unit kind; null for methods that read no cache. `eval`, sweeps and configs
// without a device all build it here, so they evaluate DIP-CA against the same cache.
std::unique_ptr<lfu_residency> standin_cache(const std::string& method, const model_hparams& hp, float cache_fraction);

}  // namespace sl

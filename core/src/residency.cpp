// LFU stand-in for the device cache: enough for DIP-CA to see a realistic, changing cache state.
#include "sparselens/core/residency.h"

#include <algorithm>
#include <cmath>

namespace sl {

lfu_residency::lfu_residency(int32_t n_layers, int32_t dim, int32_t hidden, float capacity_fraction) {
    auto make = [&](int32_t n) {
        cache c;
        c.resident.assign(static_cast<size_t>(n), 0);
        c.freq.assign(static_cast<size_t>(n), 0);
        c.last_use.assign(static_cast<size_t>(n), -1);
        c.capacity = static_cast<int32_t>(std::lround(std::clamp(capacity_fraction, 0.0f, 1.0f) * n));
        return c;
    };
    for (int32_t l = 0; l < n_layers; ++l) {
        m_inputs.push_back(make(dim));
        m_neurons.push_back(make(hidden));
    }
}

const uint8_t* lfu_residency::resident_inputs(int32_t layer) const { return m_inputs[static_cast<size_t>(layer)].resident.data(); }
const uint8_t* lfu_residency::resident_neurons(int32_t layer) const { return m_neurons[static_cast<size_t>(layer)].resident.data(); }

void lfu_residency::reset() {
    for (auto* group : {&m_inputs, &m_neurons})
        for (cache& c : *group) {
            std::fill(c.resident.begin(), c.resident.end(), 0);
            std::fill(c.freq.begin(), c.freq.end(), 0);
            std::fill(c.last_use.begin(), c.last_use.end(), -1);
            c.size = 0;
        }
    m_hits = m_misses = 0;
}

void lfu_residency::access(cache& c, const index_mask& used, int32_t pos) {
    const int32_t n = static_cast<int32_t>(c.resident.size());
    auto touch = [&](int32_t i) {
        c.freq[static_cast<size_t>(i)]++;
        c.last_use[static_cast<size_t>(i)] = pos;
        if (c.resident[static_cast<size_t>(i)]) ++m_hits; else ++m_misses;
    };
    if (used.all)
        for (int32_t i = 0; i < n; ++i) touch(i);
    else
        for (int32_t i : used.idx) touch(i);
    // Keep the `capacity` units with the highest (frequency, recency), ties to the lower index: the LFU
    // steady state. That order is total, so its first `keep` units are one set, and nth_element finds
    // it in linear time over keys packed beside their indices. A partial_sort through an index
    // comparator (three indirect loads per comparison, a fresh vector per call) took 30 ms of every
    // llama-1b token under `eval --method dip-ca` (8192 + 2048 units in 16 layers): 0.44x dense's
    // speed, against DIP's 0.96x (stop 46).
    const int32_t keep = std::min(c.capacity, n);
    std::fill(c.resident.begin(), c.resident.end(), 0);
    c.size = keep;
    if (keep <= 0) return;
    std::vector<ranked>& r = m_rank;
    r.resize(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) {
        const auto u = static_cast<size_t>(i);
        // last_use >= -1: +1 makes it an unsigned 32-bit field below the frequency.
        r[u] = {uint64_t{c.freq[u]} << 32 | static_cast<uint32_t>(c.last_use[u] + 1), i};
    }
    const auto first = [](const ranked& a, const ranked& b) {
        return a.key != b.key ? a.key > b.key : a.unit < b.unit;
    };
    if (keep < n) std::nth_element(r.begin(), r.begin() + (keep - 1), r.end(), first);
    for (int32_t i = 0; i < keep; ++i) {
        const auto u = static_cast<size_t>(r[static_cast<size_t>(i)].unit);
        if (c.freq[u] > 0) c.resident[u] = 1;
    }
}

void lfu_residency::on_token(int32_t layer, int32_t pos, const layer_masks& masks) {
    cache& in = m_inputs[static_cast<size_t>(layer)];
    // DIP's gate/up input pruning unit is one input column of both matrices.
    access(in, masks.gate_in, pos);
    // A neuron is loaded when its down column is used: the three sorted masks intersected by merge walks
    // (binary searches of each list per index were 3% of a llama-1b DIP-CA evaluation).
    intersect_masks(masks.neurons_pre, masks.neurons_post, m_pre_post);
    index_mask& used_neurons = m_used;
    intersect_masks(m_pre_post, masks.down_in, used_neurons);
    if (!used_neurons.all) {  // indices past the layer's neurons are not units of it
        const auto hidden = static_cast<int32_t>(m_neurons[static_cast<size_t>(layer)].resident.size());
        used_neurons.idx.erase(std::lower_bound(used_neurons.idx.begin(), used_neurons.idx.end(), hidden),
                               used_neurons.idx.end());
    }
    access(m_neurons[static_cast<size_t>(layer)], used_neurons, pos);
}

bool method_reads_cache(const std::string& method) { return method == "dip-ca"; }

std::unique_ptr<lfu_residency> standin_cache(const std::string& method, const model_hparams& hp, float cache_fraction) {
    if (!method_reads_cache(method)) return nullptr;
    return std::make_unique<lfu_residency>(hp.n_layers, hp.dim, hp.hidden_dim, cache_fraction);
}

}  // namespace sl

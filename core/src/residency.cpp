// LFU stand-in for the device cache: enough for DIP-CA to see a realistic, changing cache state.
#include "sparselens/core/residency.h"

#include <algorithm>
#include <cmath>
#include <numeric>

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
    // Keep the `capacity` units with the highest (frequency, recency): the LFU steady state.
    std::vector<int32_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    const int32_t keep = std::min(c.capacity, n);
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), [&](int32_t a, int32_t b) {
        if (c.freq[static_cast<size_t>(a)] != c.freq[static_cast<size_t>(b)])
            return c.freq[static_cast<size_t>(a)] > c.freq[static_cast<size_t>(b)];
        if (c.last_use[static_cast<size_t>(a)] != c.last_use[static_cast<size_t>(b)])
            return c.last_use[static_cast<size_t>(a)] > c.last_use[static_cast<size_t>(b)];
        return a < b;
    });
    std::fill(c.resident.begin(), c.resident.end(), 0);
    for (int32_t i = 0; i < keep; ++i)
        if (c.freq[static_cast<size_t>(order[static_cast<size_t>(i)])] > 0) c.resident[static_cast<size_t>(order[static_cast<size_t>(i)])] = 1;
    c.size = keep;
}

void lfu_residency::on_token(int32_t layer, int32_t pos, const layer_masks& masks) {
    cache& in = m_inputs[static_cast<size_t>(layer)];
    // DIP's gate/up input pruning unit is one input column of both matrices.
    access(in, masks.gate_in, pos);
    // A neuron is loaded when its down column is used.
    index_mask used_neurons;
    if (masks.neurons_pre.all && masks.neurons_post.all && masks.down_in.all) {
        used_neurons.set_all();
    } else {
        used_neurons.all = false;
        const int32_t hidden = static_cast<int32_t>(m_neurons[static_cast<size_t>(layer)].resident.size());
        const index_mask* base = !masks.down_in.all ? &masks.down_in : !masks.neurons_post.all ? &masks.neurons_post : &masks.neurons_pre;
        for (int32_t i : base->idx)
            if (i < hidden && masks.neurons_pre.contains(i) && masks.neurons_post.contains(i) && masks.down_in.contains(i))
                used_neurons.idx.push_back(i);
    }
    access(m_neurons[static_cast<size_t>(layer)], used_neurons, pos);
}

bool method_reads_cache(const std::string& method) { return method == "dip-ca"; }

std::unique_ptr<lfu_residency> standin_cache(const std::string& method, const model_hparams& hp, float cache_fraction) {
    if (!method_reads_cache(method)) return nullptr;
    return std::make_unique<lfu_residency>(hp.n_layers, hp.dim, hp.hidden_dim, cache_fraction);
}

}  // namespace sl

// sim_residency: the online simulator as the engine's residency_source (DIP-CA reads its cache state).
#include "sparselens/sim/residency.h"

#include <algorithm>
#include <numeric>

namespace sl::sim {

namespace {

bool input_kind(unit_kind k) {
    return k == unit_kind::input_column_pair || k == unit_kind::up_column || k == unit_kind::gate_column;
}

void append_mask(const index_mask& m, uint32_t n, std::vector<uint32_t>& out) {
    if (m.all) {
        out.resize(n);
        std::iota(out.begin(), out.end(), 0u);
        return;
    }
    out.clear();
    for (int32_t i : m.idx)
        if (i >= 0 && static_cast<uint32_t>(i) < n) out.push_back(static_cast<uint32_t>(i));
}

}  // namespace

void masks_to_units(unit_kind kind, const layer_masks& masks, uint32_t n_units, std::vector<uint32_t>& out) {
    // FFSplit reads both parts of every layer for every token: there is nothing to skip.
    if (kind == unit_kind::split_heavy || kind == unit_kind::split_light)
        return append_mask(index_mask{}, n_units, out);
    if (kind == unit_kind::up_column) return append_mask(masks.up_in, n_units, out);
    if (kind == unit_kind::gate_column) return append_mask(masks.gate_in, n_units, out);
    if (kind == unit_kind::input_column_pair) {
        if (masks.gate_in.all || masks.up_in.all) return append_mask(index_mask{}, n_units, out);
        out.clear();
        std::set_union(masks.gate_in.idx.begin(), masks.gate_in.idx.end(), masks.up_in.idx.begin(),
                       masks.up_in.idx.end(), std::back_inserter(out));
        out.erase(std::remove_if(out.begin(), out.end(), [&](uint32_t i) { return i >= n_units; }), out.end());
        return;
    }
    index_mask pre_post, used;
    intersect_masks(masks.neurons_pre, masks.neurons_post, pre_post);
    intersect_masks(pre_post, masks.down_in, used);
    append_mask(used, n_units, out);
}

sim_residency::sim_residency(simulator s, model_shape shape, mlp_layout layout, sim_params p)
    : m_sim(std::move(s)), m_shape(std::move(shape)), m_layout(std::move(layout)), m_params(std::move(p)) {
    for (size_t g = 0; g < m_layout.groups.size(); ++g) {
        const bool in = input_kind(m_layout.groups[g]);
        int32_t& slot = in ? m_input_group : m_neuron_group;
        if (slot < 0) slot = static_cast<int32_t>(g);
    }
    m_all_inputs.assign(static_cast<size_t>(m_shape.dim), 1);
    m_all_neurons.assign(static_cast<size_t>(m_shape.hidden_dim), 1);
    m_pending.resize(m_sim.map().n_streams());
    m_reported.assign(static_cast<size_t>(m_shape.n_layers), 0);
}

result<std::unique_ptr<sim_residency>> sim_residency::create(const model_shape& shape, const mlp_layout& layout,
                                                             const sim_params& p) {
    auto s = simulator::create(shape, layout, p);
    if (!s) return s.err();
    return std::unique_ptr<sim_residency>(new sim_residency(std::move(s).value(), shape, layout, p));
}

const uint8_t* sim_residency::resident_inputs(int32_t layer) const {
    if (m_input_group < 0) return m_all_inputs.data();
    return m_sim.resident_flags(static_cast<uint32_t>(layer), static_cast<uint32_t>(m_input_group));
}

const uint8_t* sim_residency::resident_neurons(int32_t layer) const {
    if (m_neuron_group < 0) return m_all_neurons.data();
    return m_sim.resident_flags(static_cast<uint32_t>(layer), static_cast<uint32_t>(m_neuron_group));
}

void sim_residency::on_token(int32_t layer, int32_t pos, const layer_masks& masks) {
    if (layer < 0 || layer >= m_shape.n_layers) {
        m_error = "residency: layer " + std::to_string(layer) + " out of range";
        return;
    }
    if (m_any_pending && (pos != m_pos || m_reported[static_cast<size_t>(layer)])) flush();
    m_pos = pos;
    const uint32_t G = static_cast<uint32_t>(m_layout.groups.size());
    for (uint32_t g = 0; g < G; ++g) {
        const uint32_t s = static_cast<uint32_t>(layer) * G + g;
        masks_to_units(m_layout.groups[g], masks, group_units(m_layout, m_layout.groups[g], m_shape), m_pending[s]);
    }
    m_reported[static_cast<size_t>(layer)] = 1;
    m_any_pending = true;
    if (layer == m_shape.n_layers - 1) flush();
}

void sim_residency::flush() {
    const uint32_t G = static_cast<uint32_t>(m_layout.groups.size());
    for (uint32_t l = 0; l < static_cast<uint32_t>(m_shape.n_layers); ++l) {
        if (m_reported[l]) continue;
        for (uint32_t g = 0; g < G; ++g) {  // not reported: the layer ran dense
            std::vector<uint32_t>& v = m_pending[l * G + g];
            v.resize(group_units(m_layout, m_layout.groups[g], m_shape));
            std::iota(v.begin(), v.end(), 0u);
        }
    }
    auto r = m_sim.step(m_pending);
    if (!r) m_error = r.message();
    if (m_record) {
        if (auto o = trace_append_token(*m_record, m_pending); !o) m_error = o.message();
    }
    std::fill(m_reported.begin(), m_reported.end(), 0);
    m_any_pending = false;
}

void sim_residency::reset() {
    auto s = simulator::create(m_shape, m_layout, m_params);
    if (s)
        m_sim = std::move(s).value();
    else
        m_error = s.message();
    std::fill(m_reported.begin(), m_reported.end(), 0);
    m_any_pending = false;
    m_pos = -1;
}

}  // namespace sl::sim

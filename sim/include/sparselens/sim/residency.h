// The online simulator behind the engine's residency_source interface: the engine reports each layer's
// masks, DIP-CA reads the simulated cache state back, and the masks can be recorded as a trace.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sparselens/core/residency.h"
#include "sparselens/sim/simulator.h"

namespace sl::sim {

// Active units of one unit kind from a layer's masks. Input kinds: input_column_pair = gate_in ∪ up_in,
// up_column = up_in, gate_column = gate_in. Neuron kinds: the neurons that contribute to the output,
// neurons_pre ∩ neurons_post ∩ down_in (the engine's own rule), for every row / column / bundle kind.
void masks_to_units(unit_kind kind, const layer_masks& masks, uint32_t n_units, std::vector<uint32_t>& out);

class sim_residency final : public residency_source {
public:
    // A simulator for `shape` with `layout` (at most one input kind and one neuron kind is what the
    // interface can report; other groups are simulated but not exposed). Belady is refused (online).
    static result<std::unique_ptr<sim_residency>> create(const model_shape& shape, const mlp_layout& layout,
                                                         const sim_params& p);

    // [dim] / [hidden] flags of the first input-kind / neuron-kind group of the layer; all ones when the
    // layout has no such group (nothing of that kind is loaded dynamically, so all of it is in DRAM).
    const uint8_t* resident_inputs(int32_t layer) const override;
    const uint8_t* resident_neurons(int32_t layer) const override;
    // Buffers the layer's units; the simulator steps once the last layer of the token has reported.
    // Layers that did not report for a token count as dense.
    void on_token(int32_t layer, int32_t pos, const layer_masks& masks) override;
    // Fresh caches and statistics (recording continues into the same trace).
    void reset() override;

    const simulator& sim() const { return m_sim; }
    // Appends every simulated token's masks to `t` (same shape and layout; nullptr stops recording).
    void record(trace* t) { m_record = t; }
    // The last failure of a simulator step or a recording (empty when none): on_token cannot return one.
    const std::string& last_error() const { return m_error; }

private:
    sim_residency(simulator s, model_shape shape, mlp_layout layout, sim_params p);
    void flush();

    simulator m_sim;
    model_shape m_shape;
    mlp_layout m_layout;
    sim_params m_params;
    int32_t m_input_group = -1, m_neuron_group = -1;
    std::vector<uint8_t> m_all_inputs, m_all_neurons;  // all-ones fallbacks
    std::vector<std::vector<uint32_t>> m_pending;      // per stream, the current token's units
    std::vector<uint8_t> m_reported;                   // per layer
    bool m_any_pending = false;
    int32_t m_pos = -1;
    trace* m_record = nullptr;
    std::string m_error;
};

}  // namespace sl::sim

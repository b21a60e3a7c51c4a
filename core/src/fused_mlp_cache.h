// Private: the compact active-weights buffer of the fused sparse MLP, updated differentially per token.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "anon_buffer.h"
#include "sparselens/core/context.h"
#include "sparselens/core/model.h"
#include "sparselens/kernels/sparse.h"

namespace sl {

// One layer's cache. The compact buffer holds neuron bundles (gate row, up row, down column back to
// back, the kernels' bundle layout) in slots; a slot map says which neuron sits where. update() frees
// the slots of neurons that left the active set and copies only the neurons that entered it, so a
// neuron that stays active costs nothing (SparseLLM's differential weight caching).
//
// Bundles are copied from the model's own gate/up rows and from the context's input-major layout of
// down (one contiguous row per down column; it replaces the row-major down, see context::set_method),
// not from a second copy of anything: the extra memory is the compact buffer alone. Gate/up rows keep
// the weights' type, the down parts the down layout's: every copy is a memcpy (on a Q4_K_M file, Q4_K
// rows beside Q4_0x8 or Q6_0x8 down columns). context::set_method only builds caches where that holds
// (fused_bundles_keep_types).
//
// Split (for a fixed set, GRIFFIN's experts): the buffer holds the three parts as three compact matrices
// instead, every slot's gate rows, then its up rows, then its down columns, always exactly full (a set
// of another size is copied afresh), and run() streams them with the dense gemv (gate and up) and the
// input-sparse kernel over all slots (down): the same row kernels and down chunks as the fused kernel,
// but gate and up read as two long streams that the hardware prefetchers follow. The fused kernel's
// per-32-neuron interleave of 64 row dots and a down chunk read GRIFFIN's sequential buffer at 25.9 GB/s
// where dense's MLP ran at 34.5 (llama-1b Q4_0). With `regroup` (context_params::regroup_rows) and a
// CPU where that pays (regroups_rows), the split gate and up parts of Q4_K / Q4_0 /
// Q8_0 rows hold their slots' rows in the regrouped form (Q4_Kx8r...), 8 slots to a group (the last capacity % 8 slots
// stay rows), as dense's own matrices are held (context::prepare): the same bits per row.
class differential_bundle_cache {
public:
    // down_t: the layer's down projection input-major ([hidden, dim]); it must outlive the cache.
    differential_bundle_cache(const layer_weights& lw, const tensor_view& down_t, int64_t dim, int64_t hidden,
                              bool split = false, context_params::regroup regroup = context_params::regroup::off);

    // Makes the buffer hold exactly `active` (sorted, unique, in [0, hidden)). Statistics go to `stats`.
    // Large copies run on n_threads.
    void update(std::span<const int32_t> active, fused_mlp_stats& stats, int n_threads);

    // y[dim] = sum over the active set of down_j * act(gate_j . x) * (up_j . x). `glu` (optional,
    // [hidden]) receives the GLU values at the neurons' positions and 0 elsewhere.
    void run(const float* x, float* y, float* glu, float* scratch, int n_threads, kernels::glu_kind act);

    // Drops every slot and frees the buffer (the next update copies its whole active set afresh).
    void clear();

    int64_t bundle_bytes() const { return m_view.bundle_bytes(); }
    uint64_t memory_bytes() const { return m_compact.size(); }
    int64_t capacity() const { return m_capacity; }

private:
    void copy_neuron(int32_t j, int32_t slot);
    void grow(int64_t capacity);
    void run_split(const float* x, float* y, int n_threads, kernels::glu_kind act);
    // Split mode: the three compact matrices over the buffer (rows = capacity), gate and up as rows.
    tensor_view split_part(int part) const;
    // Split mode, regrouped: slots [0, x8_slots()) of gate and up are groups of 8 rows.
    int64_t x8_slots() const { return m_x8 ? m_capacity / k_rows_x8 * k_rows_x8 : 0; }
    // Rewrites the gate and up groups holding a slot that changed neuron (m_group_dirty).
    void regroup_dirty(int n_threads);

    const layer_weights* m_lw;
    int64_t m_hidden = 0;
    tensor_view m_down_t;            // [hidden, dim]: row j = down column j (the context's layout)
    anon_buffer m_compact;           // m_capacity bundles
    kernels::bundle_view m_view;     // over m_compact
    int64_t m_capacity = 0;
    std::vector<int32_t> m_slot_of;    // [hidden]: slot of each neuron, -1 when absent
    std::vector<int32_t> m_neuron_at;  // [capacity]: neuron in each slot, -1 when free
    std::vector<int32_t> m_free;       // free slots (a stack)
    std::vector<uint32_t> m_mark;      // [hidden]: == m_epoch when in the current active set
    uint32_t m_epoch = 0;
    std::vector<int32_t> m_run;        // sorted slots of the active set (the kernel's index list)
    std::vector<float> m_glu_compact;  // GLU per entry of m_run
    std::vector<int32_t> m_enter;      // neurons entering in this update
    bool m_split = false;
    bool m_x8 = false;                       // split gate/up parts regrouped (constructor)
    std::vector<uint8_t> m_group_dirty;      // [capacity / 8]: a slot of the group took a new neuron
    std::vector<float> m_gate_out, m_up_out, m_glu_slot;  // split mode: per slot
};

// Whether every layer's bundles would be exact copies of its weights: gate and up of one type (their
// rows copied as they are; the down parts are copies of the down layout in any type). Otherwise a
// bundle would round differently from the unfused kernels, which read the original rows, so fused
// methods run the unfused kernels instead.
bool fused_bundles_keep_types(const model& m);

// Every layer's cache plus the kernel scratch: what context keeps while a fused method is attached.
struct fused_mlp_state {
    // down_t[l]: layer l's input-major down layout (owned by the context). split, regroup: the caches'.
    fused_mlp_state(const model& m, const std::vector<tensor_view>& down_t, int n_threads, bool split,
                    context_params::regroup regroup);

    std::vector<differential_bundle_cache> layers;
    std::vector<float> scratch;
    fused_mlp_stats stats;
};

std::shared_ptr<fused_mlp_state> make_fused_state(const model& m, const std::vector<tensor_view>& down_t, int n_threads,
                                                  bool split, context_params::regroup regroup);

}  // namespace sl

// The fused sparse MLP's differential bundle cache: slot bookkeeping, copies of entering neurons, the run.
#include "fused_mlp_cache.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstring>

#include "sparselens/kernels/kernels.h"

namespace sl {

namespace {

// Copies of at least this many bytes in one update run on the context's threads.
constexpr int64_t k_parallel_copy_bytes = 1 << 20;

// Whether a layer's bundles are copies of its weights: gate and up rows of one type (copied as stored)
// and whole blocks of it; the down parts are copies of the down layout's columns in any type.
bool bundles_are_copies(const layer_weights& lw, int64_t dim) {
    return lw.w_gate.type == lw.w_up.type && dim % dtype_block_elems(lw.w_gate.type) == 0;
}

}  // namespace

bool fused_bundles_keep_types(const model& m) {
    for (const layer_weights& lw : m.layers)
        if (!bundles_are_copies(lw, m.hp.dim)) return false;
    return true;
}

differential_bundle_cache::differential_bundle_cache(const layer_weights& lw, const tensor_view& down_t, int64_t dim,
                                                     int64_t hidden, bool split, context_params::regroup regroup)
    : m_lw(&lw),
      m_hidden(hidden),
      m_down_t(down_t),
      m_split(split),
      m_x8(split && regroups_rows(regroup, lw.w_gate.type) && dim % qk_k == 0) {
    assert(lw.w_gate.rows == hidden && lw.w_gate.cols == dim && down_t.rows == hidden && down_t.cols == dim);
    assert(bundles_are_copies(lw, dim) && "set_method builds caches only where fused_bundles_keep_types");
    m_view.type = lw.w_gate.type;
    m_view.dim = dim;
    m_view.down = down_t.type;
    m_view.n_neurons = 0;
    m_slot_of.assign(static_cast<size_t>(hidden), -1);
    m_mark.assign(static_cast<size_t>(hidden), 0);
    m_glu_compact.resize(static_cast<size_t>(hidden));
}

void differential_bundle_cache::grow(int64_t capacity) {
    // Slots keep their indices, so the slot map stays valid; the old contents move with the buffer.
    const int64_t bb = m_view.bundle_bytes();
    m_compact.grow(static_cast<uint64_t>(capacity * bb));
    assert((!m_split || m_capacity == 0) && "update() clears a split buffer before it grows");
    if (m_split) {
        for (auto* v : {&m_gate_out, &m_up_out, &m_glu_slot}) v->resize(static_cast<size_t>(capacity));
        m_group_dirty.assign(static_cast<size_t>(capacity / k_rows_x8), 0);
    }
    for (int64_t s = capacity - 1; s >= m_capacity; --s) m_free.push_back(static_cast<int32_t>(s));
    m_neuron_at.resize(static_cast<size_t>(capacity), -1);
    m_capacity = capacity;
    m_view.n_neurons = capacity;
    m_view.data = m_compact.data();
}

void differential_bundle_cache::clear() {
    if (m_capacity == 0) return;
    std::fill(m_slot_of.begin(), m_slot_of.end(), -1);
    m_compact.reset();  // unmapped: the memory this clear is for goes back at once
    m_neuron_at.clear();
    m_free.clear();
    m_run.clear();
    m_capacity = 0;
    m_view.n_neurons = 0;
    m_view.data = nullptr;
}

tensor_view differential_bundle_cache::split_part(int part) const {
    tensor_view v;
    v.type = part < 2 ? m_view.type : m_view.down;
    v.rows = m_capacity;
    v.cols = m_view.dim;
    v.data = m_compact.data() + part * m_capacity * m_view.part_bytes();
    return v;
}

void differential_bundle_cache::copy_neuron(int32_t j, int32_t slot) {
    const auto part = static_cast<size_t>(m_view.part_bytes());  // gate, up; then the down part
    if (m_split) {
        const auto s = static_cast<size_t>(slot);
        const auto cap = static_cast<size_t>(m_capacity);
        uint8_t* b = m_compact.data();
        if (slot >= x8_slots()) {  // (a regrouped slot's group is rewritten after the copies)
            std::memcpy(b + s * part, m_lw->w_gate.row(j), part);
            std::memcpy(b + (cap + s) * part, m_lw->w_up.row(j), part);
        }
        std::memcpy(b + 2 * cap * part + s * static_cast<size_t>(m_view.down_bytes()), m_down_t.row(j),
                    static_cast<size_t>(m_view.down_bytes()));
        return;
    }
    uint8_t* dst = m_compact.data() + static_cast<size_t>(slot) * m_view.bundle_bytes();
    std::memcpy(dst, m_lw->w_gate.row(j), part);
    std::memcpy(dst + part, m_lw->w_up.row(j), part);
    std::memcpy(dst + 2 * part, m_down_t.row(j), static_cast<size_t>(m_view.down_bytes()));
}

void differential_bundle_cache::update(std::span<const int32_t> active, fused_mlp_stats& stats, int n_threads) {
    const auto t0 = std::chrono::steady_clock::now();
    if (++m_epoch == 0) {  // wrapped: clear the marks once every 2^32 updates
        std::fill(m_mark.begin(), m_mark.end(), 0u);
        m_epoch = 1;
    }
    for (int32_t j : active) {
        assert(j >= 0 && j < m_hidden);
        m_mark[static_cast<size_t>(j)] = m_epoch;
    }
    // Free the slots of neurons that left; nothing is copied for them.
    int64_t left = 0;
    for (int64_t s = 0; s < m_capacity; ++s) {
        const int32_t j = m_neuron_at[static_cast<size_t>(s)];
        if (j < 0 || m_mark[static_cast<size_t>(j)] == m_epoch) continue;
        m_slot_of[static_cast<size_t>(j)] = -1;
        m_neuron_at[static_cast<size_t>(s)] = -1;
        m_free.push_back(static_cast<int32_t>(s));
        ++left;
    }
    stats.left += left;
    const auto n_active = static_cast<int64_t>(active.size());
    // A split buffer is exactly full (its regions start at multiples of its capacity, and run_split
    // streams whole matrices): another size empties it and every neuron is copied again (a fixed set's
    // buffer is cleared at each prompt anyway and filled once, from empty).
    if (m_split && n_active != m_capacity && m_capacity > 0) clear();
    if (n_active > m_capacity) grow(n_active);
    // Copy only the neurons that entered: slots first, then the copies, on n_threads when there are
    // many (a fixed set's first token copies all of them: 14 MB per llama-1b Q4_0 layer at 50%).
    m_enter.clear();
    for (int32_t j : active) {
        int32_t& slot = m_slot_of[static_cast<size_t>(j)];
        if (slot < 0) {
            assert(!m_free.empty());
            slot = m_free.back();
            m_free.pop_back();
            m_neuron_at[static_cast<size_t>(slot)] = j;
            m_enter.push_back(j);
            if (slot < x8_slots()) m_group_dirty[static_cast<size_t>(slot / k_rows_x8)] = 1;
        }
    }
    const auto entered = static_cast<int64_t>(m_enter.size());
    const int nt = entered * m_view.bundle_bytes() >= k_parallel_copy_bytes ? std::max(1, n_threads) : 1;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < entered; ++i) {
        const int32_t j = m_enter[static_cast<size_t>(i)];
        copy_neuron(j, m_slot_of[static_cast<size_t>(j)]);
    }
    if (entered > 0 && x8_slots() > 0) regroup_dirty(nt);
    // The kernel's list: the occupied slots in ascending order (it reads the buffer front to back), by
    // a scan of the slots rather than a sort of the active list's slots (a sort of 4096 per layer was
    // ~2% of a GRIFFIN token). Unchanged when no neuron entered or left (GRIFFIN after its first token).
    if (entered > 0 || left > 0 || static_cast<int64_t>(m_run.size()) != n_active) {
        m_run.clear();
        for (int64_t s = 0; s < m_capacity; ++s)
            if (m_neuron_at[static_cast<size_t>(s)] >= 0) m_run.push_back(static_cast<int32_t>(s));
    }
    assert(static_cast<int64_t>(m_run.size()) == n_active);
    ++stats.updates;
    stats.active += n_active;
    stats.entered += entered;
    stats.bytes_copied += static_cast<uint64_t>(entered * m_view.bundle_bytes());
    stats.update_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void differential_bundle_cache::run(const float* x, float* y, float* glu, float* scratch, int n_threads,
                                    kernels::glu_kind act) {
    const auto n = static_cast<int64_t>(m_run.size());
    if (m_split) {
        run_split(x, y, n_threads, act);
        for (int64_t k = 0; k < n && glu; ++k)
            m_glu_compact[static_cast<size_t>(k)] = m_glu_slot[static_cast<size_t>(m_run[static_cast<size_t>(k)])];
    } else {
        kernels::fused_sparse_mlp(m_view, x, m_run.data(), n, y, scratch, glu ? m_glu_compact.data() : nullptr,
                                  n_threads, act);
    }
    if (!glu) return;
    std::fill(glu, glu + m_hidden, 0.0f);
    for (int64_t k = 0; k < n; ++k)
        glu[m_neuron_at[static_cast<size_t>(m_run[static_cast<size_t>(k)])]] = m_glu_compact[static_cast<size_t>(k)];
}

void differential_bundle_cache::regroup_dirty(int n_threads) {
    const int64_t rb = m_view.part_bytes(), groups = x8_slots() / k_rows_x8;
    const dtype t = m_view.type;
    uint8_t* parts[2] = {m_compact.data(), m_compact.data() + m_capacity * rb};
    const tensor_view* rows[2] = {&m_lw->w_gate, &m_lw->w_up};
#pragma omp parallel num_threads(n_threads)
    {
        std::vector<uint8_t> group(static_cast<size_t>(k_rows_x8 * rb));  // 8 rows gathered, then regrouped
#pragma omp for schedule(static)
        for (int64_t g = 0; g < groups; ++g) {
            if (!m_group_dirty[static_cast<size_t>(g)]) continue;
            for (int p = 0; p < 2; ++p) {
                for (int r = 0; r < k_rows_x8; ++r) {
                    const int32_t j = m_neuron_at[static_cast<size_t>(g * k_rows_x8 + r)];
                    std::memcpy(group.data() + r * rb, rows[p]->row(j), static_cast<size_t>(rb));
                }
                kernels::to_rows_x8({t, k_rows_x8, m_view.dim, group.data()}, parts[p] + g * k_rows_x8 * rb);
            }
            m_group_dirty[static_cast<size_t>(g)] = 0;
        }
    }
}

void differential_bundle_cache::run_split(const float* x, float* y, int n_threads, kernels::glu_kind act) {
    const auto n = static_cast<int64_t>(m_run.size());
    assert(n == m_capacity && "update() keeps a split buffer exactly full");
    if (n == 0) {
        std::fill(y, y + m_view.dim, 0.0f);
        return;
    }
    // Gate and up: the regrouped slots, then the rows after them (either may be empty).
    const int64_t n8 = x8_slots();
    tensor_view views[4];
    float* ys[4];
    for (int p = 0; p < 2; ++p) {
        const tensor_view part = split_part(p);
        views[p] = {dtype_rows_x8_form(part.type), n8, part.cols, part.data};
        views[2 + p] = {part.type, n - n8, part.cols, part.row(n8)};
        ys[p] = (p == 0 ? m_gate_out : m_up_out).data();
        ys[2 + p] = ys[p] + n8;
    }
    kernels::gemv_multi(views, ys, 4, x, n_threads);
    kernels::glu(act, m_glu_slot.data(), ys[0], ys[1], n);
    kernels::gemv_input_sparse(split_part(2), m_glu_slot.data(), m_run.data(), n, y, n_threads);
}

fused_mlp_state::fused_mlp_state(const model& m, const std::vector<tensor_view>& down_t, int n_threads, bool split,
                                 context_params::regroup regroup) {
    assert(down_t.size() == m.layers.size());
    layers.reserve(m.layers.size());
    for (size_t l = 0; l < m.layers.size(); ++l)
        layers.emplace_back(m.layers[l], down_t[l], m.hp.dim, m.hp.hidden_dim, split, regroup);
    scratch.resize(static_cast<size_t>(kernels::fused_mlp_scratch_floats(m.hp.dim, n_threads)));
}

std::shared_ptr<fused_mlp_state> make_fused_state(const model& m, const std::vector<tensor_view>& down_t,
                                                  int n_threads, bool split, context_params::regroup regroup) {
    return std::make_shared<fused_mlp_state>(m, down_t, n_threads, split, regroup);
}

}  // namespace sl

// The fused sparse MLP path of the engine (methods with method_traits::fused) and its statistics.
#include <algorithm>
#include <cassert>

#include "fused_mlp_cache.h"
#include "weight_storage.h"
#include "sparselens/core/context.h"
#include "sparselens/kernels/sparse.h"

namespace sl {

void context::mlp_fused(int32_t l, const token_info& ti) {
    assert(m_fused && "set_method builds the caches of a fused method");
    assert(m_masks.gate_in.all && m_masks.up_in.all && m_masks.neurons_post.all && m_masks.down_in.all &&
           "a fused method sets only neurons_pre");
    const layer_weights& lw = m_model->layers[static_cast<size_t>(l)];
    const int32_t hidden = m_model->hp.hidden_dim;
    const index_mask& rows = m_masks.neurons_pre;
    differential_bundle_cache& cache = m_fused->layers[static_cast<size_t>(l)];
    cache.update(rows.idx, m_fused->stats, m_threads);
    // A fixed set (GRIFFIN's experts) is in the buffer after its first token: the row-major gate/up are
    // not read again before the next prompt, whose dense rows fault the pages back in (same bytes, from
    // the file; mlp_sparse clears the mark).
    if (m_traits.fused_fixed && !m_observer && !m_keep_replaced && !m_rows_paged[static_cast<size_t>(l)]) {
        const weight_storage* ws = m_model->storage.get();
        const bool paged = ws && ws->release(lw.w_gate) && ws->release(lw.w_up);
        m_rows_paged[static_cast<size_t>(l)] = paged ? 1 : 0;
    }

    if (m_observer) {
        // The fused kernel yields only the GLU; pre-activations are computed for observers alone, from
        // the same rows, so an attached observer sees what the unfused path would report.
        const auto n = static_cast<int64_t>(rows.idx.size());
        for (auto [w, full] : {std::pair{&lw.w_gate, &m_gate}, std::pair{&lw.w_up, &m_up}}) {
            kernels::gemv_output_sparse(*w, m_xb.data(), rows.idx.data(), n, m_compact.data(), m_threads);
            std::fill(full->begin(), full->begin() + hidden, 0.0f);
            for (int64_t k = 0; k < n; ++k) (*full)[static_cast<size_t>(rows.idx[static_cast<size_t>(k)])] = m_compact[static_cast<size_t>(k)];
        }
        observe(l, probe::gate_pre, ti.pos, 1, m_gate.data(), hidden);
        observe(l, probe::up_pre, ti.pos, 1, m_up.data(), hidden);
    }
    cache.run(m_xb.data(), m_proj.data(), m_observer ? m_gate.data() : nullptr, m_fused->scratch.data(), m_threads,
              glu_kind());
    if (m_observer) observe(l, probe::glu, ti.pos, 1, m_gate.data(), hidden);
    m_masks.down_in = rows;  // report what the kernel read, as the unfused path does
}

fused_mlp_stats context::fused_stats() const {
    if (!m_fused) return {};
    fused_mlp_stats s = m_fused->stats;
    s.memory_bytes = 0;
    for (const differential_bundle_cache& c : m_fused->layers) s.memory_bytes += c.memory_bytes();
    return s;
}

}  // namespace sl

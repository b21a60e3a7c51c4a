// The single-token sparse path: a sparsity method chooses masks, the sparse kernels skip the rest.
#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstring>
#include <new>

#include "anon_buffer.h"
#include "fused_mlp_cache.h"
#include "weight_storage.h"
#include "sparselens/core/context.h"
#include "sparselens/core/model_stats.h"
#include "sparselens/kernels/attention.h"
#include "sparselens/kernels/kernels.h"

namespace sl {

namespace {

const tensor_view& proj_view(const layer_weights& lw, proj p) {
    switch (p) {
        case proj::q: return lw.wq;
        case proj::k: return lw.wk;
        case proj::v: return lw.wv;
        case proj::o: return lw.wo;
        case proj::gate: return lw.w_gate;
        case proj::up: return lw.w_up;
        case proj::down: return lw.w_down;
    }
    return lw.wq;
}

}  // namespace

void context::set_method(sparsity_method* method) {
    m_method = method;
    m_prompt_open = false;
    m_traits = method ? method->traits() : method_traits{};
    // The fused path needs bundles that are exact copies of the weights (gate and up of one type; rows of
    // two types would be re-encoded: other rounding than the unfused kernels). Otherwise the same neuron
    // sets run through the unfused output-sparse gate/up and input-sparse down kernels.
    const bool fusable = fused_bundles_keep_types(*m_model);
    if (!fusable) m_traits.fused = false;
    m_fused.reset();
    m_rows_paged.assign(m_model->layers.size(), 0);
    reset_density();
    if (!method) {  // the plain forward reads the row-major matrices (released pages fault back in)
        m_layouts.clear();
        m_released_bytes = 0;
        m_rows_read.assign(m_model->layers.size(), 0);
        m_rows_x8_pending = true;
        return;
    }
    // One layout per matrix for the union of the reserved traits and this method's; this method's
    // projections that it plans to keep at or above the layout's break-even density (or never prunes)
    // stay row-major and run dense on the masked input (input_sparse_break_even).
    const method_traits& r = m_reserved;
    const bool fused = m_traits.fused || (r.fused && fusable);
    const bool neurons = m_traits.neurons_pre || m_traits.neurons_post || r.neurons_pre || r.neurons_post;
    bool cur[proj_count] = {}, res[proj_count] = {};
    for (int p = 0; p < proj_count; ++p) {
        const auto pp = static_cast<proj>(p);
        const bool attn = pp == proj::q || pp == proj::k || pp == proj::v, mlp = pp == proj::gate || pp == proj::up;
        const method_traits& t = m_traits;
        cur[p] = attn ? t.attn_inputs : pp == proj::o ? t.o_input : mlp ? t.mlp_inputs : t.down_in;
        res[p] = attn ? r.attn_inputs : pp == proj::o ? r.o_input : mlp ? r.mlp_inputs : r.down_in;
    }
    // The fused cache copies its bundles' down columns from this layout too.
    const bool down_cols = fused || neurons;
    // Neurons chosen only after one whole projection (the gate for CATS, CHESS and gate pruning, up for
    // up pruning) and nothing else reading the other projection or down on its own: pairs of the
    // other's row and the down column replace both, so a chosen neuron is one contiguous read
    // (kernels::sparse_pairs; two scattered rows per neuron ran at 14-18 GB/s on llama-1b). Every
    // neuron-choosing method of the set must compute the same projection first; a reserved set's
    // up_first cannot say whether a gate-first method is in it too, so such a set takes no pairs.
    const bool cur_post = m_traits.neurons_post, res_post = r.neurons_post;
    const bool up_first = cur_post ? m_traits.up_first : r.up_first;
    const bool one_first = !(res_post && r.up_first) && !(cur_post && res_post && m_traits.up_first);
    const bool mlp_in = m_traits.mlp_inputs || r.mlp_inputs;
    const bool pairs = !m_mlp_source && (cur_post || res_post) &&
                       one_first && !(m_traits.neurons_pre || r.neurons_pre) && !mlp_in && !fused &&
                       !(m_traits.down_in || r.down_in);
    const size_t n_layers = m_model->layers.size();
    auto needed = [&](size_t l, int p) {
        if (m_mlp_source && p >= static_cast<int>(proj::gate)) return false;
        if (p == static_cast<int>(proj::down) && (pairs || down_cols)) return !pairs;
        if (res[p]) return true;
        if (!cur[p]) return false;
        const tensor_view& w = proj_view(m_model->layers[l], static_cast<proj>(p));
        const float d = method->planned_input_density(static_cast<int32_t>(l), static_cast<proj>(p));
        return d < 0.0f || d < kernels::input_sparse_break_even(kernels::input_major_type(w));
    };
    // Gate and up as one [gate | up] layout where every method of the set gives both the same inputs
    // and reads them only by input (no neuron rows, bundles or pairs): a chosen channel is one read of
    // both rows. DIP at 50% on llama-1b Q4_0 (rows of 4608 bytes -> 9216), `bench --stages`, builds
    // alternating x3: gate/up stage 5.40 / 5.65 / 5.41 -> 4.75 / 4.78 / 4.91 ms per token, token 12.6 /
    // 13.3 / 12.7 -> 11.9 / 11.9 / 12.3 ms. Each block's bytes are those of the two layouts, and so is
    // each output's arithmetic while the joined row stays under k_input_sparse_split_row_bytes (split by
    // channels, as the halves were): the same bits. Longer joined rows (Q8_0 at 8192 outputs) are split by
    // outputs, another fixed summation order.
    const int gi = static_cast<int>(proj::gate), ui = static_cast<int>(proj::up);
    const bool shared_in = (!m_traits.mlp_inputs || m_traits.mlp_inputs_shared) &&
                           (!r.mlp_inputs || r.mlp_inputs_shared);
    const bool gate_up_ok = mlp_in && shared_in && !neurons && !fused && !pairs && !m_mlp_source;
    std::vector<uint8_t> joined(n_layers, 0);  // per layer: one [gate | up] layout
    for (size_t l = 0; l < n_layers && gate_up_ok; ++l) {
        const layer_weights& lw = m_model->layers[l];
        const dtype t = kernels::input_major_type(lw.w_gate);
        joined[l] = needed(l, gi) && needed(l, ui) && t == kernels::input_major_type(lw.w_up) &&
                    lw.w_gate.cols == lw.w_up.cols && lw.w_gate.rows % dtype_block_elems(t) == 0 &&
                    lw.w_up.rows % dtype_block_elems(t) == 0;
    }
    auto separate = [&](size_t l, int p) { return needed(l, p) && !((p == gi || p == ui) && joined[l]); };
    bool same = m_layouts.size() == n_layers;
    for (size_t l = 0; l < n_layers && same; ++l) {
        same = m_layouts[l].has_pairs == pairs && (!pairs || m_layouts[l].pairs.view.gate_rows == up_first);
        same = same && m_layouts[l].has_gate_up == (joined[l] != 0);
        for (int p = 0; p < proj_count; ++p) same = same && m_layouts[l].has[p] == separate(l, p);
    }
    if (!same) {
        m_layouts.clear();
        m_layouts.resize(n_layers);
        m_released_bytes = 0;
        for (size_t l = 0; l < n_layers; ++l) {
            if (joined[l]) {
                const layer_weights& lw = m_model->layers[l];
                m_layouts[l].gate_up =
                    kernels::to_input_major_pair(lw.w_gate, lw.w_up, kernels::input_major_type(lw.w_gate));
                m_layouts[l].has_gate_up = true;
                if (!m_keep_replaced)
                    for (const tensor_view* w : {&lw.w_gate, &lw.w_up}) release_view(*w);
            }
            for (int p = 0; p < proj_count; ++p) {
                if (!separate(l, p)) continue;
                const tensor_view& w = proj_view(m_model->layers[l], static_cast<proj>(p));
                m_layouts[l].t[p] = kernels::to_input_major(w, kernels::input_major_type(w));
                m_layouts[l].has[p] = true;
                // The layout replaces the original: its mapped pages (touched once, to transpose) go.
                // Gate/up rows stay for output-sparse neurons and the fused cache's bundle copies.
                const bool rows_used = (p == static_cast<int>(proj::gate) || p == static_cast<int>(proj::up)) &&
                                       (neurons || fused);
                if (!rows_used && !m_keep_replaced) release_view(w);
            }
            if (pairs) {
                const layer_weights& lw = m_model->layers[l];
                const tensor_view& rows = up_first ? lw.w_gate : lw.w_up;
                const dtype down_type = kernels::input_major_type(lw.w_down);
                m_layouts[l].pairs = kernels::make_pairs(rows, lw.w_down, down_type, up_first);
                m_layouts[l].has_pairs = true;
                if (!m_keep_replaced)
                    for (const tensor_view* w : {&rows, &lw.w_down}) release_view(*w);
            }
        }
    }
    // Which matrices keep their rows (no Q4_Kx8r copy): those with a layout of their own, gate/up read as
    // output-sparse neurons or copied into bundles, pairs' sources, and whatever the MLP takes from
    // elsewhere (an offload source, FFSplit's split, the fused caches). Neurons chosen after the first
    // projection leave that one read whole (CATS's gate): it is regrouped like dense's. The gate alone
    // on its rows ran at 17.5 GB/s against dense's 24.5 for gate and up regrouped (l1b Q4_K_M).
    const bool split = m_traits.split_mlp || r.split_mlp;
    const bool pre = m_traits.neurons_pre || r.neurons_pre;
    const int first = static_cast<int>(up_first ? proj::up : proj::gate);
    m_rows_read.assign(n_layers, 0);
    for (size_t l = 0; l < n_layers; ++l) {
        for (int p = 0; p < proj_count; ++p) {
            const bool mlp = p >= static_cast<int>(proj::gate), down = p == static_cast<int>(proj::down);
            const bool read_whole = !pre && one_first && p == first;  // computed before any neuron is chosen
            const bool rows_used = mlp && !down && (fused || (neurons && !read_whole));
            const bool paired = pairs && (down || p == static_cast<int>(up_first ? proj::gate : proj::up));
            const bool in_gate_up = m_layouts[l].has_gate_up && mlp && !down;
            if (m_layouts[l].has[p] || in_gate_up || rows_used || paired || (mlp && (m_mlp_source || split || fused)))
                m_rows_read[l] = static_cast<uint8_t>(m_rows_read[l] | 1u << p);
        }
    }
    m_rows_x8_pending = true;
    if (gate_up_ok) m_gate_up.resize(2 * static_cast<size_t>(m_model->hp.hidden_dim));
    if (m_traits.fused && !m_mlp_source) {  // offloaded weights never take the fused path
        std::vector<tensor_view> down_t(n_layers);
        for (size_t l = 0; l < n_layers; ++l) down_t[l] = m_layouts[l].t[static_cast<int>(proj::down)].view;
        m_fused = make_fused_state(*m_model, down_t, m_threads, m_traits.fused_fixed, m_regroup_rows);
    }
}

const tensor_view& context::dense_view(int32_t l, proj p) const {
    const auto i = static_cast<size_t>(l);
    const int pi = static_cast<int>(p);
    if (i < m_rows_x8.size() && m_rows_x8[i].has[pi]) return m_rows_x8[i].x8[pi];
    return proj_view(m_model->layers[i], p);
}

void context::prepare() {
    if (!m_rows_x8_pending) return;
    m_rows_x8_pending = false;
    const size_t n_layers = m_model->layers.size();
    m_rows_x8.resize(n_layers);
    m_rows_read.resize(n_layers, 0);
    auto view = [&](size_t l, int p) -> const tensor_view& {
        return proj_view(m_model->layers[l], static_cast<proj>(p));
    };
    // Elsewhere than on the kernel's CPUs a copy would only add the copy back (gemv's fallback).
    auto wanted = [&](size_t l, int p) {
        const tensor_view& w = view(l, p);
        return regroups_rows(m_regroup_rows, w.type) && w.rows > 0 && w.rows % k_rows_x8 == 0 &&
               w.cols % qk_k == 0 && !(m_rows_read[l] >> p & 1u);
    };
    const weight_storage* ws = m_model->storage.get();
    auto use = [&](size_t l, int p, bool on) {  // a slot's copy in or out of service
        layer_rows& lr = m_rows_x8[l];
        if (lr.has[p] == on) return;
        lr.has[p] = on;
        // Out: the original's pages fault back in as they are read; in: they go again.
        lr.released[p] = on && !m_keep_replaced && ws && ws->release(view(l, p));
    };
    // Every wanted copy already in the arena (a method's set after dense's, or the same set again): the
    // copies only change service; the others keep their memory until a set needs a copy the arena lacks.
    bool covered = true;
    uint64_t total = 0;
    auto at = [](uint64_t off) { return (off + 63) / 64 * 64; };  // whole-line starts
    for (size_t l = 0; l < n_layers; ++l)
        for (int p = 0; p < proj_count; ++p)
            if (wanted(l, p)) {
                covered = covered && m_rows_x8[l].slot[p];
                total = at(total) + static_cast<uint64_t>(view(l, p).bytes());
            }
    if (covered) {
        for (size_t l = 0; l < n_layers; ++l)
            for (int p = 0; p < proj_count; ++p) use(l, p, wanted(l, p));
        return;
    }
    // Rebuilt for this set, the old arena out first.
    for (size_t l = 0; l < n_layers; ++l)
        for (int p = 0; p < proj_count; ++p) use(l, p, false);
    m_rows_x8.assign(n_layers, layer_rows{});
    m_rows_x8_arena.reset();
    if (total == 0) return;
    auto arena = std::make_shared<anon_buffer>();
    try {
        arena->grow(total);
    } catch (const std::bad_alloc&) {
        return;  // no copies: the rows serve, as on a CPU without the kernel
    }
    uint64_t off = 0;
    for (size_t l = 0; l < n_layers; ++l)
        for (int p = 0; p < proj_count; ++p) {
            if (!wanted(l, p)) continue;
            off = at(off);
            m_rows_x8[l].x8[p] = kernels::to_rows_x8(view(l, p), arena->data() + off);
            m_rows_x8[l].slot[p] = true;
            use(l, p, true);
            off += static_cast<uint64_t>(view(l, p).bytes());
        }
    m_rows_x8_arena = std::move(arena);
}

void context::release_view(const tensor_view& w) {
    const weight_storage* ws = m_model->storage.get();
    if (ws && ws->release(w)) m_released_bytes += static_cast<uint64_t>(w.bytes());
}

uint64_t context::layout_bytes() const {
    uint64_t bytes = 0;
    for (const layer_layouts& ll : m_layouts) {
        for (int p = 0; p < proj_count; ++p)
            if (ll.has[p]) bytes += ll.t[p].bytes.size();
        if (ll.has_pairs) bytes += ll.pairs.bytes.size();
        if (ll.has_gate_up) bytes += ll.gate_up.bytes.size();
    }
    return bytes;
}

uint64_t context::rows_x8_bytes() const { return m_rows_x8_arena ? m_rows_x8_arena->size() : 0; }

uint64_t context::resident_weight_bytes() const {
    const uint64_t model_bytes = model_count_bytes(*m_model).total();
    uint64_t out = m_released_bytes;
    for (size_t l = 0; l < m_rows_x8.size(); ++l)
        for (int p = 0; p < proj_count; ++p)
            if (m_rows_x8[l].released[p])
                out += static_cast<uint64_t>(proj_view(m_model->layers[l], static_cast<proj>(p)).bytes());
    for (size_t l = 0; l < m_rows_paged.size(); ++l)
        if (m_rows_paged[l])
            out += static_cast<uint64_t>(m_model->layers[l].w_gate.bytes() + m_model->layers[l].w_up.bytes());
    return model_bytes - std::min(model_bytes, out) + rows_x8_bytes() + layout_bytes() + fused_stats().memory_bytes;
}

void context::reset_density() {
    for (layer_density& d : m_density_sum) std::fill(std::begin(d.d), std::end(d.d), 0.0f);
    m_read_sum = m_density_sum;
    m_density_tokens = 0;
}

namespace {

// 0, 1, ..., n - 1 (a projection whose inputs are all active, run on its input-major layout); the
// calling thread's buffer, grown once.
const int32_t* all_indices(int64_t n) {
    thread_local std::vector<int32_t> every;
    if (every.size() < static_cast<size_t>(n)) {
        const size_t from = every.size();
        every.resize(static_cast<size_t>(n));
        for (size_t i = from; i < every.size(); ++i) every[i] = static_cast<int32_t>(i);
    }
    return every.data();
}

// x with the inputs outside `in` zeroed, in the calling thread's buffer `slot` (one per matrix of a
// project_in_multi call), for a pruned projection that has no input-major layout.
const float* masked_input(const index_mask& in, const float* x, int64_t n, int slot) {
    thread_local std::vector<float> buf[kernels::k_input_sparse_multi_max];
    std::vector<float>& b = buf[slot];
    b.assign(static_cast<size_t>(n), 0.0f);
    for (int32_t i : in.idx) b[static_cast<size_t>(i)] = x[i];
    return b.data();
}

// Where the projection helpers below log the rows each kernel call reads (context::set_read_log; without
// a log nothing happens).
struct read_note {
    std::vector<weight_read>* log = nullptr;
    stage at = stage::other;

    // The rows base + idx[k] * row_bytes for k < n, or all `rows` when `all` (an empty list reads nothing).
    void operator()(const void* base, int64_t row_bytes, int64_t rows, bool all, const int32_t* idx = nullptr,
                    int64_t n = 0) const {
        if (!log || (!all && n == 0)) return;
        weight_read r{at, base, row_bytes, rows, {}};
        if (!all) r.idx.assign(idx, idx + n);
        log->push_back(std::move(r));
    }
    void operator()(const tensor_view& w) const { (*this)(w.data, w.row_bytes(), w.rows, true); }
    void operator()(const tensor_view& w, const int32_t* idx, int64_t n) const {
        (*this)(w.data, w.row_bytes(), w.rows, false, idx, n);
    }
};

// Whether project_in reads every weight of a matrix for a pruned input: the dense gemv of a row-major
// matrix (no layout) on x with the pruned inputs zeroed does.
bool reads_whole(const tensor_view* wt, const index_mask& in) {
    return !wt && !in.all;
}

// y = W x using only the input channels in `in` (dense when all). A matrix with an input-major layout
// `wt` runs on it alone, dense too (the layout replaces the row-major original): density 1 then equals
// dense bit for bit, and the original's pages are never touched. Without a layout (the method keeps
// this matrix at or above the layout's break-even density) a pruned x runs through the dense gemv with
// the pruned inputs zeroed: the same masked product, every weight read. Returns true in that case (the
// bytes read are the whole matrix, not the mask's share: context::read_density_sum).
bool project_in(const tensor_view& w, const tensor_view* wt, const index_mask& in, const float* x, float* y,
                int threads, const read_note& note = {}) {
    if (!wt) {
        kernels::gemv(w, in.all ? x : masked_input(in, x, w.cols, 0), y, threads);
        note(w);
        return reads_whole(wt, in);
    }
    if (in.all) {
        kernels::gemv_input_sparse(*wt, x, all_indices(wt->rows), wt->rows, y, threads);
        note(*wt);
        return false;
    }
    kernels::gemv_input_sparse(*wt, x, in.idx.data(), static_cast<int64_t>(in.idx.size()), y, threads);
    note(*wt, in.idx.data(), static_cast<int64_t>(in.idx.size()));
    return false;
}

// project_in for several matrices of the same x (q, k, v; gate, up) in one parallel region when they
// all take the same path (all row-major, or all on input-major layouts); otherwise one call each. The
// same kernels either way, so the bits are those of separate project_in calls. whole[m] receives
// project_in's result for matrix m.
void project_in_multi(int n, const tensor_view* const* w, const tensor_view* const* wt, const index_mask* const* in,
                      const float* x, float* const* y, int threads, bool* whole, const read_note& note = {}) {
    assert(n <= kernels::k_input_sparse_multi_max);
    bool rows = true, layouts = true;
    for (int m = 0; m < n; ++m) {
        rows = rows && !wt[m];
        layouts = layouts && wt[m];
        whole[m] = reads_whole(wt[m], *in[m]);  // as project_in would report on either path below
    }
    if (rows) {
        tensor_view ws[kernels::k_input_sparse_multi_max];
        const float* xs[kernels::k_input_sparse_multi_max];
        for (int m = 0; m < n; ++m) {
            ws[m] = *w[m];
            xs[m] = in[m]->all ? x : masked_input(*in[m], x, w[m]->cols, m);
        }
        kernels::gemv_multi(ws, y, n, xs, threads);
        for (int m = 0; m < n; ++m) note(*w[m]);
        return;
    }
    if (!layouts) {
        for (int m = 0; m < n; ++m) whole[m] = project_in(*w[m], wt[m], *in[m], x, y[m], threads, note);
        return;
    }
    const int32_t* idx[kernels::k_input_sparse_multi_max];
    int64_t n_idx[kernels::k_input_sparse_multi_max];
    for (int m = 0; m < n; ++m) {
        if (in[m]->all) {
            idx[m] = all_indices(wt[m]->rows);
            n_idx[m] = wt[m]->rows;
        } else {
            idx[m] = in[m]->idx.data();
            n_idx[m] = static_cast<int64_t>(in[m]->idx.size());
        }
    }
    kernels::gemv_input_sparse_multi(wt, x, idx, n_idx, y, n, threads);
    for (int m = 0; m < n; ++m) note(wt[m]->data, wt[m]->row_bytes(), wt[m]->rows, in[m]->all, idx[m], n_idx[m]);
}

// y_full[r] = W[r] . x for r in `rows`, 0 elsewhere; inputs restricted to `in`. Returns project_in's
// result when it ran (false for the output-sparse rows: they read what the row mask says).
bool project_rows(const tensor_view& w, const tensor_view* wt, const index_mask& in, const index_mask& rows,
                  const float* x, float* y_full, float* compact, int threads, const read_note& note) {
    if (rows.all) return project_in(w, wt, in, x, y_full, threads, note);
    assert(!dtype_is_rows_x8(w.type) && "rows read one by one are never regrouped (set_method's m_rows_read)");
    if (in.all) {
        const int64_t n = static_cast<int64_t>(rows.idx.size());
        kernels::gemv_output_sparse(w, x, rows.idx.data(), n, compact, threads);
        note(w, rows.idx.data(), n);
        std::fill(y_full, y_full + w.rows, 0.0f);
        for (int64_t k = 0; k < n; ++k) y_full[rows.idx[static_cast<size_t>(k)]] = compact[k];
        return false;
    }
    // Both inputs and rows pruned (no paper method does this): compute with the input mask, keep the rows.
    const bool whole = project_in(w, wt, in, x, compact, threads, note);
    std::fill(y_full, y_full + w.rows, 0.0f);
    for (int32_t r : rows.idx) y_full[r] = compact[r];
    return whole;
}

}  // namespace

void context::mlp_sparse(int32_t l, const token_info& ti) {
    const model_hparams& hp = m_model->hp;
    const layer_layouts& ll = m_layouts[static_cast<size_t>(l)];
    const int32_t hidden = hp.hidden_dim;
    const std::span<const float> xb(m_xb.data(), static_cast<size_t>(hp.dim));

    if (m_traits.mlp_inputs || m_traits.neurons_pre) {
        m_method->select_mlp_inputs(ti, xb, m_masks);
        lap(stage::select);
    }
    if (m_traits.fused && !m_masks.neurons_pre.all && !m_mlp_source) {
        mlp_fused(l, ti);  // context_fused.cpp
        lap(stage::mlp_fused);
        return;
    }
    if (!m_rows_paged.empty()) m_rows_paged[static_cast<size_t>(l)] = 0;  // the rows below fault back in
    // A fixed fused set (GRIFFIN) is chosen again after this prompt: its old copy goes now, so the copy
    // and the whole MLP are never resident together for more than one layer (peak memory), and each
    // sequence's copy is filled afresh (its slot order, hence its bits, never depend on the last one).
    if (m_traits.fused_fixed && m_fused) m_fused->layers[static_cast<size_t>(l)].clear();
    // Offloaded weights: the source loads what these masks need (a failure leaves this layer's output 0;
    // the caller sees the source's error after the token and discards it).
    mlp_views src;
    auto fetch = [&](mlp_weight_source::stage st) {
        const bool ok = m_mlp_source->fetch(l, st, m_masks, src);
        if (!ok) std::fill(m_proj.begin(), m_proj.begin() + hp.dim, 0.0f);
        lap(stage::fetch);
        return ok;
    };
    if (m_mlp_source && !fetch(mlp_weight_source::stage::inputs)) return;
    const int mi[proj_count] = {0, 0, 0, 0, 0, 1, 2};  // gate, up, down -> 0, 1, 2
    auto proj_w = [&](proj p) -> const tensor_view& {
        return m_mlp_source ? src.rows[mi[static_cast<int>(p)]] : dense_view(l, p);
    };
    auto layout = [&](proj p) -> const tensor_view* {
        if (m_mlp_source) {
            const tensor_view& c = src.cols[mi[static_cast<int>(p)]];
            return c.data ? &c : nullptr;
        }
        return ll.has[static_cast<int>(p)] ? &ll.t[static_cast<int>(p)].view : nullptr;
    };
    // Which projections read their whole matrix for a pruned input (offloaded bytes are the source's).
    auto read_whole = [&](proj p, bool whole) { m_read_whole[static_cast<int>(p)] = whole && !m_mlp_source; };
    std::vector<weight_read>* log = m_mlp_source ? nullptr : m_read_log;  // offloaded bytes are the source's

    const bool up_first = m_traits.up_first;
    const proj p1 = up_first ? proj::up : proj::gate;
    const proj p2 = up_first ? proj::gate : proj::up;
    // Where gate and up land: m_gate / m_up, or the two halves of m_gate_up when read as one matrix.
    float* gate_y = m_gate.data();
    float* up_y = m_up.data();
    const index_mask& in1 = up_first ? m_masks.up_in : m_masks.gate_in;
    const index_mask& in2 = up_first ? m_masks.gate_in : m_masks.up_in;

    index_mask rows2;
    if (ll.has_gate_up && !m_mlp_source) {  // [gate | up] in one input-major matrix (set_method)
        const tensor_view& gu = ll.gate_up.view;
        const index_mask& gin = m_masks.gate_in;
        const index_mask& uin = m_masks.up_in;
        gate_y = m_gate_up.data();
        up_y = gate_y + hidden;
        project_in(dense_view(l, proj::gate), &gu, gin, m_xb.data(), gate_y, m_threads, {log, stage::mlp_in});
        if (gin.all != uin.all || gin.idx != uin.idx) {  // not as mlp_inputs_shared promised: exact, slower
            std::copy(gate_y, gate_y + hidden, m_gate.begin());
            gate_y = m_gate.data();
            project_in(dense_view(l, proj::up), &gu, uin, m_xb.data(), m_gate_up.data(), m_threads,
                       {log, stage::mlp_in});
        }
        read_whole(proj::gate, false);
        read_whole(proj::up, false);
        intersect_masks(m_masks.neurons_pre, m_masks.neurons_post, rows2);
    } else if (!m_traits.neurons_post && m_masks.neurons_pre.all && !ll.has_pairs) {  // both by input: one region
        const tensor_view* w[2] = {&proj_w(p1), &proj_w(p2)};
        const tensor_view* wt[2] = {layout(p1), layout(p2)};
        const index_mask* in[2] = {&in1, &in2};
        float* y[2] = {up_first ? up_y : gate_y, up_first ? gate_y : up_y};
        bool whole[2];
        project_in_multi(2, w, wt, in, m_xb.data(), y, m_threads, whole, {log, stage::mlp_in});
        read_whole(p1, whole[0]);
        read_whole(p2, whole[1]);
        intersect_masks(m_masks.neurons_pre, m_masks.neurons_post, rows2);
    } else {
        float* f1 = up_first ? up_y : gate_y;
        float* f2 = up_first ? gate_y : up_y;
        read_whole(p1, project_rows(proj_w(p1), layout(p1), in1, m_masks.neurons_pre, m_xb.data(), f1,
                                    m_compact.data(), m_threads, {log, stage::mlp_in}));
        lap(stage::mlp_in);
        if (m_traits.neurons_post) {
            m_method->select_after_first(ti, {f1, static_cast<size_t>(hidden)}, m_masks);
            lap(stage::select);
        }
        intersect_masks(m_masks.neurons_pre, m_masks.neurons_post, rows2);
        if (ll.has_pairs) {  // the rest of the chosen neurons in one pass (set_method's conditions)
            mlp_pairs(l, ti, rows2);
            return;
        }
        read_whole(p2, project_rows(proj_w(p2), layout(p2), in2, rows2, m_xb.data(), f2, m_compact.data(), m_threads,
                                    {log, stage::mlp_in}));
    }
    observe(l, probe::gate_pre, ti.pos, 1, gate_y, hidden);
    observe(l, probe::up_pre, ti.pos, 1, up_y, hidden);
    lap(stage::mlp_in);

    // GLU of the neurons computed; the others are exactly 0, as the skipped weights imply.
    if (rows2.all) {
        glu(gate_y, gate_y, up_y, hidden);
    } else {
        // One vector GLU over every neuron, the computed ones kept (the same bits per element): one
        // call per neuron went through the kernel's padded tail, 4% of a llama-1b CATS decode.
        glu(m_compact.data(), gate_y, up_y, hidden);
        std::fill(gate_y, gate_y + hidden, 0.0f);
        for (int32_t j : rows2.idx) gate_y[j] = m_compact[static_cast<size_t>(j)];
    }
    observe(l, probe::glu, ti.pos, 1, gate_y, hidden);
    lap(stage::glu);

    if (m_traits.down_in) {
        m_method->select_down(ti, {gate_y, static_cast<size_t>(hidden)}, m_masks);
        lap(stage::select);
    }
    index_mask used;
    intersect_masks(rows2, m_masks.down_in, used);
    m_masks.down_in = used;  // report what the kernel really read
    if (m_mlp_source && !fetch(mlp_weight_source::stage::down)) return;
    read_whole(proj::down, project_in(proj_w(proj::down), layout(proj::down), used, gate_y, m_proj.data(),
                                      m_threads, {log, stage::down}));
    lap(stage::down);
}

// The rest of the MLP over the layer's pairs once the first projection (m_gate, or m_up for up
// pruning) chose `rows`: the neurons' other rows and down columns are read once, side by side. An
// observer still sees full gate/up pre-activations and GLU (0 for the neurons not computed), as on the
// unfused path.
void context::mlp_pairs(int32_t l, const token_info& ti, const index_mask& rows) {
    const kernels::pair_view& pv = m_layouts[static_cast<size_t>(l)].pairs.view;
    const int64_t hidden = pv.n_neurons, dim = pv.dim;
    const int64_t scratch = kernels::fused_mlp_scratch_floats(dim, m_threads);
    if (m_pair_scratch.size() < static_cast<size_t>(scratch + hidden))
        m_pair_scratch.resize(static_cast<size_t>(scratch + hidden));
    const int32_t* idx = rows.all ? all_indices(hidden) : rows.idx.data();
    const int64_t n = rows.all ? hidden : static_cast<int64_t>(rows.idx.size());
    float* row_c = m_observer ? m_pair_scratch.data() + scratch : nullptr;
    float* glu_c = m_observer ? m_compact.data() : nullptr;
    const float* pre = pv.gate_rows ? m_up.data() : m_gate.data();
    kernels::sparse_pairs(pv, pre, m_xb.data(), idx, n, m_proj.data(), m_pair_scratch.data(), glu_c, row_c, m_threads,
                          glu_kind());
    m_masks.down_in = rows;  // what the kernel read
    read_note{m_read_log, stage::mlp_fused}(pv.data, pv.pair_bytes(), hidden, rows.all, idx, n);
    if (m_observer) {
        float* other = pv.gate_rows ? m_gate.data() : m_up.data();
        std::fill(other, other + hidden, 0.0f);
        for (int64_t k = 0; k < n; ++k) other[idx[k]] = row_c[k];
        observe(l, probe::gate_pre, ti.pos, 1, m_gate.data(), static_cast<int32_t>(hidden));
        observe(l, probe::up_pre, ti.pos, 1, m_up.data(), static_cast<int32_t>(hidden));
        std::fill(m_gate.begin(), m_gate.begin() + hidden, 0.0f);
        for (int64_t k = 0; k < n; ++k) m_gate[static_cast<size_t>(idx[k])] = glu_c[k];
        observe(l, probe::glu, ti.pos, 1, m_gate.data(), static_cast<int32_t>(hidden));
    }
    lap(stage::mlp_fused);
}

void context::layer_forward_sparse(int32_t l, int32_t pos) {
    const model_hparams& hp = m_model->hp;
    const layer_weights& lw = m_model->layers[static_cast<size_t>(l)];
    const layer_layouts& ll = m_layouts[static_cast<size_t>(l)];
    const int32_t dim = hp.dim;
    auto layout = [&](proj p) { return ll.has[static_cast<int>(p)] ? &ll.t[static_cast<int>(p)].view : nullptr; };

    m_masks.reset();
    std::fill(std::begin(m_read_whole), std::end(m_read_whole), false);
    token_info ti;
    ti.layer = l;
    ti.pos = pos;
    ti.in_prompt = m_prompt_open;
    if (m_residency) {
        ti.resident_inputs = m_residency->resident_inputs(l);
        ti.resident_neurons = m_residency->resident_neurons(l);
    }

    kernels::rmsnorm_rows(m_xb.data(), m_x.data(), lw.attn_norm, 1, dim, hp.norm_eps);
    observe(l, probe::attn_in, pos, 1, m_xb.data(), dim);
    lap(stage::other);
    if (m_traits.attn_inputs) {
        m_method->select_attn_inputs(ti, {m_xb.data(), static_cast<size_t>(dim)}, m_masks);
        lap(stage::select);
    }
    {
        const tensor_view* w[3] = {&dense_view(l, proj::q), &dense_view(l, proj::k), &dense_view(l, proj::v)};
        const tensor_view* wt[3] = {layout(proj::q), layout(proj::k), layout(proj::v)};
        const index_mask* in[3] = {&m_masks.q_in, &m_masks.k_in, &m_masks.v_in};
        float* y[3] = {m_q.data(), m_k.data(), m_v.data()};
        // q, k, v: the first three of m_read_whole
        project_in_multi(3, w, wt, in, m_xb.data(), y, m_threads, m_read_whole, {m_read_log, stage::qkv});
    }
    lap(stage::qkv);
    finish_qkv(l, 1, pos);
    attend(l, 1, pos);
    lap(stage::attention);
    if (m_traits.o_input) {
        m_method->select_o_input(ti, {m_att.data(), static_cast<size_t>(hp.q_dim())}, m_masks);
        lap(stage::select);
    }
    m_read_whole[static_cast<int>(proj::o)] =
        project_in(dense_view(l, proj::o), layout(proj::o), m_masks.o_in, m_att.data(), m_proj.data(), m_threads,
                   {m_read_log, stage::o});
    lap(stage::o);
    add_residual(lw.post_attn_norm, 1);

    kernels::rmsnorm_rows(m_xb.data(), m_x.data(), lw.ffn_norm, 1, dim, hp.norm_eps);
    observe(l, probe::mlp_in, pos, 1, m_xb.data(), dim);
    lap(stage::other);
    if (!m_traits.split_mlp) mlp_sparse(l, ti);
    layer_density d_split;
    if (m_traits.split_mlp) mlp_split(l, ti, d_split);  // context_split.cpp
    add_residual(lw.post_ffn_norm, 1);

    layer_density d = masks_density(m_masks, dim, hp.hidden_dim, m_traits.up_first, hp.q_dim());
    if (m_traits.split_mlp)
        for (proj p : {proj::gate, proj::up, proj::down}) d.d[static_cast<int>(p)] = d_split.d[static_cast<int>(p)];
    layer_density& sum = m_density_sum[static_cast<size_t>(l)];
    layer_density& read = m_read_sum[static_cast<size_t>(l)];
    for (int p = 0; p < proj_count; ++p) {
        sum.d[p] += d.d[p];
        read.d[p] += m_read_whole[p] ? 1.0f : d.d[p];  // a pruned input through the dense gemv read it all
    }
    if (m_observer) m_observer->on_masks(l, pos, m_masks, d);
    lap(stage::other);
    if (m_residency) {  // timed apart: the simulator's work, not the engine's (residency_seconds)
        const auto t0 = std::chrono::steady_clock::now();
        m_residency->on_token(l, pos, m_masks);
        const auto t1 = std::chrono::steady_clock::now();
        m_residency_seconds += std::chrono::duration<double>(t1 - t0).count();
        if (m_timing) m_lap = t1;
    }
}

}  // namespace sl

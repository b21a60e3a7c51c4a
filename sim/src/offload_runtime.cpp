// offload_runtime: per-(layer, group) DRAM caches of MLP units decided by the simulator's stream_cache,
// O_DIRECT reads of the missed runs, and one layer of staging rows the engine's kernels read.
#include "sparselens/sim/offload_runtime.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "sparselens/sim/residency.h"
#include "sparselens/sim/shape.h"

namespace sl::offload {

namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }
uint64_t align_up(uint64_t v) { return (v + pack_align - 1) / pack_align * pack_align; }
constexpr uint32_t k_no_owner = 0xffffffffu;

bool input_kind(sim::unit_kind k) {
    return k == sim::unit_kind::input_column_pair || k == sim::unit_kind::up_column || k == sim::unit_kind::gate_column;
}

const tensor_view& matrix_of(const layer_weights& lw, int i) { return i == 0 ? lw.w_gate : i == 1 ? lw.w_up : lw.w_down; }

// The simulator's weight format of a storage type (its unit bytes then equal ours): whole bits per
// weight plus the rest of each block as per-group scale bits (Q4_0: 4 bits + 16 per 32; Q4_K: 4 + 32 per 64).
sim::quant_format quant_of(dtype t) {
    const int64_t elems = dtype_block_elems(t), bits_per_block = dtype_block_bytes(t) * 8;
    const uint32_t bits = static_cast<uint32_t>(bits_per_block / elems);
    const int64_t rest = bits_per_block - elems * bits;
    if (rest == 0) return {bits, 0, 0, 0};
    for (int64_t k = 1; k <= elems; ++k)  // the fewest groups whose scale fits the simulator's 32 bits
        if (elems % k == 0 && rest % k == 0 && rest / k <= 32)
            return {bits, static_cast<uint32_t>(elems / k), static_cast<uint32_t>(rest / k), 0};
    return {bits, 0, 0, 0};
}

const char* matrix_name(int i) { return i == 0 ? "W_gate" : i == 1 ? "W_up" : "W_down"; }

}  // namespace

struct offload_runtime::stream {
    sim::stream_cache cache;
    sim::cache_config cfg;
    uint64_t unit_bytes = 0;
    uint8_t* slots = nullptr;
    std::vector<int32_t> slot_of;   // per unit: its slot or -1
    std::vector<uint32_t> owner;    // per slot: its unit or k_no_owner
    std::vector<uint32_t> free_slots;

    stream(uint32_t units, const sim::cache_config& c, uint64_t ub, uint8_t* mem)
        : cache(units, c), cfg(c), unit_bytes(ub), slots(mem) {
        clear();
    }
    void clear() {
        cache = sim::stream_cache(static_cast<uint32_t>(slot_of.empty() ? cache.n_units() : slot_of.size()), cfg);
        slot_of.assign(cache.n_units(), -1);
        owner.assign(cfg.capacity, k_no_owner);
        free_slots.resize(cfg.capacity);
        for (uint32_t i = 0; i < cfg.capacity; ++i) free_slots[i] = cfg.capacity - 1 - i;
    }
};

offload_runtime::~offload_runtime() {
    if (m_reader) drain_pending();  // the read buffer must outlive reads in flight
}

result<std::unique_ptr<offload_runtime>> offload_runtime::create(const model& m, pack_info pack,
                                                                 const method_traits& traits, const offload_params& p) {
    // Fused methods (GRIFFIN, SparseLLM) run the unfused kernels on the staged units under a weight source
    // (context::set_method builds no fused buffers then): same masks, another f32 summation order.
    if (!p.pinned.empty() && p.pinned.size() != pack.regions.size())
        return error{"offload: pinned sets for " + std::to_string(p.pinned.size()) + " streams, the pack has " +
                     std::to_string(pack.regions.size())};
    std::unique_ptr<offload_runtime> rt(new offload_runtime());
    rt->m_model = &m;
    rt->m_params = p;
    bool has_rows[3] = {}, has_cols[3] = {};
    uint64_t bounce = 0, stage_bytes[3][2] = {};
    const size_t n_layers = m.layers.size(), G = pack.groups.size();
    rt->m_views.assign(n_layers, {});
    for (size_t g = 0; g < G; ++g) {
        const pack_group& pg = pack.groups[g];
        rt->m_kinds.push_back(pg.kind);
        bool rows_seg = false;
        for (size_t l = 0; l < n_layers; ++l) {
            const pack_region& reg = pack.region(static_cast<int32_t>(l), g);
            for (const pack_segment& s : reg.segments) {
                (s.cols_major ? has_cols : has_rows)[s.matrix] = true;
                rt->m_covered[s.matrix] = true;
                rows_seg = rows_seg || !s.cols_major;
                // Staging rows sized for the layer whose type needs the most bytes; each layer's view
                // carries its own type over the same memory.
                stage_bytes[s.matrix][s.cols_major] = std::max(stage_bytes[s.matrix][s.cols_major], uint64_t{pg.units} * s.bytes());
                rt->m_views[l][s.matrix][s.cols_major] = tensor_view{s.type, pg.units, s.len, nullptr};
            }
            // Runs are disjoint and ascending, so two runs share at most one page: the pages one token reads
            // are at most the region's plus one per run beyond the first (runs <= ceil(units / 2)).
            bounce = std::max(bounce, (align_up(reg.bytes) / pack_align + (pg.units + 1) / 2) * pack_align);
        }
        const bool in = input_kind(pg.kind);
        // Units holding gate or up rows are needed before the neurons are final: only methods whose
        // neuron set is fixed by select_mlp_inputs can load them then.
        if (!in && rows_seg && (traits.neurons_post || (traits.down_in && !traits.down_observe_only)))
            return error{std::string("offload: unit kind ") + sim::unit_kind_name(pg.kind) +
                         " holds gate/up rows, but this method chooses neurons after computing them; "
                         "not supported by the offload runtime"};
        rt->m_stage_of.push_back(in || rows_seg ? 0 : 1);
        int32_t& slot = in ? rt->m_input_group : rt->m_neuron_group;
        if (slot < 0) slot = static_cast<int32_t>(g);
    }
    for (int i = 0; i < 3; ++i)
        for (int c = 0; c < 2; ++c) {
            if (!stage_bytes[i][c]) continue;
            rt->m_staging[i][c] = aligned_buffer(stage_bytes[i][c]);
            if (!rt->m_staging[i][c].data) return error{"offload: out of memory for the staging rows"};
            for (auto& per_layer : rt->m_views) per_layer[i][c].data = rt->m_staging[i][c].data;
        }
    for (int i = 0; i < 3; ++i) {
        if (!rt->m_covered[i]) has_rows[i] = true;  // resident, the model's own
        const bool need_cols = i < 2 ? traits.mlp_inputs : (traits.down_in || traits.neurons_pre || traits.neurons_post);
        const bool need_rows = i < 2 && traits.neurons_pre;
        if ((need_cols && !has_cols[i]) || (need_rows && !has_rows[i]))
            return error{std::string("offload: the method reads ") + (need_cols && !has_cols[i] ? "columns" : "rows") +
                         " of " + matrix_name(i) + ", which pack layout '" + pack.layout + "' does not store"};
    }
    rt->m_bounce = aligned_buffer(bounce);
    if (!rt->m_bounce.data) return error{"offload: out of memory for the read buffer"};
    auto rd = direct_reader::open(pack.path, p.io_backend, p.queue_depth);
    if (!rd) return rd.err();
    rt->m_reader = std::move(*rd);

    sim::mlp_layout layout;
    layout.groups = rt->m_kinds;
    auto mm = sim::memory_map_build(sim::shape_from_model(m), quant_of(pack.regions[0].segments[0].type), layout,
                                    static_cast<uint32_t>(p.n_ctx));
    if (!mm) return mm.err();
    rt->m_map = std::move(*mm);
    // The pack's real unit sizes, per (layer, group): the simulator gets the same (offload_sim_params).
    std::vector<uint64_t> unit_bytes;
    for (const pack_region& reg : pack.regions) unit_bytes.push_back(reg.unit_bytes);
    if (auto o = sim::memory_map_set_stream_unit_bytes(rt->m_map, std::move(unit_bytes)); !o) return o.err();
    rt->m_all_inputs.assign(static_cast<size_t>(m.hp.dim), 1);
    rt->m_all_neurons.assign(static_cast<size_t>(m.hp.hidden_dim), 1);
    rt->m_pack = std::move(pack);
    return rt;
}

resident_parts offload_runtime::resident_part(uint64_t extra_resident) const {
    const model& m = *m_model;
    resident_parts r;
    for (const layer_weights& lw : m.layers) {
        r.attention += static_cast<uint64_t>(lw.wq.bytes() + lw.wk.bytes() + lw.wv.bytes() + lw.wo.bytes());
        for (int i = 0; i < 3; ++i)
            if (!m_covered[i]) r.mlp_static += static_cast<uint64_t>(matrix_of(lw, i).bytes());
    }
    r.attention += extra_resident;
    r.embedding = static_cast<uint64_t>(m.tok_embd.bytes());
    r.classifier = m.tied_output ? 0 : static_cast<uint64_t>(m.output.bytes());
    r.norms = (2 * m.layers.size() + 1) * static_cast<uint64_t>(m.hp.dim) * sizeof(float);
    r.kv_cache = 2 * m.layers.size() * static_cast<uint64_t>(m_params.n_ctx) * static_cast<uint64_t>(m.hp.kv_dim()) *
                 sizeof(float);
    r.work_buffers = m_bounce.size;
    for (const auto& per_matrix : m_staging)
        for (const aligned_buffer& b : per_matrix) r.work_buffers += b.size;
    return r;
}

outcome offload_runtime::allocate(uint64_t extra_resident) {
    m_resident = resident_part(extra_resident);
    const resident_parts& r = m_resident;
    if (m_params.dram_bytes < r.total())
        return error{"--dram " + std::to_string(m_params.dram_bytes) + " bytes is below the resident part of " +
                     std::to_string(r.total()) + " bytes (attention " + std::to_string(r.attention) + ", embeddings " +
                     std::to_string(r.embedding + r.classifier) + ", norms " + std::to_string(r.norms) + ", KV cache " +
                     std::to_string(r.kv_cache) + ", static MLP " + std::to_string(r.mlp_static) + ", work buffers " +
                     std::to_string(r.work_buffers) + ")"};
    m_map.attention_bytes = r.attention;
    m_map.embedding_bytes = r.embedding;
    m_map.classifier_bytes = r.classifier;
    m_map.norm_bytes = r.norms;
    m_map.kv_cache_bytes = r.kv_cache;
    m_map.mlp_static_bytes = r.mlp_static;
    m_map.extra_resident_bytes = r.work_buffers;
    auto a = sim::allocate(m_map, m_params.dram_bytes);
    if (!a) return a.err();
    m_alloc = std::move(*a);
    m_cache_capacity = 0;
    for (uint32_t s = 0; s < m_map.n_streams(); ++s)
        m_cache_capacity += uint64_t{m_alloc.stream_capacity[s]} * m_map.unit_bytes_of(s);
    if (r.total() + m_cache_capacity > m_params.dram_bytes) return error{"offload: cache allocation exceeds the budget"};
    m_slots = aligned_buffer(m_cache_capacity);  // pages are touched only as units arrive
    if (m_cache_capacity && !m_slots.data) return error{"offload: out of memory for the MLP cache"};
    m_streams.clear();
    uint64_t at = 0;
    for (uint32_t s = 0; s < m_map.n_streams(); ++s) {
        sim::cache_config c;
        c.policy = m_params.policy;
        c.window_tokens = m_params.window_tokens;
        c.capacity = m_params.policy == sim::cache_policy::none ? 0 : m_alloc.stream_capacity[s];
        const pack_group& g = m_pack.groups[s % m_pack.groups.size()];
        const uint64_t ub = m_map.unit_bytes_of(s);
        if (!m_params.pinned.empty()) {
            c.pinned = m_params.pinned[s];
            if (c.pinned.size() > c.capacity)
                return error{"--dram " + std::to_string(m_params.dram_bytes) + " bytes leaves layer " +
                             std::to_string(s / m_pack.groups.size()) + "'s " + sim::unit_kind_name(g.kind) +
                             " cache " + std::to_string(c.capacity) + " units, fewer than its " +
                             std::to_string(c.pinned.size()) + " pinned heavy hitters: raise --dram or lower pin_fraction"};
        }
        if (auto v = sim::cache_config_validate(c, g.units, "offload cache"); !v) return v;
        m_streams.push_back(std::make_unique<stream>(g.units, c, ub, m_slots.data + at));
        at += uint64_t{c.capacity} * ub;
    }
    if (!preload_pinned()) return error{m_error};
    return {};
}

uint64_t offload_runtime::pinned_units() const {
    uint64_t n = 0;
    for (const auto& p : m_params.pinned) n += p.size();
    return n;
}

bool offload_runtime::plan_into_buffer(const pack_region& reg, const std::vector<uint32_t>& ids, uint64_t& bytes) {
    sim::plan_reads(ids, reg.unit_bytes, static_cast<uint32_t>(pack_align), m_params.merge_gap_pages, m_runs);
    m_reqs.clear();
    m_miss_src.resize(ids.size());
    bytes = 0;
    for (const sim::page_run& run : m_runs) {
        const uint64_t n = run.n_pages * pack_align, first = run.first_page * pack_align;
        if (bytes + n > m_bounce.size) {
            m_error = m_pack.path + ": read buffer too small (internal error)";
            return false;
        }
        m_reqs.push_back({reg.offset + first, n, m_bounce.data + bytes});
        for (uint32_t k = run.first_miss; k < run.end_miss; ++k)
            m_miss_src[k] = m_bounce.data + bytes + (uint64_t{ids[k]} * reg.unit_bytes - first);
        bytes += n;
    }
    return true;
}

// The pinned units are resident from the first token on (the simulator counts them as hits every time):
// read them into their slots now, one batch per stream.
bool offload_runtime::preload_pinned() {
    if (m_params.pinned.empty()) return true;
    for (size_t si = 0; si < m_streams.size(); ++si) {
        const std::vector<uint32_t>& ids = m_params.pinned[si];
        if (ids.empty()) continue;
        stream& s = *m_streams[si];
        const pack_region& reg = m_pack.regions[si];
        uint64_t bytes = 0;
        if (!plan_into_buffer(reg, ids, bytes)) return false;
        if (auto o = m_reader->read(m_reqs); !o) {
            m_error = o.message();
            return false;
        }
        m_pinned_bytes += bytes;
        for (size_t k = 0; k < ids.size(); ++k)
            if (!take_slot(s, ids[k], m_miss_src[k])) return false;
    }
    return true;
}

bool offload_runtime::take_slot(stream& s, uint32_t u, const uint8_t* src) {
    if (s.free_slots.empty()) {
        m_error = "offload: cache slots exhausted (internal error)";
        return false;
    }
    const uint32_t slot = s.free_slots.back();
    s.free_slots.pop_back();
    s.slot_of[u] = static_cast<int32_t>(slot);
    s.owner[slot] = u;
    std::memcpy(s.slots + uint64_t{slot} * s.unit_bytes, src, s.unit_bytes);
    return true;
}

// The first half of a stream's load: the cache decides hits and misses (evicting as the policy says), the
// misses' reads are planned and submitted. Nothing the current layer computes on is touched, so the next
// layer's begin can run while this one computes (prefetch).
bool offload_runtime::begin_stream(int32_t layer, size_t group, const std::vector<uint32_t>& active, uint32_t token) {
    stream& s = *m_streams[static_cast<size_t>(layer) * m_pack.groups.size() + group];
    const pack_region& reg = m_pack.region(layer, group);
    const sim::access_stats st = s.cache.access(token, active, nullptr, m_misses);
    m_cur.hits += st.hits;
    m_cur.misses += st.misses;

    // The simulator's reads (sim::plan_reads): runs of consecutive missed ids, merged across small gaps,
    // each one read of whole pages into the read buffer.
    pending_load& pl = m_pending;
    pl = {};
    pl.layer = layer;
    pl.group = group;
    pl.active = active;
    if (!plan_into_buffer(reg, m_misses, pl.bytes)) return false;
    m_cur.runs += m_runs.size();
    if (!m_params.pinned.empty()) {
        const std::vector<uint32_t>& pin = m_params.pinned[static_cast<size_t>(layer) * m_pack.groups.size() + group];
        for (uint32_t u : m_misses) m_pinned_misses += std::binary_search(pin.begin(), pin.end(), u) ? 1 : 0;
    }
    pl.req0 = m_reader->requests();
    pl.t_flight = clock_type::now();
    if (auto o = m_reader->start(m_reqs); !o) {
        m_error = o.message();
        return false;
    }
    pl.reading = !m_reqs.empty();
    if (pl.reading) m_cur.submit_seconds += since(pl.t_flight);
    pl.open = true;
    return true;
}

// The second half, once the layer before has finished with the staging rows: free the evicted units'
// slots and stage the hits while the reads may still be in flight, wait for them, stage the misses and
// cache those the policy keeps.
bool offload_runtime::end_stream() {
    pending_load& pl = m_pending;
    pl.open = false;
    stream& s = *m_streams[static_cast<size_t>(pl.layer) * m_pack.groups.size() + pl.group];
    const pack_region& reg = m_pack.region(pl.layer, pl.group);
    const auto& views = m_views[static_cast<size_t>(pl.layer)];
    const auto t_copy = clock_type::now();
    for (uint32_t slot = 0; slot < s.owner.size(); ++slot) {
        const uint32_t u = s.owner[slot];
        if (u != k_no_owner && !s.cache.resident(u)) {
            s.slot_of[u] = -1;
            s.owner[slot] = k_no_owner;
            s.free_slots.push_back(slot);
        }
    }
    auto stage = [&](uint32_t u, const uint8_t* src) {
        for (const pack_segment& seg : reg.segments) {
            const tensor_view& v = views[seg.matrix][seg.cols_major];
            std::memcpy(const_cast<uint8_t*>(v.row(u)), src, seg.bytes());
            src += seg.bytes();
        }
    };
    size_t n_staged = 0;
    for (uint32_t u : pl.active)
        if (s.slot_of[u] >= 0) {
            stage(u, s.slots + uint64_t(s.slot_of[u]) * s.unit_bytes);
            ++n_staged;
        }
    m_cur.copy_seconds += since(t_copy);

    const auto t_io = clock_type::now();
    if (auto o = m_reader->finish(); !o) {
        m_error = o.message();
        return false;
    }
    m_cur.io_seconds += since(t_io);
    if (pl.reading) m_cur.flight_seconds += since(pl.t_flight);
    m_cur.bytes_read += pl.bytes;
    m_cur.requests += m_reader->requests() - pl.req0;

    const auto t_fill = clock_type::now();
    for (size_t k = 0; k < m_misses.size(); ++k) {  // misses: staged, and cached where the policy keeps them
        const uint32_t u = m_misses[k];
        stage(u, m_miss_src[k]);
        ++n_staged;
        if (s.cache.resident(u) && !take_slot(s, u, m_miss_src[k])) return false;
    }
    if (n_staged != pl.active.size()) {
        m_error = "offload: layer " + std::to_string(pl.layer) + ": " + std::to_string(pl.active.size() - n_staged) +
                  " active units neither cached nor read (internal error)";
        return false;
    }
    m_cur.copy_seconds += since(t_fill);
    return true;
}

// A read started for the next layer that will not be used (the run ends or restarts): wait for it so the
// read buffer is free; the cache decisions it made are dropped with the caches.
void offload_runtime::drain_pending() {
    if (!m_pending.open) return;
    m_pending.open = false;
    (void)m_reader->finish();
}

void offload_runtime::build_views(int32_t layer, mlp_views& out) const {
    const layer_weights& lw = m_model->layers[static_cast<size_t>(layer)];
    for (int i = 0; i < 3; ++i) {
        out.rows[i] = m_covered[i] ? m_views[static_cast<size_t>(layer)][i][0] : matrix_of(lw, i);
        out.cols[i] = m_views[static_cast<size_t>(layer)][i][1];
    }
}

bool offload_runtime::fetch(int32_t layer, stage st, const layer_masks& masks, mlp_views& out) {
    if (!m_error.empty()) return false;
    const uint8_t want = st == stage::inputs ? 0 : 1;
    for (size_t g = 0; g < m_kinds.size(); ++g) {
        if (m_stage_of[g] != want) continue;
        sim::masks_to_units(m_kinds[g], masks, m_pack.groups[g].units, m_active);
        if (m_pending.open && m_pending.layer == layer && m_pending.group == g) {
            // Prefetched while the layer before computed: the plan must be what the masks now ask for.
            if (m_pending.active != m_active) {
                drain_pending();
                m_error = "offload: layer " + std::to_string(layer) + ": the prefetched units differ from the ones "
                          "the method chose (internal error)";
                return false;
            }
        } else if (!begin_stream(layer, g, m_active, m_token)) {
            return false;
        }
        if (!end_stream()) return false;
    }
    build_views(layer, out);
    if (st == stage::inputs) prefetch_next(layer, masks);
    return true;
}

// A method that knows the next layer's neurons (GRIFFIN after the prompt) gets that layer's reads started
// now, so they overlap this layer's compute. Only for packs whose one group loads at the inputs stage
// (neuron bundles), inside a token (the next token's layer 0 may never run), and only when this layer's
// masks are the method's plan (a prompt token runs densely).
void offload_runtime::prefetch_next(int32_t layer, const layer_masks& masks) {
    if (!m_params.planner || m_kinds.size() != 1 || m_stage_of[0] != 0) return;
    if (layer + 1 >= static_cast<int32_t>(m_model->layers.size())) return;
    const index_mask* now = m_params.planner->planned_neurons(layer);
    const index_mask* next = m_params.planner->planned_neurons(layer + 1);
    if (!now || !next || masks.neurons_pre.all != now->all || masks.neurons_pre.idx != now->idx) return;
    layer_masks planned;
    planned.neurons_pre = *next;
    sim::masks_to_units(m_kinds[0], planned, m_pack.groups[0].units, m_active);
    if (begin_stream(layer + 1, 0, m_active, m_token)) ++m_prefetches;
}

const uint8_t* offload_runtime::resident_inputs(int32_t layer) const {
    if (m_input_group < 0) return m_all_inputs.data();
    return m_streams[static_cast<size_t>(layer) * m_kinds.size() + static_cast<size_t>(m_input_group)]->cache.resident_flags();
}

const uint8_t* offload_runtime::resident_neurons(int32_t layer) const {
    if (m_neuron_group < 0) return m_all_neurons.data();
    return m_streams[static_cast<size_t>(layer) * m_kinds.size() + static_cast<size_t>(m_neuron_group)]->cache.resident_flags();
}

void offload_runtime::on_token(int32_t layer, int32_t pos, const layer_masks& masks) {
    if (m_forward) m_forward->on_token(layer, pos, masks);
    if (layer + 1 != static_cast<int32_t>(m_model->layers.size())) return;
    // The budget is checked every token: what the caches hold never exceeds their share of it.
    uint64_t held = 0;
    for (const auto& s : m_streams) held += uint64_t{s->cache.n_resident()} * s->unit_bytes;
    m_cur.cache_bytes = held;
    m_peak_cache = std::max(m_peak_cache, held);
    if ((held > m_cache_capacity || m_resident.total() + held > m_params.dram_bytes) && m_error.empty())
        m_error = "offload: the MLP cache holds " + std::to_string(held) + " bytes, over the budget";
    m_tokens.push_back(m_cur);
    m_cur = {};
    ++m_token;
}

void offload_runtime::reset() {
    drain_pending();
    for (auto& s : m_streams) s->clear();
    if (!preload_pinned() && m_error.empty()) m_error = "offload: reloading the pinned units failed";
    if (m_forward) m_forward->reset();
}

sim::sim_params offload_sim_params(const offload_runtime& rt, sim::sim_params base) {
    base.quant = rt.map().quant;
    base.context_tokens = rt.map().context_tokens;
    base.pinned = rt.pinned();
    base.layer_weights.clear();
    base.stream_unit_bytes = rt.map().stream_unit_bytes;
    base.device.dram_bytes = rt.budget_bytes();
    auto mm = sim::memory_map_build(rt.map().shape, base.quant, rt.map().layout, base.context_tokens, 0);
    const uint64_t modeled = mm ? mm->resident_bytes() : 0, real = rt.resident().total();
    if (real >= modeled)
        base.extra_resident_bytes = real - modeled;
    else
        base.device.dram_bytes -= modeled - real;
    return base;
}

const char* offload_runtime::io_backend() const { return m_reader ? m_reader->backend() : "none"; }

}  // namespace sl::offload

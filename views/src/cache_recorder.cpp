// The simulator wrapper of a GUI run: per-token cache frames and totals across window resets.
#include "cache_recorder.h"

#include <algorithm>

#include "sparselens/sim/shape.h"
#include "sparselens/sim/tuner.h"

namespace sl::views::detail {

result<std::string> cache_recorder::layout_of(const std::string& method, const sparsity_method* built,
                                              int32_t n_layers) {
    // FFSplit: its exact and compressed parts; DIP loads input-column pairs and down columns; the other
    // methods whole neuron bundles (as the CLI).
    if (built && built->split_layer(0)) return sim::method_layout_of(method, *built, n_layers);
    return std::string(method == "dip" || method == "dip-ca" ? "dip" : "bundle");
}

result<std::unique_ptr<cache_recorder>> cache_recorder::create(const model& m, const std::string& method,
                                                               const sim::sim_params& p, bool frames,
                                                               const sparsity_method* built) {
    const sim::model_shape shape = sim::shape_from_model(m);
    auto layout_text = layout_of(method, built, shape.n_layers);
    if (!layout_text) return layout_text.err();
    auto layout = sim::layout_parse(*layout_text);
    if (!layout) return layout.err();
    auto inner = sim::sim_residency::create(shape, layout.value(), p);
    if (!inner) return inner.err();
    std::unique_ptr<cache_recorder> r(new cache_recorder());
    r->m_inner = std::move(inner).value();
    r->m_map = r->m_inner->sim().map();
    r->m_layout_text = *layout_text;
    r->m_page = p.device.flash_page_bytes;
    r->m_n_layers = shape.n_layers;
    r->m_frames = frames;
    const uint32_t S = r->m_map.n_streams();
    r->m_active.resize(S);
    r->m_prev.resize(S);
    cache_snapshot_series& s = r->m_series;
    s.n_layers = shape.n_layers;
    s.n_groups = static_cast<int32_t>(r->m_map.groups.size());
    for (const sim::unit_group_info& g : r->m_map.groups) s.group_names.emplace_back(sim::unit_kind_name(g.kind));
    s.capacity = r->m_inner->sim().alloc().stream_capacity;
    return r;
}

void cache_recorder::on_token(int32_t layer, int32_t pos, const layer_masks& masks) {
    const uint32_t G = static_cast<uint32_t>(m_map.groups.size());
    const bool last = layer == m_n_layers - 1;
    if (m_frames && layer >= 0 && layer < m_n_layers) {
        for (uint32_t g = 0; g < G; ++g) {
            const uint32_t st = static_cast<uint32_t>(layer) * G + g;
            sim::masks_to_units(m_map.groups[g].kind, masks, m_map.groups[g].units_per_layer, m_active[st]);
        }
        if (last) {  // the simulator steps inside this call: keep the state it starts from
            for (uint32_t st = 0; st < m_map.n_streams(); ++st) {
                const uint8_t* f = m_inner->sim().resident_flags(st / G, st % G);
                m_prev[st].assign(f, f + m_map.stream_group(st).units_per_layer);
            }
        }
    }
    m_inner->on_token(layer, pos, masks);
    if (m_frames && last) record_frame(pos);
}

void cache_recorder::record_frame(int32_t pos) {
    const uint32_t S = m_map.n_streams();
    uint64_t frame_bytes = 0;
    for (uint32_t st = 0; st < S; ++st) frame_bytes += m_map.stream_group(st).units_per_layer;
    if (m_frame_bytes + frame_bytes > cache_frames_budget_bytes) {
        m_truncated = true;
        return;
    }
    m_frame_bytes += frame_bytes;
    const uint32_t G = static_cast<uint32_t>(m_map.groups.size());
    cache_frame f;
    f.token = pos;  // flash_bytes: from the simulator's own per-token report, in series()
    f.streams.resize(S);
    uint64_t hits = 0, misses = 0;
    for (uint32_t st = 0; st < S; ++st) {
        const uint32_t n = m_map.stream_group(st).units_per_layer;
        const uint8_t* now = m_inner->sim().resident_flags(st / G, st % G);
        const std::vector<uint8_t>& before = m_prev[st];
        std::vector<uint8_t>& out = f.streams[st];
        out.assign(n, static_cast<uint8_t>(slot_state::empty));
        for (uint32_t u = 0; u < n; ++u) {
            if (now[u]) out[u] = static_cast<uint8_t>(slot_state::resident);
            else if (u < before.size() && before[u]) out[u] = static_cast<uint8_t>(slot_state::evicted);
        }
        for (uint32_t u : m_active[st]) {
            if (u >= n) continue;
            const bool hit = u < before.size() && before[u];
            out[u] = static_cast<uint8_t>(hit ? slot_state::hit : slot_state::loaded);
            ++(hit ? hits : misses);
        }
    }
    f.hit_rate = hits + misses ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 1.0;
    m_series.frames.push_back(std::move(f));
}

void cache_recorder::harvest() {
    const sim::run_report r = m_inner->sim().report();
    m_done_tokens += r.n_tokens;
    m_done_latency += r.mean_latency_s * r.n_tokens;
    for (const sim::stream_report& s : r.streams) {
        m_done_hits += s.hits;
        m_done_misses += s.misses;
    }
}

void cache_recorder::reset() {
    harvest();
    m_inner->reset();
}

double cache_recorder::tokens_per_s() const {
    const sim::run_report r = m_inner->sim().report();
    const double n = static_cast<double>(m_done_tokens + r.n_tokens);
    const double t = m_done_latency + r.mean_latency_s * r.n_tokens;
    return t > 0 ? n / t : 0.0;
}

double cache_recorder::hit_rate() const {
    const sim::run_report r = m_inner->sim().report();
    uint64_t hits = m_done_hits, misses = m_done_misses;
    for (const sim::stream_report& s : r.streams) {
        hits += s.hits;
        misses += s.misses;
    }
    return hits + misses ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 1.0;
}

std::shared_ptr<cache_snapshot_series> cache_recorder::series(generation_id gen) const {
    auto s = std::make_shared<cache_snapshot_series>(m_series);
    s->generation = gen;
    s->truncated = m_truncated;
    // Frames are recorded in simulated-token order from the first token, without resets in between.
    const sim::run_report r = m_inner->sim().report();
    for (size_t i = 0; i < s->frames.size() && i < r.tokens.size(); ++i) s->frames[i].flash_bytes = r.tokens[i].flash_bytes;
    return s;
}

}  // namespace sl::views::detail

// Recording of one run's activations, masks, densities and GLU statistics (engine thread only).
#include "activation_recorder.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace sl::views::detail {

namespace {

// Marks the indices of `m` (all: everything) in a row of n flags.
void mark(const index_mask& m, uint8_t* row, int32_t n) {
    if (m.all) {
        std::memset(row, 1, static_cast<size_t>(n));
        return;
    }
    for (int32_t i : m.idx)
        if (i >= 0 && i < n) row[i] = 1;
}

}  // namespace

activation_recorder::activation_recorder(const model_hparams& hp, int32_t max_tokens, int32_t layer, probe where,
                                         uint64_t budget_bytes)
    : m_hp(hp), m_layer(std::clamp(layer, 0, std::max(0, hp.n_layers - 1))), m_where(where) {
    max_tokens = std::max(0, max_tokens);
    // Floats of every probe of one layer for one token, plus its four mask rows.
    const uint64_t per_layer_token = uint64_t{4} * (3 * uint64_t(hp.dim) + 3 * uint64_t(hp.hidden_dim)) +
                                     3 * uint64_t(hp.dim) + uint64_t(hp.hidden_dim);
    const uint64_t all_bytes = per_layer_token * uint64_t(hp.n_layers) * uint64_t(max_tokens);
    m_all = all_bytes <= budget_bytes;
    m_max_tokens = max_tokens;
    if (!m_all) {
        const uint64_t row = uint64_t{4} * uint64_t(width_of(where)) + uint64_t(std::max(hp.dim, hp.hidden_dim));
        m_max_tokens = static_cast<int32_t>(std::min<uint64_t>(uint64_t(max_tokens), budget_bytes / std::max<uint64_t>(1, row)));
    }
    m_values.resize(static_cast<size_t>(hp.n_layers) * probe_count);
    m_kept.resize(static_cast<size_t>(hp.n_layers) * 4);
    m_glu.resize(static_cast<size_t>(hp.n_layers));
    for (glu_stats& g : m_glu) {
        g.sumsq.assign(static_cast<size_t>(hp.hidden_dim), 0.0);
        g.griffin_prompt.assign(static_cast<size_t>(hp.hidden_dim), 0.0);
        g.griffin_gen.assign(static_cast<size_t>(hp.hidden_dim), 0.0);
    }
    m_mlp_density_sum.assign(static_cast<size_t>(max_tokens), 0.0f);
    m_attn_density_sum.assign(static_cast<size_t>(max_tokens), 0.0f);
    m_density_layers.assign(static_cast<size_t>(max_tokens), 0);
}

int32_t activation_recorder::width_of(probe where) const {
    switch (where) {
        case probe::attn_out: return m_hp.q_dim();  // concatenated heads: wider than dim on Gemma, Qwen3
        case probe::attn_in:
        case probe::mlp_in: return m_hp.dim;
        default: return m_hp.hidden_dim;
    }
}

int activation_recorder::mask_kind(probe where) {
    switch (where) {
        case probe::attn_in: return 0;
        case probe::attn_out: return 1;
        case probe::mlp_in: return 2;
        default: return 3;
    }
}

bool activation_recorder::has(int32_t layer, probe where) const {
    if (layer < 0 || layer >= m_hp.n_layers) return false;
    return m_all || (layer == m_layer && where == m_where);
}

void activation_recorder::on_activation(int32_t layer, probe where, int32_t pos0, int32_t n_tokens, const float* data,
                                        int32_t width) {
    if (layer < 0 || layer >= m_hp.n_layers || n_tokens <= 0 || pos0 < 0) return;
    m_tokens = std::max(m_tokens, pos0 + n_tokens);
    if (where == probe::glu && width == m_hp.hidden_dim) {
        glu_stats& g = m_glu[static_cast<size_t>(layer)];
        for (int32_t t = 0; t < n_tokens; ++t) {
            const float* row = data + static_cast<size_t>(t) * width;
            double norm2 = 0.0;
            for (int32_t j = 0; j < width; ++j) norm2 += double(row[j]) * row[j];
            std::vector<double>& side = pos0 + t < m_n_prompt ? g.griffin_prompt : g.griffin_gen;
            const double inv = norm2 > 0 ? 1.0 / norm2 : 0.0;
            for (int32_t j = 0; j < width; ++j) {
                const double v2 = double(row[j]) * row[j];
                g.sumsq[static_cast<size_t>(j)] += v2;
                side[static_cast<size_t>(j)] += v2 * inv;
            }
            ++g.n;
        }
    }
    if (!has(layer, where) || width != width_of(where)) return;
    const int32_t end = std::min(pos0 + n_tokens, m_max_tokens);
    if (end <= pos0) return;
    std::vector<float>& v = m_values[static_cast<size_t>(slot(layer, where))];
    const size_t need = static_cast<size_t>(end) * static_cast<size_t>(width);
    if (v.size() < need) v.resize(need, 0.0f);
    std::memcpy(v.data() + static_cast<size_t>(pos0) * width, data, sizeof(float) * static_cast<size_t>(end - pos0) * width);
}

void activation_recorder::on_masks(int32_t layer, int32_t pos, const layer_masks& masks, const layer_density& density) {
    if (layer < 0 || layer >= m_hp.n_layers || pos < 0) return;
    m_tokens = std::max(m_tokens, pos + 1);
    if (pos < static_cast<int32_t>(m_density_layers.size())) {
        m_mlp_density_sum[static_cast<size_t>(pos)] += density.mlp();
        m_attn_density_sum[static_cast<size_t>(pos)] += density.attention(m_hp.q_dim(), m_hp.kv_dim());
        ++m_density_layers[static_cast<size_t>(pos)];
    }
    if (pos >= m_max_tokens || (!m_all && layer != m_layer)) return;
    for (int kind = 0; kind < 4; ++kind) {
        if (!m_all && kind != mask_kind(m_where)) continue;
        const int32_t w = kind == 3 ? m_hp.hidden_dim : kind == 1 ? m_hp.q_dim() : m_hp.dim;
        std::vector<uint8_t>& k = m_kept[static_cast<size_t>(layer) * 4 + kind];
        const size_t need = static_cast<size_t>(pos + 1) * static_cast<size_t>(w);
        if (k.size() < need) k.resize(need, 1);  // positions that reported no masks ran dense
        uint8_t* row = k.data() + static_cast<size_t>(pos) * w;
        std::memset(row, 0, static_cast<size_t>(w));
        switch (kind) {
            case 0:
                mark(masks.q_in, row, w);
                mark(masks.k_in, row, w);
                mark(masks.v_in, row, w);
                break;
            case 1: mark(masks.o_in, row, w); break;
            case 2:
                mark(masks.gate_in, row, w);
                mark(masks.up_in, row, w);
                break;
            default: {
                // A neuron contributes only if it is in all three (the engine's rule).
                std::vector<uint8_t> a(static_cast<size_t>(w), 0), b(static_cast<size_t>(w), 0);
                mark(masks.neurons_pre, row, w);
                mark(masks.neurons_post, a.data(), w);
                mark(masks.down_in, b.data(), w);
                for (int32_t j = 0; j < w; ++j) row[j] = row[j] & a[static_cast<size_t>(j)] & b[static_cast<size_t>(j)];
            }
        }
    }
}

std::shared_ptr<activation_snapshot> activation_recorder::snapshot(int32_t layer, probe where, int32_t n_tokens,
                                                                   generation_id gen) const {
    if (!has(layer, where)) return nullptr;
    auto s = std::make_shared<activation_snapshot>();
    s->generation = gen;
    s->layer = layer;
    s->where = where;
    s->width = width_of(where);
    s->n_tokens = std::clamp(std::min(n_tokens, m_tokens), 0, m_max_tokens);
    s->n_prompt = std::min(m_n_prompt, s->n_tokens);
    const size_t n = static_cast<size_t>(s->n_tokens) * static_cast<size_t>(s->width);
    const std::vector<float>& v = m_values[static_cast<size_t>(slot(layer, where))];
    s->values.assign(n, 0.0f);
    std::copy_n(v.begin(), std::min(n, v.size()), s->values.begin());
    const std::vector<uint8_t>& k = m_kept[static_cast<size_t>(layer) * 4 + mask_kind(where)];
    if (!k.empty()) {
        s->kept.assign(n, 1);
        std::copy_n(k.begin(), std::min(n, k.size()), s->kept.begin());
    }
    return s;
}

float activation_recorder::mlp_density(int32_t pos) const {
    if (pos < 0 || pos >= static_cast<int32_t>(m_density_layers.size()) || m_density_layers[static_cast<size_t>(pos)] == 0)
        return 1.0f;
    return m_mlp_density_sum[static_cast<size_t>(pos)] / static_cast<float>(m_density_layers[static_cast<size_t>(pos)]);
}

float activation_recorder::attn_density(int32_t pos) const {
    if (pos < 0 || pos >= static_cast<int32_t>(m_density_layers.size()) || m_density_layers[static_cast<size_t>(pos)] == 0)
        return 1.0f;
    return m_attn_density_sum[static_cast<size_t>(pos)] / static_cast<float>(m_density_layers[static_cast<size_t>(pos)]);
}

}  // namespace sl::views::detail

// The dense forward pass: RMSNorm, RoPE, GQA attention over a KV cache, gated MLP (context_blocks.cpp has
// the pieces that differ between architectures).
#include "sparselens/core/context.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstring>
#include <string>

#include "sparselens/kernels/attention.h"
#include "sparselens/kernels/kernels.h"

namespace sl {

context_params context_default_params() { return {}; }

bool regroups_rows(context_params::regroup r, dtype t) {
    switch (r) {
        case context_params::regroup::off: return false;
        case context_params::regroup::faster: return kernels::rows_x8_faster(t);
        case context_params::regroup::all: return kernels::rows_x8_native(t);
    }
    return false;
}

namespace {

// y[n, w.rows] = x[n, w.cols] W^T; GEMV for a single token so decode takes the bandwidth-bound path.
void project(const tensor_view& w, const float* x, int32_t n, float* y, int threads) {
    if (n == 1)
        kernels::gemv(w, x, y, threads);
    else
        kernels::gemm(w, x, n, y, threads);
}

// Projections of one x into several outputs (q/k/v, gate/up): in decode one parallel region for all
// (thread wake-ups are a visible share of a fast decode step), bit-identical to separate gemv calls.
template <size_t N>
void project_same_x(const std::array<const tensor_view*, N>& ws, const std::array<float*, N>& ys, const float* x,
                    int32_t n, int threads) {
    if (n != 1) {
        for (size_t i = 0; i < N; ++i) kernels::gemm(*ws[i], x, n, ys[i], threads);
        return;
    }
    std::array<tensor_view, N> views;
    for (size_t i = 0; i < N; ++i) views[i] = *ws[i];
    kernels::gemv_multi(views.data(), ys.data(), static_cast<int>(N), x, threads);
}

}  // namespace

result<context> context::create(const model& m, const context_params& params) {
    const model_hparams& hp = m.hp;
    const int32_t n_ctx = params.n_ctx > 0 ? std::min(params.n_ctx, hp.seq_len) : hp.seq_len;
    if (n_ctx <= 0) return error{m.path + ": model has no context length"};
    if (hp.rope_dim <= 0 || hp.rope_dim > hp.head_dim() || hp.rope_dim % 2 != 0)
        return error{m.path + ": unsupported rope dimension " + std::to_string(hp.rope_dim)};
    const uint64_t kv_floats = static_cast<uint64_t>(hp.n_layers) * n_ctx * hp.kv_dim();
    if (kv_floats > (uint64_t{1} << 36))
        return error{m.path + ": KV cache for context " + std::to_string(n_ctx) + " would need " +
                     std::to_string(kv_floats * 8 >> 30) + " GiB; pass a smaller context"};

    context c;
    c.m_model = &m;
    c.m_n_ctx = n_ctx;
    c.m_threads = params.n_threads > 0 ? params.n_threads : kernels::default_threads();
    c.m_batch = std::max(1, params.n_batch);
    c.m_keep_replaced = params.keep_replaced;
    c.m_regroup_rows = params.regroup_rows;
    c.m_k_cache.assign(kv_floats, 0.0f);
    c.m_v_cache.assign(kv_floats, 0.0f);

    c.build_rope_tables();

    const size_t b = static_cast<size_t>(c.m_batch);
    c.m_x.resize(b * hp.dim);
    c.m_xb.resize(b * hp.dim);
    c.m_q.resize(b * hp.q_dim());
    c.m_att.resize(b * hp.q_dim());
    c.m_proj.resize(b * hp.dim);
    c.m_k.resize(b * hp.kv_dim());
    c.m_v.resize(b * hp.kv_dim());
    c.m_gate.resize(b * hp.hidden_dim);
    c.m_up.resize(b * hp.hidden_dim);
    {
        const kernels::attention_shape shape{hp.n_heads, hp.n_kv_heads, hp.head_dim()};
        c.m_scores.resize(static_cast<size_t>(kernels::attention_scratch_floats(shape, c.m_threads, n_ctx)));
    }
    c.m_logits.resize(static_cast<size_t>(hp.vocab_size));
    c.m_compact.resize(static_cast<size_t>(std::max({hp.hidden_dim, hp.dim, hp.q_dim()})));
    c.m_density_sum.assign(static_cast<size_t>(hp.n_layers), layer_density{});
    for (layer_density& d : c.m_density_sum) std::fill(std::begin(d.d), std::end(d.d), 0.0f);
    c.m_read_sum = c.m_density_sum;
    return c;
}

uint64_t context::decode_weight_bytes() const {
    const model& m = *m_model;
    uint64_t bytes = static_cast<uint64_t>(m.tok_embd.row_bytes()) + static_cast<uint64_t>(m.output.bytes());
    for (const layer_weights& lw : m.layers) {
        for (const tensor_view* t : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down})
            bytes += static_cast<uint64_t>(t->bytes());
    }
    bytes += static_cast<uint64_t>(m.hp.dim) * 4 * (2 * m.layers.size() + 1);
    return bytes;
}

const char* stage_name(stage s) {
    static constexpr const char* names[stage_count] = {"qkv",    "attention", "o",     "mlp_in", "glu",  "down",
                                                       "mlp_fused", "select", "fetch", "logits", "other"};
    const auto i = static_cast<int>(s);
    return i >= 0 && i < stage_count ? names[i] : "?";
}

void context::set_stage_timing(bool on) {
    m_timing = on;
    m_stages = {};
}

void context::lap_timed(stage s) {
    const auto now = std::chrono::steady_clock::now();
    m_stages.seconds[static_cast<int>(s)] += std::chrono::duration<double>(now - m_lap).count();
    m_lap = now;
}

void context::layer_forward(int32_t l, int32_t n, int32_t pos0) {
    const model_hparams& hp = m_model->hp;
    const layer_weights& lw = m_model->layers[static_cast<size_t>(l)];
    const int32_t dim = hp.dim;
    const int32_t hidden = hp.hidden_dim;

    // Attention block.
    kernels::rmsnorm_rows(m_xb.data(), m_x.data(), lw.attn_norm, n, dim, hp.norm_eps);
    observe(l, probe::attn_in, pos0, n, m_xb.data(), dim);
    lap(stage::other);
    project_same_x<3>({&dense_view(l, proj::q), &dense_view(l, proj::k), &dense_view(l, proj::v)},
                      {m_q.data(), m_k.data(), m_v.data()}, m_xb.data(), n, m_threads);
    lap(stage::qkv);
    finish_qkv(l, n, pos0);
    attend(l, n, pos0);
    lap(stage::attention);
    project(dense_view(l, proj::o), m_att.data(), n, m_proj.data(), m_threads);
    lap(stage::o);
    add_residual(lw.post_attn_norm, n);

    // Gated MLP block.
    kernels::rmsnorm_rows(m_xb.data(), m_x.data(), lw.ffn_norm, n, dim, hp.norm_eps);
    observe(l, probe::mlp_in, pos0, n, m_xb.data(), dim);
    lap(stage::other);
    project_same_x<2>({&dense_view(l, proj::gate), &dense_view(l, proj::up)}, {m_gate.data(), m_up.data()},
                      m_xb.data(), n, m_threads);
    observe(l, probe::gate_pre, pos0, n, m_gate.data(), hidden);
    observe(l, probe::up_pre, pos0, n, m_up.data(), hidden);
    lap(stage::mlp_in);
    glu(m_gate.data(), m_gate.data(), m_up.data(), static_cast<int64_t>(n) * hidden);
    observe(l, probe::glu, pos0, n, m_gate.data(), hidden);
    lap(stage::glu);
    project(dense_view(l, proj::down), m_gate.data(), n, m_proj.data(), m_threads);
    lap(stage::down);
    add_residual(lw.post_ffn_norm, n);
    lap(stage::other);
}

void context::forward_chunk(const int32_t* tokens, int32_t n, int32_t pos0, float* logits_out, bool all_logits) {
    prepare();
    const model& m = *m_model;
    const int32_t dim = m.hp.dim;
    assert(n > 0 && n <= m_batch && pos0 >= 0 && pos0 + n <= m_n_ctx);
    if (m_timing) {
        m_lap = std::chrono::steady_clock::now();
        m_stages.tokens += n;
    }
    for (int32_t t = 0; t < n; ++t) {
        const int32_t tok = tokens[t];
        assert(tok >= 0 && tok < m.hp.vocab_size);
        float* x = m_x.data() + static_cast<size_t>(t) * dim;
        kernels::dequantize_row(m.tok_embd.type, m.tok_embd.row(tok), x, dim);
        if (m.arch.embd_scale != 1.0f)
            for (int32_t i = 0; i < dim; ++i) x[i] *= m.arch.embd_scale;
    }
    if (m_method) {
        assert(n == 1);
        for (int32_t l = 0; l < m.hp.n_layers; ++l) layer_forward_sparse(l, pos0);
        ++m_density_tokens;
    } else {
        for (int32_t l = 0; l < m.hp.n_layers; ++l) layer_forward(l, n, pos0);
    }

    if (all_logits) {
        kernels::rmsnorm_rows(m_xb.data(), m_x.data(), m.output_norm, n, dim, m.hp.norm_eps);
        project(m.output, m_xb.data(), n, logits_out, m_threads);
    } else {
        const float* last = m_x.data() + static_cast<size_t>(n - 1) * dim;
        kernels::rmsnorm_rows(m_xb.data(), last, m.output_norm, 1, dim, m.hp.norm_eps);
        kernels::gemv(m.output, m_xb.data(), logits_out, m_threads);
    }
    if (const float cap = m.arch.final_softcap; cap > 0.0f) {
        const int64_t count = static_cast<int64_t>(all_logits ? n : 1) * m.hp.vocab_size;
        kernels::softcap(logits_out, logits_out, count, cap);
    }
    lap(stage::logits);
}

const float* context::decode(int32_t token, int32_t pos) {
    if (m_method) {
        if (pos == 0) m_method->begin_sequence();
        if (m_prompt_open) m_method->end_prompt(pos);
    }
    m_prompt_open = false;
    forward_chunk(&token, 1, pos, m_logits.data(), false);
    return m_logits.data();
}

const float* context::prefill(std::span<const int32_t> tokens, int32_t pos0, float* all_logits) {
    const int32_t total = static_cast<int32_t>(tokens.size());
    const size_t vocab = static_cast<size_t>(m_model->hp.vocab_size);
    if (m_method) {
        // One token at a time through the sparse path: the masks (and GRIFFIN's prompt statistics) are
        // per token, and decode must see exactly what prefill saw.
        if (pos0 == 0) m_method->begin_sequence();
        m_prompt_open = true;
        for (int32_t t = 0; t < total; ++t) {
            float* out = all_logits ? all_logits + static_cast<size_t>(t) * vocab : m_logits.data();
            forward_chunk(tokens.data() + t, 1, pos0 + t, out, false);
            if (all_logits && t == total - 1) std::memcpy(m_logits.data(), out, sizeof(float) * vocab);
        }
        return m_logits.data();
    }
    for (int32_t done = 0; done < total; done += m_batch) {
        const int32_t n = std::min(m_batch, total - done);
        if (all_logits) {
            float* rows = all_logits + static_cast<size_t>(done) * vocab;
            forward_chunk(tokens.data() + done, n, pos0 + done, rows, true);
            if (done + n == total) std::memcpy(m_logits.data(), rows + (n - 1) * vocab, sizeof(float) * vocab);
        } else {
            forward_chunk(tokens.data() + done, n, pos0 + done, m_logits.data(), false);
        }
    }
    return m_logits.data();
}

}  // namespace sl

// The per-layer pieces of the forward pass that differ between architectures, shared by the dense and the
// sparse paths: RoPE tables and layouts, q/k/v biases and norms, windowed soft-capped attention, post-norms
// and the GLU activation. Each branches on a capability flag of model::arch, never on a name.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "sparselens/core/context.h"
#include "sparselens/kernels/attention.h"
#include "sparselens/kernels/kernels.h"

namespace sl {

void context::build_rope_tables() {
    const model& m = *m_model;
    const model_hparams& hp = m.hp;
    // Per-frequency divisors: Llama-3's rope_freqs, or Phi-3's long factors once the context outgrows the
    // original one (the rule llama.cpp applies per context).
    const float* factors = m.rope_factors_long && m_n_ctx > m.rope_orig_ctx ? m.rope_factors_long : m.rope_factors;
    const float mscale = m.arch.rope_attn_factor;
    const int32_t half = hp.rope_dim / 2;
    m_rope_cos.resize(static_cast<size_t>(m_n_ctx) * half);
    m_rope_sin.resize(static_cast<size_t>(m_n_ctx) * half);
    for (int32_t pos = 0; pos < m_n_ctx; ++pos) {
        for (int32_t j = 0; j < half; ++j) {
            // Same float arithmetic as llama2.c run.c when there are no factors, so positions rotate
            // bit-identically.
            float freq = 1.0f / std::pow(hp.rope_theta, static_cast<float>(2 * j) / static_cast<float>(hp.rope_dim));
            if (factors) freq /= factors[j];
            const float val = static_cast<float>(pos) * freq;
            const size_t at = static_cast<size_t>(pos) * half + j;
            m_rope_cos[at] = std::cos(val);
            m_rope_sin[at] = std::sin(val);
            if (mscale != 1.0f) {
                m_rope_cos[at] *= mscale;
                m_rope_sin[at] *= mscale;
            }
        }
    }
}

void context::apply_rope(float* v, int32_t n_heads_v, int32_t n, int32_t pos0) const {
    const model_hparams& hp = m_model->hp;
    const int32_t hd = hp.head_dim();
    const int32_t half = hp.rope_dim / 2;
    // Pairs rotated together: (2j, 2j+1) for Llama, (j, j + half) for NeoX-style models.
    const bool neox = m_model->arch.rope == rope_layout::neox;
    const int32_t step = neox ? 1 : 2;
    const int32_t other = neox ? half : 1;
    for (int32_t t = 0; t < n; ++t) {
        const float* cs = m_rope_cos.data() + static_cast<size_t>(pos0 + t) * half;
        const float* sn = m_rope_sin.data() + static_cast<size_t>(pos0 + t) * half;
        for (int32_t h = 0; h < n_heads_v; ++h) {
            float* head = v + (static_cast<size_t>(t) * n_heads_v + h) * hd;
            for (int32_t j = 0; j < half; ++j) {
                float* a = head + j * step;
                const float v0 = a[0];
                const float v1 = a[other];
                a[0] = v0 * cs[j] - v1 * sn[j];
                a[other] = v0 * sn[j] + v1 * cs[j];
            }
        }
    }
}

namespace {

void add_bias(float* y, const float* b, int32_t n, int32_t width) {
    for (int32_t t = 0; t < n; ++t)
        for (int32_t i = 0; i < width; ++i) y[static_cast<size_t>(t) * width + i] += b[i];
}

}  // namespace

void context::finish_qkv(int32_t l, int32_t n, int32_t pos0) {
    const model_hparams& hp = m_model->hp;
    const layer_weights& lw = m_model->layers[static_cast<size_t>(l)];
    if (lw.bq) add_bias(m_q.data(), lw.bq, n, hp.q_dim());
    if (lw.bk) add_bias(m_k.data(), lw.bk, n, hp.kv_dim());
    if (lw.bv) add_bias(m_v.data(), lw.bv, n, hp.kv_dim());
    if (lw.q_norm) kernels::rmsnorm_rows(m_q.data(), m_q.data(), lw.q_norm, int64_t{n} * hp.n_heads, hp.head_dim(), hp.norm_eps);
    if (lw.k_norm)
        kernels::rmsnorm_rows(m_k.data(), m_k.data(), lw.k_norm, int64_t{n} * hp.n_kv_heads, hp.head_dim(), hp.norm_eps);
    apply_rope(m_q.data(), hp.n_heads, n, pos0);
    apply_rope(m_k.data(), hp.n_kv_heads, n, pos0);
}

void context::attend(int32_t l, int32_t n, int32_t pos0) {
    const model_hparams& hp = m_model->hp;
    const arch_features& a = m_model->arch;
    const int32_t kv_dim = hp.kv_dim(), head_dim = hp.head_dim();
    const size_t layer_off = static_cast<size_t>(l) * m_n_ctx * kv_dim;
    float* k_cache = m_k_cache.data() + layer_off;
    float* v_cache = m_v_cache.data() + layer_off;
    // Head-major [n_kv_heads, n_ctx, head_dim] per layer: a KV head's keys (and values) are one stream for
    // the attention jobs, which each read one KV head; row-major, each job read head_dim floats of every
    // kv_dim, a strided pattern the prefetchers followed poorly from DRAM (docs/results.md, stop 44).
    const size_t head_floats = static_cast<size_t>(m_n_ctx) * head_dim;
    for (int32_t t = 0; t < n; ++t)
        for (int32_t g = 0; g < hp.n_kv_heads; ++g) {
            const size_t src = static_cast<size_t>(t) * kv_dim + static_cast<size_t>(g) * head_dim;
            const size_t dst = g * head_floats + static_cast<size_t>(pos0 + t) * head_dim;
            std::memcpy(k_cache + dst, m_k.data() + src, sizeof(float) * head_dim);
            std::memcpy(v_cache + dst, m_v.data() + src, sizeof(float) * head_dim);
        }
    kernels::attention_shape shape{hp.n_heads, hp.n_kv_heads, head_dim};
    shape.kv_pos_stride = head_dim;
    shape.kv_head_stride = static_cast<int64_t>(head_floats);
    shape.softcap = a.attn_softcap;
    shape.window = a.layer_slides(l) ? a.swa_window : 0;
    shape.scale = a.attn_scale;
    kernels::attention_causal(m_q.data(), k_cache, v_cache, pos0, n, shape, m_att.data(), m_scores.data(), m_threads);
    observe(l, probe::attn_out, pos0, n, m_att.data(), hp.q_dim());
}

void context::add_residual(const float* post_norm, int32_t n) {
    const int32_t dim = m_model->hp.dim;
    if (post_norm) kernels::rmsnorm_rows(m_proj.data(), m_proj.data(), post_norm, n, dim, m_model->hp.norm_eps);
    for (size_t i = 0; i < static_cast<size_t>(n) * dim; ++i) m_x[i] += m_proj[i];
}

kernels::glu_kind context::glu_kind() const {
    return m_model->arch.act == glu_activation::gelu_tanh ? kernels::glu_kind::gelu_tanh : kernels::glu_kind::silu;
}

void context::glu(float* y, const float* gate, const float* up, int64_t n) const {
    kernels::glu(glu_kind(), y, gate, up, n);
}

}  // namespace sl

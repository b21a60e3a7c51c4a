// Inference context: KV cache, scratch buffers and the Llama forward pass (prefill and decode).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sparselens/core/model.h"
#include "sparselens/core/observer.h"
#include "sparselens/core/result.h"

namespace sl {

struct context_params {
    int32_t n_ctx = 0;      // 0: the model's seq_len
    int32_t n_threads = 0;  // 0: OpenMP default
    int32_t n_batch = 64;   // prefill chunk (tokens per GEMM)
};

context_params context_default_params();

class context {
public:
    // Allocates the KV cache ([n_layers, n_ctx, kv_dim] for K and V) and scratch; fails on absurd sizes.
    static result<context> create(const model& m, const context_params& params = context_default_params());

    // Runs one token at position `pos` (0 <= pos < n_ctx); returns the logits [vocab] (valid until the next call).
    const float* decode(int32_t token, int32_t pos);

    // Runs tokens at positions pos0 .. pos0 + n - 1 in chunks of n_batch. Returns the last token's logits.
    // If all_logits is non-null it receives [n, vocab] logits, one row per token.
    const float* prefill(std::span<const int32_t> tokens, int32_t pos0, float* all_logits = nullptr);

    // Attach (or detach with nullptr) an observer; the context does not own it.
    void set_observer(activation_observer* obs) { m_observer = obs; }

    const model& get_model() const { return *m_model; }
    int32_t n_ctx() const { return m_n_ctx; }
    int32_t n_threads() const { return m_threads; }
    int32_t vocab_size() const { return m_model->hp.vocab_size; }
    // Bytes of weights the decode of one token reads (all matrices + one embedding row + norms).
    uint64_t decode_weight_bytes() const;

private:
    void forward_chunk(const int32_t* tokens, int32_t n, int32_t pos0, float* logits_out, bool all_logits);
    void layer_forward(int32_t l, int32_t n, int32_t pos0);
    void apply_rope(float* v, int32_t n_heads_v, int32_t n, int32_t pos0) const;
    void emit(int32_t layer, probe p, int32_t pos0, int32_t n, const float* data, int32_t width) {
        if (m_observer) m_observer->on_activation(layer, p, pos0, n, data, width);
    }

    const model* m_model = nullptr;
    activation_observer* m_observer = nullptr;
    int32_t m_n_ctx = 0;
    int32_t m_threads = 0;
    int32_t m_batch = 0;

    std::vector<float> m_k_cache, m_v_cache;  // [n_layers][n_ctx][kv_dim]
    std::vector<float> m_rope_cos, m_rope_sin;  // [n_ctx][rope_dim / 2]
    // Scratch, sized for n_batch tokens.
    std::vector<float> m_x, m_xb, m_q, m_k, m_v, m_att, m_proj, m_gate, m_up, m_scores;
    std::vector<float> m_logits;
};

}  // namespace sl

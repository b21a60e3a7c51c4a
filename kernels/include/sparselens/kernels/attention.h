// Causal multi-head attention with grouped KV heads over a KV cache (decode and prefill).
#pragma once

#include <cstdint>

namespace sl::kernels {

struct attention_shape {
    int32_t n_heads = 0;
    int32_t n_kv_heads = 0;
    int32_t head_dim = 0;
    float softcap = 0.0f;  // scores -> softcap * tanh(scores / softcap) before the softmax when > 0 (Gemma-2)
    int32_t window = 0;    // when > 0, a query at position p sees only positions (p - window, p] (sliding window)
    float scale = 0.0f;    // q . k multiplier; 0 = 1 / sqrt(head_dim) (Gemma-2-27B uses 1 / sqrt(dim / n_heads))
    // Cache layout, in floats: from one position's head_dim floats to the next position's of the same KV head
    // (0: n_kv_heads * head_dim, the row-major [positions, n_kv_heads * head_dim]), and from one KV head's
    // first position to the next head's (0: head_dim). Head-major [n_kv_heads, positions, head_dim] is
    // kv_pos_stride = head_dim, kv_head_stride = positions * head_dim: each KV head's keys are one stream.
    int64_t kv_pos_stride = 0;
    int64_t kv_head_stride = 0;
};

// For query token t in [0, n) at position pos0 + t, attends over cache positions [0, pos0 + t]:
//   out[t, h] = sum_p softmax_p(q[t, h] . k[p, g] / sqrt(head_dim)) v[p, g],  g = h / (n_heads / n_kv_heads).
// q/out are [n, n_heads * head_dim]; k_cache/v_cache hold head_dim floats per (position, KV head) as the
// shape's kv_pos_stride and kv_head_stride say (by default [positions, n_kv_heads * head_dim] row-major).
// Parallel over (token, KV head) pairs (the query heads of a KV head share its cache loads); `scores` is
// caller-owned scratch of attention_scratch_floats(shape, n_threads, max_pos) floats, max_pos >= pos0 + n.
void attention_causal(const float* q, const float* k_cache, const float* v_cache, int32_t pos0, int32_t n,
                      const attention_shape& shape, float* out, float* scores, int n_threads);

// Threads attention_causal will use for a given request.
int attention_threads(int n_threads);

// Scratch floats attention_causal needs for up to max_pos positions.
int64_t attention_scratch_floats(const attention_shape& shape, int n_threads, int32_t max_pos);

// In-place RMSNorm of n rows of width d: y = w * x / sqrt(mean(x^2) + eps).
void rmsnorm_rows(float* y, const float* x, const float* w, int64_t n, int64_t d, float eps);

// y = silu(gate) * up elementwise (SwiGLU), n elements; up == nullptr multiplies by 1 (y = silu(gate)).
// The same bits on every ISA (a vector exp, ~1 ulp).
void swiglu(float* y, const float* gate, const float* up, int64_t n);

// y = gelu_tanh(gate) * up elementwise (GeGLU with the tanh approximation, as Gemma), n elements;
// up == nullptr multiplies by 1. The same bits on every ISA (the same vector exp as swiglu).
void geglu(float* y, const float* gate, const float* up, int64_t n);

// The gated linear unit of an MLP: SwiGLU (Llama, Qwen, Phi-3, Mistral) or GeGLU (Gemma).
enum class glu_kind : uint8_t { silu, gelu_tanh };
inline void glu(glu_kind k, float* y, const float* gate, const float* up, int64_t n) {
    k == glu_kind::gelu_tanh ? geglu(y, gate, up, n) : swiglu(y, gate, up, n);
}

// y = cap * tanh(x / cap) elementwise (Gemma-2's soft-capping), n elements, y may be x. The same bits on
// every ISA (~4 ulp; the vector exp).
void softcap(float* y, const float* x, int64_t n, float cap);

}  // namespace sl::kernels

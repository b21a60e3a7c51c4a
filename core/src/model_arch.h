// Private: the architecture table -- per `general.architecture`, its GGUF tensor names, key prefix and the
// capability flags the forward pass branches on. Adding an architecture is adding a row.
#pragma once

#include <string>
#include <string_view>

#include "sparselens/core/model.h"

namespace sl {

// Where per-frequency RoPE divisors come from, if anywhere.
enum class rope_factor_source : uint8_t {
    none,
    freqs,       // rope_freqs.weight (Llama-3.x "llama3" scaling, written by the converter)
    long_short,  // rope_factors_long/short.weight (Phi-3 "longrope"), chosen by context length
};

// GGUF names of one layer's tensors, without the "blk.N." prefix.
struct layer_tensor_names {
    const char* attn_norm = "attn_norm.weight";
    const char* q = "attn_q.weight";
    const char* k = "attn_k.weight";
    const char* v = "attn_v.weight";
    const char* qkv = "attn_qkv.weight";  // fused [q; k; v] rows (arch_row::fused_qkv)
    const char* q_bias = "attn_q.bias";
    const char* k_bias = "attn_k.bias";
    const char* v_bias = "attn_v.bias";
    const char* q_norm = "attn_q_norm.weight";
    const char* k_norm = "attn_k_norm.weight";
    const char* o = "attn_output.weight";
    const char* post_attn_norm = "post_attention_norm.weight";
    const char* ffn_norm = "ffn_norm.weight";
    const char* gate = "ffn_gate.weight";
    const char* up = "ffn_up.weight";  // [gate; up] rows when arch_row::fused_gate_up
    const char* down = "ffn_down.weight";
    const char* post_ffn_norm = "post_ffw_norm.weight";
};

struct arch_row {
    const char* name;  // general.architecture, also the prefix of its hyper-parameter keys
    rope_layout rope = rope_layout::pairs;
    glu_activation act = glu_activation::silu;
    bool fused_qkv = false;
    bool fused_gate_up = false;
    bool qkv_bias = false;
    bool qk_norm = false;
    bool post_norms = false;
    bool embd_scale_sqrt_dim = false;
    float attn_softcap = 0.0f;   // defaults when <arch>.attn_logit_softcapping is absent (0 = none)
    float final_softcap = 0.0f;  // ... <arch>.final_logit_softcapping
    int32_t swa_window = 0;      // ... <arch>.attention.sliding_window (0 = no sliding window)
    int32_t swa_period = 1;      // ... <arch>.attention.sliding_window_pattern
    bool swa_from_file = false;  // whether the file's sliding_window key is honoured (llama.cpp: Gemma-2 only here)
    rope_factor_source factors = rope_factor_source::none;
    // Gemma-2-27B (46 layers) scales q . k by 1 / sqrt(dim / n_heads) instead of 1 / sqrt(head_dim), the
    // reference's query_pre_attn_scalar; llama.cpp recognises it by the layer count, and so do we.
    int32_t dim_heads_scale_layers = 0;
    layer_tensor_names names{};
};

// nullptr when the architecture is not in the table.
const arch_row* find_arch(std::string_view name);

// "llama, qwen2, ..." for error messages.
std::string supported_arch_list();

}  // namespace sl

// The architecture table: what differs between the GGUF architectures we run, as data.
#include "model_arch.h"

namespace sl {

namespace {

arch_row make_row(const char* name) {
    arch_row r;
    r.name = name;
    return r;
}

const arch_row k_rows[] = {
    [] {  // Llama 1/2/3.x, Mistral, SmolLM, TinyLlama: the baseline
        arch_row r = make_row("llama");
        r.factors = rope_factor_source::freqs;
        return r;
    }(),
    [] {  // Qwen2 / Qwen2.5: biases on q, k, v
        arch_row r = make_row("qwen2");
        r.rope = rope_layout::neox;
        r.qkv_bias = true;
        return r;
    }(),
    [] {  // Qwen3: per-head RMSNorm of q and k
        arch_row r = make_row("qwen3");
        r.rope = rope_layout::neox;
        r.qk_norm = true;
        return r;
    }(),
    [] {  // Phi-3 / Phi-3.5: fused qkv and gate||up, long/short RoPE factors
        arch_row r = make_row("phi3");
        r.rope = rope_layout::neox;
        r.fused_qkv = true;
        r.fused_gate_up = true;
        r.factors = rope_factor_source::long_short;
        // The converter writes Phi-3's sliding_window, but llama.cpp runs it with full attention (its
        // ggml-org/llama.cpp#13676); we follow the oracle.
        r.swa_from_file = false;
        return r;
    }(),
    [] {  // Gemma 2: GeGLU, scaled embeddings, sandwich norms, soft-capping, alternating sliding window
        arch_row r = make_row("gemma2");
        r.rope = rope_layout::neox;
        r.act = glu_activation::gelu_tanh;
        r.post_norms = true;
        r.embd_scale_sqrt_dim = true;
        r.attn_softcap = 50.0f;
        r.final_softcap = 30.0f;
        r.swa_window = 4096;
        r.swa_period = 2;
        return r;
    }(),
};

}  // namespace

const arch_row* find_arch(std::string_view name) {
    for (const arch_row& r : k_rows)
        if (name == r.name) return &r;
    return nullptr;
}

std::string supported_arch_list() {
    std::string out;
    for (const arch_row& r : k_rows) out += (out.empty() ? "" : ", ") + std::string(r.name);
    return out;
}

}  // namespace sl

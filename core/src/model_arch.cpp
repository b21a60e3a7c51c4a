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
        // ggml-org/llama.cpp#13676); we follow the oracle (swa_from_file stays false).
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
        r.swa_from_file = true;
        r.dim_heads_scale_layers = 46;
        return r;
    }(),
    [] {  // Gemma (1): GeGLU, scaled embeddings, tied output; no post-norms, soft-caps or sliding window
        arch_row r = make_row("gemma");
        r.rope = rope_layout::neox;
        r.act = glu_activation::gelu_tanh;
        r.embd_scale_sqrt_dim = true;
        return r;
    }(),
};

}  // namespace

const arch_row* find_arch(std::string_view name) {
    for (const arch_row& r : k_rows)
        if (name == r.name) return &r;
    return nullptr;
}

std::string arch_summary(const arch_features& a) {
    std::string s = a.name + ": " + (a.act == glu_activation::gelu_tanh ? "GeGLU (tanh)" : "SwiGLU") + ", " +
                    (a.rope == rope_layout::neox ? "NeoX RoPE" : "pair RoPE");
    auto add = [&](bool on, const std::string& what) {
        if (on) s += ", " + what;
    };
    add(a.qkv_bias, "q/k/v bias");
    add(a.qk_norm, "q/k norm");
    add(a.post_norms, "post-norms");
    add(a.embd_scale != 1.0f, "embedding scale " + std::to_string(a.embd_scale).substr(0, 5));
    add(a.attn_softcap > 0.0f, "attention soft-cap " + std::to_string(a.attn_softcap).substr(0, 4));
    add(a.final_softcap > 0.0f, "final soft-cap " + std::to_string(a.final_softcap).substr(0, 4));
    add(a.swa_window > 0, "sliding window " + std::to_string(a.swa_window) +
                              (a.swa_period > 1 ? " (" + std::to_string(a.swa_period - 1) + " of " + std::to_string(a.swa_period) + " layers)" : ""));
    return s;
}

std::string supported_arch_list() {
    std::string out;
    for (const arch_row& r : k_rows) out += (out.empty() ? "" : ", ") + std::string(r.name);
    return out;
}

}  // namespace sl

// A loaded Llama-family model (llama, qwen2/3, phi3, gemma2): hyper-parameters, architecture features,
// weight views and the storage that backs them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sparselens/core/result.h"
#include "sparselens/kernels/types.h"

namespace sl {

struct model_hparams {
    int32_t dim = 0;         // embedding width
    int32_t hidden_dim = 0;  // MLP width (number of GLU neurons)
    int32_t n_layers = 0;
    int32_t n_heads = 0;
    int32_t n_kv_heads = 0;
    int32_t vocab_size = 0;
    int32_t seq_len = 0;     // maximum context
    int32_t rope_dim = 0;    // dimensions rotated per head (== head_dim for llama)
    float rope_theta = 10000.0f;
    float norm_eps = 1e-5f;
    // Width of one attention head (GGUF attention.key_length); 0 = dim / n_heads. Gemma and Qwen3 use
    // heads wider than dim / n_heads, so q and the attention output are q_dim() wide, not dim.
    int32_t head_width = 0;

    int32_t head_dim() const { return head_width > 0 ? head_width : n_heads > 0 ? dim / n_heads : 0; }
    int32_t q_dim() const { return head_dim() * n_heads; }  // width of q and of the o projection's input
    int32_t kv_dim() const { return head_dim() * n_kv_heads; }
};

// The activation of the gated MLP: act(gate) * up.
enum class glu_activation : uint8_t { silu, gelu_tanh };

// Which dimensions RoPE rotates together: adjacent pairs (2j, 2j+1) as Llama, or the two halves of the
// rotated span (j, j + rope_dim/2) as GPT-NeoX, Qwen, Phi-3 and Gemma (llama.cpp's "NeoX" rope type).
enum class rope_layout : uint8_t { pairs, neox };

// What the forward pass branches on; filled from the architecture table (model_arch.cpp) and the file's
// metadata. The defaults are plain Llama, which is also what llama2.c files are.
struct arch_features {
    std::string name = "llama";       // general.architecture
    glu_activation act = glu_activation::silu;
    rope_layout rope = rope_layout::pairs;
    bool qkv_bias = false;            // layer_weights::bq/bk/bv present
    bool qk_norm = false;             // per-head RMSNorm of q and k before RoPE (layer_weights::q_norm/k_norm)
    bool post_norms = false;          // RMSNorm of the attention and MLP outputs before the residual add
    float embd_scale = 1.0f;          // token embeddings multiplied by this (Gemma: sqrt(dim))
    float attn_softcap = 0.0f;        // scores -> c * tanh(scores / c) when > 0
    float final_softcap = 0.0f;       // logits -> c * tanh(logits / c) when > 0
    int32_t swa_window = 0;           // sliding-window layers attend to the last swa_window positions; 0 = none
    int32_t swa_period = 1;           // layer l slides when l % period < period - 1 (llama.cpp's pattern); 1 = all
    float rope_attn_factor = 1.0f;    // cos/sin multiplied by this (rope.scaling.attn_factor)
    float attn_scale = 0.0f;          // q . k multiplier; 0 = 1 / sqrt(head_dim)

    bool layer_slides(int32_t l) const { return swa_window > 0 && (swa_period <= 1 || l % swa_period < swa_period - 1); }
};

// "gemma2: GeGLU (tanh), NeoX RoPE, post-norms, ..." for `info` and the model card.
std::string arch_summary(const arch_features& a);

struct layer_weights {
    const float* attn_norm = nullptr;  // [dim]
    tensor_view wq, wk, wv, wo;        // [q_dim, dim], [kv_dim, dim] x2, [dim, q_dim]; views into attn_qkv when fused
    const float* bq = nullptr;         // [q_dim] q bias (arch_features::qkv_bias)
    const float* bk = nullptr;         // [kv_dim]
    const float* bv = nullptr;         // [kv_dim]
    const float* q_norm = nullptr;     // [head_dim] (arch_features::qk_norm)
    const float* k_norm = nullptr;     // [head_dim]
    const float* post_attn_norm = nullptr;  // [dim] (arch_features::post_norms)
    const float* ffn_norm = nullptr;   // [dim]
    tensor_view w_gate, w_up;          // [hidden, dim]; views into the two halves of ffn_up when fused
    tensor_view w_down;                // [dim, hidden]
    const float* post_ffn_norm = nullptr;   // [dim]
};

// One tensor as stored in the file, for `info` and for validation messages.
struct tensor_record {
    std::string name;
    dtype type = dtype::f32;
    std::vector<int64_t> shape;  // ggml order: shape[0] = row length
    uint64_t bytes = 0;
};

// Vocabulary embedded in a model file (GGUF tokenizer.ggml.*); empty for llama2.c files.
struct embedded_vocab {
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;  // SentencePiece token types (1 normal, 2 unknown, 3 control, 6 byte)
    int32_t bos_id = 1;
    int32_t eos_id = 2;
    int32_t unk_id = 0;
    std::string model;  // tokenizer.ggml.model: "llama" (SentencePiece) or "gpt2" (byte-level BPE)
    std::string pre;    // tokenizer.ggml.pre: the BPE pre-tokenizer's name
    std::vector<std::string> merges;  // tokenizer.ggml.merges ("left right", rank order); BPE only
    int32_t eot_id = -1;              // tokenizer.ggml.eot_token_id
    int32_t add_bos = -1;             // tokenizer.ggml.add_bos_token: 0/1, -1 when absent
    int32_t add_eos = -1;
    int32_t add_space_prefix = -1;    // tokenizer.ggml.add_space_prefix (SentencePiece)
    std::string chat_template;        // tokenizer.chat_template (Jinja source)
    bool empty() const { return tokens.empty(); }
};

// Owns the bytes the weight views point into (a read-only mapping and/or converted buffers).
struct weight_storage;

struct model {
    std::string path;
    std::string format;  // "gguf", "llama2c-f32", "llama2c-q8_0"
    std::string name;
    model_hparams hp;
    arch_features arch;
    const float* rope_factors = nullptr;       // [rope_dim / 2] divisors of the RoPE frequencies (Llama-3, Phi-3 short)
    const float* rope_factors_long = nullptr;  // [rope_dim / 2] used instead when the context exceeds rope_orig_ctx
    int32_t rope_orig_ctx = 0;

    tensor_view tok_embd;             // [vocab, dim]
    const float* output_norm = nullptr;  // [dim]
    tensor_view output;               // [vocab, dim]; same memory as tok_embd when tied
    bool tied_output = false;
    std::vector<layer_weights> layers;

    std::vector<tensor_record> tensors;
    embedded_vocab vocab;
    uint64_t file_bytes = 0;

    std::shared_ptr<weight_storage> storage;
};

struct model_load_params {
    progress_fn progress;      // may be empty; returning false cancels the load
    bool use_mmap = true;
};

model_load_params model_default_load_params();

// Detects the format (GGUF magic, llama2.c v2 magic, else legacy llama2.c) and loads it.
// Every size, offset and count is validated against the file size before use; errors name the file.
result<model> model_load(const std::string& path, const model_load_params& params = model_default_load_params());

}  // namespace sl

// A loaded Llama-family model: hyper-parameters, weight views and the storage that backs them.
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

    int32_t head_dim() const { return n_heads > 0 ? dim / n_heads : 0; }
    int32_t kv_dim() const { return head_dim() * n_kv_heads; }
};

struct layer_weights {
    const float* attn_norm = nullptr;  // [dim]
    tensor_view wq, wk, wv, wo;        // [dim, dim], [kv_dim, dim] x2, [dim, dim]
    const float* ffn_norm = nullptr;   // [dim]
    tensor_view w_gate, w_up;          // [hidden, dim]
    tensor_view w_down;                // [dim, hidden]
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

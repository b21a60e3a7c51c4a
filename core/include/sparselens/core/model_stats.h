// Byte accounting of a loaded model by component (attention / MLP / embeddings / norms).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparselens/core/model.h"

namespace sl {

struct model_bytes {
    uint64_t attention = 0;   // wq, wk, wv, wo of every layer
    uint64_t mlp = 0;         // gate, up, down of every layer
    uint64_t embeddings = 0;  // token embedding + classifier (once when tied)
    uint64_t norms = 0;       // RMSNorm weights
    uint64_t total() const { return attention + mlp + embeddings + norms; }
};

model_bytes model_count_bytes(const model& m);

// One weight type's share of the file: the tensor-type mix a model card shows (a Q4_K_M file is mostly
// Q4_K with some Q6_K and F32 norms). Bytes are as stored, so bits per weight are the file's own.
struct type_share {
    dtype type = dtype::f32;
    int32_t tensors = 0;
    uint64_t elements = 0;
    uint64_t bytes = 0;
    double bits_per_weight() const { return elements ? 8.0 * static_cast<double>(bytes) / static_cast<double>(elements) : 0.0; }
};

// Every type present in m.tensors, largest share of bytes first.
std::vector<type_share> model_type_mix(const model& m);

// What a model card says about the embedded vocabulary: "byte-level BPE (llama-bpe), 128256 tokens",
// "SentencePiece, 32000 tokens", "none embedded"; plus the chat format its template is recognised as
// ("Llama-3", "ChatML", ...; "none" without a template, "unrecognised" for one we cannot name).
std::string tokenizer_kind_name(const embedded_vocab& v);
std::string chat_format_kind(const embedded_vocab& v);

// Parameters (elements) of the same components, independent of storage type.
uint64_t model_count_params(const model& m);

}  // namespace sl

// Model shapes for the simulator: from assets/models/*.json profiles or from a loaded model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparselens/core/model.h"
#include "sparselens/core/result.h"

namespace sl::sim {

// Only what the memory map needs; a Llama-family decoder (SwiGLU MLP, GQA attention).
struct model_shape {
    std::string name;
    int32_t dim = 0;
    int32_t hidden_dim = 0;
    int32_t n_layers = 0;
    int32_t n_heads = 0;
    int32_t n_kv_heads = 0;
    int32_t vocab_size = 0;
    bool tied_embeddings = false;  // classifier shares the token-embedding matrix
    int32_t max_context = 0;       // informational; 0 = unknown
    int32_t head_width = 0;        // attention head width when not dim / n_heads (Gemma, Qwen3); 0 = dim / n_heads

    int32_t head_dim() const { return head_width > 0 ? head_width : n_heads > 0 ? dim / n_heads : 0; }
    int32_t q_dim() const { return head_dim() * n_heads; }
    int32_t kv_dim() const { return head_dim() * n_kv_heads; }
};

// Checks positivity, dim % n_heads == 0 (unless head_dim is given), n_heads % n_kv_heads == 0 and sane upper bounds.
outcome shape_validate(const model_shape& s, const std::string& origin);

// {"schema": "sparselens.model_shape", "version": 1, "name": ..., "dim": ..., ...}
result<model_shape> shape_load(const std::string& path);

// `name_or_path`: an existing .json file or a stem under <assets>/models (see device.h assets_dir()).
result<model_shape> shape_find(const std::string& name_or_path, const std::string& assets = {});
std::vector<std::string> shape_list(const std::string& assets = {});

model_shape shape_from_hparams(const model_hparams& hp, bool tied_embeddings, const std::string& name = {});
model_shape shape_from_model(const model& m);

}  // namespace sl::sim

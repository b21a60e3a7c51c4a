// Immutable results the engine thread hands to the GUI. Produced by EngineController (engine side),
// consumed read-only by the panels and canvases; shared via std::shared_ptr<const T> so no copy is made
// per view. Every snapshot carries the generation id of the request that produced it: a view ignores a
// snapshot older than the one it shows.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sparselens/core/eval.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/observer.h"

namespace sl::views {

using generation_id = uint64_t;

// What the Model panel shows after a load.
struct model_card {
    generation_id generation = 0;
    std::string path, format, name;  // format: "gguf" / "llama2c"
    std::string architecture;        // arch_summary: "gemma2 (GeGLU, soft-caps, ...)"
    std::string tokenizer_kind;      // "byte-level BPE (llama-bpe), 128256 tokens", "SentencePiece, ..."
    std::string chat_format;         // recognised chat template family, "none" or "unrecognised"
    uint64_t file_bytes = 0;
    int32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0, seq_len = 0;
    int32_t head_dim = 0;     // width of one attention head (not always dim / n_heads)
    std::string weight_type;  // e.g. "F32", "Q8_0" (the MLP weights' type)
    uint64_t attention_bytes = 0, mlp_bytes = 0, embedding_bytes = 0, other_bytes = 0;
    bool has_tokenizer = false;
    bool has_calibration = false;  // a calibration beside the model was found and matches
    bool tied_embeddings = false;  // the classifier shares the token embedding (simulator memory map)
    std::string tokenizer_source;  // "embedded" or the tokenizer file used
    std::string calibration_source;  // the calibration file used (empty: none)
    struct type_share {
        std::string type;  // "Q4_K", "F32", ...
        int32_t tensors = 0;
        uint64_t bytes = 0;
        double bits_per_weight = 0;
    };
    std::vector<type_share> tensor_types;  // the file's tensor-type mix, largest share of bytes first
};

// One token of the prompt or the generated text, with the per-token metrics the Prompt panel colours by.
struct token_event {
    generation_id generation = 0;
    int32_t pos = 0;
    int32_t id = 0;
    std::string piece;         // decoded, printable
    bool in_prompt = false;
    float logprob = 0;         // log p(token) under the model with the method (NaN for the first token)
    float kld_to_dense = -1;   // KL(dense || method) of this position's next-token distribution; -1 = not computed (dense run)
    float mlp_density = 1;     // mean over layers of the MLP weights read for this token
    float attn_density = 1;
};

// Activations of one (layer, probe) over the tokens of the last run, row-major [n_tokens, width].
struct activation_snapshot {
    generation_id generation = 0;
    int32_t layer = 0;
    probe where = probe::glu;
    int32_t n_tokens = 0, n_prompt = 0, width = 0;
    std::vector<float> values;   // raw signed values
    // 1 = the kernels computed this entry (neuron active / input column read); empty = dense run (all 1).
    // For width == hidden_dim probes: neurons that contributed; for width == dim: gate/up input columns read.
    std::vector<uint8_t> kept;
};

// Per-neuron statistics for the Neurons panel, per layer.
struct neuron_layer_stats {
    std::vector<float> importance_sorted;  // heavy-hitter norms, descending
    std::vector<int32_t> order_by_importance;  // neuron ids, most important first
    std::vector<int32_t> order_by_griffin;     // neuron ids by GRIFFIN's prompt statistic (row-normalised L2), highest first
    int32_t ffsplit_split = 0;             // number of heavy neurons FFSplit keeps exact at its setting
    int32_t pinned = 0;                    // heavy hitters the method pins (pin_fraction), the top of the order
    float top_share_1 = 0, top_share_10 = 0;  // share of the total norm held by the top 1% / 10%
    float flock_jaccard = 0;               // Jaccard of the prompt's and the generation's top-k neuron sets
};
struct neuron_snapshot {
    generation_id generation = 0;
    std::vector<neuron_layer_stats> layers;
};

// Cache states per token for the Cache panel. One frame per simulated token; per stream (layer x unit
// group, stream = layer * n_groups + group) one byte per unit slot with a `slot_state`.
enum class slot_state : uint8_t { empty = 0, resident = 1, hit = 2, loaded = 3, evicted = 4, pinned = 5 };
struct cache_frame {
    int32_t token = 0;
    double hit_rate = 0;          // this token
    uint64_t flash_bytes = 0;     // this token
    std::vector<std::vector<uint8_t>> streams;  // [stream][unit] slot_state
};
struct cache_snapshot_series {
    generation_id generation = 0;
    int32_t n_layers = 0, n_groups = 1;
    std::vector<std::string> group_names;  // unit kind names
    std::vector<uint32_t> capacity;        // per stream: slots the DRAM budget gives
    std::vector<cache_frame> frames;
    bool truncated = false;  // later tokens were simulated but not kept (frame memory cap)
};

// Result of one tuning evaluation (the Tuning panel's readouts, one Trade-offs point).
struct tuning_result {
    generation_id generation = 0;
    method_config config;
    eval_result eval;          // ppl, ppl_dense, kld_mean, top1_agreement, densities, measured tok/s
    double sim_tokens_per_s = 0, sim_hit_rate = 0, sim_dense_tokens_per_s = 0;
    std::string device_name;
    double seconds = 0;        // wall time of this evaluation
    bool partial = false;      // an intermediate result while a slider is dragged (fewer windows)
};

}  // namespace sl::views

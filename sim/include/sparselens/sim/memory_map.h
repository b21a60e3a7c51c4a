// Bytes of every part of a model at a bit-width, the MLP "units" methods load, and the DRAM allocation.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sparselens/core/result.h"
#include "sparselens/sim/shape.h"

namespace sl::sim {

// Weight storage: `bits` per weight plus one `scale_bits` scale per `group_size` consecutive weights
// (group 32 with an fp16 scale adds 0.5 bit per weight). group_size 0 = no scales.
struct quant_format {
    uint32_t bits = 4;
    uint32_t group_size = 32;
    uint32_t scale_bits = 16;
    uint32_t embedding_bits = 0;  // token embedding + classifier; 0 = same as `bits`
};

// 16 bits: no scales; fewer bits: groups of 32 with fp16 scales.
quant_format quant_default(uint32_t bits);
outcome quant_validate(const quant_format& q);

// Bytes of `n` consecutive weights stored as one piece: ceil(n*bits/8) + ceil(n/group)*scale_bits/8.
uint64_t weight_bytes(uint64_t n, uint32_t bits, const quant_format& q);

// What a method loads from flash as one piece, for one MLP layer with W_gate, W_up [hidden, dim] and
// W_down [dim, hidden] (row = output, column = input). Units of one kind are stored contiguously in
// flash in id order. Size per unit in weights; count per layer:
enum class unit_kind : uint8_t {
    neuron_bundle = 0,      // gate row i + up row i + down column i      3*dim weights, hidden units
    up_down_bundle = 1,     // up row i + down column i (gate stays dense)  2*dim weights, hidden units
    gate_row = 2,           // row i of W_gate                               dim weights,   hidden units
    up_row = 3,             // row i of W_up                                 dim weights,   hidden units
    down_column = 4,        // column i of W_down (GLU neuron i's output)    dim weights,   hidden units
    input_column_pair = 5,  // column j of W_up and of W_gate (DIP: input j) 2*hidden,      dim units
    up_column = 6,          // column j of W_up                              hidden weights, dim units
    gate_column = 7,        // column j of W_gate                            hidden weights, dim units
    // FFSplit's two parts (a split layout, mlp_split): read in full every token, sized by the split.
    split_heavy = 8,  // an exact heavy-hitter neuron: gate row + up row + down column   3*dim, split.heavy units
    split_light = 9,  // the compressed light neurons of the layer (SVD factors or Q4_0), 1 unit
};
// Kinds a trace or offload pack file can hold; the split kinds need their mlp_split, which files do not carry.
constexpr uint8_t unit_kind_count = 8;
constexpr uint8_t unit_kind_count_all = 10;

const char* unit_kind_name(unit_kind k);
bool unit_kind_parse(const std::string& name, unit_kind& out);
uint32_t unit_kind_pieces(unit_kind k);                               // 3, 2, 1, 1, 1, 2, 1, 1
uint64_t unit_kind_piece_weights(unit_kind k, const model_shape& s);  // dim or hidden
uint32_t unit_kind_units(unit_kind k, const model_shape& s);          // hidden or dim
uint64_t unit_kind_bytes(unit_kind k, const model_shape& s, const quant_format& q);

// FFSplit (core/ffsplit.h) per layer: `heavy` exact neurons and the other hidden - heavy compressed,
// as rank-`rank` factors of gate, up and down (svd) or as Q4_0 rows (q4).
struct mlp_split {
    int32_t heavy = 0;
    int32_t rank = 0;  // svd
    bool q4 = false;
    bool operator==(const mlp_split&) const = default;
};

// Which MLP matrices the unit groups of a method cover; uncovered matrices stay dense and resident.
// A trace or simulation has one cache ("stream") per (layer, group): stream = layer * groups + group.
struct mlp_layout {
    std::vector<unit_kind> groups{unit_kind::neuron_bundle};
    mlp_split split;  // split layouts only: {split_heavy, split_light}, or {split_light} with no heavy neuron
};
// Every matrix covered at most once, 1..4 groups; a split layout is exactly its split's groups.
outcome layout_validate(const mlp_layout& l);
// "bundle" (neuron_bundle), "dip" (input_column_pair + down_column), "cats" (up_down_bundle), a
// comma-separated list of unit kind names, or a split "ffsplit:HEAVY:svd:RANK" / "ffsplit:HEAVY:q4".
result<mlp_layout> layout_parse(const std::string& text);
std::string layout_name(const mlp_layout& l);
mlp_layout split_layout(const mlp_split& split);
// Units per layer and bytes per unit of a group of `l` (the split kinds take their sizes from l.split):
//   split_heavy: 3 wb(dim) each;
//   split_light svd: 2 (n_light wb(r) + r wb(dim)) + dim wb(r) + r wb(n_light)   (gate/up factors
//                    [n_light, r] and [r, dim], down factors [dim, r] and [r, n_light], n_light = hidden - heavy);
//   split_light q4:  3 n_light ceil(dim / 32) 18   (Q4_0 blocks, whatever the map's bit width).
uint32_t group_units(const mlp_layout& l, unit_kind k, const model_shape& s);
uint64_t group_unit_bytes(const mlp_layout& l, unit_kind k, const model_shape& s, const quant_format& q);

struct unit_group_info {
    unit_kind kind = unit_kind::neuron_bundle;
    uint32_t units_per_layer = 0;
    uint64_t unit_bytes = 0;
    uint64_t layer_bytes() const { return uint64_t{units_per_layer} * unit_bytes; }
};

struct memory_map {
    model_shape shape;
    quant_format quant;
    mlp_layout layout;
    uint32_t context_tokens = 0;

    uint64_t attention_bytes = 0;       // wq, wk, wv, wo of all layers
    uint64_t embedding_bytes = 0;       // token embedding table
    uint64_t classifier_bytes = 0;      // output matrix; 0 when tied
    uint64_t norm_bytes = 0;            // (2 * n_layers + 1) * dim fp16 weights
    uint64_t kv_cache_bytes = 0;        // fp16 K and V for context_tokens positions
    uint64_t mlp_static_bytes = 0;      // MLP matrices no unit group covers (dense, resident)
    uint64_t mlp_dynamic_bytes = 0;     // all units of all groups in all layers
    uint64_t extra_resident_bytes = 0;  // predictors etc., resident and read every token
    std::vector<unit_group_info> groups;
    // Per stream (layer * groups + group) unit bytes when they differ between layers (an offload pack of
    // a file mixing weight types per layer, e.g. Q4_K_M's W_down); empty = the group's unit_bytes.
    std::vector<uint64_t> stream_unit_bytes;

    // Everything that is not dynamically loaded; must sit in DRAM.
    uint64_t resident_bytes() const;
    // Resident bytes read from DRAM per token: attention, the classifier (the embedding table when
    // tied) plus one embedding row, norms, the whole KV cache, static MLP, extras.
    uint64_t per_token_static_read_bytes() const;
    uint64_t weight_bytes_total() const;  // all weights (no KV cache, no extras)
    uint32_t n_streams() const { return static_cast<uint32_t>(shape.n_layers) * static_cast<uint32_t>(groups.size()); }
    const unit_group_info& stream_group(uint32_t stream) const { return groups[stream % groups.size()]; }
    uint64_t unit_bytes_of(uint32_t stream) const {
        return stream_unit_bytes.empty() ? stream_group(stream).unit_bytes : stream_unit_bytes[stream];
    }
};

result<memory_map> memory_map_build(const model_shape& s, const quant_format& q, const mlp_layout& l,
                                    uint32_t context_tokens, uint64_t extra_resident_bytes = 0);
// Sets per-stream unit bytes (one non-zero value per stream; empty restores the groups') and recomputes
// mlp_dynamic_bytes.
outcome memory_map_set_stream_unit_bytes(memory_map& mm, std::vector<uint64_t> bytes);

// DRAM split: resident part first; the rest goes to per-layer MLP caches, uniformly or in proportion to
// `layer_weights` (one non-negative weight per layer), capped at what a layer can use, with the excess
// redistributed. Within a layer, groups share in proportion to their total bytes.
struct allocation {
    uint64_t dram_bytes = 0;
    uint64_t resident_bytes = 0;
    bool fits = true;                    // resident part fits in DRAM
    uint64_t static_overflow_bytes = 0;  // resident bytes that do not fit: streamed from flash every token
    std::string message;                 // why it does not fit (empty when it does)
    uint64_t cache_bytes = 0;            // DRAM left for MLP caches
    std::vector<uint64_t> layer_cache_bytes;
    std::vector<uint32_t> stream_capacity;  // units per stream (layer * groups + group)
    uint64_t used_cache_bytes = 0;          // sum of capacity * unit bytes (<= cache_bytes)
};

result<allocation> allocate(const memory_map& mm, uint64_t dram_bytes, std::span<const double> layer_weights = {});

}  // namespace sl::sim

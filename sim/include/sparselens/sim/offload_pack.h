// The MLP pack: a model's MLP weights in the unit layout a method loads from flash (docs/offload.md).
// Units of one (layer, group) are stored back to back in unit-id order, each region starting on a
// 4 KiB boundary so any run of units can be read with O_DIRECT; a small index in front describes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparselens/core/model.h"
#include "sparselens/core/result.h"
#include "sparselens/sim/memory_map.h"

namespace sl::offload {

// 2: unit sizes and piece types per (layer, group) (a Q4_K_M file's W_down mixes Q4_K and Q6_K layers).
// 3: Q8_0 / Q4_0 columns of whole 256-element groups stored in their x8 form (kernels types.h).
inline constexpr uint32_t pack_version = 3;
inline constexpr uint64_t pack_align = 4096;

// One piece of a unit: row `id` of matrix `matrix` (0 gate, 1 up, 2 down) in its row-major form
// (`cols_major` false) or of its input-major copy (true), `len` elements of `type`.
struct pack_segment {
    uint8_t matrix = 0;
    bool cols_major = false;
    dtype type = dtype::f32;
    int64_t len = 0;
    uint64_t bytes() const { return static_cast<uint64_t>(dtype_row_bytes(type, len)); }
};

// A unit group: its kind and, per layer, the pieces of a unit (matrix, orientation and length are the
// same in every layer; the types follow each layer's weights, so unit sizes may differ between layers).
struct pack_group {
    sim::unit_kind kind = sim::unit_kind::neuron_bundle;
    uint32_t units = 0;           // per layer
    uint64_t max_unit_bytes = 0;  // the largest over the layers
};

struct pack_region {
    uint64_t offset = 0, bytes = 0;  // offset is a multiple of pack_align; bytes = units * unit_bytes
    uint64_t checksum = 0;           // FNV-1a 64 of the region's bytes
    uint64_t unit_bytes = 0;
    std::vector<pack_segment> segments;  // this layer's pieces of one unit, back to back
};

struct pack_info {
    std::string path;
    std::string model_sha256;
    uint64_t model_file_bytes = 0;
    int32_t dim = 0, hidden = 0, n_layers = 0;
    std::string layout;  // sim::layout_name of the groups
    std::vector<pack_group> groups;
    std::vector<pack_region> regions;  // [layer * groups + group]
    uint64_t data_offset = 0, file_bytes = 0;

    const pack_region& region(int32_t layer, size_t group) const {
        return regions[static_cast<size_t>(layer) * groups.size() + group];
    }
    uint64_t mlp_bytes() const;  // sum of region bytes (no padding)
};

// The unit pieces of `kind` in layer `layer` of model `m`: rows in the layer's weight type, input-major
// rows in the type the engine's input-major copies use (kernels::input_major_type).
std::vector<pack_segment> pack_segments(sim::unit_kind kind, const model& m, size_t layer);
uint64_t pack_unit_bytes(const std::vector<pack_segment>& segments);

// Writes the pack of `m` (file `model_path`, hashed for the index) for `layout` to `out_path`
// (through a temporary file renamed at the end: a cancelled or failed pack leaves nothing behind).
outcome pack_write(const model& m, const std::string& model_path, const sim::mlp_layout& layout,
                   const std::string& out_path, const progress_fn& progress = {});

// Reads and validates the index and the file size (truncation), and that it belongs to a model with
// SHA-256 `model_sha256` and shape of `m` (empty sha: not checked). One-line errors naming the file.
result<pack_info> pack_open(const std::string& path, const model& m, const std::string& model_sha256);

// Reads every region with O_DIRECT and compares its checksum (a modified pack); progress may cancel.
outcome pack_verify(const pack_info& p, const progress_fn& progress = {});

// "dip", "bundle", "cats", else the unit kinds joined by '+'.
std::string pack_layout_tag(const sim::mlp_layout& l);
// Default pack path: MODEL + ".<layout tag>.slpack".
std::string pack_default_path(const std::string& model_path, const sim::mlp_layout& layout);

}  // namespace sl::offload

// Activation traces: per token and per stream (layer x unit group) the sorted ids of the active units.
// In memory a CSR table the engine fills online; on disk a versioned, checksummed binary file
// (format in docs/simulator.md).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sparselens/core/result.h"
#include "sparselens/sim/memory_map.h"
#include "sparselens/sim/shape.h"

namespace sl::sim {

constexpr uint32_t trace_format_version = 1;

struct trace {
    model_shape shape;
    mlp_layout layout;
    std::string label;  // free text: method and parameters, model file...
    uint32_t n_tokens = 0;
    // Row r = token * n_streams() + stream holds ids[offsets[r], offsets[r + 1]), strictly ascending.
    std::vector<uint64_t> offsets{0};
    std::vector<uint32_t> ids;

    uint32_t n_groups() const { return static_cast<uint32_t>(layout.groups.size()); }
    uint32_t n_streams() const { return static_cast<uint32_t>(shape.n_layers) * n_groups(); }
    uint32_t stream_units(uint32_t stream) const { return group_units(layout, layout.groups[stream % n_groups()], shape); }
    std::span<const uint32_t> active(uint32_t token, uint32_t stream) const {
        const size_t r = size_t{token} * n_streams() + stream;
        return {ids.data() + offsets[r], ids.data() + offsets[r + 1]};
    }
    uint64_t n_accesses() const { return ids.size(); }
};

// An empty trace for `shape` with `layout` (validated).
result<trace> trace_create(const model_shape& shape, const mlp_layout& layout, const std::string& label = {});

// Appends one token: `masks[stream]` = ascending active ids of that stream (n_streams() spans).
// Rejects wrong counts, unsorted or out-of-range ids without modifying the trace.
outcome trace_append_token(trace& t, std::span<const std::span<const uint32_t>> masks);
outcome trace_append_token(trace& t, const std::vector<std::vector<uint32_t>>& masks);

// Full consistency check (offsets monotone, ids ascending and in range): for traces built by hand.
outcome trace_validate(const trace& t, const std::string& origin = "trace");

std::vector<uint8_t> trace_encode(const trace& t);
// `name` prefixes error messages. Never reads out of bounds; allocations are bounded by `size`.
result<trace> trace_decode(const uint8_t* data, size_t size, const std::string& name);
outcome trace_write(const std::string& path, const trace& t);
result<trace> trace_read(const std::string& path);

// Per stream, the `n` most frequently active units over the trace (ties: lower id), ascending:
// "heavy hitters" for a pinned set.
std::vector<uint32_t> trace_top_units(const trace& t, uint32_t stream, uint32_t n);

}  // namespace sl::sim

// Pieces shared by the online, replay and analytic modes: validated setup and per-token accounting.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sparselens/sim/simulator.h"

namespace sl::sim::detail {

struct sim_setup {
    sim_params p;
    memory_map mm;
    allocation alloc;
    std::vector<cache_config> configs;  // per stream
    std::vector<uint32_t> units;        // per stream
    std::vector<uint64_t> unit_bytes;   // per stream
    uint64_t static_dram_bytes = 0;     // resident bytes read from DRAM per token
    uint64_t static_flash_bytes = 0;    // resident bytes that did not fit, streamed per token
    uint64_t static_flash_reads = 0;
    uint32_t n_streams() const { return static_cast<uint32_t>(configs.size()); }
};

// Validates everything (device, quantisation, layout, weights, pinned sets) and allocates DRAM.
// `mode` names the caller in messages; Belady is refused unless `offline`.
result<sim_setup> setup_build(const model_shape& shape, const mlp_layout& layout, const sim_params& p, bool offline);

// Flash bytes (page-rounded) and read count of one token's ascending misses in one stream; runs merged
// as plan_reads does when gap_pages >= 0.
void misses_to_reads(std::span<const uint32_t> misses, uint64_t unit_bytes, uint32_t page_bytes,
                     stream_token_stats& out, int32_t gap_pages = -1);

// One token's totals and latency from its per-stream counters.
token_report token_total(const sim_setup& su, uint32_t token, std::span<const stream_token_stats> streams);

// Empty per-stream sums (layer, group, units, capacity filled in) and adding one token to them.
std::vector<stream_report> stream_sums_init(const sim_setup& su);
void stream_sum_add(stream_report& r, const stream_token_stats& s, uint64_t unit_bytes);

// Summary over tokens [warmup, n): rates and per-token means; `sums` must cover the same tokens.
run_report report_build(const sim_setup& su, const char* mode, std::vector<token_report> tokens,
                        std::vector<stream_report> sums);

}  // namespace sl::sim::detail

// The flash/DRAM simulator: online (one token at a time, in lockstep with the engine), trace replay
// (many settings, Belady) and analytic (shape only, dense/static). Formulas in docs/simulator.md.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sparselens/core/result.h"
#include "sparselens/sim/cache.h"
#include "sparselens/sim/device.h"
#include "sparselens/sim/memory_map.h"
#include "sparselens/sim/trace.h"

namespace sl::sim {

struct sim_params {
    device_profile device;              // sim_default_params(): the paper's A18 (60 GB/s DRAM, 1 GB/s flash, 4 GB)
    quant_format quant;                 // 4 bits, groups of 32 with fp16 scales
    uint32_t context_tokens = 1024;     // KV cache reserved and read per token
    uint64_t extra_resident_bytes = 0;  // predictors and other resident, always-read data
    double compute_seconds_per_token = 0;  // measured engine time per token without I/O (0: DRAM-bound model only)
    cache_policy policy = cache_policy::lfu;
    uint32_t window_tokens = 5;
    std::vector<double> layer_weights;          // per-layer cache share; empty = uniform
    std::vector<std::vector<uint32_t>> pinned;  // per stream ascending ids; empty = none
    std::vector<uint64_t> stream_unit_bytes;    // per stream unit bytes overriding the weight format's (an
                                                // offload pack's real per-layer sizes); empty = none
    uint32_t warmup_tokens = 0;                 // replay/online: simulated but left out of the summary
    bool keep_stream_tokens = false;            // replay: keep per-token per-stream counters in the report
    uint32_t threads = 0;                       // replay/sweep worker threads; 0 = hardware concurrency
};
sim_params sim_default_params();

// Per token and stream (kept on request and in the online simulator).
struct stream_token_stats {
    uint32_t hits = 0, misses = 0, inserted = 0, evicted = 0;
    uint32_t reads = 0;  // contiguous flash reads (runs of consecutive missed ids)
    uint32_t n_resident = 0;
    uint64_t flash_bytes = 0;  // page-rounded
};

struct token_report {
    uint32_t token = 0;
    uint64_t hits = 0, misses = 0, inserted = 0, evicted = 0;
    uint64_t dram_bytes = 0, flash_bytes = 0, flash_reads = 0;
    uint64_t flash_batches = 0;  // streams that read this token (each its own batch, waited for)
    double dram_time_s = 0, flash_time_s = 0, latency_s = 0;
};

struct stream_report {
    uint32_t layer = 0, group = 0;
    uint32_t units = 0, capacity = 0;
    uint64_t hits = 0, misses = 0, inserted = 0, evicted = 0;
    uint64_t flash_bytes = 0, flash_reads = 0, dram_bytes = 0;
    double hit_rate() const { return hits + misses ? double(hits) / double(hits + misses) : 0.0; }
};

struct run_report {
    std::string mode;   // "analytic", "replay", "online"
    std::string label;  // method / trace label
    device_profile device;
    cache_policy policy = cache_policy::none;
    memory_map map;
    allocation alloc;
    uint32_t n_tokens = 0;  // tokens in the summary (after warm-up)
    double tokens_per_s = 0, mean_latency_s = 0, hit_rate = 0;
    double dram_bytes_per_token = 0, flash_bytes_per_token = 0, flash_reads_per_token = 0;
    double dram_time_per_token_s = 0, flash_time_per_token_s = 0;
    std::vector<token_report> tokens;               // every simulated token, warm-up included
    std::vector<stream_report> streams;             // summed over the summary tokens
    std::vector<stream_token_stats> stream_tokens;  // [token * n_streams + stream] when kept
    std::string warning;                            // e.g. the resident part does not fit in DRAM
};

// The latency rule for one token (docs/simulator.md): t_dram = dram/B_dram,
// t_flash = max(flash/B_flash, reads/iops) + reads*latency + batches*batch_latency, latency = max or sum
// (overlap). compute_s (optional): measured engine time per token outside the reads; t_dram =
// max(dram/B_dram, compute_s). overlapped_s (optional): engine work done while the reads are in flight
// (the offload runtime stages its cached units between submitting a batch and waiting for it); without
// device overlap the reads then cost max(t_flash, overlapped_s) instead of t_flash on top of it.
token_report token_cost(const device_profile& d, uint64_t dram_bytes, uint64_t flash_bytes, uint64_t flash_reads,
                        double compute_s = 0, uint64_t flash_batches = 0, double overlapped_s = 0);

// One read of a batch: pages [first_page, first_page + n_pages) of a stream's region (units packed from a
// page-aligned start), serving misses [first_miss, end_miss) (indices into the ascending miss list).
struct page_run {
    uint64_t first_page = 0, n_pages = 0;
    uint32_t first_miss = 0, end_miss = 0;
};
// The reads of one stream's ascending misses: each run of consecutive ids covers whole pages; with
// gap_pages >= 0 a run starting at most gap_pages pages after the previous read's end joins it (the gap is
// read too), so runs sharing a page become one read. page_bytes <= 1: byte-exact ("pages" are bytes).
// The runtime (offload_runtime) reads exactly these; the simulator counts them.
void plan_reads(std::span<const uint32_t> misses, uint64_t unit_bytes, uint32_t page_bytes, int32_t gap_pages,
                std::vector<page_run>& out);

// Flash bytes of one read of `count` consecutive units from unit `first`, with units of `unit_bytes`
// packed from a page-aligned start: whole pages touched (byte-exact when page_bytes <= 1).
uint64_t flash_run_bytes(uint64_t first, uint64_t count, uint64_t unit_bytes, uint32_t page_bytes);

// GUI snapshot of the caches after the last token.
struct stream_snapshot {
    uint32_t capacity = 0, n_resident = 0;
    uint32_t hits = 0, misses = 0, inserted = 0, evicted = 0;  // of the last token
    std::vector<uint64_t> resident_bits;                       // bit i = unit i resident (empty unless requested)
};
struct cache_snapshot {
    uint32_t token = 0;  // tokens simulated so far
    uint32_t n_groups = 1;
    std::vector<stream_snapshot> streams;  // stream = layer * n_groups + group
};

struct unit_bitset {
    uint32_t n = 0;
    std::vector<uint64_t> words;
    bool test(uint32_t i) const { return (words[i >> 6] >> (i & 63)) & 1u; }
    uint32_t count() const;
};

// Online mode: masks in, cache state out, one token at a time. Belady is not available (needs the future).
class simulator {
public:
    static result<simulator> create(const model_shape& shape, const mlp_layout& layout, const sim_params& p);
    simulator(simulator&&) noexcept;
    simulator& operator=(simulator&&) noexcept;
    ~simulator();

    // masks[stream] = ascending active unit ids (n_streams spans); validated.
    result<token_report> step(std::span<const std::span<const uint32_t>> masks);
    result<token_report> step(const std::vector<std::vector<uint32_t>>& masks);

    // Resident units of a layer's cache after the last step: DIP-CA's c^(t-1).
    unit_bitset cache_state(uint32_t layer, uint32_t group = 0) const;
    const uint8_t* resident_flags(uint32_t layer, uint32_t group = 0) const;  // n_units bytes, fast path
    cache_snapshot snapshot(bool with_bits = true) const;
    run_report report() const;  // summary of the tokens so far

    const memory_map& map() const;
    const allocation& alloc() const;
    uint32_t n_tokens() const;

private:
    simulator();
    struct impl;
    std::unique_ptr<impl> m;
};

// Replays a whole trace under one setting; streams run on p.threads threads. The progress callback
// runs on the calling thread and may cancel.
result<run_report> replay(const trace& t, const sim_params& p, const progress_fn& progress = {});

// Many settings over one trace, (setting, stream) jobs spread over `threads` threads.
result<std::vector<run_report>> sweep(const trace& t, std::span<const sim_params> settings, uint32_t threads = 0,
                                      const progress_fn& progress = {});

// Per-layer cache weights proportional to each layer's measured flash bytes in `r` (its misses), for a
// second, non-uniform allocation (sim_params::layer_weights). Layers without misses get a small floor.
std::vector<double> layer_weights_from_misses(const run_report& r);

// Shape-only steady state with a warm cache. "dense": every unit active every token; "static": a fixed
// set of round(density * units) units per stream (a structurally pruned model).
result<run_report> analytic(const model_shape& shape, const mlp_layout& layout, const sim_params& p,
                            const std::string& method, double density = 1.0);

}  // namespace sl::sim

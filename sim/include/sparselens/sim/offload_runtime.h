// The flash-offload runtime: the engine's MLP weight source and residency source at once. Attention,
// embeddings and norms stay resident; MLP units live in per-(layer, group) DRAM caches run by the
// simulator's own policies (so the simulator fed the same masks makes the same hits and misses), and
// missing units are read from the pack with O_DIRECT, batched per layer.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sparselens/core/mlp_source.h"
#include "sparselens/core/residency.h"
#include "sparselens/sim/offload_direct_io.h"
#include "sparselens/sim/offload_pack.h"
#include "sparselens/sim/cache.h"
#include "sparselens/sim/memory_map.h"
#include "sparselens/sim/simulator.h"

namespace sl::offload {

struct offload_params {
    uint64_t dram_bytes = 0;  // the whole budget: resident part + MLP caches
    sim::cache_policy policy = sim::cache_policy::lfu;
    uint32_t window_tokens = 5;
    int32_t n_ctx = 0;  // KV cache positions (counted as resident)
    std::string io_backend = "auto";
    uint32_t queue_depth = 32;
    // Runs of a batch closer than this many pages are read as one request (sim::plan_reads; the
    // device profile's flash_merge_gap_pages, so the simulator counts the same reads); -1 = no merging.
    int32_t merge_gap_pages = -1;
    // Per stream (layer * groups + group) ascending unit ids kept in the cache for the whole run (a
    // config's pinned heavy hitters): inside the stream's capacity, read once by allocate(); empty = none.
    std::vector<std::vector<uint32_t>> pinned;
    // The method, when it can say the next layer's neurons ahead (sparsity_method::planned_neurons): that
    // layer's reads are then started while this one computes. Not owned; null = no prefetch.
    const sparsity_method* planner = nullptr;
};

// DRAM the run holds besides the MLP caches (bytes as stored in memory here).
struct resident_parts {
    uint64_t attention = 0;       // wq, wk, wv, wo (+ the method's input-major copies of them)
    uint64_t embedding = 0, classifier = 0, norms = 0;
    uint64_t kv_cache = 0;
    uint64_t mlp_static = 0;      // MLP matrices the layout does not cover
    uint64_t work_buffers = 0;    // one layer of staging rows + the read buffer
    uint64_t total() const { return attention + embedding + classifier + norms + kv_cache + mlp_static + work_buffers; }
};

struct offload_token {
    uint64_t hits = 0, misses = 0;
    uint64_t bytes_read = 0;   // O_DIRECT bytes (whole pages)
    uint64_t runs = 0;         // contiguous runs of missed units (the simulator's reads)
    uint64_t requests = 0;     // I/O requests submitted (runs split at 1 MiB)
    uint64_t cache_bytes = 0;  // resident units' bytes after the token
    double io_seconds = 0;     // waiting for reads
    double copy_seconds = 0;   // cache fills and staging copies
    // Reads in flight: from the start of each batch's submission to its completion, summed over the
    // batches (the window the device worked in; io_seconds is the part of it the engine waited).
    double flight_seconds = 0;
    double submit_seconds = 0;  // inside the submission call itself (part of flight_seconds)
};

class offload_runtime final : public mlp_weight_source, public residency_source {
public:
    // Checks that the pack's layout can feed a method with `traits` (errors name what is missing).
    static result<std::unique_ptr<offload_runtime>> create(const model& m, pack_info pack, const method_traits& traits,
                                                           const offload_params& p);
    ~offload_runtime() override;

    // Second phase, once the context's own copies are built: `extra_resident` (attention input-major
    // copies) joins the resident part; the rest of the budget becomes the caches. A budget below the
    // resident part is an error.
    outcome allocate(uint64_t extra_resident);
    // The resident part allocate() would count with `extra_resident` (nothing is allocated): what a budget
    // must cover before any MLP unit is cached.
    resident_parts resident_part(uint64_t extra_resident) const;

    // mlp_weight_source
    bool fetch(int32_t layer, stage st, const layer_masks& masks, mlp_views& out) override;
    const std::string& last_error() const override { return m_error; }
    // residency_source (the real caches; DIP-CA reads these)
    const uint8_t* resident_inputs(int32_t layer) const override;
    const uint8_t* resident_neurons(int32_t layer) const override;
    void on_token(int32_t layer, int32_t pos, const layer_masks& masks) override;
    void reset() override;
    // Also tell `r` (e.g. the simulator) about every layer's masks; not owned.
    void forward_to(residency_source* r) { m_forward = r; }

    const resident_parts& resident() const { return m_resident; }
    uint64_t cache_capacity_bytes() const { return m_cache_capacity; }  // sum of stream capacities * unit bytes
    uint64_t budget_bytes() const { return m_params.dram_bytes; }
    void set_budget_bytes(uint64_t bytes) { m_params.dram_bytes = bytes; }  // before allocate()
    uint64_t peak_cache_bytes() const { return m_peak_cache; }
    const sim::memory_map& map() const { return m_map; }
    const sim::allocation& alloc() const { return m_alloc; }
    const std::vector<offload_token>& tokens() const { return m_tokens; }
    const char* io_backend() const;
    const pack_info& pack() const { return m_pack; }
    const std::vector<std::vector<uint32_t>>& pinned() const { return m_params.pinned; }
    uint64_t pinned_units() const;
    uint64_t pinned_bytes() const { return m_pinned_bytes; }    // read by allocate() (and after reset())
    uint64_t pinned_misses() const { return m_pinned_misses; }  // pinned units read again later (0)
    uint64_t prefetches() const { return m_prefetches; }  // layers whose reads started during the layer before

private:
    offload_runtime() = default;
    struct stream;
    // One stream's load in two halves (begin: cache decisions and submitted reads; end: staging), so the
    // next layer's begin can overlap this layer's compute. One load is open at a time (m_pending).
    bool begin_stream(int32_t layer, size_t group, const std::vector<uint32_t>& active, uint32_t token);
    bool end_stream();
    void drain_pending();
    void prefetch_next(int32_t layer, const layer_masks& masks);
    // Plans the reads of `ids` (ascending) from `reg` into the read buffer (m_reqs, m_miss_src).
    bool plan_into_buffer(const pack_region& reg, const std::vector<uint32_t>& ids, uint64_t& bytes);
    bool preload_pinned();
    bool take_slot(stream& s, uint32_t unit, const uint8_t* src);  // a free slot gets the unit's bytes
    void build_views(int32_t layer, mlp_views& out) const;

    const model* m_model = nullptr;
    pack_info m_pack;
    offload_params m_params;
    sim::memory_map m_map;
    sim::allocation m_alloc;
    resident_parts m_resident;
    uint64_t m_cache_capacity = 0, m_peak_cache = 0;
    std::vector<sim::unit_kind> m_kinds;
    std::vector<uint8_t> m_stage_of;  // per group: 0 inputs, 1 down
    int32_t m_input_group = -1, m_neuron_group = -1;
    std::vector<std::unique_ptr<stream>> m_streams;
    aligned_buffer m_staging[3][2];  // [matrix][cols_major]
    std::vector<std::array<std::array<tensor_view, 2>, 3>> m_views;  // per layer: the staging rows in its types
    bool m_covered[3] = {};
    aligned_buffer m_bounce;
    aligned_buffer m_slots;
    std::unique_ptr<direct_reader> m_reader;
    std::vector<uint8_t> m_all_inputs, m_all_neurons;
    std::vector<uint32_t> m_active, m_misses;
    std::vector<read_request> m_reqs;
    std::vector<sim::page_run> m_runs;
    std::vector<const uint8_t*> m_miss_src;
    struct pending_load {
        bool open = false, reading = false;
        int32_t layer = -1;
        size_t group = 0;
        std::vector<uint32_t> active;
        uint64_t bytes = 0, req0 = 0;
        std::chrono::steady_clock::time_point t_flight;
    } m_pending;
    uint64_t m_prefetches = 0;
    residency_source* m_forward = nullptr;
    std::vector<offload_token> m_tokens;
    offload_token m_cur;
    uint32_t m_token = 0;
    uint64_t m_pinned_bytes = 0, m_pinned_misses = 0;
    std::string m_error;
};

// The simulator setting "fed the same masks" as `rt`: `base` (device, policy, window) with the runtime's
// weight format and context, DRAM = the budget, and the resident part padded (or the DRAM trimmed) so the
// simulator's caches get exactly the runtime's capacities.
sim::sim_params offload_sim_params(const offload_runtime& rt, sim::sim_params base);

}  // namespace sl::offload

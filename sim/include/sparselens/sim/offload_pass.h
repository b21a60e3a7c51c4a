// One offloaded run measured next to the simulator fed the same masks: what `run --offload`, `eval
// --offload` and the GUI's "Verify on this machine" all call (docs/offload.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparselens/core/calibration.h"
#include "sparselens/core/generate.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/model.h"
#include "sparselens/core/result.h"
#include "sparselens/sim/deploy_config.h"
#include "sparselens/sim/offload_runtime.h"

namespace sl::offload {

struct pass_request {
    const model* m = nullptr;
    std::string model_sha256;                    // the pack must have been made from this file ("": not checked)
    const sim::deploy_config* config = nullptr;  // cache policy and window, pinning, in-RAM decode speed
    const calibration* calib = nullptr;          // heavy hitters when the config pins (method.pin_fraction > 0)
    sparsity_method* method = nullptr;
    std::string pack_path;
    uint64_t budget = 0;         // DRAM: resident part + MLP caches
    // >= 0: the budget is the run's resident part plus this share of the pack's MLP bytes instead (the
    // acceptance runs of docs/offload.md use 0.5: each configuration gets caches of half its MLP).
    double budget_mlp_share = -1;
    sim::device_profile device;  // the simulated column (and the runtime's run merging)
    // Probe the pack read-only just before the run (probe_pack_params, ~1 s; its merge gap plans the
    // run's reads) and again right after it, and take the flash figures of the simulated column from the
    // two probes' mean: it then sees the storage in the state the run found it (a virtual disk moves by
    // +-20% from one second to the next, and 2x with the host's caches).
    bool probe_pack = false;
    // Start the next layer's reads while this one computes where the method knows its neurons ahead
    // (GRIFFIN after the prompt; offload_params::planner).
    bool prefetch = true;
    std::string io = "auto";
    bool verify = true;           // checksum pass over the pack first
    std::vector<int32_t> prompt;  // token ids, BOS included
    int32_t steps = 48;           // positions in all
    sampler_params sampling = sampler_default_params();
    int32_t bos_id = 1;
    int32_t threads = 0;
    // Fraction done (checksum pass first, then the positions); false cancels (the result is a cancelled error).
    progress_fn progress;
};

struct pass_result {
    std::string label, pack, io_backend;
    sim::device_profile device;  // the simulated column's device (with the pack probes' flash figures)
    bool probed = false;
    double flash_probe_bandwidth[2] = {0, 0};  // the probes before and after the run
    std::vector<int32_t> tokens;
    int32_t n_prompt = 0, n_decoded = 0;
    double decode_seconds = 0;
    resident_parts resident;
    uint64_t budget = 0, cache_capacity = 0, peak_cache = 0;
    uint64_t pinned_units = 0, pinned_bytes = 0;  // loaded once before the first token
    uint64_t pinned_misses = 0;                   // pinned units missed after that (must stay 0)
    uint64_t prefetched_layers = 0;  // layer loads started while the layer before computed (GRIFFIN)
    // Measured over the decoded positions.
    double tokens_per_s = 0, bytes_per_token = 0, hit_rate = 0, io_wait_share = 0, runs_per_token = 0,
           requests_per_token = 0, copy_share = 0;
    uint64_t bytes_total = 0, proc_read_bytes = 0;
    // Simulated over the same positions.
    double sim_tokens_per_s = 0, sim_bytes_per_token = 0, sim_hit_rate = 0, sim_reads_per_token = 0;
    // io: waiting for reads; compute: the decode time outside the read windows; overlapped: work done
    // inside them (submission and the staging of cached units while the device reads).
    double sim_flash_s_per_token = 0, io_s_per_token = 0, compute_s_per_token = 0, overlapped_s_per_token = 0;
    // Measured read windows (submission to completion of each batch, summed) and the rate the device
    // delivered in them: bytes read / window.
    double flight_s_per_token = 0, submit_s_per_token = 0, read_bytes_per_s = 0;
    // With the compute term (sim::token_cost's compute_s and overlapped_s): this run's time outside and
    // inside its read windows, and the in-RAM decode speed the config measured (0 when it has none).
    double sim_tokens_per_s_run_compute = 0, sim_tokens_per_s_config_compute = 0;
    double sim_io_wait_share = 0;  // predicted wait (flash time beyond the overlapped work) / predicted token time
    bool same_capacity = true;
};

// The pinned units per stream (layer * groups + group) of a config that pins heavy hitters: the
// calibration's heavy hitters of each layer for groups whose units are neurons, none for input columns.
// Empty when the config pins nothing.
result<std::vector<std::vector<uint32_t>>> pinned_units(const sim::deploy_config& c, const calibration* calib,
                                                        const model& m, const pack_info& pack);

result<pass_result> offload_pass(const pass_request& q);

// A DRAM budget as users write it: a size ("600MB", sim::parse_size) or "+P%" — the run's resident part
// plus P% (0..100) of the pack's MLP bytes (pass_request::budget_mlp_share).
struct budget_spec {
    uint64_t bytes = 0;
    double mlp_share = -1;  // >= 0 for "+P%"
};
result<budget_spec> parse_budget(const std::string& text);

// Bytes this process made the kernel fetch from storage (/proc/self/io read_bytes; 0 when unknown).
uint64_t proc_read_bytes();

}  // namespace sl::offload

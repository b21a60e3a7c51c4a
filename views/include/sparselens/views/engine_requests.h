// What the GUI asks the engine for (generate, evaluate) and the summary of a generation; plain values.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "sparselens/core/methods.h"
#include "sparselens/core/observer.h"
#include "sparselens/views/snapshots.h"

namespace sl::views {

// The simulated target device: a shipped profile plus the overrides the Tuning panel exposes.
struct device_settings {
    std::string device = "apple-a18";  // profile stem, alias or JSON path (sim::device_find)
    uint64_t dram_bytes = 0;           // DRAM available to the model; 0: the profile's
    double dram_bandwidth = 0;         // bytes/s; 0: the profile's
    double flash_bandwidth = 0;        // bytes/s; 0: the profile's
    uint32_t bits = 4;                 // weight bits on the device
    std::string policy = "lfu";        // lfu, lru, window, none (belady needs a recorded trace)
    bool operator==(const device_settings&) const = default;
};

struct generate_request {
    std::string prompt = "Once upon a time";
    int32_t steps = 256;        // positions in total, BOS and prompt included (llama2.c run semantics)
    float temperature = 0.8f;   // 0: greedy
    float top_p = 0.9f;
    uint64_t seed = 0;          // 0: the sampler's fixed default
    method_config method = method_default_config();
    device_settings device;
    int32_t layer = 0;          // Activations view selection recorded first when memory is short
    probe where = probe::glu;
    // Every (layer, probe) is recorded when it fits, else only the selection (others are re-run).
    uint64_t activation_budget_bytes = uint64_t{256} << 20;
};

struct evaluate_request {
    method_config method = method_default_config();
    device_settings device;
    int32_t n_ctx = 128;    // window length (first half prompt, second half scored)
    int32_t windows = 8;    // windows of the evaluation text
    bool partial = false;   // an intermediate result while a slider moves
};

struct generation_stats {
    generation_id generation = 0;
    int32_t n_prompt = 0, n_tokens = 0;
    double prefill_seconds = 0;
    double decode_tokens_per_s = 0;  // measured on this CPU, method path only
    double sim_tokens_per_s = 0, sim_hit_rate = 0;
    double mean_kld = -1;            // over generated positions; -1 without a dense shadow
    bool stopped = false;            // the user stopped it; the snapshots hold what was produced
    std::string text;                // the decoded tokens
};

}  // namespace sl::views

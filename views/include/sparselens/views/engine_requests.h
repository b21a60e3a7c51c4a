// What the GUI asks the engine for (generate, evaluate) and the summary of a generation; plain values.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

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
    // Flash read granularity in bytes; -1: the profile's, 0: byte-exact. Units smaller than a page (every
    // unit of a tiny model) cost a whole page per scattered miss, which decides sparse vs dense speed.
    int64_t flash_page_bytes = -1;
    uint32_t bits = 4;                 // weight bits on the device
    std::string policy = "lfu";        // lfu, lru, window, none (belady needs a recorded trace)
    bool operator==(const device_settings&) const = default;
};

struct generate_request {
    std::string prompt = "Once upon a time";
    bool chat = false;          // wrap the prompt in the model's chat format (tokenizer.chat_template)
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
    uint64_t weights_in_ram = 0;     // weight bytes the engine held after the run (context::resident_weight_bytes)
    uint64_t model_weights = 0;      // the model's weight bytes, for the ratio
    bool stopped = false;            // the user stopped it; the snapshots hold what was produced
    std::string stop_reason;         // otherwise why it ended: "end token <|eot_id|> (128009)", "reached 256 positions"
    std::string text;                // the decoded tokens
};

// How a session file is opened: File > New Session creates, Open Session opens, the startup session
// (the last one, or the default) is created when it does not exist.
enum class session_open_mode { create, open, open_or_create };

// A sweep (methods x densities) or a tune (methods within accuracy budgets) recorded into the session.
struct session_job_request {
    bool tune = false;
    std::vector<std::string> methods;
    std::vector<float> densities;   // sweep: target MLP densities in (0, 1]
    std::string budgets;            // tune: "ppl+0.2, kld<0.05" (sessions::parse_budgets)
    std::string objective = "sim";  // tune: "sim" (simulated tok/s) or "cpu"
    device_settings device;         // the simulated device
    int32_t n_ctx = 128, windows = 8;  // the Tuning panel's full evaluation windows
    // The Tuning panel's knobs (TuningPanel::methodKnobs): each method gets the ones it reads
    // (method_config_for). name, density and d_in/d_down are ignored: the job chooses the densities.
    // Sweeps run DIP-CA at this gamma; tunes search their gamma grid instead.
    method_config knobs = method_default_config();
};

// What an imported deployment config gives the Tuning panel.
struct imported_settings {
    method_config method = method_default_config();
    bool has_device = false;
    device_settings device;            // when has_device
    std::vector<std::string> warnings;
    std::string summary;               // "dip at 50% density on apple-a18, 4-bit, lfu"
    std::string path;
    bool calibration_installed = false;
};

// "Verify on this machine": a saved run's deployment config run offloaded (MLP weights read from its pack
// with O_DIRECT) under a DRAM budget, measured next to the simulator with this machine's probed profile.
struct offload_verify_request {
    int64_t run_id = 0;
    uint64_t dram_bytes = 0;  // the budget; 0: the run's simulated device DRAM
    double mlp_share = -1;    // >= 0 ("+50%"): the resident part plus this share of the pack's MLP bytes
    int32_t steps = 48;       // positions (greedy, from the opening words of the evaluation text)
};

struct offload_verify_result {
    int64_t run_id = 0;
    std::string method, profile, pack, io_backend;
    bool pack_written = false;  // the pack was missing or stale and was written first
    uint64_t budget = 0, resident = 0, cache_capacity = 0;
    uint64_t pinned_units = 0;
    int32_t n_decoded = 0;
    double tokens_per_s = 0, sim_tokens_per_s = 0;  // simulated with this run's compute time
    double sim_dram_bound_tokens_per_s = 0;
    double bytes_per_token = 0, sim_bytes_per_token = 0;
    double hit_rate = 0, sim_hit_rate = 0;
    double io_wait_share = 0, sim_io_wait_share = 0;
    // The read rate the run's batches got, and the flash bandwidth the simulated column used (from the
    // short probe of the pack just before the run: storage speed moves with the host's caches and load).
    double read_bytes_per_s = 0, sim_flash_bytes_per_s = 0;
    bool flash_probed = false;
    std::string text;  // the generated text
};

}  // namespace sl::views

// Device and weight-format options shared by `sim`, `trace` and `tune`: CLI11 options into sim_params.
#pragma once

#include <cstdint>
#include <string>

#include "cli_common.h"
#include "sparselens/sim/simulator.h"

namespace sl::cli {

struct device_opts {
    std::string device = "apple-a18", assets, dram, dram_bw, flash_bw, page;
    double read_latency = -1, iops = -1;
    bool overlap = false, no_overlap = false;
    int bits = 4, group = -1, scale_bits = 16, embedding_bits = 0;
    uint32_t context = 1024;
};

// --device, --assets, --dram, --dram-bw, --flash-bw, --page, --read-latency, --iops, --overlap,
// --no-overlap, --bits, --group, --scale-bits, --embedding-bits, --context.
void add_device_options(CLI::App* c, device_opts& o);

// sim_default_params() with the device profile and its overrides, the weight format and the context;
// the cache policy and the rest stay at their defaults. Throws cli_error on bad values.
sim::sim_params device_sim_params(const device_opts& o);

}  // namespace sl::cli

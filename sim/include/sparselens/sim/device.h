// Device profiles (DRAM budget and bandwidth, flash bandwidth and read granularity) and size parsing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparselens/core/result.h"

namespace sl::sim {

// One target device. Plain struct: every field may be overridden at run time after loading.
struct device_profile {
    std::string name;                  // file stem, e.g. "apple-a18"
    std::string display_name;          // "Apple A18 (iPhone 16 class)"
    std::string description;           // where the numbers come from
    std::vector<std::string> aliases;  // short names accepted by device_find ("a18")
    uint64_t dram_bytes = 0;           // DRAM available to the model (weights, KV cache and MLP caches)
    double dram_bandwidth = 0;         // bytes/s
    double flash_bandwidth = 0;        // sequential read, bytes/s
    uint32_t flash_page_bytes = 0;     // read granularity; 0 or 1 = byte-exact reads
    double flash_read_latency_s = 0;   // fixed cost per read command, 0 = none
    double flash_iops = 0;             // read commands per second ceiling, 0 = unlimited
    // Fixed cost per read batch (a layer's misses of one unit group, submitted together and waited for):
    // submission, the first read's latency, the waiting thread's wake-up. 0 = none.
    double flash_batch_latency_s = 0;
    // Runs of one batch whose gap is at most this many pages are read as one request (the gap is read
    // too: cheaper than a request); 0 merges runs sharing or touching a page; -1 = every run its own read.
    int32_t flash_merge_gap_pages = -1;
    bool overlap_io_compute = true;    // flash reads overlap DRAM-bound compute (latency = max, else sum)

    bool operator==(const device_profile&) const = default;
};

// Checks ranges (positive bandwidths, non-negative latency...); the message names `origin` and the field.
outcome device_validate(const device_profile& d, const std::string& origin);

// Loads and validates a versioned profile {"schema": "sparselens.device", "version": 1, ...}.
// Sizes may be numbers (bytes) or strings with units ("4GB"), bandwidths numbers (bytes/s) or "60GB/s".
result<device_profile> device_load(const std::string& path);

// `name_or_path`: an existing .json file, or a profile stem / alias under <assets>/devices.
result<device_profile> device_find(const std::string& name_or_path, const std::string& assets = {});

// The user's own profiles (probe-device writes this-machine.json there): $XDG_CONFIG_HOME/sparselens/devices
// or ~/.config/sparselens/devices; empty when neither variable is set.
std::string user_devices_dir();

// Stems of the shipped profiles under <assets>/devices, sorted, then (when `assets` is empty, the default
// lookup) those of user_devices_dir() not shipped. device_find searches the same places.
std::vector<std::string> device_list(const std::string& assets = {});

// The assets folder: `explicit_dir` if non-empty, else $SPARSELENS_ASSETS_DIR, else the source tree's
// assets/ (compile-time default).
std::string assets_dir(const std::string& explicit_dir = {});

// "4GB" = 4e9, "4GiB" = 4*2^30, "512MB", "512 MiB", "1.5G", "4096" (bytes). Decimal units without "i".
result<uint64_t> parse_size(const std::string& text);
// "60GB/s", "1 GiB/s", "2.5e9" (bytes/s).
result<double> parse_rate(const std::string& text);

}  // namespace sl::sim

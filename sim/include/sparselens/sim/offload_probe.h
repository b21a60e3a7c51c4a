// Measures this machine's storage and memory the way the simulator models them: O_DIRECT random reads
// of 4 KiB … 1 MiB at queue depths 1 … 32 (io_uring), a sequential read and the DRAM read bandwidth,
// on a scratch file that is removed afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparselens/core/result.h"
#include "sparselens/sim/device.h"

namespace sl::offload {

struct probe_params {
    uint64_t file_bytes = uint64_t{512} << 20;  // scratch file size
    std::string dir;                            // where the scratch file goes (must allow O_DIRECT)
    std::vector<uint32_t> read_sizes{4096, 16384, 65536, 262144, 1 << 20};
    std::vector<uint32_t> depths{1, 4, 16, 32};
    double seconds_per_point = 0.4;
    int dram_threads = 0;  // 0: OpenMP default
    progress_fn progress;  // fraction done; false cancels (the scratch file is still removed)
};

struct probe_point {
    uint32_t read_bytes = 0, depth = 0;
    uint64_t reads = 0;
    double iops = 0, bytes_per_s = 0, mean_latency_s = 0;
};

struct probe_result {
    std::vector<probe_point> random;
    double sequential_bytes_per_s = 0;
    double dram_bytes_per_s = 0;
    uint64_t dram_total_bytes = 0;
    sim::device_profile profile;  // "this-machine": the figures the runtime's batched reads see
};

result<probe_result> probe_device(const probe_params& p);

// The profile file of a probe (assets/devices format: every profile field, the device-file header and the
// raw measurements under "notes"), as JSON text.
std::string probe_profile_json(const probe_result& r, uint64_t scratch_file_bytes);
// Writes it where device_list and the GUI find it (user_devices_dir()/this-machine.json); returns the path.
result<std::string> probe_save_this_machine(const std::string& profile_json);
// The default folder of the scratch file: $XDG_CACHE_HOME/sparselens or ~/.cache/sparselens ("." if neither).
std::string probe_default_dir();

}  // namespace sl::offload

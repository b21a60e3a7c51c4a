// Measures this machine's storage and memory the way the simulator models them: O_DIRECT random reads
// of 4 KiB … 1 MiB at queue depths 1 … 32 (io_uring), a sequential read and the DRAM read bandwidth,
// on a scratch file that is removed afterwards (or, read-only, on a given file).
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
    // Read this existing file instead (nothing is written; at least 16 MiB). A pack probed just before
    // an offloaded run is read in the state the run finds it: a virtual disk's host caches make reads of
    // recently written or read data 1.5-2.5x faster than of cold data (docs/offload.md).
    std::string file;
    bool sequential = true;  // the whole-file sequential pass (notes only; the profile's B comes from the fit)
    bool dram = true;        // measure the DRAM read bandwidth (else dram_* stay 0)
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

// The short read-only probe of a pack taken just before an offloaded run (`--probe`): 4 KiB reads at
// depths 1 and 32 and 1 MiB reads at depth 32, `seconds_per_point` each (~1 s in all), no sequential pass,
// no DRAM measurement. Its profile's flash_* fields are what the run's simulated column uses.
probe_params probe_pack_params(const std::string& pack_path, double seconds_per_point = 0.3);

// `device` with the flash figures (bandwidth, per-read and per-batch cost, merge gap) of a probe.
sim::device_profile with_probed_flash(sim::device_profile device, const sim::device_profile& probed);
// `a` with flash figures between its own and `b`'s: the mean time per byte, per read and per batch
// (a's merge gap is kept: it planned the reads).
sim::device_profile average_flash(sim::device_profile a, const sim::device_profile& b);

// The profile file of a probe (assets/devices format: every profile field, the device-file header and the
// raw measurements under "notes"), as JSON text.
std::string probe_profile_json(const probe_result& r, uint64_t scratch_file_bytes);
// Writes it where device_list and the GUI find it (user_devices_dir()/this-machine.json); returns the path.
result<std::string> probe_save_this_machine(const std::string& profile_json);
// The default folder of the scratch file: $XDG_CACHE_HOME/sparselens or ~/.cache/sparselens ("." if neither).
std::string probe_default_dir();

}  // namespace sl::offload

// probe_device: scratch file, O_DIRECT reads through io_uring at fixed queue depths, DRAM bandwidth.
#include "sparselens/sim/offload_probe.h"
#include "sparselens/sim/deploy_config.h"

#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "sparselens/kernels/membw.h"
#include "sparselens/sim/offload_direct_io.h"

namespace sl::offload {

namespace {

using clock_type = std::chrono::steady_clock;
double seconds(clock_type::time_point a, clock_type::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Removes the scratch file however the probe ends.
struct scratch_file {
    std::string path;
    int fd = -1;
    ~scratch_file() {
        if (fd >= 0) ::close(fd);
        if (!path.empty()) ::unlink(path.c_str());
    }
};

uint64_t mem_total_bytes() {
    std::ifstream in("/proc/meminfo");
    std::string key, unit;
    uint64_t kb = 0;
    while (in >> key >> kb >> unit)
        if (key == "MemAvailable:") return kb * 1024;
    return 0;
}

// `depth` reads of `size` bytes in flight at random aligned offsets for about `secs` seconds.
result<probe_point> random_reads(int fd, io_uring& ring, uint64_t file_bytes, uint32_t size, uint32_t depth, double secs,
                                 uint8_t* buf, std::mt19937_64& rng) {
    probe_point pt;
    pt.read_bytes = size;
    pt.depth = depth;
    const uint64_t slots = file_bytes / size;
    std::vector<clock_type::time_point> issued(depth);
    double latency_sum = 0;
    auto submit = [&](uint32_t slot) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        const uint64_t off = (rng() % slots) * size;
        io_uring_prep_read(sqe, fd, buf + uint64_t{slot} * size, size, off);
        io_uring_sqe_set_data64(sqe, slot);
        issued[slot] = clock_type::now();
    };
    const auto t0 = clock_type::now();
    for (uint32_t s = 0; s < depth; ++s) submit(s);
    uint32_t inflight = depth;
    bool stop = false;
    while (inflight > 0) {
        if (int e = io_uring_submit_and_wait(&ring, 1); e < 0) return error{std::string("io_uring: ") + std::strerror(-e)};
        io_uring_cqe* cqe = nullptr;
        unsigned head = 0, seen = 0;
        std::vector<uint32_t> again;
        io_uring_for_each_cqe(&ring, head, cqe) {
            if (cqe->res != static_cast<int>(size))
                return error{std::string("probe read failed: ") + (cqe->res < 0 ? std::strerror(-cqe->res) : "short read")};
            const uint32_t slot = static_cast<uint32_t>(io_uring_cqe_get_data64(cqe));
            latency_sum += seconds(issued[slot], clock_type::now());
            ++pt.reads;
            ++seen;
            again.push_back(slot);
        }
        io_uring_cq_advance(&ring, seen);
        inflight -= seen;
        stop = stop || seconds(t0, clock_type::now()) >= secs;
        if (!stop)
            for (uint32_t s : again) {
                submit(s);
                ++inflight;
            }
    }
    const double el = seconds(t0, clock_type::now());
    pt.iops = static_cast<double>(pt.reads) / el;
    pt.bytes_per_s = pt.iops * size;
    pt.mean_latency_s = latency_sum / static_cast<double>(std::max<uint64_t>(1, pt.reads));
    return pt;
}

}  // namespace

result<probe_result> probe_device(const probe_params& p) {
    constexpr uint64_t chunk = 1 << 20;
    if (p.read_sizes.empty() || p.depths.empty()) return error{"probe: no read sizes or queue depths"};
    const uint32_t max_depth = *std::max_element(p.depths.begin(), p.depths.end());
    const uint32_t max_size = *std::max_element(p.read_sizes.begin(), p.read_sizes.end());
    for (uint32_t size : p.read_sizes)
        if (size == 0 || size % 4096) return error{"probe: read sizes must be whole 4 KiB pages"};
    aligned_buffer buf(std::max<uint64_t>(uint64_t{max_depth} * max_size, 32 * chunk));
    if (!buf.data) return error{"probe: out of memory"};
    auto report = [&](float f) { return !p.progress || p.progress(f); };
    auto cancelled = [] { return error{"probe cancelled", true}; };
    std::mt19937_64 rng(0x5eed);
    scratch_file sf;
    uint64_t file_bytes = 0;
    std::string where = p.dir;
    if (!p.file.empty()) {  // read-only: an existing file as it is
        where = p.file;
        sf.fd = ::open(p.file.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (sf.fd < 0) return error{p.file + ": cannot open with O_DIRECT: " + std::strerror(errno)};
        const off_t size = ::lseek(sf.fd, 0, SEEK_END);
        file_bytes = size > 0 ? static_cast<uint64_t>(size) / 4096 * 4096 : 0;
        if (file_bytes < max_size)
            return error{p.file + ": too small to probe with " + std::to_string(max_size) + "-byte reads"};
    } else {
        if (p.file_bytes < 16 * chunk) return error{"probe: --size must be at least 16 MiB"};
        file_bytes = p.file_bytes / chunk * chunk;
        std::error_code ec;
        std::filesystem::create_directories(p.dir, ec);
        sf.path =
            (std::filesystem::path(p.dir) / (".sparselens-probe-" + std::to_string(::getpid()) + ".tmp")).string();
        sf.fd = ::open(sf.path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
        if (sf.fd < 0) {
            const std::string why = std::strerror(errno);
            sf.path.clear();
            return error{p.dir + ": cannot create a scratch file with O_DIRECT: " + why};
        }
        // Write random bytes (not zeros, which some devices short-cut), 1 MiB at a time.
        for (uint64_t i = 0; i < chunk / 8; ++i) reinterpret_cast<uint64_t*>(buf.data)[i] = rng();
        for (uint64_t off = 0; off < file_bytes; off += chunk) {
            reinterpret_cast<uint64_t*>(buf.data)[0] = off;
            if (::pwrite(sf.fd, buf.data, chunk, static_cast<off_t>(off)) != static_cast<ssize_t>(chunk))
                return error{sf.path + ": write failed: " + std::strerror(errno)};
            if (!report(0.2f * static_cast<float>(off + chunk) / static_cast<float>(file_bytes))) return cancelled();
        }
        if (::fsync(sf.fd) != 0) return error{sf.path + ": fsync failed: " + std::strerror(errno)};
    }
    if (file_bytes < max_size) return error{where + ": smaller than the largest probe read"};

    probe_result r;
    io_uring ring{};
    if (int e = io_uring_queue_init(std::max<uint32_t>(max_depth, 32), &ring, 0); e < 0)
        return error{std::string("probe: io_uring is not available: ") + std::strerror(-e)};
    struct ring_guard {
        io_uring* r;
        ~ring_guard() { io_uring_queue_exit(r); }
    } rg{&ring};

    // Sequential: the whole file in 1 MiB reads, 32 in flight.
    if (p.sequential) {
        auto rd = direct_reader::open(p.file.empty() ? sf.path : p.file, "uring", 32);
        if (!rd) return rd.err();
        const auto t0 = clock_type::now();
        for (uint64_t off = 0; off < file_bytes; off += 32 * chunk) {
            const read_request req{off, std::min<uint64_t>(32 * chunk, file_bytes - off), buf.data};
            if (auto o = (*rd)->read({&req, 1}); !o) return o.err();
            if (!report(0.2f + 0.1f * static_cast<float>(off) / static_cast<float>(file_bytes))) return cancelled();
        }
        r.sequential_bytes_per_s = static_cast<double>(file_bytes) / seconds(t0, clock_type::now());
    }
    const size_t points = p.read_sizes.size() * p.depths.size();
    for (uint32_t size : p.read_sizes)
        for (uint32_t depth : p.depths) {
            auto pt = random_reads(sf.fd, ring, file_bytes, size, depth, p.seconds_per_point, buf.data, rng);
            if (!pt) return pt.err();
            r.random.push_back(*pt);
            if (!report(0.3f + 0.6f * static_cast<float>(r.random.size()) / static_cast<float>(points))) return cancelled();
        }
    if (p.dram) {
        r.dram_bytes_per_s = kernels::measure_read_bandwidth_gbs(p.dram_threads, int64_t{256} << 20, 3) * 1e9;
        r.dram_total_bytes = mem_total_bytes();
    }
    if (!report(1.0f)) return cancelled();

    // The profile: what the runtime's batched reads see. A batch keeps up to 32 requests in flight, and
    // at that depth the time per request of s bytes (1 / IOPS) is close to a + s / B from 4 KiB to 1 MiB:
    // B from the smallest and largest read sizes (a least-squares fit would let the noise of the large
    // reads swamp a), a the per-read cost (flash_read_latency_s, additive; no separate IOPS ceiling). A
    // batch of one small read takes the QD 1 time: its fixed cost is that minus one read at depth. A gap
    // of g pages inside one request costs g pages / B, cheaper than a separate request while
    // g <= a * B / page: runs that close are merged. Each batch waits for its reads (no overlap).
    const uint32_t fit_depth = *std::max_element(p.depths.begin(), p.depths.end());
    const probe_point *small = nullptr, *large = nullptr, *small_qd1 = nullptr;
    for (const probe_point& pt : r.random) {
        if (pt.iops <= 0) continue;
        if (pt.depth == 1 && (!small_qd1 || pt.read_bytes < small_qd1->read_bytes)) small_qd1 = &pt;
        if (pt.depth != fit_depth) continue;
        if (!small || pt.read_bytes < small->read_bytes) small = &pt;
        if (!large || pt.read_bytes > large->read_bytes) large = &pt;
    }
    double bw = r.sequential_bytes_per_s, per_read = 0, batch = 0;
    if (small && large && large->read_bytes > small->read_bytes) {
        const double dt = 1.0 / large->iops - 1.0 / small->iops;
        if (dt > 0) bw = (large->read_bytes - small->read_bytes) / dt;
        per_read = std::max(0.0, 1.0 / small->iops - small->read_bytes / bw);
        if (small_qd1 && small_qd1->read_bytes == small->read_bytes) batch = std::max(0.0, 1.0 / small_qd1->iops - 1.0 / small->iops);
    }
    sim::device_profile& d = r.profile;
    d.name = "this-machine";
    d.display_name = "this machine (measured)";
    d.description = "Measured by sparselens probe-device: O_DIRECT reads through io_uring on " + where;
    d.dram_bytes = r.dram_total_bytes;
    d.dram_bandwidth = r.dram_bytes_per_s;
    d.flash_bandwidth = bw;
    d.flash_page_bytes = 4096;
    d.flash_read_latency_s = std::min(per_read, 1.0);
    d.flash_iops = 0;
    d.flash_batch_latency_s = std::min(batch, 1.0);
    d.flash_merge_gap_pages = static_cast<int32_t>(std::min(256.0, per_read * bw / 4096.0));
    d.overlap_io_compute = false;
    return r;
}

probe_params probe_pack_params(const std::string& pack_path, double seconds_per_point) {
    probe_params p;
    p.file = pack_path;
    // Large reads of 1 MiB (the runtime's largest piece), or for a smaller pack its largest power of two.
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(pack_path, ec);
    uint32_t large = 1 << 20;
    while (!ec && large > 8192 && large > size) large /= 2;
    p.read_sizes = {4096, large};
    p.depths = {1, 32};
    p.seconds_per_point = seconds_per_point;
    p.sequential = false;
    p.dram = false;
    return p;
}

sim::device_profile with_probed_flash(sim::device_profile device, const sim::device_profile& probed) {
    device.flash_bandwidth = probed.flash_bandwidth;
    device.flash_page_bytes = probed.flash_page_bytes;
    device.flash_read_latency_s = probed.flash_read_latency_s;
    device.flash_iops = probed.flash_iops;
    device.flash_batch_latency_s = probed.flash_batch_latency_s;
    device.flash_merge_gap_pages = probed.flash_merge_gap_pages;
    device.overlap_io_compute = probed.overlap_io_compute;
    return device;
}

sim::device_profile average_flash(sim::device_profile a, const sim::device_profile& b) {
    if (a.flash_bandwidth > 0 && b.flash_bandwidth > 0)
        a.flash_bandwidth = 2.0 / (1.0 / a.flash_bandwidth + 1.0 / b.flash_bandwidth);
    a.flash_read_latency_s = 0.5 * (a.flash_read_latency_s + b.flash_read_latency_s);
    a.flash_batch_latency_s = 0.5 * (a.flash_batch_latency_s + b.flash_batch_latency_s);
    return a;
}

std::string probe_profile_json(const probe_result& r, uint64_t scratch_file_bytes) {
    nlohmann::json points = nlohmann::json::array();
    for (const probe_point& pt : r.random)
        points.push_back({{"read_bytes", pt.read_bytes}, {"queue_depth", pt.depth}, {"iops", pt.iops},
                          {"bytes_per_s", pt.bytes_per_s}, {"mean_latency_s", pt.mean_latency_s}});
    sim::device_profile named = r.profile;
    named.aliases = {"this-machine-measured"};
    // Every profile field as configs store it, plus the device-file header and the raw measurements.
    nlohmann::json j = nlohmann::json::parse(sim::deploy_device_to_json(named));
    j["schema"] = "sparselens.device";
    j["version"] = 1;
    j["notes"] = {{"sequential_bytes_per_s", r.sequential_bytes_per_s},
                  {"dram_read_bytes_per_s", r.dram_bytes_per_s},
                  {"scratch_file_bytes", scratch_file_bytes},
                  {"random_reads", points}};
    return j.dump(2) + "\n";
}

result<std::string> probe_save_this_machine(const std::string& profile_json) {
    const std::string dir = sim::user_devices_dir();
    if (dir.empty()) return error{"cannot save the profile: neither XDG_CONFIG_HOME nor HOME is set"};
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const std::string out = (std::filesystem::path(dir) / "this-machine.json").string();
    std::ofstream f(out);
    f << profile_json;
    if (!f) return error{out + ": cannot write"};
    return out;
}

std::string probe_default_dir() {
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/sparselens";
    if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/sparselens";
    return ".";
}

}  // namespace sl::offload

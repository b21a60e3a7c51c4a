// `sparselens probe-device [--size BYTES] [--dir D | --file F] --out this-machine.json`: this machine's storage
// and memory measured as the simulator models them, written as a device profile (assets/devices format).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cli_offload.h"
#include "sparselens/sim/offload_probe.h"

namespace sl::cli {

namespace {

struct probe_opts {
    std::string size = "512MiB", dir, file, out;
    double seconds = 0.4;
    bool json = false, save = false;
};

int run_probe(const probe_opts& o) {
    offload::probe_params p;
    p.file_bytes = take(sim::parse_size(o.size));
    p.dir = o.dir.empty() ? offload::probe_default_dir() : o.dir;
    p.file = o.file;
    p.seconds_per_point = o.seconds;
    offload_interrupt guard;
    p.progress = offload_progress("probe-device", o.json);
    const offload::probe_result r = take(offload::probe_device(p));
    const sim::device_profile& d = r.profile;
    const std::string text = offload::probe_profile_json(r, p.file_bytes);
    std::string out = o.out;
    if (o.save) out = take(offload::probe_save_this_machine(text));  // the GUI lists it as "this machine (measured)"
    if (!o.save && !out.empty()) {
        std::ofstream f(out);
        f << text;
        if (!f) throw cli_error(out + ": cannot write");
    }
    if (o.json) {
        print_json(nlohmann::json::parse(text));
        return 0;
    }
    std::printf("sequential O_DIRECT read: %.0f MB/s; DRAM read: %.1f GB/s%s%s\n", r.sequential_bytes_per_s / 1e6,
                r.dram_bytes_per_s / 1e9, o.file.empty() ? "" : "; read-only on ", o.file.c_str());
    std::printf("random O_DIRECT reads (io_uring)   MB/s by queue depth\n%10s", "size");
    for (uint32_t q : p.depths) std::printf("  QD%-6u", q);
    std::printf("\n");
    for (size_t i = 0; i < r.random.size(); ++i) {
        if (i % p.depths.size() == 0) std::printf("%8u B", r.random[i].read_bytes);
        std::printf("  %8.1f", r.random[i].bytes_per_s / 1e6);
        if (i % p.depths.size() + 1 == p.depths.size()) std::printf("\n");
    }
    std::printf("profile: flash %.0f MB/s + %.1f us per read (QD 32 fit), %.0f us per batch, merge gaps up to %d "
                "pages, page 4096, no I/O-compute overlap%s%s\n",
                d.flash_bandwidth / 1e6, d.flash_read_latency_s * 1e6, d.flash_batch_latency_s * 1e6,
                d.flash_merge_gap_pages, out.empty() ? "" : "; written to ", out.c_str());
    return 0;
}

}  // namespace

void register_probe_device(CLI::App& app, command_fn& run) {
    auto o = std::make_shared<probe_opts>();
    CLI::App* c = app.add_subcommand("probe-device", "Measure this machine's storage and DRAM as a device profile");
    c->add_option("--size", o->size, "Scratch file size (default 512MiB)");
    c->add_option("--dir", o->dir, "Folder for the scratch file (default: the cache directory); must allow O_DIRECT");
    c->add_option("--file", o->file,
                  "Probe this existing file read-only instead of a scratch file (e.g. a pack, as the run will find it)")
        ->check(CLI::ExistingFile);
    c->add_option("--seconds", o->seconds, "Seconds per (read size, queue depth) point")->check(CLI::Range(0.05, 60.0));
    c->add_option("--out", o->out, "Write the profile here (assets/devices format)");
    c->add_flag("--save", o->save,
                "Write the profile as this-machine.json in the user's device folder (~/.config/sparselens/devices), "
                "where run --device this-machine and the GUI's device list find it");
    c->add_flag("--json", o->json, "Machine-readable output");
    c->callback([o, &run] {
        if (o->save && !o->out.empty()) throw CLI::ValidationError("--save and --out are exclusive");
        if (!o->file.empty() && !o->dir.empty()) throw CLI::ValidationError("--file and --dir are exclusive");
        run = [o] { return run_probe(*o); };
    });
}

}  // namespace sl::cli

// Device and weight-format options shared by the simulator commands.
#include "cli_device.h"

namespace sl::cli {

void add_device_options(CLI::App* c, device_opts& o) {
    c->add_option("--device", o.device, "Device profile name, alias or JSON file (default apple-a18)");
    c->add_option("--assets", o.assets, "Assets folder (default $SPARSELENS_ASSETS_DIR or the source tree)");
    c->add_option("--dram", o.dram, "DRAM available to the model, e.g. 4GB, 512MB, 4GiB");
    c->add_option("--dram-bw", o.dram_bw, "DRAM bandwidth, e.g. 60GB/s");
    c->add_option("--flash-bw", o.flash_bw, "Flash read bandwidth, e.g. 1GB/s");
    c->add_option("--page", o.page, "Flash read granularity, e.g. 4096 or 16KiB (0 = byte-exact)");
    c->add_option("--read-latency", o.read_latency, "Seconds per flash read command")->check(CLI::Range(0.0, 10.0));
    c->add_option("--iops", o.iops, "Flash read commands per second ceiling (0 = unlimited)")
        ->check(CLI::NonNegativeNumber);
    c->add_flag("--overlap", o.overlap, "Flash reads overlap DRAM-bound compute (latency = max)");
    c->add_flag("--no-overlap", o.no_overlap, "Flash reads and compute in series (latency = sum)");
    c->add_option("--bits", o.bits, "Weight bits (16, 8, 4, 3, 2...)")->check(CLI::Range(1, 32));
    c->add_option("--group", o.group, "Quantization group size (default 32 below 16 bits, 0 = no scales)")
        ->check(CLI::Range(0, 1 << 20));
    c->add_option("--scale-bits", o.scale_bits, "Bits per group scale")->check(CLI::Range(1, 32));
    c->add_option("--embedding-bits", o.embedding_bits, "Bits of embedding and classifier (0 = --bits)")
        ->check(CLI::Range(0, 32));
    c->add_option("--context", o.context, "KV cache context tokens (reserved and read per token)");
}

sim::sim_params device_sim_params(const device_opts& o) {
    namespace ss = sl::sim;
    ss::sim_params p = ss::sim_default_params();
    p.device = take(ss::device_find(o.device, o.assets));
    if (!o.dram.empty()) p.device.dram_bytes = take(ss::parse_size(o.dram));
    if (!o.dram_bw.empty()) p.device.dram_bandwidth = take(ss::parse_rate(o.dram_bw));
    if (!o.flash_bw.empty()) p.device.flash_bandwidth = take(ss::parse_rate(o.flash_bw));
    if (!o.page.empty()) {
        const uint64_t page = take(ss::parse_size(o.page));
        if (page > (1u << 30)) throw cli_error("--page: larger than 1 GiB");
        p.device.flash_page_bytes = static_cast<uint32_t>(page);
    }
    if (o.read_latency >= 0) p.device.flash_read_latency_s = o.read_latency;
    if (o.iops >= 0) p.device.flash_iops = o.iops;
    if (o.overlap && o.no_overlap) throw cli_error("--overlap and --no-overlap contradict each other");
    if (o.overlap) p.device.overlap_io_compute = true;
    if (o.no_overlap) p.device.overlap_io_compute = false;
    if (auto v = ss::device_validate(p.device, p.device.name); !v) throw cli_error(v.message());

    p.quant = ss::quant_default(static_cast<uint32_t>(o.bits));
    if (o.group >= 0) p.quant.group_size = static_cast<uint32_t>(o.group);
    p.quant.scale_bits = static_cast<uint32_t>(o.scale_bits);
    p.quant.embedding_bits = static_cast<uint32_t>(o.embedding_bits);
    p.context_tokens = o.context;
    return p;
}

}  // namespace sl::cli

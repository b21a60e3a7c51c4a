// Setup validation, the latency rule and report summaries shared by every simulation mode.
#include <algorithm>
#include <cmath>

#include "sim_internal.h"

namespace sl::sim {

sim_params sim_default_params() {
    sim_params p;
    p.device.name = "paper-a18";
    p.device.display_name = "Apple A18 as in the DIP paper";
    p.device.dram_bytes = 4'000'000'000ull;
    p.device.dram_bandwidth = 60e9;
    p.device.flash_bandwidth = 1e9;
    p.device.flash_page_bytes = 4096;
    p.device.overlap_io_compute = true;
    p.quant = quant_default(4);
    return p;
}

uint32_t unit_bitset::count() const {
    uint32_t c = 0;
    for (uint64_t w : words) c += static_cast<uint32_t>(__builtin_popcountll(w));
    return c;
}

token_report token_cost(const device_profile& d, uint64_t dram_bytes, uint64_t flash_bytes, uint64_t flash_reads,
                        double compute_s, uint64_t flash_batches, double overlapped_s) {
    token_report r;
    r.dram_bytes = dram_bytes;
    r.flash_bytes = flash_bytes;
    r.flash_reads = flash_reads;
    r.flash_batches = flash_batches;
    // The DRAM read is a floor on the engine's time; a measured compute time per token replaces it when
    // larger (a CPU that is not memory bound).
    r.dram_time_s = std::max(static_cast<double>(dram_bytes) / d.dram_bandwidth, compute_s);
    double transfer = static_cast<double>(flash_bytes) / d.flash_bandwidth;
    if (d.flash_iops > 0) transfer = std::max(transfer, static_cast<double>(flash_reads) / d.flash_iops);
    r.flash_time_s = transfer + static_cast<double>(flash_reads) * d.flash_read_latency_s +
                     static_cast<double>(flash_batches) * d.flash_batch_latency_s;
    r.latency_s = d.overlap_io_compute ? std::max(r.dram_time_s, r.flash_time_s)
                                       : r.dram_time_s + std::max(r.flash_time_s, overlapped_s);
    return r;
}

uint64_t flash_run_bytes(uint64_t first, uint64_t count, uint64_t unit_bytes, uint32_t page_bytes) {
    if (count == 0) return 0;
    const uint64_t start = first * unit_bytes, end = (first + count) * unit_bytes;
    if (page_bytes <= 1) return end - start;
    return ((end - 1) / page_bytes - start / page_bytes + 1) * page_bytes;
}

void plan_reads(std::span<const uint32_t> misses, uint64_t unit_bytes, uint32_t page_bytes, int32_t gap_pages,
                std::vector<page_run>& out) {
    out.clear();
    const uint64_t pb = page_bytes > 1 ? page_bytes : 1;
    const uint32_t* m = misses.data();
    const size_t n = misses.size();
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && m[j] == m[j - 1] + 1) ++j;
        const uint64_t p0 = uint64_t{m[i]} * unit_bytes / pb, p1 = ((uint64_t{m[j - 1]} + 1) * unit_bytes - 1) / pb + 1;
        if (gap_pages >= 0 && !out.empty() &&
            p0 <= out.back().first_page + out.back().n_pages + static_cast<uint64_t>(gap_pages)) {
            page_run& r = out.back();
            r.n_pages = std::max(r.first_page + r.n_pages, p1) - r.first_page;
            r.end_miss = static_cast<uint32_t>(j);
        } else {
            out.push_back({p0, p1 - p0, static_cast<uint32_t>(i), static_cast<uint32_t>(j)});
        }
        i = j;
    }
}

std::vector<double> layer_weights_from_misses(const run_report& r) {
    std::vector<double> w(static_cast<size_t>(r.map.shape.n_layers), 0.0);
    for (const stream_report& s : r.streams)
        if (s.layer < w.size()) w[s.layer] += static_cast<double>(s.flash_bytes);
    double total = 0;
    for (double x : w) total += x;
    // A floor keeps every layer in the split (a layer that never missed still needs its working set).
    const double floor = total > 0 ? 1e-3 * total / static_cast<double>(w.size()) : 1.0;
    for (double& x : w) x = std::max(x, floor);
    return w;
}

namespace detail {

result<sim_setup> setup_build(const model_shape& shape, const mlp_layout& layout, const sim_params& p, bool offline) {
    sim_setup su;
    su.p = p;
    if (auto o = device_validate(p.device, p.device.name.empty() ? "device" : p.device.name); !o) return o.err();
    if (p.policy == cache_policy::belady && !offline)
        return error{"the belady policy needs the whole future: use trace replay, not the online simulator"};
    auto mm = memory_map_build(shape, p.quant, layout, p.context_tokens, p.extra_resident_bytes);
    if (!mm) return mm.err();
    su.mm = std::move(mm).value();
    if (auto o = memory_map_set_stream_unit_bytes(su.mm, p.stream_unit_bytes); !o) return o.err();
    auto al = allocate(su.mm, p.device.dram_bytes, p.layer_weights);
    if (!al) return al.err();
    su.alloc = std::move(al).value();

    const uint32_t S = su.mm.n_streams();
    if (!p.pinned.empty() && p.pinned.size() != S)
        return error{"pinned sets: " + std::to_string(p.pinned.size()) + " given for " + std::to_string(S) +
                     " streams"};
    su.configs.resize(S);
    su.units.resize(S);
    su.unit_bytes.resize(S);
    for (uint32_t s = 0; s < S; ++s) {
        const unit_group_info& g = su.mm.stream_group(s);
        cache_config& c = su.configs[s];
        c.policy = p.policy;
        c.capacity = su.alloc.stream_capacity[s];
        c.window_tokens = p.window_tokens;
        if (!p.pinned.empty()) c.pinned = p.pinned[s];
        const std::string origin = "stream " + std::to_string(s) + " (layer " +
                                   std::to_string(s / su.mm.groups.size()) + ", " + unit_kind_name(g.kind) + ")";
        if (auto o = cache_config_validate(c, g.units_per_layer, origin); !o) return o.err();
        su.units[s] = g.units_per_layer;
        su.unit_bytes[s] = su.mm.unit_bytes_of(s);
    }
    const uint64_t per_token = su.mm.per_token_static_read_bytes();
    su.static_flash_bytes = std::min(su.alloc.static_overflow_bytes, per_token);
    su.static_dram_bytes = per_token - su.static_flash_bytes;
    su.static_flash_reads = su.static_flash_bytes > 0 ? static_cast<uint64_t>(shape.n_layers) : 0;
    return su;
}

void misses_to_reads(std::span<const uint32_t> misses, uint64_t unit_bytes, uint32_t page_bytes,
                     stream_token_stats& out, int32_t gap_pages) {
    out.reads = 0;
    out.flash_bytes = 0;
    const size_t n = misses.size();
    if (n == 0) return;
    if (gap_pages >= 0) {  // merged runs: exactly the runtime's reads
        thread_local std::vector<page_run> runs;
        plan_reads(misses, unit_bytes, page_bytes, gap_pages, runs);
        const uint64_t pb = page_bytes > 1 ? page_bytes : 1;
        for (const page_run& r : runs) out.flash_bytes += r.n_pages * pb;
        out.reads = static_cast<uint32_t>(runs.size());
        return;
    }
    const uint32_t* m = misses.data();
    const bool pow2 = page_bytes <= 1 || (page_bytes & (page_bytes - 1)) == 0;
    if (!pow2) {  // rare: one division pair per run
        size_t i = 0;
        while (i < n) {
            size_t j = i + 1;
            while (j < n && m[j] == m[j - 1] + 1) ++j;
            out.flash_bytes += flash_run_bytes(m[i], j - i, unit_bytes, page_bytes);
            ++out.reads;
            i = j;
        }
        return;
    }
    // Branch-free: a run's pages are last_page(end) + 1 - first_page(start); sum both ends separately.
    // Masks are noisy, so a branch per id would mispredict often. Page 0/1 = shift 0 = byte-exact.
    const uint32_t shift = page_bytes > 1 ? static_cast<uint32_t>(__builtin_ctz(page_bytes)) : 0;
    uint64_t reads = 0, first_pages = 0, end_pages = 0;
    for (size_t i = 0; i < n; ++i) {
        const uint64_t id = m[i];
        const uint64_t starts = i == 0 || m[i - 1] + 1 != m[i];
        const uint64_t ends = i + 1 == n || m[i] + 1 != m[i + 1];
        reads += starts;
        first_pages += starts * ((id * unit_bytes) >> shift);
        end_pages += ends * ((((id + 1) * unit_bytes - 1) >> shift) + 1);
    }
    out.reads = static_cast<uint32_t>(reads);
    out.flash_bytes = (end_pages - first_pages) << shift;
}

token_report token_total(const sim_setup& su, uint32_t token, std::span<const stream_token_stats> streams) {
    uint64_t hits = 0, misses = 0, inserted = 0, evicted = 0;
    uint64_t dram = su.static_dram_bytes, flash = su.static_flash_bytes, reads = su.static_flash_reads;
    uint64_t batches = su.static_flash_reads;  // one per layer that streams its static overflow
    for (size_t s = 0; s < streams.size(); ++s) {
        const stream_token_stats& x = streams[s];
        hits += x.hits;
        misses += x.misses;
        inserted += x.inserted;
        evicted += x.evicted;
        dram += uint64_t{x.hits} * su.unit_bytes[s];
        flash += x.flash_bytes;
        reads += x.reads;
        batches += x.reads > 0;
    }
    token_report r = token_cost(su.p.device, dram, flash, reads, su.p.compute_seconds_per_token, batches);
    r.token = token;
    r.hits = hits;
    r.misses = misses;
    r.inserted = inserted;
    r.evicted = evicted;
    return r;
}

std::vector<stream_report> stream_sums_init(const sim_setup& su) {
    const uint32_t G = static_cast<uint32_t>(su.mm.groups.size());
    std::vector<stream_report> sums(su.n_streams());
    for (uint32_t s = 0; s < su.n_streams(); ++s) {
        sums[s].layer = s / G;
        sums[s].group = s % G;
        sums[s].units = su.units[s];
        sums[s].capacity = su.configs[s].capacity;
    }
    return sums;
}

void stream_sum_add(stream_report& r, const stream_token_stats& s, uint64_t unit_bytes) {
    r.hits += s.hits;
    r.misses += s.misses;
    r.inserted += s.inserted;
    r.evicted += s.evicted;
    r.flash_bytes += s.flash_bytes;
    r.flash_reads += s.reads;
    r.dram_bytes += uint64_t{s.hits} * unit_bytes;
}

run_report report_build(const sim_setup& su, const char* mode, std::vector<token_report> tokens,
                        std::vector<stream_report> sums) {
    run_report r;
    r.mode = mode;
    r.device = su.p.device;
    r.policy = su.p.policy;
    r.map = su.mm;
    r.alloc = su.alloc;
    r.warning = su.alloc.message;
    const size_t first = std::min<size_t>(su.p.warmup_tokens, tokens.size());
    r.n_tokens = static_cast<uint32_t>(tokens.size() - first);
    double latency = 0, dram_t = 0, flash_t = 0, dram = 0, flash = 0, reads = 0;
    uint64_t hits = 0, misses = 0;
    for (size_t t = first; t < tokens.size(); ++t) {
        const token_report& x = tokens[t];
        latency += x.latency_s;
        dram_t += x.dram_time_s;
        flash_t += x.flash_time_s;
        dram += static_cast<double>(x.dram_bytes);
        flash += static_cast<double>(x.flash_bytes);
        reads += static_cast<double>(x.flash_reads);
        hits += x.hits;
        misses += x.misses;
    }
    if (r.n_tokens > 0) {
        const double n = r.n_tokens;
        r.mean_latency_s = latency / n;
        r.tokens_per_s = latency > 0 ? n / latency : 0;
        r.dram_bytes_per_token = dram / n;
        r.flash_bytes_per_token = flash / n;
        r.flash_reads_per_token = reads / n;
        r.dram_time_per_token_s = dram_t / n;
        r.flash_time_per_token_s = flash_t / n;
    } else if (r.warning.empty()) {
        r.warning = "no tokens after the warm-up";
    }
    r.hit_rate = hits + misses ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 0.0;
    r.tokens = std::move(tokens);
    r.streams = std::move(sums);
    return r;
}

}  // namespace detail
}  // namespace sl::sim

// offload_pass: one offloaded generation under a DRAM budget with the simulator stepped in lockstep on
// the same masks, summarised as measured next to simulated (the CLI's `run/eval --offload` and the GUI's
// "Verify on this machine" call this one function).
#include "sparselens/sim/offload_pass.h"
#include "sparselens/sim/offload_probe.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "sparselens/core/context.h"
#include "sparselens/sim/residency.h"
#include "sparselens/sim/shape.h"

namespace sl::offload {

namespace {

bool neuron_kind(sim::unit_kind k) {
    return k != sim::unit_kind::input_column_pair && k != sim::unit_kind::up_column && k != sim::unit_kind::gate_column;
}

// The per-token figures of the runtime and of the simulator over the decoded positions.
// The simulated times are recomputed here with `dev` (which may be another storage probe than the one
// the lockstep simulator started with); bytes, reads and batches are the simulator's own.
void summarise(pass_result& r, const offload_runtime& rt, const sim::run_report& sr, const sim::device_profile& dev,
               double cfg_cpu_tokens_per_s) {
    const auto& mt = rt.tokens();
    const size_t n = std::min<size_t>({static_cast<size_t>(r.n_decoded), mt.size(), sr.tokens.size()});
    const size_t m0 = mt.size() - n, s0 = sr.tokens.size() - n;
    uint64_t hits = 0, misses = 0, runs = 0, reqs = 0, sh = 0, sm = 0;
    double io = 0, copy = 0, flight = 0, submit = 0, lat = 0, sb = 0, sreads = 0;
    for (const offload_token& t : mt) r.bytes_total += t.bytes_read;
    for (size_t i = 0; i < n; ++i) {
        const offload_token& t = mt[m0 + i];
        const sim::token_report& s = sr.tokens[s0 + i];
        hits += t.hits;
        misses += t.misses;
        runs += t.runs;
        reqs += t.requests;
        io += t.io_seconds;
        copy += t.copy_seconds;
        flight += t.flight_seconds;
        submit += t.submit_seconds;
        r.bytes_per_token += static_cast<double>(t.bytes_read);
        sh += s.hits;
        sm += s.misses;
        lat += sim::token_cost(dev, s.dram_bytes, s.flash_bytes, s.flash_reads, 0, s.flash_batches).latency_s;
        sb += static_cast<double>(s.flash_bytes);
        sreads += static_cast<double>(s.flash_reads);
    }
    const double dn = std::max<double>(1, static_cast<double>(n));
    r.tokens_per_s = r.decode_seconds > 0 ? r.n_decoded / r.decode_seconds : 0;
    r.bytes_per_token /= dn;
    r.hit_rate = hits + misses ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 0;
    r.io_wait_share = r.decode_seconds > 0 ? io / r.decode_seconds : 0;
    r.copy_share = r.decode_seconds > 0 ? copy / r.decode_seconds : 0;
    r.runs_per_token = static_cast<double>(runs) / dn;
    r.requests_per_token = static_cast<double>(reqs) / dn;
    r.sim_tokens_per_s = lat > 0 ? static_cast<double>(n) / lat : 0;
    r.sim_bytes_per_token = sb / dn;
    r.sim_hit_rate = sh + sm ? static_cast<double>(sh) / static_cast<double>(sh + sm) : 0;
    r.sim_reads_per_token = sreads / dn;
    r.io_s_per_token = io / dn;
    r.flight_s_per_token = flight / dn;
    r.submit_s_per_token = submit / dn;
    r.read_bytes_per_s = flight > 0 ? r.bytes_per_token * dn / flight : 0;
    // The run's time splits into read windows (batch submitted .. batch complete) and the rest. Inside a
    // window the device reads while the runtime submits and stages cached units; only the remainder is
    // waiting. The simulator's flash time stands for the device's part of the windows, so it is set
    // against the work done inside them (max), not added to it: counting that work as compute and the
    // flash time on top double-counted it (dense offload, Q4_0 llama-1b: 0.056 s of 0.30 s per token).
    r.compute_s_per_token = std::max(0.0, r.decode_seconds / dn - r.flight_s_per_token);
    r.overlapped_s_per_token = std::max(0.0, r.flight_s_per_token - r.io_s_per_token);
    const double cfg_compute = cfg_cpu_tokens_per_s > 0 ? 1.0 / cfg_cpu_tokens_per_s : 0.0;
    double lat_run = 0, lat_cfg = 0, flash_t = 0;
    for (size_t i = 0; i < n; ++i) {
        const sim::token_report& s = sr.tokens[s0 + i];
        const sim::token_report run = sim::token_cost(dev, s.dram_bytes, s.flash_bytes, s.flash_reads,
                                                      r.compute_s_per_token, s.flash_batches, r.overlapped_s_per_token);
        r.sim_flash_s_per_token += run.flash_time_s / dn;
        flash_t += std::max(0.0, run.flash_time_s - r.overlapped_s_per_token);  // the part not hidden by staging
        lat_run += run.latency_s;
        lat_cfg += sim::token_cost(dev, s.dram_bytes, s.flash_bytes, s.flash_reads, cfg_compute, s.flash_batches)
                       .latency_s;
    }
    r.sim_tokens_per_s_run_compute = lat_run > 0 ? static_cast<double>(n) / lat_run : 0;
    r.sim_tokens_per_s_config_compute = lat_cfg > 0 ? static_cast<double>(n) / lat_cfg : 0;
    r.sim_io_wait_share = lat_run > 0 ? flash_t / lat_run : 0;
}

}  // namespace

uint64_t proc_read_bytes() {
    std::ifstream in("/proc/self/io");
    std::string key;
    uint64_t v = 0;
    while (in >> key >> v)
        if (key == "read_bytes:") return v;
    return 0;
}

result<std::vector<std::vector<uint32_t>>> pinned_units(const sim::deploy_config& c, const calibration* calib,
                                                        const model& m, const pack_info& pack) {
    std::vector<std::vector<uint32_t>> out;
    const float fraction = c.method.pin_fraction;
    if (!(fraction > 0.0f)) return out;
    if (!calib)
        return error{"offload: the config pins heavy hitters (pin_fraction " + std::to_string(fraction) +
                     ") but has no calibration to take them from"};
    const size_t G = pack.groups.size();
    out.resize(m.layers.size() * G);
    for (size_t l = 0; l < m.layers.size(); ++l) {
        const std::vector<int32_t> heavy = calib->heavy_hitters(static_cast<int32_t>(l), fraction);
        for (size_t g = 0; g < G; ++g) {
            if (!neuron_kind(pack.groups[g].kind)) continue;
            std::vector<uint32_t>& ids = out[l * G + g];
            for (int32_t h : heavy)
                if (h >= 0 && static_cast<uint32_t>(h) < pack.groups[g].units) ids.push_back(static_cast<uint32_t>(h));
            std::sort(ids.begin(), ids.end());
            ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        }
    }
    return out;
}

result<budget_spec> parse_budget(const std::string& text) {
    budget_spec b;
    if (text.size() > 2 && text.front() == '+' && text.back() == '%') {
        const std::string num = text.substr(1, text.size() - 2);
        char* end = nullptr;
        const double pct = std::strtod(num.c_str(), &end);
        if (end != num.c_str() + num.size() || !(pct >= 0.0 && pct <= 100.0))
            return error{"DRAM budget " + text + ": a share of the MLP must be +0% .. +100%"};
        b.mlp_share = pct / 100.0;
        return b;
    }
    auto size = sim::parse_size(text);
    if (!size) return size.err();
    if (*size == 0) return error{"DRAM budget " + text + " must be positive"};
    b.bytes = *size;
    return b;
}

result<pass_result> offload_pass(const pass_request& q) {
    const model& m = *q.m;
    const sim::deploy_config& c = *q.config;
    auto progress = [&](float f) { return !q.progress || q.progress(f); };
    auto pack = pack_open(q.pack_path, m, q.model_sha256);
    if (!pack) return pack.err();
    if (q.verify)
        if (outcome v = pack_verify(*pack, [&](float f) { return progress(0.15f * f); }); !v) return v.err();
    sim::device_profile device = q.device;
    if (q.probe_pack) {
        probe_params pp = probe_pack_params(q.pack_path);
        pp.progress = [&](float f) { return progress(0.15f + 0.05f * f); };
        auto pr = probe_device(pp);
        if (!pr) return pr.err();
        device = with_probed_flash(device, pr->profile);
    }
    if (c.policy == sim::cache_policy::belady) return error{"offload: Belady needs the future; use lru, lfu or window"};
    auto pinned = pinned_units(c, q.calib, m, *pack);
    if (!pinned) return pinned.err();

    context_params cp = context_default_params();
    cp.n_threads = q.threads;
    cp.n_ctx = std::min(q.steps, m.hp.seq_len);  // the KV cache a run of `steps` positions needs (counted resident)
    auto ctx = context::create(m, cp);
    if (!ctx) return ctx.err();
    offload_params op;
    op.dram_bytes = q.budget;
    op.policy = c.policy;
    op.window_tokens = c.window_tokens;
    op.n_ctx = ctx->n_ctx();
    op.io_backend = q.io;
    op.merge_gap_pages = device.flash_merge_gap_pages;
    op.pinned = std::move(*pinned);
    op.planner = q.prefetch ? q.method : nullptr;
    auto rt_r = offload_runtime::create(m, *pack, q.method->traits(), op);
    if (!rt_r) return rt_r.err();
    offload_runtime& rt = **rt_r;
    ctx->set_mlp_source(&rt);
    ctx->set_method(q.method);
    if (q.budget_mlp_share >= 0)
        rt.set_budget_bytes(rt.resident_part(ctx->layout_bytes()).total() +
                            static_cast<uint64_t>(q.budget_mlp_share * static_cast<double>(pack->mlp_bytes())));
    if (outcome a = rt.allocate(ctx->layout_bytes()); !a) return a.err();
    ctx->set_residency(&rt);

    sim::sim_params base = sim::deploy_sim_params(c);
    base.device = device;
    const sim::sim_params sp = offload_sim_params(rt, base);
    auto simres = sim::sim_residency::create(sim::shape_from_model(m), rt.map().layout, sp);
    if (!simres) return simres.err();
    rt.forward_to(simres->get());

    generate_params gp = generate_default_params();
    gp.steps = q.steps;
    gp.sampling = q.sampling;
    gp.bos_id = q.bos_id;
    const int32_t total = std::max(1, std::min(q.steps, ctx->n_ctx()));
    bool cancelled = false;
    const uint64_t io0 = proc_read_bytes();
    auto gr = generate(*ctx, q.prompt, gp, [&](const generate_step& st) {
        cancelled = !progress(0.2f + 0.8f * static_cast<float>(st.pos + 1) / static_cast<float>(total));
        return rt.last_error().empty() && !cancelled;
    });
    const uint64_t io1 = proc_read_bytes();
    if (!rt.last_error().empty()) return error{rt.last_error()};
    if (!(*simres)->last_error().empty()) return error{"simulator: " + (*simres)->last_error()};
    if (cancelled) return error{"offload run cancelled", true};
    if (!gr) return gr.err();

    pass_result r;
    r.label = q.method->name();
    r.probed = q.probe_pack;
    r.pack = q.pack_path;
    r.io_backend = rt.io_backend();
    r.tokens = gr->tokens;
    r.n_prompt = gr->n_prompt;
    r.n_decoded = gr->n_decoded;
    r.decode_seconds = gr->decode_seconds;
    r.resident = rt.resident();
    r.budget = rt.budget_bytes();
    r.cache_capacity = rt.cache_capacity_bytes();
    r.peak_cache = rt.peak_cache_bytes();
    r.pinned_units = rt.pinned_units();
    r.pinned_bytes = rt.pinned_bytes();
    r.pinned_misses = rt.pinned_misses();
    r.prefetched_layers = rt.prefetches();
    r.proc_read_bytes = io1 - io0;
    const sim::run_report sr = (*simres)->sim().report();
    r.same_capacity = sr.alloc.stream_capacity == rt.alloc().stream_capacity;
    if (q.probe_pack) {  // again after the run: the simulated column uses the two probes' mean
        probe_params pp = probe_pack_params(q.pack_path);
        auto after = probe_device(pp);
        if (!after) return after.err();
        r.flash_probe_bandwidth[0] = device.flash_bandwidth;
        r.flash_probe_bandwidth[1] = after->profile.flash_bandwidth;
        device = average_flash(device, after->profile);
    }
    r.device = device;
    summarise(r, rt, sr, device, c.expected.cpu_tokens_per_s);
    return r;
}

}  // namespace sl::offload

// `sparselens run MODEL --config C --offload`: the config's method with its MLP weights read from the
// pack under a DRAM budget, measured next to the simulator fed the same masks (docs/offload.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "cli_config.h"
#include "cli_generate.h"
#include "cli_offload.h"
#include "sparselens/core/fingerprint.h"
#include "sparselens/sim/offload_runtime.h"
#include "sparselens/sim/residency.h"

namespace sl::cli {

namespace {

// Bytes this process made the kernel fetch from storage (/proc/self/io read_bytes).
uint64_t proc_read_bytes() {
    std::ifstream in("/proc/self/io");
    std::string key;
    uint64_t v = 0;
    while (in >> key >> v)
        if (key == "read_bytes:") return v;
    return 0;
}

struct pass_result {
    std::string label, pack, io_backend;
    std::vector<int32_t> tokens;
    int32_t n_prompt = 0, n_decoded = 0;
    double decode_seconds = 0;
    offload::resident_parts resident;
    uint64_t budget = 0, cache_capacity = 0, peak_cache = 0;
    // Measured over the decoded positions.
    double tokens_per_s = 0, bytes_per_token = 0, hit_rate = 0, io_wait_share = 0, runs_per_token = 0,
           requests_per_token = 0, copy_share = 0;
    uint64_t bytes_total = 0, proc_read_bytes = 0;
    // Simulated over the same positions.
    double sim_tokens_per_s = 0, sim_bytes_per_token = 0, sim_hit_rate = 0, sim_reads_per_token = 0;
    double sim_flash_s_per_token = 0, io_s_per_token = 0, compute_s_per_token = 0;
    // With the compute term (sim::token_cost's compute_s): this run's time outside I/O waits, and the
    // in-RAM decode speed the config measured (0 when it has none).
    double sim_tokens_per_s_run_compute = 0, sim_tokens_per_s_config_compute = 0;
    double sim_io_wait_share = 0;  // predicted flash time / predicted token time (with this run's compute)
    bool same_capacity = true;
};

nlohmann::json pass_json(const pass_result& r) {
    return {{"label", r.label},
            {"pack", r.pack},
            {"io_backend", r.io_backend},
            {"n_prompt", r.n_prompt},
            {"n_decoded", r.n_decoded},
            {"budget_bytes", r.budget},
            {"resident", {{"attention", r.resident.attention}, {"embedding", r.resident.embedding},
                          {"classifier", r.resident.classifier}, {"norms", r.resident.norms},
                          {"kv_cache", r.resident.kv_cache}, {"mlp_static", r.resident.mlp_static},
                          {"work_buffers", r.resident.work_buffers}, {"total", r.resident.total()}}},
            {"cache_capacity_bytes", r.cache_capacity},
            {"peak_cache_bytes", r.peak_cache},
            {"measured", {{"tokens_per_s", r.tokens_per_s}, {"bytes_read_per_token", r.bytes_per_token},
                          {"hit_rate", r.hit_rate}, {"io_wait_share", r.io_wait_share},
                          {"copy_share", r.copy_share}, {"runs_per_token", r.runs_per_token},
                          {"io_seconds_per_token", r.io_s_per_token}, {"compute_seconds_per_token", r.compute_s_per_token},
                          {"requests_per_token", r.requests_per_token}, {"bytes_read_total", r.bytes_total},
                          {"proc_io_read_bytes", r.proc_read_bytes}}},
            {"simulated", {{"tokens_per_s", r.sim_tokens_per_s}, {"bytes_read_per_token", r.sim_bytes_per_token},
                           {"hit_rate", r.sim_hit_rate}, {"reads_per_token", r.sim_reads_per_token},
                           {"flash_seconds_per_token", r.sim_flash_s_per_token},
                           {"tokens_per_s_with_run_compute", r.sim_tokens_per_s_run_compute},
                           {"tokens_per_s_with_config_compute", r.sim_tokens_per_s_config_compute},
                           {"io_wait_share", r.sim_io_wait_share},
                           {"same_cache_capacities", r.same_capacity}}}};
}

pass_result offload_pass(const loaded_model& lm, const std::string& model_path, const std::string& sha,
                         const sim::deploy_config& c, sparsity_method& method, const std::string& pack_path,
                         uint64_t budget, const sim::device_profile& device, const run_opts_offload& oo,
                         const generation_request& q, int32_t threads, bool quiet) {
    const model& m = *lm.m;
    offload::pack_info pack = take(offload::pack_open(pack_path, m, sha));
    if (oo.verify)
        if (outcome v = offload::pack_verify(pack, offload_progress("verify pack", quiet)); !v) throw cli_error(v.message());
    context_params cp = context_default_params();
    cp.n_threads = threads;
    cp.n_ctx = std::min(q.steps, m.hp.seq_len);  // the KV cache a run of `steps` positions needs (counted resident)
    context ctx = take(context::create(m, cp));
    offload::offload_params op;
    op.dram_bytes = budget;
    op.policy = c.policy;
    op.window_tokens = c.window_tokens;
    op.n_ctx = ctx.n_ctx();
    op.io_backend = oo.io;
    op.merge_gap_pages = device.flash_merge_gap_pages;
    if (op.policy == sim::cache_policy::belady) throw cli_error("offload: Belady needs the future; use lru, lfu or window");
    auto rt = take(offload::offload_runtime::create(m, pack, method.traits(), op));
    ctx.set_mlp_source(rt.get());
    ctx.set_method(&method);
    if (outcome a = rt->allocate(ctx.layout_bytes()); !a) throw cli_error(a.message());
    ctx.set_residency(rt.get());

    sim::sim_params base = sim::deploy_sim_params(c);
    base.device = device;
    const sim::sim_params sp = offload::offload_sim_params(*rt, base);
    auto simres = take(sim::sim_residency::create(sim::shape_from_model(m), rt->map().layout, sp));
    rt->forward_to(simres.get());

    generate_params gp = generate_default_params();
    gp.steps = q.steps;
    gp.sampling.temperature = q.temperature;
    gp.sampling.top_p = q.top_p;
    gp.sampling.seed = q.seed;
    gp.bos_id = lm.tok->bos_id();
    const std::vector<int32_t> prompt = encode_prompt(lm, q.prompt);
    const uint64_t io0 = proc_read_bytes();
    auto gr = generate(ctx, prompt, gp, [&](const generate_step&) {
        return rt->last_error().empty() && !offload_interrupt::requested();
    });
    const uint64_t io1 = proc_read_bytes();
    if (!rt->last_error().empty()) throw cli_error(rt->last_error());
    if (!simres->last_error().empty()) throw cli_error("simulator: " + simres->last_error());
    if (!gr) throw cli_error(gr.cancelled() ? "run cancelled" : gr.message());

    pass_result r;
    r.label = method.name();
    r.pack = pack_path;
    r.io_backend = rt->io_backend();
    r.tokens = gr->tokens;
    r.n_prompt = gr->n_prompt;
    r.n_decoded = gr->n_decoded;
    r.decode_seconds = gr->decode_seconds;
    r.resident = rt->resident();
    r.budget = budget;
    r.cache_capacity = rt->cache_capacity_bytes();
    r.peak_cache = rt->peak_cache_bytes();
    r.proc_read_bytes = io1 - io0;
    const sim::run_report sr = simres->sim().report();
    r.same_capacity = sr.alloc.stream_capacity == rt->alloc().stream_capacity;
    // Decoded positions: the last n_decoded of every per-token row.
    const auto& mt = rt->tokens();
    const size_t n = std::min<size_t>({static_cast<size_t>(r.n_decoded), mt.size(), sr.tokens.size()});
    const size_t m0 = mt.size() - n, s0 = sr.tokens.size() - n;
    uint64_t hits = 0, misses = 0, runs = 0, reqs = 0, sh = 0, sm = 0;
    double io = 0, copy = 0, lat = 0, sb = 0, sreads = 0;
    for (const offload::offload_token& t : mt) r.bytes_total += t.bytes_read;
    for (size_t i = 0; i < n; ++i) {
        const offload::offload_token& t = mt[m0 + i];
        const sim::token_report& s = sr.tokens[s0 + i];
        hits += t.hits;
        misses += t.misses;
        runs += t.runs;
        reqs += t.requests;
        io += t.io_seconds;
        copy += t.copy_seconds;
        r.bytes_per_token += static_cast<double>(t.bytes_read);
        sh += s.hits;
        sm += s.misses;
        lat += s.latency_s;
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
    r.compute_s_per_token = std::max(0.0, r.decode_seconds / dn - r.io_s_per_token);
    const double cfg_compute = c.expected.cpu_tokens_per_s > 0 ? 1.0 / c.expected.cpu_tokens_per_s : 0.0;
    double lat_run = 0, lat_cfg = 0, flash_t = 0;
    for (size_t i = 0; i < n; ++i) {
        const sim::token_report& s = sr.tokens[s0 + i];
        r.sim_flash_s_per_token += s.flash_time_s / dn;
        flash_t += s.flash_time_s;
        lat_run += sim::token_cost(sp.device, s.dram_bytes, s.flash_bytes, s.flash_reads, r.compute_s_per_token, s.flash_batches).latency_s;
        lat_cfg += sim::token_cost(sp.device, s.dram_bytes, s.flash_bytes, s.flash_reads, cfg_compute, s.flash_batches).latency_s;
    }
    r.sim_tokens_per_s_run_compute = lat_run > 0 ? static_cast<double>(n) / lat_run : 0;
    r.sim_tokens_per_s_config_compute = lat_cfg > 0 ? static_cast<double>(n) / lat_cfg : 0;
    r.sim_io_wait_share = lat_run > 0 ? flash_t / lat_run : 0;
    (void)model_path;
    return r;
}

void print_pass(const pass_result& r) {
    std::fprintf(stderr,
                 "%s offload (%s, budget %llu B: resident %llu + cache %llu, peak cache %llu): measured %.2f tok/s, "
                 "%.0f B read/token, hit rate %.1f%%, I/O wait %.0f%%; simulated %.2f tok/s (%.2f with this run's "
                 "compute time), %.0f B/token, hit rate %.1f%%; /proc/self/io read_bytes %llu vs %llu counted\n",
                 r.label.c_str(), r.io_backend.c_str(), static_cast<unsigned long long>(r.budget),
                 static_cast<unsigned long long>(r.resident.total()), static_cast<unsigned long long>(r.cache_capacity),
                 static_cast<unsigned long long>(r.peak_cache), r.tokens_per_s, r.bytes_per_token, 100 * r.hit_rate,
                 100 * r.io_wait_share, r.sim_tokens_per_s, r.sim_tokens_per_s_run_compute, r.sim_bytes_per_token, 100 * r.sim_hit_rate,
                 static_cast<unsigned long long>(r.proc_read_bytes), static_cast<unsigned long long>(r.bytes_total));
}

}  // namespace

namespace {

// What `run --offload` and `eval --offload` share: the model, its config and method, the pack and the
// budget, the main pass and (--dense-baseline) the dense one.
struct offload_session {
    loaded_model lm;
    sim::loaded_deploy_config lc;
    sim::deploy_runtime drt;
    std::string sha, pack_path;
    sim::device_profile device;
    uint64_t budget = 0;
};

offload_session open_offload(const std::string& model_path, const std::string& config_path,
                             const std::string& tokenizer_path, bool allow_other_weights, const run_opts_offload& oo) {
    offload_session s{load_model(model_path, tokenizer_path, true), {}, {}, {}, {}, {}, 0};
    s.lc = load_config_for_model(config_path, model_path, *s.lm.m, allow_other_weights);
    const sim::deploy_config& c = s.lc.config;
    s.drt = take(sim::deploy_instantiate(c, *s.lm.m, s.lc.calib ? &*s.lc.calib : nullptr, config_path));
    s.sha = take(sha256_file(model_path));
    const sim::mlp_layout layout = take(sim::layout_parse(config_layout(c)));
    s.pack_path = oo.pack_path.empty() ? offload::pack_default_path(model_path, layout) : oo.pack_path;
    s.device = c.device;
    if (!oo.device.empty()) s.device = take(sim::device_find(oo.device));
    if (s.device.name.empty())
        throw cli_error("--offload: the config has no device; give --device PROFILE for the prediction");
    s.budget = s.device.dram_bytes;
    if (!oo.dram.empty()) s.budget = take(sim::parse_size(oo.dram));
    return s;
}

std::pair<pass_result, std::optional<pass_result>> offload_passes(offload_session& s, const std::string& model_path,
                                                                  const run_opts_offload& oo,
                                                                  const generation_request& q, int32_t threads,
                                                                  bool quiet) {
    const sim::deploy_config& c = s.lc.config;
    pass_result main = offload_pass(s.lm, model_path, s.sha, c, *s.drt.method, s.pack_path, s.budget, s.device, oo, q,
                                    threads, quiet);
    std::optional<pass_result> dense;
    if (oo.dense_baseline) {
        method_config dc;
        dc.name = "dense";
        auto dm = take(make_method(dc, *s.lm.m, nullptr));
        const std::string dpack = offload::pack_default_path(model_path, take(sim::layout_parse("bundle")));
        dense = offload_pass(s.lm, model_path, s.sha, c, *dm, dpack, s.budget, s.device, oo, q, threads, quiet);
    }
    return {std::move(main), std::move(dense)};
}

double rel(double measured, double simulated) { return simulated > 0 ? 100.0 * (measured / simulated - 1.0) : 0.0; }

void print_eval_table(const pass_result& r) {
    std::printf("%s offload (%s), budget %llu B (resident %llu + caches %llu), %d decoded tokens\n", r.label.c_str(),
                r.io_backend.c_str(), static_cast<unsigned long long>(r.budget),
                static_cast<unsigned long long>(r.resident.total()), static_cast<unsigned long long>(r.cache_capacity),
                r.n_decoded);
    std::printf("  %-18s %14s %14s %9s\n", "", "measured", "simulated", "meas/sim");
    std::printf("  %-18s %14.2f %14.2f %+8.1f%%   (simulated with this run's compute time; DRAM-bound: %.2f)\n",
                "tokens/s", r.tokens_per_s, r.sim_tokens_per_s_run_compute, rel(r.tokens_per_s, r.sim_tokens_per_s_run_compute),
                r.sim_tokens_per_s);
    std::printf("  %-18s %14.0f %14.0f %+8.1f%%\n", "bytes read/token", r.bytes_per_token, r.sim_bytes_per_token,
                rel(r.bytes_per_token, r.sim_bytes_per_token));
    std::printf("  %-18s %13.1f%% %13.1f%%\n", "hit rate", 100 * r.hit_rate, 100 * r.sim_hit_rate);
    std::printf("  %-18s %13.1f%% %13.1f%%\n", "I/O-wait share", 100 * r.io_wait_share, 100 * r.sim_io_wait_share);
    std::printf("  %-18s %14.0f %14.0f\n", "reads/token", r.runs_per_token, r.sim_reads_per_token);
    std::printf("  /proc/self/io read_bytes %llu, counted %llu\n", static_cast<unsigned long long>(r.proc_read_bytes),
                static_cast<unsigned long long>(r.bytes_total));
}

}  // namespace

void add_offload_options(CLI::App* c, bool& offload, run_opts_offload& oo) {
    c->add_flag("--offload", offload, "Read MLP weights from the pack with O_DIRECT under a DRAM budget (docs/offload.md)");
    c->add_option("--pack", oo.pack_path, "MLP pack (default: MODEL.<layout>.slpack, written by sparselens pack)");
    c->add_option("--dram", oo.dram, "DRAM budget for the offloaded run, e.g. 400MB (default: the device's dram_bytes)");
    c->add_option("--device", oo.device, "Device profile for the simulated column (name or JSON; default: the config's)");
    c->add_option("--io", oo.io, "I/O backend: auto, uring, pread");
    c->add_flag("!--no-verify", oo.verify, "Skip the pack checksum pass before the run");
    c->add_flag("--dense-baseline", oo.dense_baseline,
                "Also run dense offload (every missing weight read; needs MODEL.bundle.slpack) at the same budget");
}

void check_offload_options(bool offload, const run_opts_offload& oo) {
    const bool offload_only = !oo.pack_path.empty() || !oo.dram.empty() || !oo.device.empty() || oo.dense_baseline ||
                              oo.io != "auto" || !oo.verify;
    if (offload_only && !offload) throw CLI::ValidationError("--pack/--dram/--device/--io need --offload");
}

int run_offloaded(const std::string& model_path, const std::string& config_path, const std::string& tokenizer_path,
                  const generation_request& q, int32_t threads, bool allow_other_weights, bool json,
                  const run_opts_offload& oo) {
    offload_session s = open_offload(model_path, config_path, tokenizer_path, allow_other_weights, oo);
    offload_interrupt guard;
    auto [main, dense] = offload_passes(s, model_path, oo, q, threads, json);
    const std::string text = s.lm.tok->decode_all(main.tokens);
    if (json) {
        nlohmann::json j{{"config", config_path}, {"method", s.lc.config.method.name}, {"device", s.device.name},
                         {"text", text},          {"tokens", main.tokens},  {"offload", pass_json(main)}};
        if (dense) j["dense_offload"] = pass_json(*dense);
        print_json(j);
        return 0;
    }
    std::printf("%s\n", text.c_str());
    std::fflush(stdout);
    print_pass(main);
    if (dense) print_pass(*dense);
    return 0;
}

int eval_offloaded(const std::string& model_path, const std::string& config_path, const std::string& tokenizer_path,
                   const std::string& text_path, int32_t steps, int32_t threads, bool allow_other_weights, bool json,
                   const run_opts_offload& oo) {
    offload_session s = open_offload(model_path, config_path, tokenizer_path, allow_other_weights, oo);
    // Greedy decoding from the opening words of the evaluation text: the masks come from real activations
    // and the run is reproducible.
    std::string prompt = read_text(text_path).substr(0, 32);
    if (const size_t sp = prompt.find_last_of(" \n"); sp != std::string::npos && sp > 0) prompt.resize(sp);
    generation_request q;
    q.prompt = prompt;
    q.steps = steps;
    q.temperature = 0;
    q.stream = false;
    offload_interrupt guard;
    auto [main, dense] = offload_passes(s, model_path, oo, q, threads, json);
    if (json) {
        nlohmann::json j{{"config", config_path}, {"method", s.lc.config.method.name}, {"device", s.device.name},
                         {"prompt", prompt},      {"offload", pass_json(main)}};
        if (dense) j["dense_offload"] = pass_json(*dense);
        print_json(j);
        return 0;
    }
    std::printf("config       %s: %s on %s\n", config_path.c_str(), config_method_summary(s.lc.config).c_str(),
                s.device.name.c_str());
    print_eval_table(main);
    if (dense) print_eval_table(*dense);
    return 0;
}

}  // namespace sl::cli

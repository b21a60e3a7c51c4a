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
#include "sparselens/sim/offload_pass.h"
#include "sparselens/sim/residency.h"

namespace sl::cli {

namespace {

using offload::pass_result;

nlohmann::json pass_json(const pass_result& r) {
    return {{"label", r.label},
            {"pack", r.pack},
            {"io_backend", r.io_backend},
            {"n_prompt", r.n_prompt},
            {"n_decoded", r.n_decoded},
            {"budget_bytes", r.budget},
            {"resident",
             {{"attention", r.resident.attention},
              {"embedding", r.resident.embedding},
              {"classifier", r.resident.classifier},
              {"norms", r.resident.norms},
              {"kv_cache", r.resident.kv_cache},
              {"mlp_static", r.resident.mlp_static},
              {"work_buffers", r.resident.work_buffers},
              {"total", r.resident.total()}}},
            {"cache_capacity_bytes", r.cache_capacity},
            {"prefetched_layers", r.prefetched_layers},
            {"peak_cache_bytes", r.peak_cache},
            {"pinned",
             {{"units", r.pinned_units}, {"bytes_read_once", r.pinned_bytes}, {"misses_after_load", r.pinned_misses}}},
            {"measured",
             {{"tokens_per_s", r.tokens_per_s},
              {"bytes_read_per_token", r.bytes_per_token},
              {"hit_rate", r.hit_rate},
              {"io_wait_share", r.io_wait_share},
              {"copy_share", r.copy_share},
              {"runs_per_token", r.runs_per_token},
              {"io_seconds_per_token", r.io_s_per_token},
              {"compute_seconds_per_token", r.compute_s_per_token},
              {"requests_per_token", r.requests_per_token},
              {"bytes_read_total", r.bytes_total},
              {"read_window_seconds_per_token", r.flight_s_per_token},
              {"overlapped_seconds_per_token", r.overlapped_s_per_token},
              {"submit_seconds_per_token", r.submit_s_per_token},
              {"read_bytes_per_s", r.read_bytes_per_s},
              {"proc_io_read_bytes", r.proc_read_bytes}}},
            {"simulated",
             {{"tokens_per_s", r.sim_tokens_per_s},
              {"bytes_read_per_token", r.sim_bytes_per_token},
              {"hit_rate", r.sim_hit_rate},
              {"reads_per_token", r.sim_reads_per_token},
              {"flash_seconds_per_token", r.sim_flash_s_per_token},
              {"tokens_per_s_with_run_compute", r.sim_tokens_per_s_run_compute},
              {"tokens_per_s_with_config_compute", r.sim_tokens_per_s_config_compute},
              {"io_wait_share", r.sim_io_wait_share},
              {"same_cache_capacities", r.same_capacity},
              {"flash_bandwidth", r.device.flash_bandwidth},
              {"flash_read_latency_s", r.device.flash_read_latency_s},
              {"flash_batch_latency_s", r.device.flash_batch_latency_s},
              {"flash_merge_gap_pages", r.device.flash_merge_gap_pages},
              {"flash_from_pack_probe", r.probed},
              {"flash_bandwidth_probed_before", r.flash_probe_bandwidth[0]},
              {"flash_bandwidth_probed_after", r.flash_probe_bandwidth[1]}}}};
}

pass_result offload_pass(const loaded_model& lm, const std::string& sha, const sim::deploy_config& c,
                         const calibration* calib, sparsity_method& method, const std::string& pack_path,
                         uint64_t budget, const sim::device_profile& device, const run_opts_offload& oo,
                         const generation_request& q, int32_t threads, bool quiet) {
    offload::pass_request rq;
    rq.m = lm.m.get();
    rq.model_sha256 = sha;
    rq.config = &c;
    rq.calib = calib;
    rq.method = &method;
    rq.pack_path = pack_path;
    rq.budget = budget;
    rq.budget_mlp_share = oo.budget_mlp_share;
    rq.device = device;
    rq.io = oo.io;
    rq.verify = oo.verify;
    rq.probe_pack = oo.probe;
    rq.prefetch = oo.prefetch;
    rq.prompt = encode_prompt(lm, q.prompt);
    rq.steps = q.steps;
    rq.sampling.temperature = q.temperature;
    rq.sampling.top_p = q.top_p;
    rq.sampling.seed = q.seed;
    rq.bos_id = lm.tok->bos_id();
    rq.threads = threads;
    const progress_fn verify = offload_progress("verify pack", quiet);
    rq.progress = [&](float f) {  // the checksum pass shows progress; the run only listens for Ctrl-C
        return f <= 0.2f ? verify(f / 0.2f) : !offload_interrupt::requested();
    };
    auto r = offload::offload_pass(rq);
    if (!r) throw cli_error(r.cancelled() ? "run cancelled" : r.message());
    return std::move(*r);
}

void print_pass(const pass_result& r) {
    std::fprintf(stderr,
                 "%s offload (%s, budget %llu B: resident %llu + cache %llu, peak cache %llu): measured %.2f tok/s, "
                 "%.0f B read/token, hit rate %.1f%%, I/O wait %.0f%%; simulated %.2f tok/s (%.2f with this run's "
                 "compute time), %.0f B/token, hit rate %.1f%%; /proc/self/io read_bytes %llu vs %llu counted\n",
                 r.label.c_str(), r.io_backend.c_str(), static_cast<unsigned long long>(r.budget),
                 static_cast<unsigned long long>(r.resident.total()), static_cast<unsigned long long>(r.cache_capacity),
                 static_cast<unsigned long long>(r.peak_cache), r.tokens_per_s, r.bytes_per_token, 100 * r.hit_rate,
                 100 * r.io_wait_share, r.sim_tokens_per_s, r.sim_tokens_per_s_run_compute, r.sim_bytes_per_token,
                 100 * r.sim_hit_rate, static_cast<unsigned long long>(r.proc_read_bytes),
                 static_cast<unsigned long long>(r.bytes_total));
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
    if (!oo.dram.empty() && oo.budget_mlp_share < 0) s.budget = take(sim::parse_size(oo.dram));
    return s;
}

std::pair<pass_result, std::optional<pass_result>> offload_passes(offload_session& s, const std::string& model_path,
                                                                  const run_opts_offload& oo,
                                                                  const generation_request& q, int32_t threads,
                                                                  bool quiet) {
    const sim::deploy_config& c = s.lc.config;
    const calibration* calib = s.lc.calib ? &*s.lc.calib : nullptr;
    pass_result main =
        offload_pass(s.lm, s.sha, c, calib, *s.drt.method, s.pack_path, s.budget, s.device, oo, q, threads, quiet);
    std::optional<pass_result> dense;
    if (oo.dense_baseline) {
        method_config dc;
        dc.name = "dense";
        auto dm = take(make_method(dc, *s.lm.m, nullptr));
        const std::string dpack = offload::pack_default_path(model_path, take(sim::layout_parse("bundle")));
        sim::deploy_config dense_config = c;  // the dense baseline pins nothing
        dense_config.method.pin_fraction = 0.0f;
        dense = offload_pass(s.lm, s.sha, dense_config, nullptr, *dm, dpack, s.budget, s.device, oo, q, threads, quiet);
    }
    return {std::move(main), std::move(dense)};
}

double rel(double measured, double simulated) {
    return simulated > 0 ? 100.0 * (measured / simulated - 1.0) : 0.0;
}

void print_eval_table(const pass_result& r) {
    std::printf("%s offload (%s), budget %llu B (resident %llu + caches %llu), %d decoded tokens\n", r.label.c_str(),
                r.io_backend.c_str(), static_cast<unsigned long long>(r.budget),
                static_cast<unsigned long long>(r.resident.total()), static_cast<unsigned long long>(r.cache_capacity),
                r.n_decoded);
    std::printf("  %-18s %14s %14s %9s\n", "", "measured", "simulated", "meas/sim");
    std::printf("  %-18s %14.2f %14.2f %+8.1f%%   (simulated with this run's compute time; DRAM-bound: %.2f)\n",
                "tokens/s", r.tokens_per_s, r.sim_tokens_per_s_run_compute,
                rel(r.tokens_per_s, r.sim_tokens_per_s_run_compute), r.sim_tokens_per_s);
    std::printf("  %-18s %14.0f %14.0f %+8.1f%%\n", "bytes read/token", r.bytes_per_token, r.sim_bytes_per_token,
                rel(r.bytes_per_token, r.sim_bytes_per_token));
    std::printf("  %-18s %13.1f%% %13.1f%%\n", "hit rate", 100 * r.hit_rate, 100 * r.sim_hit_rate);
    std::printf("  %-18s %13.1f%% %13.1f%%\n", "I/O-wait share", 100 * r.io_wait_share, 100 * r.sim_io_wait_share);
    std::printf("  %-18s %14.0f %14.0f\n", "reads/token", r.runs_per_token, r.sim_reads_per_token);
    std::printf("  %-18s %14.4f %14.4f   (measured: batches submitted .. complete; of it waiting %.4f)\n",
                "read time/token s", r.flight_s_per_token, r.sim_flash_s_per_token, r.io_s_per_token);
    if (r.probed)
        std::printf("  %-18s %14.0f %14.0f   (simulated: the pack probed before / after the run: %.0f / %.0f)\n",
                    "read MB/s", r.read_bytes_per_s / 1e6, r.device.flash_bandwidth / 1e6,
                    r.flash_probe_bandwidth[0] / 1e6, r.flash_probe_bandwidth[1] / 1e6);
    else
        std::printf("  %-18s %14.0f %14.0f   (simulated: the profile's flash bandwidth)\n", "read MB/s",
                    r.read_bytes_per_s / 1e6, r.device.flash_bandwidth / 1e6);
    if (r.prefetched_layers)
        std::printf("  prefetch: %llu layer loads started during the layer before\n",
                    static_cast<unsigned long long>(r.prefetched_layers));
    std::printf("  /proc/self/io read_bytes %llu, counted %llu\n", static_cast<unsigned long long>(r.proc_read_bytes),
                static_cast<unsigned long long>(r.bytes_total));
}

}  // namespace

void add_offload_options(CLI::App* c, bool& offload, run_opts_offload& oo) {
    c->add_flag("--offload", offload,
                "Read MLP weights from the pack with O_DIRECT under a DRAM budget (docs/offload.md)");
    c->add_option("--pack", oo.pack_path, "MLP pack (default: MODEL.<layout>.slpack, written by sparselens pack)");
    c->add_option("--dram", oo.dram,
                  "DRAM budget for the offloaded run, e.g. 400MB, or +50% for the run's resident part plus half of "
                  "the pack's MLP bytes (default: the device's dram_bytes)");
    c->add_option("--device", oo.device,
                  "Device profile for the simulated column (name or JSON; default: the config's)");
    c->add_option("--io", oo.io, "I/O backend: auto, uring, pread");
    c->add_flag("!--no-verify", oo.verify, "Skip the pack checksum pass before the run");
    c->add_flag("--probe", oo.probe,
                "Probe the pack read-only just before the run (~1 s) and simulate with its flash figures instead of "
                "the profile's: storage speed moves (host caches, other load), the prediction then sees this run's");
    c->add_flag("!--no-prefetch", oo.prefetch,
                "Do not start the next layer's reads during this layer's compute (GRIFFIN after the prompt knows "
                "every layer's neurons ahead; this turns that off, for comparison)");
    c->add_flag("--dense-baseline", oo.dense_baseline,
                "Also run dense offload (every missing weight read; needs MODEL.bundle.slpack) at the same budget");
}

void check_offload_options(bool offload, run_opts_offload& oo) {
    // "+P%": resident part + P% of the pack's MLP bytes, resolved per pass once the resident part is known.
    if (!oo.dram.empty()) {
        auto b = offload::parse_budget(oo.dram);
        if (!b) throw CLI::ValidationError("--dram: " + b.message());
        oo.budget_mlp_share = b->mlp_share;
    }
    const bool offload_only = !oo.pack_path.empty() || !oo.dram.empty() || !oo.device.empty() || oo.dense_baseline ||
                              oo.io != "auto" || !oo.verify || oo.probe || !oo.prefetch;
    if (offload_only && !offload) throw CLI::ValidationError("--pack/--dram/--device/--io/--probe need --offload");
}

int run_offloaded(const std::string& model_path, const std::string& config_path, const std::string& tokenizer_path,
                  const generation_request& q, int32_t threads, bool allow_other_weights, bool json,
                  const run_opts_offload& oo) {
    offload_session s = open_offload(model_path, config_path, tokenizer_path, allow_other_weights, oo);
    offload_interrupt guard;
    auto [main, dense] = offload_passes(s, model_path, oo, q, threads, json);
    const std::string text = s.lm.tok->decode_all(main.tokens);
    if (json) {
        nlohmann::json j{{"config", config_path},   {"method", s.lc.config.method.name},
                         {"device", s.device.name}, {"text", text},
                         {"tokens", main.tokens},   {"offload", pass_json(main)}};
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
        nlohmann::json j{{"config", config_path},
                         {"method", s.lc.config.method.name},
                         {"device", s.device.name},
                         {"prompt", prompt},
                         {"offload", pass_json(main)}};
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

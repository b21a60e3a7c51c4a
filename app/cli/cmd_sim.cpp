// `sparselens sim`: flash/DRAM device simulation — online (MODEL TEXT: the engine's real masks drive the
// simulator token by token, DIP-CA reads its cache back), trace replay (--trace), analytic (--shape), and
// a synthetic-trace writer.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "cli_device.h"
#include "cli_methods.h"
#include "sparselens/core/context.h"
#include "sparselens/sim/residency.h"
#include "sparselens/sim/simulator.h"
#include "sparselens/sim/synthetic.h"
#include "sparselens/sim/tuner.h"

namespace sl::cli {

namespace {

namespace ss = sl::sim;

struct sim_opts {
    std::string shape, trace_path, method = "dense", layout, policy = "lfu";
    std::string extra_resident, layer_weights, synthetic_out;
    std::string tokenizer, calib, trace_out;
    device_opts dev;
    method_config knobs = method_default_config();  // online: --split, --compress, --attn-density, --rank, --pin, ...
    double density = -1, gamma = -1, pin_top = 0;
    double persistence = 0.7, skew = 1.0;
    uint32_t window = 5, warmup = 0, threads = 0, tokens = 256;
    uint64_t seed = 1;
    bool per_token = false, per_layer = false, json = false;
    std::vector<std::string> positional;
};

// Bytes with a unit that keeps three significant digits (tiny models are KB, real ones GB).
std::string gb(double bytes) {
    char b[32];
    if (bytes >= 1e9 || bytes == 0)
        std::snprintf(b, sizeof b, "%.3f GB", bytes / 1e9);
    else if (bytes >= 1e6)
        std::snprintf(b, sizeof b, "%.3f MB", bytes / 1e6);
    else
        std::snprintf(b, sizeof b, "%.1f KB", bytes / 1e3);
    return b;
}

ss::sim_params build_params(const sim_opts& o) {
    ss::sim_params p = device_sim_params(o.dev);
    if (!o.extra_resident.empty()) p.extra_resident_bytes = take(ss::parse_size(o.extra_resident));
    if (!ss::cache_policy_parse(o.policy, p.policy))
        throw cli_error("unknown --policy '" + o.policy + "' (none, lru, lfu, belady, window)");
    p.window_tokens = o.window;
    p.warmup_tokens = o.warmup;
    p.threads = o.threads;
    if (!o.layer_weights.empty() && o.layer_weights != "misses") {
        std::stringstream in(o.layer_weights);
        std::string item;
        while (std::getline(in, item, ',')) {
            try {
                size_t used = 0;
                p.layer_weights.push_back(std::stod(item, &used));
                if (used != item.size()) throw std::invalid_argument(item);
            } catch (const std::exception&) {
                throw cli_error("--layer-weights: '" + item + "' is not a number");
            }
        }
    }
    return p;
}

nlohmann::json report_json(const ss::run_report& r, bool per_token) {
    const ss::memory_map& mm = r.map;
    nlohmann::json j;
    j["mode"] = r.mode;
    j["label"] = r.label;
    const ss::device_profile& d = r.device;
    j["device"] = {{"name", d.name},
                   {"dram_bytes", d.dram_bytes},
                   {"dram_bandwidth", d.dram_bandwidth},
                   {"flash_bandwidth", d.flash_bandwidth},
                   {"flash_page_bytes", d.flash_page_bytes},
                   {"flash_read_latency_s", d.flash_read_latency_s},
                   {"flash_iops", d.flash_iops},
                   {"overlap_io_compute", d.overlap_io_compute}};
    j["policy"] = ss::cache_policy_name(r.policy);
    const double bpw = static_cast<double>(ss::weight_bytes(1u << 20, mm.quant.bits, mm.quant)) * 8.0 / (1u << 20);
    j["quant"] = {{"bits", mm.quant.bits},
                  {"group_size", mm.quant.group_size},
                  {"scale_bits", mm.quant.scale_bits},
                  {"embedding_bits", mm.quant.embedding_bits ? mm.quant.embedding_bits : mm.quant.bits},
                  {"bits_per_weight", bpw}};
    const ss::model_shape& s = mm.shape;
    j["shape"] = {{"name", s.name},
                  {"dim", s.dim},
                  {"hidden_dim", s.hidden_dim},
                  {"n_layers", s.n_layers},
                  {"n_heads", s.n_heads},
                  {"n_kv_heads", s.n_kv_heads},
                  {"head_dim", s.head_dim()},
                  {"vocab_size", s.vocab_size},
                  {"tied_embeddings", s.tied_embeddings}};
    nlohmann::json units = nlohmann::json::array();
    for (const ss::unit_group_info& g : mm.groups)
        units.push_back({{"kind", ss::unit_kind_name(g.kind)},
                         {"units_per_layer", g.units_per_layer},
                         {"unit_bytes", g.unit_bytes}});
    j["memory"] = {{"context_tokens", mm.context_tokens},
                   {"attention", mm.attention_bytes},
                   {"embeddings", mm.embedding_bytes},
                   {"classifier", mm.classifier_bytes},
                   {"norms", mm.norm_bytes},
                   {"kv_cache", mm.kv_cache_bytes},
                   {"mlp_static", mm.mlp_static_bytes},
                   {"mlp_dynamic", mm.mlp_dynamic_bytes},
                   {"extra_resident", mm.extra_resident_bytes},
                   {"resident", mm.resident_bytes()},
                   {"weights_total", mm.weight_bytes_total()},
                   {"per_token_static_read", mm.per_token_static_read_bytes()},
                   {"units", units}};
    const ss::allocation& a = r.alloc;
    j["allocation"] = {{"dram", a.dram_bytes},
                       {"resident", a.resident_bytes},
                       {"fits", a.fits},
                       {"static_overflow", a.static_overflow_bytes},
                       {"cache", a.cache_bytes},
                       {"used_cache", a.used_cache_bytes},
                       {"layer_cache_bytes", a.layer_cache_bytes}};
    j["summary"] = {{"tokens", r.n_tokens},
                    {"tokens_per_s", r.tokens_per_s},
                    {"mean_latency_s", r.mean_latency_s},
                    {"hit_rate", r.hit_rate},
                    {"dram_bytes_per_token", r.dram_bytes_per_token},
                    {"flash_bytes_per_token", r.flash_bytes_per_token},
                    {"flash_reads_per_token", r.flash_reads_per_token},
                    {"dram_time_per_token_s", r.dram_time_per_token_s},
                    {"flash_time_per_token_s", r.flash_time_per_token_s}};
    const double n = r.n_tokens ? r.n_tokens : 1;
    nlohmann::json layers = nlohmann::json::array();
    for (const ss::stream_report& x : r.streams)
        layers.push_back({{"layer", x.layer},
                          {"group", x.group},
                          {"kind", ss::unit_kind_name(mm.groups[x.group].kind)},
                          {"units", x.units},
                          {"capacity", x.capacity},
                          {"hit_rate", x.hit_rate()},
                          {"hits", x.hits},
                          {"misses", x.misses},
                          {"inserted", x.inserted},
                          {"evicted", x.evicted},
                          {"flash_bytes_per_token", static_cast<double>(x.flash_bytes) / n},
                          {"flash_reads_per_token", static_cast<double>(x.flash_reads) / n},
                          {"dram_bytes_per_token", static_cast<double>(x.dram_bytes) / n}});
    j["layers"] = layers;
    if (per_token) {
        nlohmann::json ts = nlohmann::json::array();
        for (const ss::token_report& t : r.tokens)
            ts.push_back({{"token", t.token},
                          {"latency_s", t.latency_s},
                          {"dram_time_s", t.dram_time_s},
                          {"flash_time_s", t.flash_time_s},
                          {"hits", t.hits},
                          {"misses", t.misses},
                          {"evicted", t.evicted},
                          {"dram_bytes", t.dram_bytes},
                          {"flash_bytes", t.flash_bytes},
                          {"flash_reads", t.flash_reads}});
        j["tokens"] = ts;
    }
    j["warning"] = r.warning;
    return j;
}

void print_text(const ss::run_report& r, const sim_opts& o) {
    const ss::memory_map& mm = r.map;
    const ss::device_profile& d = r.device;
    const double bpw = static_cast<double>(ss::weight_bytes(1u << 20, mm.quant.bits, mm.quant)) * 8.0 / (1u << 20);
    std::printf("mode       %s (%s), shape %s, %u-bit weights = %.3f bits/weight with scales, policy %s\n",
                r.mode.c_str(), r.label.c_str(), mm.shape.name.c_str(), mm.quant.bits, bpw,
                ss::cache_policy_name(r.policy));
    std::printf("device     %s: DRAM %s at %.1f GB/s, flash %.2f GB/s (pages %u B, %g s/read, %g IOPS), overlap %s\n",
                d.name.c_str(), gb(static_cast<double>(d.dram_bytes)).c_str(), d.dram_bandwidth / 1e9,
                d.flash_bandwidth / 1e9, d.flash_page_bytes, d.flash_read_latency_s, d.flash_iops,
                d.overlap_io_compute ? "on" : "off");
    std::printf("memory     attention %s, embeddings+classifier %s, norms %s, KV cache (%u tokens) %s, static MLP %s\n",
                gb(mm.attention_bytes).c_str(), gb(mm.embedding_bytes + mm.classifier_bytes).c_str(),
                gb(mm.norm_bytes).c_str(), mm.context_tokens, gb(mm.kv_cache_bytes).c_str(),
                gb(mm.mlp_static_bytes).c_str());
    for (const ss::unit_group_info& g : mm.groups)
        std::printf("units      %s: %u per layer x %llu B = %s per layer, %s in all\n", ss::unit_kind_name(g.kind),
                    g.units_per_layer, static_cast<unsigned long long>(g.unit_bytes),
                    gb(static_cast<double>(g.layer_bytes())).c_str(),
                    gb(static_cast<double>(g.layer_bytes()) * mm.shape.n_layers).c_str());
    const ss::allocation& a = r.alloc;
    std::printf("allocation resident %s, MLP caches %s (%s used)", gb(a.resident_bytes).c_str(),
                gb(a.cache_bytes).c_str(), gb(a.used_cache_bytes).c_str());
    if (!a.stream_capacity.empty())
        std::printf(", layer 0: %u of %u units", a.stream_capacity[0], mm.groups[0].units_per_layer);
    std::printf("\n");
    if (!r.warning.empty()) std::printf("warning    %s\n", r.warning.c_str());
    std::printf("per token  DRAM %s (%.4f s), flash %s in %.1f reads (%.4f s)\n", gb(r.dram_bytes_per_token).c_str(),
                r.dram_time_per_token_s, gb(r.flash_bytes_per_token).c_str(), r.flash_reads_per_token,
                r.flash_time_per_token_s);
    std::printf("result     %.4f tokens/s (%.4f s per token) over %u tokens, MLP hit rate %.3f\n", r.tokens_per_s,
                r.mean_latency_s, r.n_tokens, r.hit_rate);
    if (o.per_layer) {
        std::printf("\nlayer group kind               units  capacity  hit rate  flash MB/token\n");
        const double n = r.n_tokens ? r.n_tokens : 1;
        for (const ss::stream_report& x : r.streams)
            std::printf("%5u %5u %-18s %6u  %8u  %8.3f  %14.3f\n", x.layer, x.group,
                        ss::unit_kind_name(mm.groups[x.group].kind), x.units, x.capacity, x.hit_rate(),
                        static_cast<double>(x.flash_bytes) / n / 1e6);
    }
    if (o.per_token) {
        std::printf("\ntoken  latency s   hits      misses    flash MB   reads\n");
        for (const ss::token_report& t : r.tokens)
            std::printf("%5u  %9.5f  %8llu  %8llu  %9.3f  %6llu\n", t.token, t.latency_s,
                        static_cast<unsigned long long>(t.hits), static_cast<unsigned long long>(t.misses),
                        static_cast<double>(t.flash_bytes) / 1e6, static_cast<unsigned long long>(t.flash_reads));
    }
}

int write_synthetic(const sim_opts& o) {
    if (o.shape.empty()) throw cli_error("--synthetic needs --shape");
    const ss::model_shape s = take(ss::shape_find(o.shape, o.dev.assets));
    const ss::mlp_layout l = take(ss::layout_parse(o.layout.empty() ? "bundle" : o.layout));
    ss::synthetic_params sp;
    sp.n_tokens = o.tokens;
    sp.density = o.density >= 0 ? o.density : 0.3;
    sp.persistence = o.persistence;
    sp.skew = o.skew;
    sp.seed = o.seed;
    const ss::trace t = take(ss::trace_synthetic(s, l, sp));
    if (auto w = ss::trace_write(o.synthetic_out, t); !w) throw cli_error(w.message());
    if (o.json) {
        print_json({{"path", o.synthetic_out},
                    {"tokens", t.n_tokens},
                    {"streams", t.n_streams()},
                    {"accesses", t.n_accesses()},
                    {"label", t.label}});
    } else {
        std::printf("wrote %s: %u tokens x %u streams, %llu active units (%s)\n", o.synthetic_out.c_str(), t.n_tokens,
                    t.n_streams(), static_cast<unsigned long long>(t.n_accesses()), t.label.c_str());
    }
    return 0;
}

// Online: run MODEL over TEXT with a sparsity method whose masks step the simulator in lockstep; the
// simulator's cache state is what cache-aware methods (DIP-CA) read for the next token.
int run_online(const sim_opts& o) {
    if (o.positional.size() != 2) throw cli_error("online simulation takes MODEL TEXT");
    if (!o.shape.empty() || !o.trace_path.empty()) throw cli_error("MODEL TEXT cannot be combined with --shape or --trace");
    loaded_model lm = load_model(o.positional[0], o.tokenizer, true);
    method_opts mo;
    mo.cfg = o.knobs;
    mo.cfg.name = o.method;
    mo.cfg.density = o.density < 0 ? 0.5f : static_cast<float>(o.density);
    if (o.gamma >= 0) mo.cfg.gamma = static_cast<float>(o.gamma);
    mo.calib_path = o.calib;
    const std::optional<calibration> cal = load_calibration(mo, *lm.m, method_config_needs_calibration(mo.cfg));
    auto method = build_method(mo.cfg, *lm.m, cal ? &*cal : nullptr, o.json);

    ss::sim_params p = build_params(o);
    if (p.policy == ss::cache_policy::belady)
        throw cli_error("--policy belady needs the future: record a trace (--record FILE) and replay it with --trace");
    const ss::model_shape shape = ss::shape_from_model(*lm.m);
    // DIP loads input-column pairs and down columns; FFSplit its exact and compressed parts (sized by
    // its split); the other methods load whole neuron bundles.
    const std::string layout_name =
        !o.layout.empty() ? o.layout
        : method->split_layer(0) ? take(ss::method_layout_of(o.method, *method, shape.n_layers))
        : (o.method == "dip" || o.method == "dip-ca") ? "dip" : "bundle";
    const ss::mlp_layout layout = take(ss::layout_parse(layout_name));
    auto residency = take(ss::sim_residency::create(shape, layout, p));
    ss::trace recorded;
    if (!o.trace_out.empty()) {
        recorded = take(ss::trace_create(shape, layout, o.method + " density " + std::to_string(mo.cfg.density) +
                                                            " gamma " + std::to_string(mo.cfg.gamma) + " on " +
                                                            o.positional[0]));
        residency->record(&recorded);
    }

    std::vector<int32_t> tokens = encode_prompt(lm, read_text(o.positional[1]));
    tokens.resize(std::min<size_t>(tokens.size(), o.tokens));
    context_params cp = context_default_params();
    cp.n_threads = static_cast<int32_t>(o.threads);
    context ctx = take(context::create(*lm.m, cp));
    ctx.set_method(method.get());
    ctx.set_residency(residency.get());
    // Windows of the model's context, each starting at BOS; the device cache persists across them.
    for (size_t start = 0; start < tokens.size(); start += static_cast<size_t>(ctx.n_ctx())) {
        std::vector<int32_t> window(tokens.begin() + static_cast<std::ptrdiff_t>(start),
                                    tokens.begin() + static_cast<std::ptrdiff_t>(std::min(tokens.size(), start + ctx.n_ctx())));
        window[0] = lm.tok->bos_id();
        ctx.prefill(window, 0);
        if (!residency->last_error().empty()) throw cli_error("simulator: " + residency->last_error());
    }
    if (!o.trace_out.empty())
        if (auto w = ss::trace_write(o.trace_out, recorded); !w) throw cli_error(w.message());

    ss::run_report r = residency->sim().report();
    // FFSplit reads --density only to choose an svd rank.
    const bool uses_density = o.method != "ffsplit" || (mo.cfg.ffsplit_mode == "svd" && mo.cfg.rank == 0);
    r.label = o.method +
              (uses_density ? " at " + std::to_string(static_cast<int>(std::lround(100 * mo.cfg.density))) + "% MLP density"
                            : "") +
              (o.method == "dip-ca" ? ", gamma " + std::to_string(mo.cfg.gamma) : "") +
              (o.method == "ffsplit" ? ", " + std::to_string(static_cast<int>(std::lround(100 * mo.cfg.ffsplit_heavy))) +
                                           "% exact, the rest " + mo.cfg.ffsplit_mode +
                                           (mo.cfg.ffsplit_mode == "svd" && mo.cfg.rank > 0 ? ":" + std::to_string(mo.cfg.rank) : "")
                                     : "") +
              " on " + std::to_string(tokens.size()) +
              " tokens";
    if (o.json) {
        nlohmann::json j = report_json(r, o.per_token);
        add_method_json(j, mo.cfg);
        j["density"] = mo.cfg.density;
        if (!o.trace_out.empty()) j["trace"] = o.trace_out;
        print_json(j);
    } else {
        print_text(r, o);
        if (!o.trace_out.empty()) std::printf("trace      recorded to %s\n", o.trace_out.c_str());
    }
    return 0;
}

int run_sim(const sim_opts& o) {
    if (!o.synthetic_out.empty()) return write_synthetic(o);
    if (!o.positional.empty()) return run_online(o);
    if (!(o.knobs == method_default_config()))
        throw cli_error("--d-in, --d-down, --attn-density, --rank, --split, --compress and --pin need MODEL TEXT (online)");
    const bool analytic_method = o.method == "dense" || o.method == "static";
    if ((!analytic_method && o.trace_path.empty()) || o.gamma >= 0)
        throw cli_error("method '" + o.method + "' needs MODEL TEXT (online); --shape takes --method dense|static");
    if (!o.trace_path.empty() && !o.shape.empty())
        throw cli_error("--trace carries its own shape: give either --trace or --shape");
    ss::sim_params p = build_params(o);
    ss::run_report r;
    if (!o.trace_path.empty()) {
        const ss::trace t = take(ss::trace_read(o.trace_path));
        if (o.pin_top > 0) {
            if (o.pin_top > 1) throw cli_error("--pin-top is a fraction of each cache in (0, 1]");
            // Capacities come from the allocation: build it once to size the pinned sets.
            const ss::memory_map mm =
                take(ss::memory_map_build(t.shape, p.quant, t.layout, p.context_tokens, p.extra_resident_bytes));
            const ss::allocation a = take(ss::allocate(mm, p.device.dram_bytes, p.layer_weights));
            p.pinned.resize(t.n_streams());
            for (uint32_t s = 0; s < t.n_streams(); ++s)
                p.pinned[s] =
                    ss::trace_top_units(t, s, static_cast<uint32_t>(std::floor(o.pin_top * a.stream_capacity[s])));
        }
        r = take(ss::replay(t, p));
        if (o.layer_weights == "misses") {  // second pass: caches in proportion to the measured misses
            p.layer_weights = ss::layer_weights_from_misses(r);
            r = take(ss::replay(t, p));
            r.label += " (cache split by measured misses)";
        }
    } else {
        if (o.shape.empty()) throw cli_error("give --shape NAME (analytic mode) or --trace FILE (replay)");
        if (o.pin_top > 0) throw cli_error("--pin-top needs a trace");
        if (o.layer_weights == "misses") throw cli_error("--layer-weights misses needs a trace");
        const ss::model_shape s = take(ss::shape_find(o.shape, o.dev.assets));
        const ss::mlp_layout l = take(ss::layout_parse(o.layout.empty() ? "bundle" : o.layout));
        if (o.method == "static" && o.density < 0) throw cli_error("--method static needs --density");
        r = take(ss::analytic(s, l, p, o.method, o.density < 0 ? 1.0 : o.density));
    }
    if (o.json)
        print_json(report_json(r, o.per_token));
    else
        print_text(r, o);
    return 0;
}

}  // namespace

void register_sim(CLI::App& app, command_fn& run) {
    auto o = std::make_shared<sim_opts>();
    CLI::App* c = app.add_subcommand(
        "sim", "Flash/DRAM device simulation: analytic (--shape), trace replay (--trace), synthetic traces");
    c->add_option("model_text", o->positional, "MODEL TEXT: online simulation driven by the engine's real masks");
    c->add_option("--shape", o->shape, "Model shape profile (assets/models) or JSON file: analytic mode");
    c->add_option("--method", o->method, "Online: any sparsity method (see eval --help); analytic: dense | static");
    c->add_option("--density", o->density, "Active fraction for --method static / --synthetic")
        ->check(CLI::Range(0.0, 1.0));
    c->add_option("--gamma", o->gamma, "DIP-CA weight of units not cached (online mode)")->check(CLI::Range(0.0, 1.0));
    add_method_knobs(c, o->knobs);
    c->add_option("-z,--tokenizer", o->tokenizer, "Online: llama2.c tokenizer.bin (default: embedded or beside the model)");
    c->add_option("--calib", o->calib, "Online: calibration file for methods that need one (default MODEL.calib)");
    c->add_option("--record", o->trace_out, "Online: also record the masks as a trace file for --trace replay");
    c->add_option("--trace", o->trace_path, "Trace file to replay");
    add_device_options(c, o->dev);
    c->add_option("--extra-resident", o->extra_resident, "Resident, always-read extras such as predictors (size)");
    c->add_option("--layout", o->layout, "MLP units: bundle, dip, cats or unit kinds (default: dip for DIP methods, else bundle)");
    c->add_option("--policy", o->policy, "Cache policy: none, lru, lfu, belady (replay only), window");
    c->add_option("--window", o->window, "Tokens kept by the window policy")->check(CLI::Range(1, 1 << 30));
    c->add_option("--pin-top", o->pin_top, "Pin each stream's most used units (hindsight): fraction of its cache");
    c->add_option("--layer-weights", o->layer_weights,
                  "Per-layer cache shares: comma-separated, or 'misses' (replay twice, split by measured misses)");
    c->add_option("--warmup", o->warmup, "Tokens left out of the summary");
    c->add_option("--threads", o->threads, "Replay threads (0: all cores)");
    c->add_option("--synthetic", o->synthetic_out, "Write a synthetic trace for --shape to this file and exit");
    c->add_option("--tokens", o->tokens, "Tokens: of the synthetic trace, or of TEXT in online mode")->check(CLI::Range(1, 1 << 20));
    c->add_option("--persistence", o->persistence, "Synthetic: chance a unit keeps its state")
        ->check(CLI::Range(0.0, 0.999));
    c->add_option("--skew", o->skew, "Synthetic: log-normal sigma of unit popularity")->check(CLI::Range(0.0, 10.0));
    c->add_option("--seed", o->seed, "Synthetic: random seed");
    c->add_flag("--per-token", o->per_token, "Per-token figures");
    c->add_flag("--per-layer", o->per_layer, "Per-layer table (JSON always has it)");
    c->add_flag("--json", o->json, "Machine-readable output");
    c->callback([o, &run] { run = [o] { return run_sim(*o); }; });
}

}  // namespace sl::cli

namespace sl::cli {

// `sparselens trace MODEL TEXT --method M --out FILE`: record the engine's masks for replay under many
// device/policy settings (`sim --trace FILE`). Cache-aware methods see the simulated cache of the
// device given here while recording.
void register_trace(CLI::App& app, command_fn& run) {
    auto o = std::make_shared<sim_opts>();
    CLI::App* c = app.add_subcommand("trace", "Record a method's per-token masks as a trace file for `sim --trace`");
    c->add_option("model_text", o->positional, "MODEL TEXT")->required()->expected(2);
    c->add_option("-o,--out", o->trace_out, "Trace file to write")->required();
    c->add_option("--method", o->method, "Sparsity method (see eval --help)")->check(CLI::IsMember(method_names()));
    c->add_option("--density", o->density, "Target MLP density")->check(CLI::Range(0.0, 1.0));
    c->add_option("--gamma", o->gamma, "DIP-CA weight of units not cached")->check(CLI::Range(0.0, 1.0));
    add_method_knobs(c, o->knobs);
    c->add_option("-z,--tokenizer", o->tokenizer, "llama2.c tokenizer.bin (default: embedded or beside the model)");
    c->add_option("--calib", o->calib, "Calibration file for methods that need one (default MODEL.calib)");
    c->add_option("--tokens", o->tokens, "Tokens of TEXT to run")->check(CLI::Range(1, 1 << 20));
    c->add_option("--layout", o->layout, "MLP units (default: dip for DIP methods, else bundle)");
    c->add_option("--device", o->dev.device, "Device whose cache cache-aware methods see while recording");
    c->add_option("--dram", o->dev.dram, "DRAM available to the model, e.g. 4GB");
    c->add_option("--bits", o->dev.bits, "Weight bits")->check(CLI::Range(1, 32));
    c->add_option("--context", o->dev.context, "KV cache context tokens");
    c->add_option("--policy", o->policy, "Cache policy while recording: none, lru, lfu, window");
    c->add_flag("--json", o->json, "Machine-readable output");
    c->callback([o, &run] { run = [o] { return run_online(*o); }; });
}

}  // namespace sl::cli

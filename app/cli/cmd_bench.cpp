// `sparselens bench`: prefill/decode tokens/s, achieved weight-read GB/s, and the machine's read bandwidth.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <utility>

#include <sys/resource.h>
#include <unistd.h>

#include "bench_kernels.h"
#include "cli_methods.h"
#include "sparselens/core/context.h"
#include "sparselens/core/model_stats.h"
#include "sparselens/core/sampler.h"
#include "sparselens/core/stage_ideal.h"
#include "sparselens/kernels/kernels.h"
#include "sparselens/kernels/membw.h"

namespace sl::cli {

namespace {

struct bench_opts {
    std::string model_path;
    method_opts method;  // --method: also measure decode with a sparsity method against dense
    int32_t prompt_len = 64;
    int32_t gen = 32;
    int32_t threads = 0;
    int32_t reps = 3;
    bool membw = false;
    double membw_gib = 1.0;
    bool json = false;
    bool stages = false;  // --stages: decode time per stage of the forward pass
    context_params::regroup regroup = context_params::regroup::faster;  // --regroup, --no-regroup
    bool no_amx = false;             // --no-amx: kernels::set_amx_enabled(false)
};

// Resident set size now (Linux /proc/self/statm; 0 elsewhere) and its peak (getrusage, KiB on Linux).
uint64_t rss_bytes() {
    std::ifstream f("/proc/self/statm");
    uint64_t size = 0, resident = 0;
    if (!(f >> size >> resident)) return 0;
    return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

uint64_t peak_rss_bytes() {
    struct rusage ru {};
    return ::getrusage(RUSAGE_SELF, &ru) == 0 ? static_cast<uint64_t>(ru.ru_maxrss) * 1024 : 0;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

struct decode_timing {
    double prefill_tps = 0.0;
    double decode_tps = 0.0;  // 1 / median per-token decode time
    size_t decoded = 0;
    double bytes_per_token = 0.0;  // weights the decode path read, from the densities it reported
    stage_times stages;            // --stages: summed over the decoded tokens after the first of each repetition
    double first_token_s = 0.0;    // mean time of each repetition's first decoded token
    double stage_bytes[stage_count] = {};  // weight bytes per token each stage read
};

// The ideal at the access pattern (--stages): a plain read (kernels::read_listed_rows, the best of its
// modes) of the rows the method's kernels read in a few decoded tokens (context::set_read_log), timed
// against the same read of the whole row-major matrices dense reads, stage by stage, tokens and modes
// taking turns. Random rows read slower than a stream on this memory whatever the arithmetic
// (docs/results.md, stops 33 and 34): a weight stage's ideal at its pattern is its ideal scaled by the two
// reads' times per byte. Only stages where the method listed rows are read (dense's references: the same
// stage, or gate/up + down for the pair stage); the others keep their ideal.
struct pattern_reads {
    double method_s[stage_count] = {}, method_bytes[stage_count] = {};
    double dense_s[stage_count] = {}, dense_bytes[stage_count] = {};
    int tokens = 0;

    // A method stage's read time per byte over the dense reference's (0: not read).
    double slowdown(int s) const {
        const int mlp_in = static_cast<int>(stage::mlp_in), down = static_cast<int>(stage::down);
        const bool pair = s == static_cast<int>(stage::mlp_fused);
        const double ref_s = pair ? dense_s[mlp_in] + dense_s[down] : dense_s[s];
        const double ref_b = pair ? dense_bytes[mlp_in] + dense_bytes[down] : dense_bytes[s];
        if (method_s[s] <= 0 || method_bytes[s] <= 0 || ref_s <= 0 || ref_b <= 0) return 0.0;
        return (method_s[s] / method_bytes[s]) / (ref_s / ref_b);
    }
};

// The next token of a greedy decode from ctx's logits.
int32_t greedy_token(const context& ctx, const float* logits) {
    return sampler::argmax({logits, static_cast<size_t>(ctx.vocab_size())});
}

// The weight reads of `tokens` decoded tokens of ctx (a method attached) after the prompt, one log each.
std::vector<std::vector<weight_read>> record_reads(context& ctx, const std::vector<int32_t>& prompt, int tokens) {
    std::vector<std::vector<weight_read>> logs(static_cast<size_t>(tokens));
    const float* logits = ctx.prefill(prompt, 0);
    for (int i = 0; i < tokens; ++i) {
        const int32_t tok = greedy_token(ctx, logits);
        ctx.set_read_log(&logs[static_cast<size_t>(i)]);
        logits = ctx.decode(tok, static_cast<int32_t>(prompt.size()) + i);
        ctx.set_read_log(nullptr);
    }
    return logs;
}

// Replays the logged reads of the method and dense's whole matrices for the stages where the method
// listed rows, a token at a time (dense's, then the method's), each mode of read_listed_rows in turn.
pattern_reads replay_reads(const model& m, const std::vector<std::vector<weight_read>>& logs, int threads) {
    bool listed[stage_count] = {};
    for (const auto& log : logs)
        for (const weight_read& r : log) listed[static_cast<int>(r.at)] |= !r.idx.empty();
    bool ref[stage_count] = {};  // dense's references
    for (int st = 0; st < stage_count; ++st) ref[st] = listed[st];
    if (listed[static_cast<int>(stage::mlp_fused)])
        ref[static_cast<int>(stage::mlp_in)] = ref[static_cast<int>(stage::down)] = true;
    std::vector<weight_read> dense;
    for (const layer_weights& lw : m.layers) {
        const std::pair<stage, const tensor_view*> mats[] = {{stage::qkv, &lw.wq},      {stage::qkv, &lw.wk},
                                                             {stage::qkv, &lw.wv},      {stage::o, &lw.wo},
                                                             {stage::mlp_in, &lw.w_gate}, {stage::mlp_in, &lw.w_up},
                                                             {stage::down, &lw.w_down}};
        for (const auto& [st, w] : mats)
            if (ref[static_cast<int>(st)]) dense.push_back({st, w->data, w->row_bytes(), w->rows, {}});
    }
    int64_t max_rows = 0;
    for (const weight_read& r : dense) max_rows = std::max(max_rows, r.rows);
    for (const auto& log : logs)
        for (const weight_read& r : log) max_rows = std::max(max_rows, r.rows);
    std::vector<int32_t> all(static_cast<size_t>(max_rows));
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);

    using clock = std::chrono::steady_clock;
    double t[kernels::k_read_listed_modes][2][stage_count] = {};
    volatile uint64_t sink = 0;  // keeps the reads observable
    auto pass = [&](const std::vector<weight_read>& reads, bool method, int mode) {
        for (const weight_read& r : reads) {
            const int st = static_cast<int>(r.at);
            if (method && !listed[st]) continue;
            // A whole matrix as one stream: runs of up to 64 rows (a power of two dividing the count)
            // read as one, as a dense gemv streams it (row by row read it 5-10% slower).
            const bool whole = r.idx.empty();
            int64_t run = 1;
            while (whole && run < 64 && r.rows % (2 * run) == 0) run *= 2;
            const auto t0 = clock::now();
            sink = sink + kernels::read_listed_rows(r.base, r.row_bytes * run, whole ? all.data() : r.idx.data(),
                                                    whole ? r.rows / run : static_cast<int64_t>(r.idx.size()), threads,
                                                    mode);
            t[mode][method][st] += std::chrono::duration<double>(clock::now() - t0).count();
        }
    };
    for (int mode = 0; mode < kernels::k_read_listed_modes; ++mode)
        for (const auto& log : logs) {
            pass(dense, false, mode);
            pass(log, true, mode);
        }
    pattern_reads p;
    p.tokens = static_cast<int>(logs.size());
    for (int st = 0; st < stage_count; ++st) {
        p.dense_s[st] = t[0][0][st];
        p.method_s[st] = t[0][1][st];
        for (int mode = 1; mode < kernels::k_read_listed_modes; ++mode) {
            p.dense_s[st] = std::min(p.dense_s[st], t[mode][0][st]);
            p.method_s[st] = std::min(p.method_s[st], t[mode][1][st]);
        }
    }
    for (const weight_read& r : dense)
        p.dense_bytes[static_cast<int>(r.at)] += static_cast<double>(r.bytes()) * p.tokens;
    for (const auto& log : logs)
        for (const weight_read& r : log)
            if (const int st = static_cast<int>(r.at); listed[st]) p.method_bytes[st] += static_cast<double>(r.bytes());
    return p;
}

// The --stages table: per stage ms/token and GB/s of dense and the method, and what the method's stage
// would take at dense's GB/s on its bytes (weight stages) or in dense's time (the rest; select and fetch:
// 0; a fused method's MLP: dense's whole MLP scaled by the bytes), and that ideal at the access pattern
// of its reads (`pat`). Its "over" column is where a method loses its ideal speed-up. Returns the
// pattern ideal's total over the ideal's (1 without `pat`).
double print_stages(const decode_timing& dense, const decode_timing* sparse, const pattern_reads* pat,
                    const std::string& name, nlohmann::json& j, bool json) {
    const auto ms = [](const decode_timing& t, int s) {
        return t.stages.tokens > 0 ? 1e3 * t.stages.seconds[s] / static_cast<double>(t.stages.tokens) : 0.0;
    };
    const auto gbs = [&](const decode_timing& t, int s) -> std::string {
        const double v = ms(t, s);
        if (v <= 0 || t.stage_bytes[s] <= 0) return "-";
        char b[32];
        std::snprintf(b, sizeof b, "%.1f", t.stage_bytes[s] / (v * 1e-3) / 1e9);
        return b;
    };
    double ideal_ms[stage_count] = {};
    if (sparse) stage_ideal_ms(dense.stages, dense.stage_bytes, sparse->stage_bytes, ideal_ms);
    if (!json) {
        std::printf("stages     decode ms per token by stage, means over %lld tokens (each repetition's tokens after its "
                    "first; a token's stages add up to its forward pass)\n",
                    static_cast<long long>(dense.stages.tokens));
        std::printf("  first decoded token after the prompt: dense %.3f ms", 1e3 * dense.first_token_s);
        if (sparse) std::printf(", %s %.3f ms", name.c_str(), 1e3 * sparse->first_token_s);
        std::printf("\n");
        std::printf("  %-10s %9s %7s", "stage", "dense ms", "GB/s");
        if (sparse) std::printf(" %9s %7s %9s %7s", (name + " ms").c_str(), "GB/s", "ideal ms", "over");
        if (pat) std::printf(" %9s %7s", "at patt.", "over");
        std::printf("\n");
    }
    nlohmann::json rows = nlohmann::json::object();
    double tot_d = 0, tot_s = 0, tot_i = 0, tot_p = 0;
    for (int s = 0; s < stage_count; ++s) {
        const double dm = ms(dense, s), sm = sparse ? ms(*sparse, s) : 0.0, im = ideal_ms[s];
        // Never under the ideal; and a stage that ran faster than the plain read of its rows shows that
        // read is not its pattern's ceiling: its own time is then.
        const double slow = pat ? pat->slowdown(s) : 0.0, pm = slow > 0 ? std::max(im, std::min(im * slow, sm)) : im;
        tot_d += dm;
        tot_s += sm;
        tot_i += im;
        tot_p += pm;
        nlohmann::json row = {{"dense_ms", dm}, {"dense_weight_bytes", dense.stage_bytes[s]}};
        if (sparse) {
            row["method_ms"] = sm;
            row["method_weight_bytes"] = sparse->stage_bytes[s];
            row["ideal_ms"] = im;
        }
        if (pat) {
            row["pattern_ms"] = pm;
            row["pattern_read_slowdown"] = slow > 0 ? slow : 1.0;
        }
        rows[stage_name(static_cast<stage>(s))] = row;
        if (json || (dm <= 0 && sm <= 0)) continue;
        std::printf("  %-10s %9.3f %7s", stage_name(static_cast<stage>(s)), dm, gbs(dense, s).c_str());
        if (sparse) std::printf(" %9.3f %7s %9.3f %+7.3f", sm, gbs(*sparse, s).c_str(), im, sm - im);
        if (pat) std::printf(" %9.3f %+7.3f", pm, sm - pm);
        std::printf("\n");
    }
    if (!json) {
        std::printf("  %-10s %9.3f %7s", "total", tot_d, "");
        if (sparse) std::printf(" %9.3f %7s %9.3f %+7.3f", tot_s, "", tot_i, tot_s - tot_i);
        if (pat) std::printf(" %9.3f %+7.3f", tot_p, tot_s - tot_p);
        std::printf("\n");
        if (sparse)
            std::printf("  ideal: each weight stage at dense's GB/s on the method's bytes, the rest in dense's time, "
                        "selection at dense's MLP GB/s on what it reads (0 for activations only)\n");
        if (pat)
            std::printf("  at patt.: on stages where the method lists rows, the ideal times a plain read's time per "
                        "byte of those rows (%d tokens, best of %d\n    read modes) over that of the whole matrices "
                        "dense reads; at most the stage's own time, never under the ideal\n",
                        pat->tokens, kernels::k_read_listed_modes);
    }
    j["stages"] = {{"tokens", dense.stages.tokens}, {"by_stage", rows}, {"dense_first_token_ms", 1e3 * dense.first_token_s}};
    if (sparse) j["stages"]["method_first_token_ms"] = 1e3 * sparse->first_token_s;
    if (pat) j["stages"]["pattern_tokens"] = pat->tokens;
    return tot_i > 0 ? tot_p / tot_i : 1.0;
}

// What the repetitions of one context measured (time_rep appends, summarize reduces).
struct decode_samples {
    std::vector<double> prefill_tps, token_s;
    std::vector<double> rep_token_s;  // each repetition's median decoded-token time
    double bytes = 0.0;
    stage_times stages;
};

// One repetition on each context: the prompt, then o.gen decoded tokens, each timed, the contexts
// taking turns token by token (dense and a method: this host's memory bandwidth moves within seconds,
// and timing one after the other put those moves into the ratio; docs/results.md, stop 29).
void time_rep(std::span<context* const> ctxs, const std::vector<int32_t>& prompt, const bench_opts& o,
              std::span<decode_samples* const> out) {
    using clock = std::chrono::steady_clock;
    const size_t n = ctxs.size();
    std::vector<int32_t> tok(n);
    std::vector<std::vector<double>> rep(n);
    for (size_t c = 0; c < n; ++c) {
        const auto t0 = clock::now();
        const float* logits = ctxs[c]->prefill(prompt, 0);
        out[c]->prefill_tps.push_back(o.prompt_len / std::chrono::duration<double>(clock::now() - t0).count());
        ctxs[c]->reset_density();
        tok[c] = greedy_token(*ctxs[c], logits);
    }
    for (int32_t i = 0; i < o.gen; ++i) {
        for (size_t c = 0; c < n; ++c) {
            // Decode only (a method's prefill runs the same path token by token), after the first token:
            // the steady state; the first token (GRIFFIN copies its experts then) is reported apart.
            if (i == 1) ctxs[c]->set_stage_timing(o.stages);
            const auto t1 = clock::now();
            const float* logits = ctxs[c]->decode(tok[c], o.prompt_len + i);
            rep[c].push_back(std::chrono::duration<double>(clock::now() - t1).count());
            tok[c] = greedy_token(*ctxs[c], logits);
        }
    }
    for (size_t c = 0; c < n; ++c) {
        decode_samples& s = *out[c];
        context& ctx = *ctxs[c];
        s.token_s.insert(s.token_s.end(), rep[c].begin(), rep[c].end());
        s.rep_token_s.push_back(median(rep[c]));
        s.bytes = ctx.method() ? read_bytes_per_token(ctx) : static_cast<double>(ctx.decode_weight_bytes());
        s.stages += ctx.stage_timing();
        ctx.set_stage_timing(false);
    }
}

decode_timing summarize(const context& ctx, const decode_samples& s, const bench_opts& o) {
    double first = 0.0;
    for (size_t i = 0; i < s.token_s.size(); i += static_cast<size_t>(o.gen)) first += s.token_s[i];
    const size_t reps = std::max<size_t>(1, s.rep_token_s.size());
    decode_timing t{median(s.prefill_tps), 1.0 / median(s.token_s), s.token_s.size(), s.bytes, s.stages,
                    first / static_cast<double>(reps)};
    if (o.stages) stage_weight_bytes(ctx, s.stages, t.stage_bytes);
    return t;
}

// Memory with the method attached (ctx after a repetition): its layouts replace the matrices they
// transpose, so what stays resident (weights + KV cache + scratch, over the process's start) should be ~
// the file. Into j["memory"]; returns the two lines the text output prints.
std::string report_memory(const context& ctx, const std::string& path, uint64_t rss_before, nlohmann::json& j) {
    std::error_code ec;
    const auto file_bytes = static_cast<uint64_t>(std::filesystem::file_size(path, ec));
    const uint64_t rss = rss_bytes(), peak = peak_rss_bytes();
    const uint64_t model_weights = model_count_bytes(ctx.get_model()).total(), held = ctx.resident_weight_bytes();
    const uint64_t over_load = rss - std::min(rss, rss_before);
    const double over_file = ec || !file_bytes ? 0.0 : double(over_load) / file_bytes;
    j["memory"] = {{"file_bytes", ec ? 0 : file_bytes},
                   {"model_weight_bytes", model_weights},
                   {"resident_weight_bytes", held},
                   {"resident_weights_over_model_weights", model_weights ? double(held) / model_weights : 0.0},
                   {"layout_bytes", ctx.layout_bytes()},
                   {"rows_x8_bytes", ctx.rows_x8_bytes()},
                   {"rss_bytes", rss},
                   {"rss_over_load_bytes", over_load},
                   {"peak_rss_bytes", peak},
                   {"resident_over_file", over_file}};
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "weights    %.1f MiB held with the method (%.3fx the model's %.1f MiB: layouts in, replaced matrices "
                  "out)\nmemory     file %.1f MiB, resident after a method run %.1f MiB (%.3fx), peak RSS %.1f MiB\n",
                  double(held) / (1 << 20), model_weights ? double(held) / model_weights : 0.0,
                  double(model_weights) / (1 << 20), double(file_bytes) / (1 << 20), double(over_load) / (1 << 20),
                  over_file, double(peak) / (1 << 20));
    return buf;
}

int run_bench(const bench_opts& o) {
    if (o.model_path.empty() && !o.membw) throw cli_error("bench: give a MODEL, --membw, or both");
    const int threads = o.threads > 0 ? o.threads : kernels::default_threads();
    nlohmann::json j;
    j["threads"] = threads;
    j["isa"] = kernels::isa_name(kernels::active_isa());
    // Which of two same-bits kernels sums Q4_0x8 input-major rows (a CPU choice, kernels.h): methods that
    // read Q4_0 (or Q4_K / IQ4) matrices by input run through it.
    j["q4_0x8_chunk"] = kernels::q4_0x8_chunk_name();
    if (o.no_amx) kernels::set_amx_enabled(false);
    j["amx"] = kernels::amx_enabled();
    // How idle workers waited (prefer_passive_openmp): part of what a decode number means.
    const std::string policy = env_or("OMP_WAIT_POLICY", "default"), spin = env_or("GOMP_SPINCOUNT", "default");
    j["omp_wait_policy"] = policy;
    j["gomp_spincount"] = spin;
    if (!o.json)
        std::printf("threads    %d, OpenMP wait policy %s, spin count %s, ISA %s%s, Q4_0x8 input-sparse chunk %s\n",
                    threads, policy.c_str(), spin.c_str(), kernels::isa_name(kernels::active_isa()),
                    kernels::amx_enabled() ? " (prefill on AMX tiles)" : o.no_amx ? " (AMX off)" : "",
                    kernels::q4_0x8_chunk_name());

    double membw = 0.0;
    if (o.membw) {
        membw = kernels::measure_read_bandwidth_gbs(threads, static_cast<int64_t>(o.membw_gib * (1 << 30)), 5);
        j["read_bandwidth_gbs"] = membw;
        if (!o.json) std::printf("memory     measured read bandwidth %.2f GB/s (%d threads, %.2f GiB buffer, median of 5)\n",
                                 membw, threads, o.membw_gib);
    }
    if (!o.model_path.empty()) {
        const uint64_t rss_before = rss_bytes();
        const auto load_start = std::chrono::steady_clock::now();
        std::optional<model> m(take(model_load(o.model_path)));
        // Includes the copy into huge pages when that is on (SPARSELENS_HUGE_WEIGHTS, docs/results.md).
        const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
        j["load_seconds"] = load_s;
        if (!o.json) std::printf("load       %.2f s\n", load_s);
        context_params cp = context_default_params();
        cp.n_threads = threads;
        cp.n_ctx = std::min(m->hp.seq_len, o.prompt_len + o.gen);
        cp.n_batch = std::max(1, o.prompt_len);
        cp.regroup_rows = o.regroup;
        if (o.prompt_len + o.gen > m->hp.seq_len) throw cli_error("bench: prompt + gen exceeds the model's context");

        std::mt19937 rng(1234);
        std::uniform_int_distribution<int32_t> dist(3, m->hp.vocab_size - 1);
        std::vector<int32_t> prompt(static_cast<size_t>(o.prompt_len));
        for (int32_t& t : prompt) t = dist(rng);

        const bool with_method = o.method.cfg.name != "dense";
        std::optional<calibration> cal;
        std::string memory_text;
        if (with_method) {
            cal = load_calibration(o.method, *m, method_config_needs_calibration(o.method.cfg));
            // Memory first, as a user runs the method: each replaced matrix's pages handed back as its
            // layout is built, one repetition, then what stays resident and the peak so far.
            {
                context first = take(context::create(*m, cp));
                auto method = take(make_method(o.method.cfg, *m, cal ? &*cal : nullptr));
                first.set_method(method.get());
                decode_samples untimed;
                context* one[] = {&first};
                decode_samples* sink[] = {&untimed};
                time_rep(one, prompt, o, sink);
                memory_text = report_memory(first, o.model_path, rss_before, j);
            }
            // The handed-back pages would come back from the file on 4 KiB pages, not as the huge-page
            // copy dense read them from: the timing runs on a fresh load.
            m.reset();
            m.emplace(take(model_load(o.model_path)));
        }
        // Beside a method: neither context hands back pages the other reads (dense's Q4_Kx8r copies replace
        // matrices the method may read row by row).
        context_params dcp = cp;
        dcp.keep_replaced = with_method;
        context ctx = take(context::create(*m, dcp));
        ctx.prepare();  // the Q4_Kx8r copies are made before the timed repetitions, as a load would
        std::unique_ptr<sparsity_method> method;
        std::optional<context> mctx;
        if (with_method) {
            method = take(make_method(o.method.cfg, *m, cal ? &*cal : nullptr));
            context_params mcp = cp;
            mcp.keep_replaced = true;  // ctx reads the row-major matrices in the same rounds
            mctx.emplace(take(context::create(*m, mcp)));
            mctx->set_method(method.get());
            mctx->prepare();
        }
        decode_samples dense_s, method_s;
        std::vector<context*> ctxs = {&ctx};
        std::vector<decode_samples*> outs = {&dense_s};
        if (mctx) {
            ctxs.push_back(&*mctx);
            outs.push_back(&method_s);
        }
        for (int32_t rep = 0; rep < o.reps; ++rep) time_rep(ctxs, prompt, o, outs);
        const decode_timing dense = summarize(ctx, dense_s, o);
        const double achieved = dense.bytes_per_token * dense.decode_tps / 1e9;
        j["model"] = o.model_path;
        j["prompt_len"] = o.prompt_len;
        j["gen"] = o.gen;
        j["prefill_tokens_per_second"] = dense.prefill_tps;
        j["decode_tokens_per_second"] = dense.decode_tps;
        j["decode_weight_bytes_per_token"] = dense.bytes_per_token;
        j["decode_weight_gbs"] = achieved;
        if (membw > 0) j["fraction_of_read_bandwidth"] = achieved / membw;
        if (!o.json) {
            std::printf("model      %s (%.1f MiB read per decoded token)\n", o.model_path.c_str(),
                        dense.bytes_per_token / (1 << 20));
            std::printf("prefill    %.1f tokens/s (%d-token prompt, median of %d)\n", dense.prefill_tps, o.prompt_len, o.reps);
            std::printf("decode     %.2f tokens/s (median over %zu tokens) = %.2f GB/s of weights", dense.decode_tps,
                        dense.decoded, achieved);
            if (membw > 0) std::printf(" = %.1f%% of measured read bandwidth", 100.0 * achieved / membw);
            std::printf("\n");
        }
        if (mctx) {
            const decode_timing sparse = summarize(*mctx, method_s, o);
            const double ideal = dense.bytes_per_token / sparse.bytes_per_token;
            const double measured = sparse.decode_tps / dense.decode_tps;
            // Each repetition's speed-up (its median token times): how far the host moved the ratio.
            std::vector<double> per_rep;
            for (size_t r = 0; r < method_s.rep_token_s.size(); ++r)
                per_rep.push_back(dense_s.rep_token_s[r] / method_s.rep_token_s[r]);
            const auto [lo, hi] = std::minmax_element(per_rep.begin(), per_rep.end());
            j["method"] = {{"name", o.method.cfg.name},
                           {"density_target", o.method.cfg.density},
                           {"decode_tokens_per_second", sparse.decode_tps},
                           {"decode_weight_bytes_per_token", sparse.bytes_per_token},
                           {"speedup", measured},
                           {"speedup_per_repetition", per_rep},
                           {"ideal_speedup", ideal},
                           {"fraction_of_ideal", measured / ideal},
                           {"layout_bytes", mctx->layout_bytes()}};
            if (!o.json) {
                std::printf("%s", memory_text.c_str());
                std::printf("%-10s %.2f tokens/s reading %.1f MiB/token: speed-up %.2fx (repetitions %.2f-%.2fx) of an "
                            "ideal %.2fx (%.0f%%); layouts %.1f MiB\n",
                            o.method.cfg.name.c_str(), sparse.decode_tps, sparse.bytes_per_token / (1 << 20), measured,
                            *lo, *hi, ideal, 100.0 * measured / ideal,
                            static_cast<double>(mctx->layout_bytes()) / (1 << 20));
            }
            if (o.stages) {
                // After the timed repetitions (the log allocates): a few tokens' reads, replayed.
                const pattern_reads pat = replay_reads(*m, record_reads(*mctx, prompt, std::min(o.gen, 8)), threads);
                const double scale = print_stages(dense, &sparse, &pat, o.method.cfg.name, j, o.json);
                const double at_pattern = ideal / scale;
                j["method"]["pattern_ideal_speedup"] = at_pattern;
                j["method"]["fraction_of_pattern_ideal"] = measured / at_pattern;
                if (!o.json)
                    std::printf("%-10s at the access pattern of its reads the ideal %.2fx becomes %.2fx: measured "
                                "%.2fx is %.0f%% of it\n",
                                o.method.cfg.name.c_str(), ideal, at_pattern, measured, 100.0 * measured / at_pattern);
            }
        } else if (o.stages) {
            print_stages(dense, nullptr, nullptr, "", j, o.json);
        }
    }
    if (o.json) print_json(j);
    return 0;
}

}  // namespace

void register_bench(CLI::App& app, command_fn& run) {
    auto o = std::make_shared<bench_opts>();
    CLI::App* c = app.add_subcommand("bench", "Prefill/decode speed, achieved weight GB/s, measured memory bandwidth");
    c->add_option("model", o->model_path, "Model file (optional with --membw)");
    c->add_option("--prompt-len", o->prompt_len, "Prefill tokens")->check(CLI::Range(1, 1 << 16));
    c->add_option("--gen", o->gen, "Decoded tokens per repetition")->check(CLI::Range(1, 1 << 16));
    c->add_option("--reps", o->reps, "Repetitions")->check(CLI::Range(1, 1000));
    c->add_option("--threads", o->threads, "Worker threads (0: all cores)")->check(CLI::NonNegativeNumber);
    c->add_flag("--membw", o->membw, "Also measure the machine's read bandwidth (the roofline)");
    c->add_option("--membw-gib", o->membw_gib, "Buffer size for --membw in GiB")->check(CLI::Range(0.01, 64.0));
    c->add_option("-m,--method", o->method.cfg.name, "Also decode with this sparsity method and compare")
        ->check(CLI::IsMember(method_names()));
    c->add_option("--density", o->method.cfg.density, "Method: target MLP density")->check(CLI::Range(0.0, 1.0));
    c->add_option("--gamma", o->method.cfg.gamma, "DIP-CA gamma")->check(CLI::Range(0.0, 1.0));
    c->add_option("--calib", o->method.calib_path, "Calibration for methods that need one (default MODEL.calib)");
    c->add_flag("--json", o->json, "Machine-readable output");
    c->add_flag("--stages", o->stages,
                "Also time each stage of the decode (q/k/v, attention, MLP parts, selection, logits): ms/token, GB/s, "
                "and per stage what the method would take at dense's GB/s");
    c->add_flag_callback(
        "--no-regroup", [o] { o->regroup = context_params::regroup::off; },
        "Read Q4_K, Q4_0 and Q8_0 matrices as the file's rows, not regrouped 8 rows at a time (what the regrouping "
        "buys; the same results); the same as --regroup off");
    const std::map<std::string, context_params::regroup> regroup_modes{
        {"faster", context_params::regroup::faster}, {"all", context_params::regroup::all},
        {"off", context_params::regroup::off}};
    c->add_option("--regroup", o->regroup,
                  "Which matrices are regrouped 8 rows at a time: faster (default: the types where that pays on this "
                  "CPU), all (every type this CPU has a regrouped kernel for), off")
        ->transform(CLI::CheckedTransformer(regroup_modes).description(""))
        ->type_name("faster|all|off");
    c->add_flag("--no-amx", o->no_amx,
                "Prefill without the AMX tiles on CPUs that have them (the AVX-512 VNNI kernel; the same results)");
    // `bench kernels` sets `run` itself; CLI11 runs this parent callback after it, so leave it alone then.
    CLI::App* kernels = register_bench_kernels(*c, run);
    c->callback([o, &run, kernels] {
        if (kernels->parsed()) return;
        run = [o] { return run_bench(*o); };
    });
}

}  // namespace sl::cli

// Trace replay and sweeps: each (setting, stream) pair is an independent job, so streams replay
// stream-major (cache state stays hot) and jobs spread over std::threads.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <thread>

#include "sim_internal.h"

namespace sl::sim {

namespace {

// For every access of `stream`, the next token in which the same unit is active (never_used if none).
void next_uses(const trace& t, uint32_t stream, std::vector<uint32_t>& out, std::vector<uint64_t>& starts,
               std::vector<uint32_t>& seen) {
    starts.assign(size_t{t.n_tokens} + 1, 0);
    for (uint32_t tok = 0; tok < t.n_tokens; ++tok) starts[tok + 1] = starts[tok] + t.active(tok, stream).size();
    out.resize(starts.back());
    seen.assign(t.stream_units(stream), never_used);
    for (uint32_t tok = t.n_tokens; tok-- > 0;) {
        const std::span<const uint32_t> a = t.active(tok, stream);
        uint32_t* o = out.data() + starts[tok];
        for (size_t i = 0; i < a.size(); ++i) {
            o[i] = seen[a[i]];
            seen[a[i]] = tok;
        }
    }
}

struct job_scratch {
    std::vector<uint32_t> misses, next, seen;
    std::vector<uint64_t> starts;
};

void run_stream(const trace& t, const detail::sim_setup& su, uint32_t stream, stream_token_stats* out,
                job_scratch& js) {
    const uint32_t S = t.n_streams();
    stream_cache cache(su.units[stream], su.configs[stream]);
    const bool belady = su.configs[stream].policy == cache_policy::belady;
    if (belady) next_uses(t, stream, js.next, js.starts, js.seen);
    const uint32_t page = su.p.device.flash_page_bytes;
    const uint64_t ub = su.unit_bytes[stream];
    for (uint32_t tok = 0; tok < t.n_tokens; ++tok) {
        const std::span<const uint32_t> a = t.active(tok, stream);
        const access_stats st = cache.access(tok, a, belady ? js.next.data() + js.starts[tok] : nullptr, js.misses);
        stream_token_stats& x = out[size_t{tok} * S + stream];
        x.hits = st.hits;
        x.misses = st.misses;
        x.inserted = st.inserted;
        x.evicted = st.evicted;
        x.n_resident = cache.n_resident();
        detail::misses_to_reads(js.misses, ub, page, x, su.p.device.flash_merge_gap_pages);
    }
}

bool trace_matches(const trace& t, std::string& why) {
    if (t.offsets.size() != size_t{t.n_tokens} * t.n_streams() + 1 || t.offsets.back() != t.ids.size()) {
        why = "trace offsets do not match its token and stream counts";
        return false;
    }
    return true;
}

}  // namespace

result<std::vector<run_report>> sweep(const trace& t, std::span<const sim_params> settings, uint32_t threads,
                                      const progress_fn& progress) {
    if (auto o = trace_validate(t, "trace"); !o) return o.err();
    std::string why;
    if (!trace_matches(t, why)) return error{why};
    std::vector<detail::sim_setup> setups;
    setups.reserve(settings.size());
    for (size_t i = 0; i < settings.size(); ++i) {
        auto su = detail::setup_build(t.shape, t.layout, settings[i], true);
        if (!su)
            return error{settings.size() > 1 ? "setting " + std::to_string(i) + ": " + su.message() : su.message()};
        setups.push_back(std::move(su).value());
    }
    const uint32_t S = t.n_streams();
    std::vector<std::vector<stream_token_stats>> stats(settings.size());
    for (auto& s : stats) s.resize(size_t{t.n_tokens} * S);

    const size_t n_jobs = settings.size() * S;
    uint32_t n_threads = threads ? threads : std::max(1u, std::thread::hardware_concurrency());
    n_threads = static_cast<uint32_t>(std::min<size_t>(n_threads, std::max<size_t>(n_jobs, 1)));
    std::atomic<size_t> next{0}, done{0};
    std::atomic<bool> stop{false}, failed{false};
    auto work = [&](bool report) {
        job_scratch js;
        for (;;) {
            if (stop.load(std::memory_order_relaxed)) return;
            const size_t j = next.fetch_add(1);
            if (j >= n_jobs) return;
            try {
                run_stream(t, setups[j / S], static_cast<uint32_t>(j % S), stats[j / S].data(), js);
            } catch (const std::exception&) {  // out of memory in a worker: fail the call, not the process
                failed = true;
                stop = true;
                return;
            }
            const size_t d = done.fetch_add(1) + 1;
            if (report && progress && !progress(static_cast<float>(d) / static_cast<float>(n_jobs))) stop = true;
        }
    };
    std::vector<std::thread> pool;
    for (uint32_t i = 1; i < n_threads; ++i) pool.emplace_back(work, false);
    work(true);  // the calling thread works too and is the only one that calls `progress`
    // Keep reporting (and honouring cancellation) while the other threads finish their last jobs.
    if (progress) {
        float reported = -1;
        while (!stop.load() && done.load() < n_jobs) {
            const float f = static_cast<float>(done.load()) / static_cast<float>(n_jobs);
            if (f != reported && !progress(f)) stop = true;
            reported = f;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        if (!stop.load() && reported < 1.0f && !progress(1.0f)) stop = true;
    }
    for (std::thread& th : pool) th.join();
    if (failed) return error{"replay: out of memory"};
    if (stop) return error{"replay cancelled", true};

    std::vector<run_report> out;
    out.reserve(settings.size());
    for (size_t i = 0; i < settings.size(); ++i) {
        const detail::sim_setup& su = setups[i];
        std::vector<token_report> tokens(t.n_tokens);
        std::vector<stream_report> sums = detail::stream_sums_init(su);
        for (uint32_t tok = 0; tok < t.n_tokens; ++tok) {
            const std::span<const stream_token_stats> row(stats[i].data() + size_t{tok} * S, S);
            tokens[tok] = detail::token_total(su, tok, row);
            if (tok >= su.p.warmup_tokens)
                for (uint32_t s = 0; s < S; ++s) detail::stream_sum_add(sums[s], row[s], su.unit_bytes[s]);
        }
        run_report r = detail::report_build(su, "replay", std::move(tokens), std::move(sums));
        r.label = t.label;
        if (su.p.keep_stream_tokens) r.stream_tokens = std::move(stats[i]);
        std::vector<stream_token_stats>().swap(stats[i]);
        out.push_back(std::move(r));
    }
    return out;
}

result<run_report> replay(const trace& t, const sim_params& p, const progress_fn& progress) {
    auto r = sweep(t, std::span<const sim_params>(&p, 1), p.threads, progress);
    if (!r) return r.err();
    return std::move(r->front());
}

}  // namespace sl::sim

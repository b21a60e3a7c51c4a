// The tuner: coarse density grid, bisection at each budget's boundary, DIP splits and DIP-CA gammas, with
// every evaluation's masks replayed under the device's cache policies.
#include "sparselens/sim/tuner.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>

#include "sparselens/core/ffsplit.h"
#include "sparselens/sim/residency.h"
#include "sparselens/sim/shape.h"
#include "sparselens/sim/trace.h"

namespace sl::sim {

namespace {

using clock_type = std::chrono::steady_clock;

std::string format_number(double v) {
    std::ostringstream s;
    s << v;
    return s.str();
}

// Forwards to the device cache and remembers where each window starts in the recorded trace:
// eval_method resets the residency before every window, so each window replays with a cold cache, as
// DIP-CA saw it while it chose its masks.
class window_recorder final : public residency_source {
public:
    window_recorder(residency_source& inner, const trace& t) : m_inner(inner), m_trace(t) {}
    const uint8_t* resident_inputs(int32_t layer) const override { return m_inner.resident_inputs(layer); }
    const uint8_t* resident_neurons(int32_t layer) const override { return m_inner.resident_neurons(layer); }
    void on_token(int32_t layer, int32_t pos, const layer_masks& masks) override { m_inner.on_token(layer, pos, masks); }
    void reset() override {
        m_starts.push_back(m_trace.n_tokens);
        m_inner.reset();
    }
    const std::vector<uint32_t>& starts() const { return m_starts; }

private:
    residency_source& m_inner;
    const trace& m_trace;
    std::vector<uint32_t> m_starts;
};

trace trace_slice(const trace& t, uint32_t first, uint32_t last) {
    trace s;
    s.shape = t.shape;
    s.layout = t.layout;
    s.label = t.label;
    s.n_tokens = last - first;
    const size_t S = t.n_streams();
    const uint64_t base = t.offsets[first * S];
    s.offsets.resize((last - first) * S + 1);
    for (size_t r = 0; r < s.offsets.size(); ++r) s.offsets[r] = t.offsets[first * S + r] - base;
    s.ids.assign(t.ids.begin() + static_cast<std::ptrdiff_t>(base),
                 t.ids.begin() + static_cast<std::ptrdiff_t>(t.offsets[last * S]));
    return s;
}

// Replays each window of `t` from a cold cache under every setting and sums the windows.
result<std::vector<sim_summary>> replay_windows(const trace& t, std::vector<uint32_t> starts,
                                                const std::vector<sim_params>& settings) {
    if (starts.empty() || starts.front() != 0) starts.insert(starts.begin(), 0);
    starts.push_back(t.n_tokens);
    std::vector<double> tokens(settings.size()), latency(settings.size()), hits(settings.size()),
        misses(settings.size()), flash(settings.size()), dram(settings.size());
    for (size_t w = 0; w + 1 < starts.size(); ++w) {
        if (starts[w + 1] <= starts[w]) continue;
        const trace part = trace_slice(t, starts[w], starts[w + 1]);
        auto reports = sweep(part, settings);
        if (!reports) return reports.err();
        for (size_t i = 0; i < settings.size(); ++i) {
            const run_report& r = (*reports)[i];
            tokens[i] += r.n_tokens;
            latency[i] += r.mean_latency_s * r.n_tokens;
            flash[i] += r.flash_bytes_per_token * r.n_tokens;
            dram[i] += r.dram_bytes_per_token * r.n_tokens;
            for (const stream_report& s : r.streams) {
                hits[i] += static_cast<double>(s.hits);
                misses[i] += static_cast<double>(s.misses);
            }
        }
    }
    std::vector<sim_summary> out(settings.size());
    for (size_t i = 0; i < settings.size(); ++i) {
        out[i].policy = settings[i].policy;
        out[i].tokens_per_s = latency[i] > 0 ? tokens[i] / latency[i] : 0.0;
        out[i].hit_rate = hits[i] + misses[i] > 0 ? hits[i] / (hits[i] + misses[i]) : 0.0;
        out[i].flash_bytes_per_token = tokens[i] > 0 ? flash[i] / tokens[i] : 0.0;
        out[i].dram_bytes_per_token = tokens[i] > 0 ? dram[i] / tokens[i] : 0.0;
    }
    return out;
}

// The first `windows` windows of a reference (stage 1 evaluates on fewer windows).
dense_reference reference_prefix(const dense_reference& ref, int32_t windows) {
    if (windows <= 0 || windows >= ref.n_windows) return ref;
    dense_reference r;
    r.n_ctx = ref.n_ctx;
    r.n_windows = windows;
    r.vocab = ref.vocab;
    r.decode_tokens_per_second = ref.decode_tokens_per_second;
    const size_t per_window = static_cast<size_t>(ref.scored_per_window()) * static_cast<size_t>(ref.vocab);
    r.tokens.assign(ref.tokens.begin(), ref.tokens.begin() + static_cast<std::ptrdiff_t>(windows) * ref.n_ctx);
    r.logprobs.assign(ref.logprobs.begin(), ref.logprobs.begin() + static_cast<std::ptrdiff_t>(windows * per_window));
    double nll = 0.0;
    int64_t count = 0;
    for (int32_t w = 0; w < windows; ++w)
        for (int32_t j = r.first_scored(); j < r.n_ctx - 1; ++j) {
            const int32_t target = r.tokens[static_cast<size_t>(w) * r.n_ctx + j + 1];
            nll -= r.logprobs[w * per_window + static_cast<size_t>(j - r.first_scored()) * r.vocab + target];
            ++count;
        }
    r.ppl = std::exp(nll / static_cast<double>(std::max<int64_t>(count, 1)));
    return r;
}

float round_density(float d) { return std::round(std::clamp(d, 0.0f, 1.0f) * 1000.0f) / 1000.0f; }

// One tuning run's state: the evaluations done so far (memoised by configuration) and the progress plan.
class tuner {
public:
    tuner(context& ctx, const dense_reference& ref, const calibration* calib, const tune_params& p,
          const eval_params& eval, const tune_candidate_fn& on_candidate)
        : m_ctx(ctx), m_full(ref), m_calib(calib), m_p(p), m_eval(eval), m_on_candidate(on_candidate) {
        m_coarse = reference_prefix(ref, p.coarse_windows);
        m_shape = shape_from_model(ctx.get_model());
    }

    result<tune_result> run();

private:
    result<int32_t> evaluate(const method_config& cfg, bool full, const std::string& stage);
    result<tune_candidate> evaluate_uncached(const method_config& cfg, bool full, const std::string& stage);
    outcome refine(const std::string& method, const accuracy_budget& b);
    bool coarse_is_full() const { return m_coarse.n_windows == m_full.n_windows; }
    float gamma_for(const std::string& method, const accuracy_budget& b) const;
    // The plan is an estimate (a bracket may need to move up), so the reported fraction never goes back.
    bool report(float within) {
        if (!m_p.progress) return true;
        const double f = (static_cast<double>(m_done) + within) / static_cast<double>(std::max(m_planned, m_done + 1));
        m_reported = std::max(m_reported, static_cast<float>(std::min(0.99, f)));
        return m_p.progress(m_reported);
    }

    context& m_ctx;
    const dense_reference& m_full;
    dense_reference m_coarse;
    const calibration* m_calib;
    const tune_params& m_p;
    eval_params m_eval;
    const tune_candidate_fn& m_on_candidate;
    model_shape m_shape;
    tune_result m_result;
    std::map<std::string, int32_t> m_memo;  // configuration key -> candidate index
    int32_t m_planned = 1, m_done = 0;
    float m_reported = 0.0f;
};

std::string config_key(const method_config& c, bool full) {
    std::ostringstream s;
    s << c.name << '|' << c.density << '|' << c.d_in << '|' << c.d_down << '|' << (c.name == "dip-ca" ? c.gamma : 0.0f)
      << '|' << full;
    return s.str();
}

result<tune_candidate> tuner::evaluate_uncached(const method_config& cfg, bool full, const std::string& stage) {
    const auto t0 = clock_type::now();
    const dense_reference& ref = full ? m_full : m_coarse;
    auto method = make_method(cfg, m_ctx.get_model(), m_calib);
    if (!method) return error{"tune: " + method.message()};

    const bool cache_aware = method_reads_cache(cfg.name);
    const bool simulate = m_p.objective == tune_objective::sim || cache_aware;
    tune_candidate c;
    c.config = cfg;
    c.stage = stage;
    c.windows = ref.n_windows;
    c.full = full;
    auto layout_text = method_layout_of(cfg.name, **method, m_shape.n_layers);
    if (!layout_text) return error{"tune: " + layout_text.message()};
    c.layout = *layout_text;

    eval_params ep = m_eval;
    ep.progress = [this](float f) { return report(f); };
    std::unique_ptr<sim_residency> device;
    std::unique_ptr<window_recorder> recorder;
    trace recorded;
    if (simulate) {
        auto layout = layout_parse(c.layout);
        if (!layout) return layout.err();
        sim_params online = m_p.sim;
        // Non-cache-aware methods only need their masks recorded: no cache in the loop is cheapest.
        online.policy = cache_aware ? m_p.online_policy : cache_policy::none;
        online.warmup_tokens = 0;
        auto made = sim_residency::create(m_shape, *layout, online);
        if (!made) return error{"tune: " + made.message()};
        device = std::move(made).value();
        auto t = trace_create(m_shape, *layout, cfg.name);
        if (!t) return t.err();
        recorded = std::move(t).value();
        device->record(&recorded);
        recorder = std::make_unique<window_recorder>(*device, recorded);
    }
    auto r = eval_method(m_ctx, ref, **method, recorder.get(), ep);
    if (!r) return error{r.cancelled() ? "tune: cancelled" : "tune: " + r.message(), r.cancelled()};
    c.eval = std::move(r).value();
    if (device && !device->last_error().empty()) return error{"tune: simulator: " + device->last_error()};

    if (simulate) {
        std::vector<cache_policy> policies = m_p.policies;
        if (cache_aware && std::find(policies.begin(), policies.end(), m_p.online_policy) == policies.end())
            policies.push_back(m_p.online_policy);
        if (m_p.belady_bound) policies.push_back(cache_policy::belady);
        std::vector<sim_params> settings;
        for (cache_policy pol : policies) {
            sim_params s = m_p.sim;
            s.policy = pol;
            s.warmup_tokens = 0;
            s.keep_stream_tokens = false;
            settings.push_back(s);
        }
        auto sims = replay_windows(recorded, recorder->starts(), settings);
        if (!sims) return error{"tune: replay: " + sims.message(), sims.cancelled()};
        c.sims = std::move(sims).value();
        for (size_t i = 0; i < c.sims.size(); ++i) {
            sim_summary& s = c.sims[i];
            const bool listed = std::find(m_p.policies.begin(), m_p.policies.end(), s.policy) != m_p.policies.end();
            s.recommendable = s.policy != cache_policy::belady && (cache_aware ? s.policy == m_p.online_policy : listed);
            if (s.recommendable && (c.best_sim < 0 || s.tokens_per_s > c.sims[static_cast<size_t>(c.best_sim)].tokens_per_s))
                c.best_sim = static_cast<int32_t>(i);
        }
    }
    if (m_p.objective == tune_objective::sim)
        c.objective = c.best_sim >= 0 ? c.sims[static_cast<size_t>(c.best_sim)].tokens_per_s : 0.0;
    else
        c.objective = c.eval.decode_tokens_per_second;
    c.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    return c;
}

result<int32_t> tuner::evaluate(const method_config& in, bool full, const std::string& stage) {
    method_config cfg = in;
    cfg.density = round_density(cfg.density);
    if (cfg.d_in >= 0) cfg.d_in = round_density(cfg.d_in);
    if (cfg.d_down >= 0) cfg.d_down = round_density(cfg.d_down);
    full = full || coarse_is_full();
    const std::string key = config_key(cfg, full);
    if (auto it = m_memo.find(key); it != m_memo.end()) return it->second;
    auto c = evaluate_uncached(cfg, full, stage);
    if (!c) return c.err();
    ++m_done;
    ++m_result.evaluations;
    if (!report(0.0f)) return error{"tune: cancelled", true};
    if (m_on_candidate) m_on_candidate(*c);
    m_result.candidates.push_back(std::move(c).value());
    const int32_t index = static_cast<int32_t>(m_result.candidates.size()) - 1;
    m_memo.emplace(key, index);
    return index;
}

// DIP-CA: the gamma whose stage-1 points reach the highest objective within the budget (or, if none
// does, the lowest perplexity at the highest density).
float tuner::gamma_for(const std::string& method, const accuracy_budget& b) const {
    float best = m_p.gammas.empty() ? m_p.base.gamma : m_p.gammas.front();
    double best_obj = -1.0, best_ppl = 1e300;
    float top_density = -1.0f;
    bool any_in_budget = false;
    for (const tune_candidate& c : m_result.candidates) {
        if (c.config.name != method || c.stage != "coarse") continue;
        if (budget_met(b, c.eval)) {
            if (!any_in_budget || c.objective > best_obj) best = c.config.gamma, best_obj = c.objective;
            any_in_budget = true;
        } else if (!any_in_budget &&
                   (c.config.density > top_density || (c.config.density == top_density && c.eval.ppl < best_ppl))) {
            top_density = c.config.density;
            best_ppl = c.eval.ppl;
            best = c.config.gamma;
        }
    }
    return best;
}

outcome tuner::refine(const std::string& method, const accuracy_budget& b) {
    method_config base = method_config_for(m_p.base, method);  // the knobs this method reads
    if (method == "dip-ca") base.gamma = gamma_for(method, b);

    // Stage-1 series of this method (and gamma), by density.
    std::vector<std::pair<float, bool>> series;  // (density, meets the budget on the coarse windows)
    for (const tune_candidate& c : m_result.candidates)
        if (c.config.name == method && c.stage == "coarse" && (method != "dip-ca" || c.config.gamma == base.gamma))
            series.emplace_back(c.config.density, budget_met(b, c.eval));
    std::sort(series.begin(), series.end());

    float hi = 1.0f, lo = 0.0f;
    for (const auto& [d, ok] : series)
        if (ok) {
            hi = d;
            break;
        }
    for (const auto& [d, ok] : series)
        if (d < hi && !ok) lo = d;

    // Confirm the upper bracket on every window; where the coarse windows were optimistic, move up.
    while (hi < 1.0f) {
        method_config c = base;
        c.density = hi;
        auto i = evaluate(c, true, "refine");
        if (!i) return i.err();
        if (budget_met(b, m_result.candidates[static_cast<size_t>(*i)].eval)) break;
        lo = hi;
        float next = 1.0f;
        for (const auto& [d, ok] : series)
            if (d > hi) {
                next = d;
                break;
            }
        hi = next;
    }
    for (int32_t step = 0; step < m_p.refine_steps; ++step) {
        const float mid = round_density(0.5f * (lo + hi));
        if (mid <= lo || mid >= hi) break;
        method_config c = base;
        c.density = mid;
        auto i = evaluate(c, true, "refine");
        if (!i) return i.err();
        (budget_met(b, m_result.candidates[static_cast<size_t>(*i)].eval) ? hi : lo) = mid;
    }

    // DIP appendix B.1: other (d_in, d_down) splits of the same density at both ends of the bracket; a
    // better split can bring the failing end within budget.
    if (method == "dip" && m_p.dip_split_points >= 2) {
        for (float d : {hi, lo}) {
            if (d <= 0.0f || d >= 1.0f) continue;
            const float a = std::max(0.0f, (3.0f * d - 1.0f) / 2.0f), z = std::min(1.0f, 1.5f * d);
            const int32_t n = m_p.dip_split_points + 1;  // endpoints excluded: one side would be dense or empty
            for (int32_t k = 1; k < n; ++k) {
                method_config c = base;
                c.density = d;
                c.d_in = round_density(a + (z - a) * static_cast<float>(k) / static_cast<float>(n));
                c.d_down = round_density(3.0f * d - 2.0f * c.d_in);
                if (std::abs(c.d_in - d) < 0.01f) continue;  // the default split, already evaluated
                auto i = evaluate(c, true, "split");
                if (!i) return i.err();
            }
        }
    }
    return {};
}

result<tune_result> tuner::run() {
    const auto t0 = clock_type::now();
    if (m_p.methods.empty()) return error{"tune: no methods"};
    if (m_p.budgets.empty()) return error{"tune: no accuracy budget"};
    if (m_p.objective == tune_objective::sim && m_p.policies.empty()) return error{"tune: no cache policy"};
    if (m_p.online_policy == cache_policy::belady) return error{"tune: DIP-CA cannot run with Belady (it needs the future)"};
    for (cache_policy pol : m_p.policies)
        if (pol == cache_policy::belady) return error{"tune: Belady is an upper bound, not a policy to recommend"};
    for (const std::string& name : m_p.methods) {
        if (std::find(method_names().begin(), method_names().end(), name) == method_names().end())
            return error{"tune: unknown method '" + name + "'"};
        if (name == "dense") return error{"tune: '" + name + "' has nothing to tune"};
        // FFSplit's svd variant follows the density (its rank is the largest that fits); q4 or a fixed
        // rank has no density knob.
        if (name == "ffsplit" && (m_p.base.ffsplit_mode != "svd" || m_p.base.rank > 0))
            return error{"tune: 'ffsplit' with q4 or a fixed rank has nothing to tune (svd with rank 0 tunes the density)"};
        const method_config named = method_config_for(m_p.base, name);
        if (method_config_needs_calibration(named) && !m_calib)
            return error{"tune: method '" + name + "' needs a calibration file (sparselens calibrate MODEL TEXT)"};
    }
    for (float d : m_p.densities)
        if (!(d > 0.0f && d <= 1.0f)) return error{"tune: density " + format_number(d) + " is outside (0, 1]"};
    for (float g : m_p.gammas)
        if (!(g >= 0.0f && g <= 1.0f)) return error{"tune: gamma " + format_number(g) + " is outside [0, 1]"};

    // Progress plan: dense + stage 1 + per (method, budget) the bracket check, bisection and DIP splits.
    m_planned = 1;
    for (const std::string& name : m_p.methods) {
        const int32_t g = name == "dip-ca" ? std::max<int32_t>(1, static_cast<int32_t>(m_p.gammas.size())) : 1;
        m_planned += static_cast<int32_t>(m_p.densities.size()) * g;
        const int32_t splits = name == "dip" && m_p.dip_split_points >= 2 ? 2 * m_p.dip_split_points : 0;
        m_planned += static_cast<int32_t>(m_p.budgets.size()) * (1 + m_p.refine_steps + splits);
    }

    // Dense baseline, through the same recording and replay.
    // Dense reads every neuron: no knob applies (pinning would be refused by make_method).
    const method_config dense = method_config_for(m_p.base, "dense");
    auto dense_c = evaluate_uncached(dense, true, "dense");
    if (!dense_c) return dense_c.err();
    m_result.dense = std::move(dense_c).value();
    ++m_done;
    ++m_result.evaluations;
    if (!report(0.0f)) return error{"tune: cancelled", true};
    if (m_on_candidate) m_on_candidate(m_result.dense);

    for (const std::string& name : m_p.methods) {
        const std::vector<float> gammas = name == "dip-ca" && !m_p.gammas.empty() ? m_p.gammas : std::vector<float>{m_p.base.gamma};
        for (float d : m_p.densities)
            for (float g : gammas) {
                method_config c = method_config_for(m_p.base, name);
                c.density = d;
                if (name == "dip-ca") c.gamma = g;
                auto i = evaluate(c, false, "coarse");
                if (!i) return i.err();
            }
    }
    for (const std::string& name : m_p.methods)
        for (const accuracy_budget& b : m_p.budgets)
            if (auto o = refine(name, b); !o) return o.err();

    tune_mark_pareto(m_result.candidates);
    for (const accuracy_budget& b : m_p.budgets) {
        tune_budget_result br;
        br.budget = b;
        br.methods = m_p.methods;
        double best_overall = m_result.dense.objective;
        for (const std::string& name : m_p.methods) {
            int32_t best = -1;
            for (size_t i = 0; i < m_result.candidates.size(); ++i) {
                const tune_candidate& c = m_result.candidates[i];
                if (c.config.name != name || !c.full || !budget_met(b, c.eval)) continue;
                if (m_p.objective == tune_objective::sim && c.best_sim < 0) continue;
                const tune_candidate* cur = best >= 0 ? &m_result.candidates[static_cast<size_t>(best)] : nullptr;
                if (!cur || c.objective > cur->objective || (c.objective == cur->objective && c.eval.ppl < cur->eval.ppl))
                    best = static_cast<int32_t>(i);
            }
            br.best.push_back(best);
            // Recommended only when it beats dense: on a CPU a tiny model's sparse path can be slower.
            if (best >= 0 && m_result.candidates[static_cast<size_t>(best)].objective > best_overall) {
                best_overall = m_result.candidates[static_cast<size_t>(best)].objective;
                br.recommended = best;
            }
        }
        m_result.budgets.push_back(std::move(br));
    }
    m_result.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    if (m_p.progress && !m_p.progress(1.0f)) return error{"tune: cancelled", true};
    return std::move(m_result);
}

}  // namespace

tune_params tune_default_params() {
    tune_params p;
    p.sim = sim_default_params();
    p.budgets.push_back(budget_parse("ppl+0.2").value());
    p.budgets.push_back(budget_parse("ppl+0.5").value());
    return p;
}

result<accuracy_budget> budget_parse(const std::string& text) {
    std::string s;
    for (char ch : text)
        if (ch != ' ' && ch != '\t') s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
    const std::string bad = "budget '" + text + "': expected ppl+X, ppl*X, ppl<X, kld<X or top1>X";
    struct form {
        const char* prefix;
        budget_metric metric;
    };
    static const form forms[] = {{"ppl+", budget_metric::ppl_delta}, {"ppl*", budget_metric::ppl_ratio},
                                 {"ppl<=", budget_metric::ppl_max},  {"ppl<", budget_metric::ppl_max},
                                 {"kld<=", budget_metric::kld_max},  {"kld<", budget_metric::kld_max},
                                 {"top1>=", budget_metric::top1_min}, {"top1>", budget_metric::top1_min}};
    for (const form& f : forms) {
        const std::string prefix = f.prefix;
        if (s.compare(0, prefix.size(), prefix) != 0) continue;
        const std::string num = s.substr(prefix.size());
        if (num.empty() || !(std::isdigit(static_cast<unsigned char>(num[0])) || num[0] == '.')) return error{bad};
        char* end = nullptr;
        const double v = std::strtod(num.c_str(), &end);
        if (end != num.c_str() + num.size() || !std::isfinite(v)) return error{bad};
        accuracy_budget b;
        b.metric = f.metric;
        b.limit = v;
        if (f.metric == budget_metric::ppl_ratio && v < 1.0)
            return error{"budget '" + text + "': a perplexity ratio below 1 excludes the dense model"};
        if (f.metric == budget_metric::top1_min && v > 1.0)
            return error{"budget '" + text + "': top-1 agreement is a fraction in [0, 1]"};
        static const char* canonical[] = {"ppl+", "ppl*", "ppl<", "kld<", "top1>"};
        b.text = canonical[static_cast<int>(f.metric)] + format_number(v);
        return b;
    }
    return error{bad};
}

bool budget_met(const accuracy_budget& b, const eval_result& r) {
    // A relative slack of 1e-9 so that a method reproducing dense exactly meets "ppl+0".
    const double eps = 1e-9 * std::max(1.0, std::abs(r.ppl_dense));
    switch (b.metric) {
        case budget_metric::ppl_delta: return r.ppl <= r.ppl_dense + b.limit + eps;
        case budget_metric::ppl_ratio: return r.ppl <= r.ppl_dense * b.limit + eps;
        case budget_metric::ppl_max: return r.ppl <= b.limit;
        case budget_metric::kld_max: return r.kld_mean <= b.limit;
        case budget_metric::top1_min: return r.top1_agreement >= b.limit;
    }
    return false;
}

std::string method_layout(const std::string& method) {
    if (method == "dip" || method == "dip-ca" || method == "teal" || method == "teal-uniform") return "dip";
    if (method == "cats" || method == "chess" || method == "chess-attn" || method == "gate") return "cats";
    if (method == "up") return "gate_row,down_column";
    if (method == "glu") return "down_column";
    return "bundle";
}

result<std::string> method_layout_of(const std::string& name, const sparsity_method& m, int32_t n_layers) {
    const ffsplit_layer_weights* first = m.split_layer(0);
    if (!first) return method_layout(name);
    mlp_split sp;
    sp.heavy = static_cast<int32_t>(first->heavy.size());
    sp.q4 = !first->gate_q4.bytes.empty();
    sp.rank = sp.q4 ? 0 : static_cast<int32_t>(first->rank);
    for (int32_t l = 1; l < n_layers; ++l) {
        const ffsplit_layer_weights* s = m.split_layer(l);
        if (!s || static_cast<int32_t>(s->heavy.size()) != sp.heavy || (!sp.q4 && s->rank != sp.rank))
            return error{"the simulator's split layout needs the same heavy count and rank in every layer (layer " +
                         std::to_string(l) + " differs)"};
    }
    return layout_name(split_layout(sp));
}

void tune_mark_pareto(std::vector<tune_candidate>& candidates) {
    for (tune_candidate& p : candidates) {
        p.pareto = p.full;
        if (!p.full) continue;
        for (const tune_candidate& q : candidates) {
            if (&q == &p || !q.full || q.config.name != p.config.name) continue;
            const bool no_worse = q.objective >= p.objective && q.eval.ppl <= p.eval.ppl;
            const bool better = q.objective > p.objective || q.eval.ppl < p.eval.ppl;
            // Equal points (two target densities that select the same k) appear once: the first evaluated.
            if (no_worse && (better || &q < &p)) {
                p.pareto = false;
                break;
            }
        }
    }
}

result<tune_result> tune(context& ctx, const dense_reference& ref, const calibration* calib, const tune_params& p,
                         const eval_params& eval, const tune_candidate_fn& on_candidate) {
    if (ref.n_windows <= 0) return error{"tune: the dense reference has no windows"};
    tuner t(ctx, ref, calib, p, eval, on_candidate);
    return t.run();
}

}  // namespace sl::sim

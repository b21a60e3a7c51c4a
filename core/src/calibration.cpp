// calibrate(): runs text through the model with an observer and accumulates the statistics the methods use.
#include <algorithm>
#include <bit>
#include <cassert>
#include <chrono>
#include <cmath>
#include <ctime>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "glu_act.h"
#include "calibration_internal.h"
#include "sparselens/core/text_format.h"
#include "sparselens/core/context.h"
#include "sparselens/kernels/kernels.h"

namespace sl {

namespace {

// |A ∩ B| / |A ∪ B| for the first k entries of two rankings of n items.
float topk_jaccard(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int32_t k, std::vector<uint8_t>& mark) {
    if (k <= 0) return 1.0f;
    mark.assign(a.size(), 0);
    for (int32_t i = 0; i < k; ++i) mark[static_cast<size_t>(a[static_cast<size_t>(i)])] = 1;
    int32_t inter = 0;
    for (int32_t i = 0; i < k; ++i) inter += mark[static_cast<size_t>(b[static_cast<size_t>(i)])];
    return static_cast<float>(inter) / static_cast<float>(2 * k - inter);
}

int32_t fraction_count(float fraction, int32_t n) {
    return std::clamp(static_cast<int32_t>(std::lround(static_cast<double>(fraction) * n)), 1, n);
}


// Accumulators of one layer (double sums, converted once at the end).
struct layer_acc {
    std::array<magnitude_histogram, hist_slot_count> hist;
    std::vector<double> sum_abs_up, sum_abs_gate, sum_abs_glu, sum_sq_glu;
    std::array<std::vector<uint64_t>, calibration_topk_densities.size()> topk_count;
    std::vector<double> attn_sum, mlp_sum;
    std::vector<float> attn_max, mlp_max;
    // Flocking: per half of the current window, sum over tokens of the squared row-normalised GLU.
    std::vector<double> s2_prompt, s2_gen;
    std::vector<int32_t> prev_prompt_rank;
    std::array<double, calibration_flock_fractions.size()> within_sum{}, between_sum{};
    int32_t n_within = 0, n_between = 0;
};

class calibration_observer final : public activation_observer {
public:
    calibration_observer(const model_hparams& hp, glu_activation act, int32_t n_ctx, int32_t octave_bits, int64_t n_tokens,
                         bool buffer_gate)
        : m_act(act), m_dim(hp.dim), m_hidden(hp.hidden_dim), m_n_ctx(n_ctx), m_n_tokens(n_tokens) {
        const size_t dim = static_cast<size_t>(hp.dim), hidden = static_cast<size_t>(hp.hidden_dim);
        m_layers.resize(static_cast<size_t>(hp.n_layers));
        for (layer_acc& a : m_layers) {
            for (auto& h : a.hist) h = magnitude_histogram(octave_bits);
            a.sum_abs_up.assign(hidden, 0.0);
            a.sum_abs_gate.assign(hidden, 0.0);
            a.sum_abs_glu.assign(hidden, 0.0);
            a.sum_sq_glu.assign(hidden, 0.0);
            for (auto& c : a.topk_count) c.assign(hidden, 0);
            a.attn_sum.assign(dim, 0.0);
            a.mlp_sum.assign(dim, 0.0);
            a.attn_max.assign(dim, 0.0f);
            a.mlp_max.assign(dim, 0.0f);
            a.s2_prompt.assign(hidden, 0.0);
            a.s2_gen.assign(hidden, 0.0);
        }
        if (buffer_gate) m_gate_buffer.resize(static_cast<size_t>(hp.n_layers) * static_cast<size_t>(n_tokens) * hidden);
        m_scratch.resize(hidden);
        m_sel.resize(hidden);
    }

    // Pass 2 (or the buffered replay) bins CHESS scores with the final E|a_up|.
    void set_chess_scale(std::vector<std::vector<float>> scale) { m_chess_scale = std::move(scale); }
    void set_window(int32_t w) { m_window = w; }

    void on_activation(int32_t layer, probe where, int32_t pos0, int32_t n, const float* data, int32_t width) override {
        layer_acc& a = m_layers[static_cast<size_t>(layer)];
        if (!m_chess_scale.empty()) {
            if (where == probe::gate_pre) bin_chess(layer, n, data);
            return;
        }
        for (int32_t t = 0; t < n; ++t) {
            const float* row = data + static_cast<size_t>(t) * width;
            switch (where) {
                case probe::attn_in: channels(a, hist_slot::attn_in, row, a.attn_sum, a.attn_max); break;
                case probe::attn_out: a.hist[static_cast<size_t>(hist_slot::attn_out)].add_abs({row, static_cast<size_t>(width)}); break;
                case probe::mlp_in: channels(a, hist_slot::mlp_in, row, a.mlp_sum, a.mlp_max); break;
                case probe::gate_pre: gate(a, layer, pos0 + t, row); break;
                case probe::up_pre: up(a, row); break;
                case probe::glu: glu(a, pos0 + t, row); break;
            }
        }
    }

    // Flocking bookkeeping once a window has been fully run.
    void end_window() {
        for (layer_acc& a : m_layers) {
            rank_desc(a.s2_prompt, m_rank_p);
            rank_desc(a.s2_gen, m_rank_g);
            for (size_t i = 0; i < calibration_flock_fractions.size(); ++i) {
                const int32_t k = fraction_count(calibration_flock_fractions[i], m_hidden);
                a.within_sum[i] += topk_jaccard(m_rank_p, m_rank_g, k, m_mark);
                if (!a.prev_prompt_rank.empty()) a.between_sum[i] += topk_jaccard(a.prev_prompt_rank, m_rank_p, k, m_mark);
            }
            ++a.n_within;
            if (!a.prev_prompt_rank.empty()) ++a.n_between;
            a.prev_prompt_rank = m_rank_p;
            std::fill(a.s2_prompt.begin(), a.s2_prompt.end(), 0.0);
            std::fill(a.s2_gen.begin(), a.s2_gen.end(), 0.0);
        }
    }

    // Bins the CHESS scores from the gate activations kept during pass 1.
    void replay_gate_buffer() {
        const size_t hidden = static_cast<size_t>(m_hidden);
        for (size_t l = 0; l < m_layers.size(); ++l) {
            const float* base = m_gate_buffer.data() + l * static_cast<size_t>(m_n_tokens) * hidden;
            for (int64_t t = 0; t < m_n_tokens; ++t) score_row(m_layers[l], m_chess_scale[l], base + static_cast<size_t>(t) * hidden);
        }
        m_gate_buffer = {};
    }

    // Converts the accumulators into the stored per-layer statistics.
    void finish(const model& m, std::vector<layer_calibration>& out) {
        const double n = static_cast<double>(m_n_tokens);
        out.resize(m_layers.size());
        for (size_t l = 0; l < m_layers.size(); ++l) {
            layer_acc& a = m_layers[l];
            layer_calibration& c = out[l];
            for (size_t s = 0; s < a.hist.size(); ++s) {
                a.hist[s].trim();
                c.hist[s] = std::move(a.hist[s]);
            }
            auto mean = [n](const std::vector<double>& sum) {
                std::vector<float> r(sum.size());
                for (size_t i = 0; i < sum.size(); ++i) r[i] = static_cast<float>(sum[i] / n);
                return r;
            };
            c.mean_abs_up = mean(a.sum_abs_up);
            c.mean_abs_gate_act = mean(a.sum_abs_gate);
            c.mean_abs_glu = mean(a.sum_abs_glu);
            c.mean_sq_glu = mean(a.sum_sq_glu);
            c.down_col_norm = calibration_down_column_norms(m.layers[l].w_down);
            c.heavy_hitter.resize(c.mean_sq_glu.size());
            for (size_t j = 0; j < c.heavy_hitter.size(); ++j)
                c.heavy_hitter[j] = static_cast<float>(std::sqrt(a.sum_sq_glu[j] / n) * c.down_col_norm[j]);
            for (size_t i = 0; i < a.topk_count.size(); ++i) {
                c.topk_freq[i].resize(a.topk_count[i].size());
                for (size_t j = 0; j < a.topk_count[i].size(); ++j)
                    c.topk_freq[i][j] = static_cast<float>(static_cast<double>(a.topk_count[i][j]) / n);
            }
            c.mlp_in_mean_abs = mean(a.mlp_sum);
            c.mlp_in_max_abs = a.mlp_max;
            c.attn_in_mean_abs = mean(a.attn_sum);
            c.attn_in_max_abs = a.attn_max;
            for (size_t i = 0; i < c.flock_within.size(); ++i) {
                c.flock_within[i] = a.n_within ? static_cast<float>(a.within_sum[i] / a.n_within) : 0.0f;
                c.flock_between[i] = a.n_between ? static_cast<float>(a.between_sum[i] / a.n_between) : 0.0f;
            }
        }
    }

    std::vector<std::vector<float>> mean_abs_up() const {
        std::vector<std::vector<float>> r(m_layers.size());
        for (size_t l = 0; l < m_layers.size(); ++l) {
            r[l].resize(m_layers[l].sum_abs_up.size());
            for (size_t j = 0; j < r[l].size(); ++j)
                r[l][j] = static_cast<float>(m_layers[l].sum_abs_up[j] / static_cast<double>(m_n_tokens));
        }
        return r;
    }

private:
    void channels(layer_acc& a, hist_slot slot, const float* row, std::vector<double>& sum, std::vector<float>& mx) {
        a.hist[static_cast<size_t>(slot)].add_abs({row, static_cast<size_t>(m_dim)});
        for (int32_t i = 0; i < m_dim; ++i) {
            const float v = std::fabs(row[i]);
            sum[static_cast<size_t>(i)] += v;
            if (v > mx[static_cast<size_t>(i)]) mx[static_cast<size_t>(i)] = v;
        }
    }

    void gate(layer_acc& a, int32_t layer, int32_t pos, const float* row) {
        float* act = m_scratch.data();
        size_t n_pos = 0, n_neg = 0;
        glu_act_abs(m_act, row, act, m_hidden);
        for (int32_t j = 0; j < m_hidden; ++j) {
            a.sum_abs_gate[static_cast<size_t>(j)] += act[j];
            // Split by sign bit: m_sel collects positives from the front, negatives from the back.
            if (std::signbit(row[j])) m_sel[static_cast<size_t>(m_hidden) - 1 - n_neg++] = -row[j];
            else m_sel[n_pos++] = row[j];
        }
        a.hist[static_cast<size_t>(hist_slot::gate_pre_pos)].add_abs({m_sel.data(), n_pos});
        a.hist[static_cast<size_t>(hist_slot::gate_pre_neg)].add_abs({m_sel.data() + n_pos, n_neg});
        a.hist[static_cast<size_t>(hist_slot::gate_act)].add_abs({act, static_cast<size_t>(m_hidden)});
        if (!m_gate_buffer.empty()) {
            const size_t tok = static_cast<size_t>(m_window) * static_cast<size_t>(m_n_ctx) + static_cast<size_t>(pos);
            const size_t off = (static_cast<size_t>(layer) * static_cast<size_t>(m_n_tokens) + tok) * static_cast<size_t>(m_hidden);
            std::copy(act, act + m_hidden, m_gate_buffer.begin() + static_cast<std::ptrdiff_t>(off));
        }
    }

    void up(layer_acc& a, const float* row) {
        a.hist[static_cast<size_t>(hist_slot::up_act)].add_abs({row, static_cast<size_t>(m_hidden)});
        for (int32_t j = 0; j < m_hidden; ++j) a.sum_abs_up[static_cast<size_t>(j)] += std::fabs(row[j]);
    }

    void glu(layer_acc& a, int32_t pos, const float* row) {
        const size_t hidden = static_cast<size_t>(m_hidden);
        a.hist[static_cast<size_t>(hist_slot::glu)].add_abs({row, hidden});
        double norm2 = 0.0;
        float* mag = m_scratch.data();
        for (size_t j = 0; j < hidden; ++j) {
            const double v = row[j];
            mag[j] = std::fabs(row[j]);
            a.sum_abs_glu[j] += mag[j];
            // NaN would break the selection's ordering; rank it above everything instead.
            if (std::isnan(mag[j])) mag[j] = std::numeric_limits<float>::infinity();
            a.sum_sq_glu[j] += v * v;
            norm2 += v * v;
        }
        // GRIFFIN's relative activations: the row scaled to unit length (an all-zero row adds nothing).
        if (norm2 > 0.0) {
            std::vector<double>& s2 = pos < m_n_ctx / 2 ? a.s2_prompt : a.s2_gen;
            const double inv = 1.0 / norm2;
            for (size_t j = 0; j < hidden; ++j) s2[j] += static_cast<double>(row[j]) * row[j] * inv;
        }
        topk_membership(a, mag);
    }

    // Per-token top-k by |glu| at each recorded density. The k-th largest value is found by a radix
    // step on the exponent (magnitudes compare as their bit patterns) and a selection inside the one
    // exponent bucket holding it: a few times cheaper than nth_element over all neurons, which
    // showed up at ~20% of a stories260K calibration.
    void topk_membership(layer_acc& a, const float* mag) {
        const size_t hidden = static_cast<size_t>(m_hidden);
        std::array<int32_t, 256> bucket{};
        for (size_t j = 0; j < hidden; ++j) ++bucket[std::bit_cast<uint32_t>(mag[j]) >> 23];
        for (size_t i = 0; i < calibration_topk_densities.size(); ++i) {
            const int32_t k = fraction_count(calibration_topk_densities[i], m_hidden);
            int32_t above = 0;
            uint32_t b = 256;
            while (b-- > 0 && above + bucket[b] < k) above += bucket[b];
            // The (k - above)-th largest of bucket b is the k-th largest overall.
            size_t nc = 0;
            for (size_t j = 0; j < hidden; ++j) {  // branch-free gather of the bucket
                m_sel[nc] = mag[j];
                nc += (std::bit_cast<uint32_t>(mag[j]) >> 23) == b;
            }
            const auto kk = static_cast<std::ptrdiff_t>(k - above - 1);
            std::nth_element(m_sel.begin(), m_sel.begin() + kk, m_sel.begin() + static_cast<std::ptrdiff_t>(nc),
                             std::greater<float>());
            const float kth = m_sel[static_cast<size_t>(kk)];
            for (size_t c = 0; c < nc; ++c) above += m_sel[c] > kth;
            // Entries above the k-th value are in; equal ones (at least the k-th itself) fill the
            // remaining places by index.
            std::vector<uint64_t>& cnt = a.topk_count[i];
            for (size_t j = 0; j < hidden; ++j) cnt[j] += mag[j] > kth;
            int32_t ties = k - above;
            for (size_t j = 0; j < hidden && ties > 0; ++j)
                if (mag[j] == kth) {
                    ++cnt[j];
                    --ties;
                }
        }
    }

    void score_row(layer_acc& a, const std::vector<float>& scale, const float* act) {
        float* s = m_scratch.data();
        for (int32_t j = 0; j < m_hidden; ++j) s[j] = scale[static_cast<size_t>(j)] * act[j];
        a.hist[static_cast<size_t>(hist_slot::chess_score)].add_abs({s, static_cast<size_t>(m_hidden)});
    }

    void bin_chess(int32_t layer, int32_t n, const float* data) {
        float* act = m_sel.data();  // score_row() uses m_scratch
        for (int32_t t = 0; t < n; ++t) {
            const float* row = data + static_cast<size_t>(t) * m_hidden;
            glu_act_abs(m_act, row, act, m_hidden);
            score_row(m_layers[static_cast<size_t>(layer)], m_chess_scale[static_cast<size_t>(layer)], act);
        }
    }

    glu_activation m_act;
    int32_t m_dim, m_hidden, m_n_ctx;
    int64_t m_n_tokens;
    int32_t m_window = 0;
    std::vector<layer_acc> m_layers;
    std::vector<float> m_gate_buffer;  // [layer][token][hidden] of |silu(gate)|, when it fits
    std::vector<std::vector<float>> m_chess_scale;
    std::vector<float> m_scratch, m_sel;
    std::vector<int32_t> m_rank_p, m_rank_g;
    std::vector<uint8_t> m_mark;
};

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

calibration_params calibration_default_params() { return {}; }

std::vector<float> calibration_down_column_norms(const tensor_view& w_down) {
    std::vector<double> sq(static_cast<size_t>(w_down.cols), 0.0);
    std::vector<float> row(static_cast<size_t>(w_down.cols));
    for (int64_t r = 0; r < w_down.rows; ++r) {
        kernels::dequantize_row(w_down.type, w_down.row(r), row.data(), w_down.cols);
        for (size_t j = 0; j < row.size(); ++j) sq[j] += static_cast<double>(row[j]) * row[j];
    }
    std::vector<float> out(sq.size());
    for (size_t j = 0; j < sq.size(); ++j) out[j] = static_cast<float>(std::sqrt(sq[j]));
    return out;
}

calibration_fingerprint calibration_fingerprint_of(const model& m) {
    calibration_fingerprint f;
    f.model_path = m.path;
    f.model_format = m.format;
    f.model_name = m.name;
    f.file_bytes = m.file_bytes;
    f.dim = m.hp.dim;
    f.hidden_dim = m.hp.hidden_dim;
    f.n_layers = m.hp.n_layers;
    f.n_heads = m.hp.n_heads;
    f.n_kv_heads = m.hp.n_kv_heads;
    f.vocab_size = m.hp.vocab_size;
    f.weights_hash = calibration_weights_hash(m);
    return f;
}

uint64_t calibration_weights_hash(const model& m) {
    // The first and last 4 KiB of every matrix plus the norms: cheap on a multi-GB model and still
    // different for any two trainings or quantizations.
    uint64_t h = fnv1a64(nullptr, 0);
    auto mix_view = [&h](const tensor_view& w) {
        const int64_t meta[3] = {static_cast<int64_t>(w.type), w.rows, w.cols};
        h = fnv1a64(meta, sizeof meta, h);
        const auto* p = static_cast<const uint8_t*>(w.data);
        const int64_t bytes = w.data ? w.bytes() : 0;
        const int64_t head = std::min<int64_t>(bytes, 4096);
        h = fnv1a64(p, static_cast<size_t>(head), h);
        if (bytes > head) {
            const int64_t tail = std::min<int64_t>(bytes - head, 4096);
            h = fnv1a64(p + bytes - tail, static_cast<size_t>(tail), h);
        }
    };
    auto mix_norm = [&h, &m](const float* v) {
        if (v) h = fnv1a64(v, sizeof(float) * static_cast<size_t>(m.hp.dim), h);
    };
    mix_view(m.tok_embd);
    for (const layer_weights& lw : m.layers) {
        mix_norm(lw.attn_norm);
        mix_norm(lw.ffn_norm);
        for (const tensor_view* w : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down}) mix_view(*w);
    }
    mix_norm(m.output_norm);
    return h;
}

result<calibration> calibrate(const model& m, std::span<const int32_t> tokens, const calibration_params& params) {
    const auto t0 = std::chrono::steady_clock::now();
    const model_hparams& hp = m.hp;
    const int32_t n_ctx = params.n_ctx;
    if (hp.n_layers <= 0 || hp.dim <= 0 || hp.hidden_dim <= 0 || static_cast<int32_t>(m.layers.size()) != hp.n_layers)
        return error{"calibration: " + m.path + ": model has no usable layers"};
    if (n_ctx < 4) return error{"calibration: context " + str(n_ctx) + " is too short (need >= 4)"};
    if (hp.seq_len > 0 && n_ctx > hp.seq_len)
        return error{"calibration: context " + str(n_ctx) + " exceeds the model's " + str(hp.seq_len)};
    if (params.hist_octave_bits < 4 || params.hist_octave_bits > 10)
        return error{"calibration: histogram resolution " + str(params.hist_octave_bits) + " bits per octave is outside 4..10"};
    if (params.bos_id < 0 || params.bos_id >= hp.vocab_size)
        return error{"calibration: BOS id " + str(params.bos_id) + " is outside the vocabulary of " + str(hp.vocab_size)};
    int64_t usable = static_cast<int64_t>(tokens.size());
    if (params.max_tokens > 0) usable = std::min<int64_t>(usable, params.max_tokens);
    const int64_t n_windows = usable / n_ctx;
    if (n_windows == 0)
        return error{"calibration: text has " + str(static_cast<int64_t>(tokens.size())) + " tokens (limit " +
                     str(params.max_tokens) + "), fewer than one window of " + str(n_ctx)};
    if (n_windows > std::numeric_limits<int32_t>::max()) return error{"calibration: text is too long"};
    const int64_t n_tokens = n_windows * n_ctx;
    for (int64_t i = 0; i < n_tokens; ++i)
        if (tokens[static_cast<size_t>(i)] < 0 || tokens[static_cast<size_t>(i)] >= hp.vocab_size)
            return error{"calibration: token " + str(tokens[static_cast<size_t>(i)]) + " at position " + str(i) +
                         " is outside the vocabulary of " + str(hp.vocab_size)};

    context_params cp = context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    cp.n_threads = params.n_threads;
    result<context> ctx = context::create(m, cp);
    if (!ctx) return ctx.err();

    const uint64_t buffer_bytes = static_cast<uint64_t>(hp.n_layers) * static_cast<uint64_t>(n_tokens) *
                                  static_cast<uint64_t>(hp.hidden_dim) * sizeof(float);
    const bool buffered = params.chess_buffer_bytes > 0 && buffer_bytes <= static_cast<uint64_t>(params.chess_buffer_bytes);
    calibration_observer obs(hp, m.arch.act, n_ctx, params.hist_octave_bits, n_tokens, buffered);
    ctx->set_observer(&obs);

    const int64_t total_steps = buffered ? n_windows : 2 * n_windows;
    int64_t steps = 0;
    std::vector<int32_t> window(static_cast<size_t>(n_ctx));
    auto run_windows = [&](bool flocking) -> bool {
        for (int64_t w = 0; w < n_windows; ++w) {
            const auto first = tokens.begin() + static_cast<std::ptrdiff_t>(w * n_ctx);
            std::copy(first, first + n_ctx, window.begin());
            window[0] = params.bos_id;
            obs.set_window(static_cast<int32_t>(w));
            (void)ctx->prefill(window, 0);
            if (flocking) obs.end_window();
            ++steps;
            if (params.progress && !params.progress(static_cast<float>(steps) / static_cast<float>(total_steps)))
                return false;
        }
        return true;
    };
    const error cancelled{"calibration: cancelled", true};
    if (!run_windows(true)) return cancelled;
    obs.set_chess_scale(obs.mean_abs_up());
    if (buffered) {
        obs.replay_gate_buffer();
    } else if (!run_windows(false)) {
        return cancelled;
    }
    ctx->set_observer(nullptr);

    calibration cal;
    cal.model = calibration_fingerprint_of(m);
    cal.n_ctx = n_ctx;
    cal.bos_id = params.bos_id;
    cal.act = m.arch.act;
    cal.hist_octave_bits = params.hist_octave_bits;
    cal.n_tokens = n_tokens;
    cal.n_windows = static_cast<int32_t>(n_windows);
    cal.text_hash = fnv1a64(tokens.data(), static_cast<size_t>(n_tokens) * sizeof(int32_t));
    cal.created = utc_now_iso8601();
    obs.finish(m, cal.layers);
    cal.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return cal;
}

}  // namespace sl

// FFSplit (Liu et al. 2024): heavy-hitter neurons exact, the light rest as low rank or Q4_0; a model transform.
#include "sparselens/core/ffsplit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "ffsplit_internal.h"
#include "sparselens/kernels/kernels.h"
#include "weight_storage.h"

namespace sl {

ffsplit_params ffsplit_default_params() { return {}; }

ffsplit_params ffsplit_params_from_config(const method_config& cfg) {
    ffsplit_params p;
    p.mode = cfg.ffsplit_mode;
    p.heavy_fraction = cfg.ffsplit_heavy;
    p.density = cfg.density;
    p.rank = cfg.rank > 0 ? cfg.rank : -1;
    return p;
}

namespace {

double element_bytes(dtype t) {
    return static_cast<double>(dtype_block_bytes(t)) / static_cast<double>(dtype_block_elems(t));
}

double mlp_element_bytes(const layer_weights& lw) {
    return element_bytes(lw.w_gate.type) + element_bytes(lw.w_up.type) + element_bytes(lw.w_down.type);
}

uint64_t mlp_dense_bytes(const layer_weights& lw) {
    return static_cast<uint64_t>(lw.w_gate.bytes() + lw.w_up.bytes() + lw.w_down.bytes());
}

// The split model's storage: its own F32 MLP buffers, plus a share of the original's storage that
// every other view (embeddings, attention, norms) still points into.
struct split_storage {
    std::shared_ptr<weight_storage> original;
    weight_storage owned;
};

// Replaces the rows `light` of w ([rows, cols]) by their rank-r approximation (zero when r == 0).
// Returns whether the SVD was randomized.
bool low_rank_rows(matrix_rm& w, const std::vector<int32_t>& light, int64_t r) {
    const low_rank_factors f = rows_low_rank(w, light, r);
    const matrix_rm approx = f.a * f.b;
    for (size_t i = 0; i < light.size(); ++i) w.row(light[i]) = approx.row(static_cast<int64_t>(i));
    return f.randomized;
}

float relative_error(const matrix_rm& a, const matrix_rm& b) {
    const double n = static_cast<double>(a.norm());
    return n > 0.0 ? static_cast<float>(static_cast<double>((a - b).norm()) / n) : 0.0f;
}

tensor_view store(weight_storage& s, const matrix_rm& w) {
    const uint64_t bytes = static_cast<uint64_t>(w.size()) * sizeof(float);
    uint8_t* p = s.alloc(bytes);
    if (!p) return {};
    std::memcpy(p, w.data(), bytes);
    return tensor_view{dtype::f32, w.rows(), w.cols(), p};
}

}  // namespace

void q4_round_trip(float* v, int64_t n, std::vector<uint8_t>& blocks) {
    blocks.resize(static_cast<size_t>(dtype_row_bytes(dtype::q4_0, n)));
    kernels::quantize_row(dtype::q4_0, v, blocks.data(), n);
    kernels::dequantize_row(dtype::q4_0, blocks.data(), v, n);
}

low_rank_factors rows_low_rank(const matrix_rm& w, const std::vector<int32_t>& rows, int64_t r) {
    matrix_rm part(static_cast<int64_t>(rows.size()), w.cols());
    for (size_t i = 0; i < rows.size(); ++i) part.row(static_cast<int64_t>(i)) = w.row(rows[i]);
    return truncated_svd(part, r);
}

outcome ffsplit_validate(const model& m, const calibration& cal, const ffsplit_params& params) {
    const std::string& mode = params.mode;
    if (mode != "svd" && mode != "q4") return error{"ffsplit: unknown mode '" + mode + "' (known: svd, q4)"};
    if (!(params.heavy_fraction >= 0.0f && params.heavy_fraction <= 1.0f))
        return error{"ffsplit: heavy fraction " + std::to_string(params.heavy_fraction) + " is outside [0, 1]"};
    if (mode == "svd" && params.rank < 0 && !(params.density >= 0.0f && params.density <= 1.0f))
        return error{"ffsplit: density " + std::to_string(params.density) + " is outside [0, 1]"};
    if (outcome o = calibration_matches(cal, m); !o) return error{"ffsplit: " + o.message()};
    if (mode == "q4" && m.hp.dim % qk4_0 != 0)
        return error{"ffsplit q4: " + m.path + " has dim " + std::to_string(m.hp.dim) + ", not a multiple of 32"};
    for (size_t l = 0; l < cal.layers.size(); ++l)
        if (cal.layers[l].heavy_hitter.size() != static_cast<size_t>(m.hp.hidden_dim))
            return error{"ffsplit: calibration has no heavy-hitter scores for layer " + std::to_string(l)};
    return outcome::success();
}

ffsplit_layer_plan ffsplit_plan_layer(const model& m, const calibration& cal, const ffsplit_params& params, size_t l) {
    const layer_weights& lw = m.layers[l];
    const int64_t dim = m.hp.dim, hidden = m.hp.hidden_dim;
    ffsplit_layer_plan p;
    p.heavy = cal.heavy_hitters(static_cast<int32_t>(l), params.heavy_fraction);
    std::sort(p.heavy.begin(), p.heavy.end());
    for (int32_t j = 0, h = 0; j < hidden; ++j) {
        if (h < static_cast<int32_t>(p.heavy.size()) && p.heavy[static_cast<size_t>(h)] == j) ++h;
        else p.light.push_back(j);
    }
    const auto n_heavy = static_cast<int64_t>(p.heavy.size()), n_light = static_cast<int64_t>(p.light.size());
    p.rep.n_heavy = static_cast<int32_t>(n_heavy);
    p.rep.dense_bytes = mlp_dense_bytes(lw);
    p.rep.heavy_share = cal.heavy_hitter_share(static_cast<int32_t>(l), params.heavy_fraction);
    if (params.mode == "svd") {
        int64_t rank = params.rank;
        if (rank < 0) {
            // Largest rank whose bytes, added to the heavy part, stay within the target.
            const double budget = params.density * static_cast<double>(p.rep.dense_bytes) -
                                  static_cast<double>(ffsplit_layer_bytes(lw, dim, n_heavy, n_light, params.mode, 0));
            const double per_rank = static_cast<double>(n_light + dim) * mlp_element_bytes(lw);
            rank = budget > 0.0 ? static_cast<int64_t>(std::floor(budget / per_rank)) : 0;
        }
        p.rank = std::clamp<int64_t>(rank, 0, std::min(n_light, dim));
    }
    p.rep.rank = static_cast<int32_t>(p.rank);
    p.rep.split_bytes = ffsplit_layer_bytes(lw, dim, n_heavy, n_light, params.mode, p.rank);
    return p;
}

uint64_t ffsplit_layer_bytes(const layer_weights& lw, int64_t dim, int64_t n_heavy, int64_t n_light,
                             const std::string& mode, int64_t rank) {
    const double e = mlp_element_bytes(lw);
    double bytes = static_cast<double>(n_heavy) * static_cast<double>(dim) * e;
    if (mode == "svd")
        bytes += static_cast<double>(rank) * static_cast<double>(n_light + dim) * e;
    else
        bytes += static_cast<double>(n_light) * static_cast<double>(dim) * 3.0 * element_bytes(dtype::q4_0);
    return static_cast<uint64_t>(std::llround(bytes));
}

result<ffsplit_model> ffsplit_transform(const model& m, const calibration& cal, const ffsplit_params& params) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string& mode = params.mode;
    if (outcome o = ffsplit_validate(m, cal, params); !o) return o.err();
    const int64_t dim = m.hp.dim;

    auto holder = std::make_shared<split_storage>();
    holder->original = m.storage;
    ffsplit_model out;
    out.m = m;
    out.m.storage = std::shared_ptr<weight_storage>(holder, &holder->owned);
    out.mode = mode;
    out.heavy_fraction = params.heavy_fraction;
    std::vector<uint8_t> blocks;
    std::vector<float> column(static_cast<size_t>(dim));

    for (size_t l = 0; l < m.layers.size(); ++l) {
        const layer_weights& lw = m.layers[l];
        ffsplit_layer_plan plan = ffsplit_plan_layer(m, cal, params, l);
        const std::vector<int32_t>& light = plan.light;
        const auto n_light = static_cast<int64_t>(light.size());
        const int64_t rank = plan.rank;
        ffsplit_layer_report rep = plan.rep;

        const matrix_rm gate = dequantize_matrix(lw.w_gate), up = dequantize_matrix(lw.w_up),
                        down = dequantize_matrix(lw.w_down);
        matrix_rm gate2 = gate, up2 = up, down2 = down;
        if (n_light > 0 && mode == "svd") {
            out.randomized_svd |= low_rank_rows(gate2, light, rank);
            out.randomized_svd |= low_rank_rows(up2, light, rank);
            // Down columns are the rows of its transpose.
            matrix_rm down_t = down2.transpose();
            out.randomized_svd |= low_rank_rows(down_t, light, rank);
            down2 = down_t.transpose();
        } else if (n_light > 0) {
            for (int32_t j : light) {
                q4_round_trip(gate2.row(j).data(), dim, blocks);
                q4_round_trip(up2.row(j).data(), dim, blocks);
                for (int64_t i = 0; i < dim; ++i) column[static_cast<size_t>(i)] = down2(i, j);
                q4_round_trip(column.data(), dim, blocks);
                for (int64_t i = 0; i < dim; ++i) down2(i, j) = column[static_cast<size_t>(i)];
            }
        }
        rep.rel_error[0] = relative_error(gate, gate2);
        rep.rel_error[1] = relative_error(up, up2);
        rep.rel_error[2] = relative_error(down, down2);

        layer_weights& nw = out.m.layers[l];
        nw.w_gate = store(holder->owned, gate2);
        nw.w_up = store(holder->owned, up2);
        nw.w_down = store(holder->owned, down2);
        if (!nw.w_gate.data || !nw.w_up.data || !nw.w_down.data)
            return error{"ffsplit: out of memory for the split MLP of layer " + std::to_string(l) + " of " + m.path};

        out.heavy.push_back(std::move(plan.heavy));
        out.mlp_dense_bytes += rep.dense_bytes;
        out.mlp_split_bytes += rep.split_bytes;
        out.layers.push_back(rep);
        if (params.progress && !params.progress(static_cast<float>(l + 1) / static_cast<float>(m.layers.size())))
            return error{"ffsplit: cancelled", true};
    }

    uint64_t other = static_cast<uint64_t>(m.tok_embd.bytes()) + (m.tied_output ? 0 : static_cast<uint64_t>(m.output.bytes()));
    for (const layer_weights& lw : m.layers)
        for (const tensor_view* t : {&lw.wq, &lw.wk, &lw.wv, &lw.wo}) other += static_cast<uint64_t>(t->bytes());
    other += static_cast<uint64_t>(dim) * sizeof(float) * (2 * m.layers.size() + 1);  // norms
    out.model_dense_bytes = other + out.mlp_dense_bytes;
    out.model_split_bytes = other + out.mlp_split_bytes;

    char suffix[96];
    std::snprintf(suffix, sizeof suffix, " [ffsplit %s, heavy %.0f%%, MLP bytes %.1f%%]", mode.c_str(),
                  100.0 * params.heavy_fraction, 100.0 * out.mlp_density());
    out.m.name += suffix;
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

}  // namespace sl

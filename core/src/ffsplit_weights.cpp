// FFSplit's executed form: the compact split of each MLP (heavy rows exact, light part as low-rank
// factors or Q4_0 rows) and the registry method "ffsplit" that hands it to the engine.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "ffsplit_internal.h"
#include "methods_internal.h"
#include "sparselens/kernels/kernels.h"

namespace sl {

uint64_t ffsplit_weights::mlp_dense_bytes() const {
    uint64_t b = 0;
    for (const ffsplit_layer_weights& l : layers) b += l.dense_bytes[0] + l.dense_bytes[1] + l.dense_bytes[2];
    return b;
}

uint64_t ffsplit_weights::mlp_split_bytes() const {
    uint64_t b = 0;
    for (const ffsplit_layer_weights& l : layers) b += l.split_bytes[0] + l.split_bytes[1] + l.split_bytes[2];
    return b;
}

namespace {

// A zeroed [rows, cols] matrix of `type` whose data is 64-byte aligned inside its own bytes.
kernels::owned_matrix alloc_matrix(dtype type, int64_t rows, int64_t cols) {
    kernels::owned_matrix m;
    m.view = tensor_view{type, rows, cols, nullptr};
    m.bytes.assign(static_cast<size_t>(m.view.bytes()) + 63, 0);
    const auto p = (reinterpret_cast<uintptr_t>(m.bytes.data()) + 63) & ~uintptr_t{63};
    m.view.data = reinterpret_cast<const void*>(p);
    return m;
}

uint8_t* row_ptr(kernels::owned_matrix& m, int64_t r) { return const_cast<uint8_t*>(m.view.row(r)); }

// Rows `rows` of a stored matrix, copied byte for byte (exact in any type).
kernels::owned_matrix pick_rows(const tensor_view& w, const std::vector<int32_t>& rows) {
    kernels::owned_matrix m = alloc_matrix(w.type, static_cast<int64_t>(rows.size()), w.cols);
    for (size_t i = 0; i < rows.size(); ++i)
        std::memcpy(row_ptr(m, static_cast<int64_t>(i)), w.row(rows[i]), static_cast<size_t>(w.row_bytes()));
    return m;
}

kernels::owned_matrix from_eigen(const matrix_rm& e) {
    kernels::owned_matrix m = alloc_matrix(dtype::f32, e.rows(), e.cols());
    if (e.size() > 0) std::memcpy(row_ptr(m, 0), e.data(), static_cast<size_t>(e.size()) * sizeof(float));
    return m;
}

// Rows `rows` of an f32 matrix re-encoded as Q4_0 (ggml's rounding).
kernels::owned_matrix q4_rows(const matrix_rm& w, const std::vector<int32_t>& rows) {
    kernels::owned_matrix m = alloc_matrix(dtype::q4_0, static_cast<int64_t>(rows.size()), w.cols());
    for (size_t i = 0; i < rows.size(); ++i)
        kernels::quantize_row(dtype::q4_0, w.row(rows[i]).data(), row_ptr(m, static_cast<int64_t>(i)), w.cols());
    return m;
}

ffsplit_layer_weights build_layer(const model& m, const calibration& cal, const ffsplit_params& params, size_t l,
                                  bool& randomized) {
    const layer_weights& lw = m.layers[l];
    ffsplit_layer_plan plan = ffsplit_plan_layer(m, cal, params, l);
    ffsplit_layer_weights s;
    s.heavy = std::move(plan.heavy);
    s.light = std::move(plan.light);
    s.rank = plan.rank;
    s.iota.resize(std::max(s.heavy.size(), s.light.size()));
    std::iota(s.iota.begin(), s.iota.end(), 0);

    s.gate_heavy = pick_rows(lw.w_gate, s.heavy);
    s.up_heavy = pick_rows(lw.w_up, s.heavy);
    // Heavy down columns as rows of the input-major down (its type when dim allows the blocks).
    const tensor_view& down = lw.w_down;
    const dtype down_t_type = down.rows % dtype_block_elems(down.type) == 0 ? down.type : dtype::f32;
    const kernels::owned_matrix down_t = kernels::to_input_major(down, down_t_type);
    s.down_heavy = pick_rows(down_t.view, s.heavy);

    if (!s.light.empty()) {
        const matrix_rm gate = dequantize_matrix(lw.w_gate), up = dequantize_matrix(lw.w_up);
        const matrix_rm down_rows = dequantize_matrix(down).transpose();  // row j = down column j
        if (params.mode == "svd" && s.rank > 0) {
            for (auto [w, a, b] : {std::tuple{&gate, &s.gate_a, &s.gate_b}, std::tuple{&up, &s.up_a, &s.up_b}}) {
                const low_rank_factors f = rows_low_rank(*w, s.light, s.rank);
                *a = from_eigen(f.a);
                *b = from_eigen(f.b);
                randomized |= f.randomized;
            }
            // down[:, light]^T ~ a b, so down[:, light] ~ b^T a^T: t = a^T glu_light, y = b^T t.
            const low_rank_factors f = rows_low_rank(down_rows, s.light, s.rank);
            s.down_a = from_eigen(f.b.transpose());
            s.down_b = from_eigen(f.a.transpose());
            randomized |= f.randomized;
        } else if (params.mode == "q4") {
            s.gate_q4 = q4_rows(gate, s.light);
            s.up_q4 = q4_rows(up, s.light);
            s.down_q4 = q4_rows(down_rows, s.light);
        }
    }
    s.dense_bytes[0] = static_cast<uint64_t>(lw.w_gate.bytes());
    s.dense_bytes[1] = static_cast<uint64_t>(lw.w_up.bytes());
    s.dense_bytes[2] = static_cast<uint64_t>(down.bytes());
    const kernels::owned_matrix* parts[3][4] = {{&s.gate_heavy, &s.gate_a, &s.gate_b, &s.gate_q4},
                                                {&s.up_heavy, &s.up_a, &s.up_b, &s.up_q4},
                                                {&s.down_heavy, &s.down_a, &s.down_b, &s.down_q4}};
    for (int p = 0; p < 3; ++p)
        for (const kernels::owned_matrix* x : parts[p]) s.split_bytes[p] += static_cast<uint64_t>(x->view.bytes());
    return s;
}

class ffsplit_method final : public sparsity_method {
public:
    explicit ffsplit_method(std::shared_ptr<const ffsplit_weights> w) : m_w(std::move(w)) {}
    std::string name() const override { return "ffsplit"; }
    method_traits traits() const override {
        method_traits t;
        t.split_mlp = true;
        return t;
    }
    const ffsplit_layer_weights* split_layer(int32_t layer) const override {
        return &m_w->layers[static_cast<size_t>(layer)];
    }
    // What a deployment config pins: the neurons kept exact and the light part's rank, per layer.
    std::vector<std::pair<std::string, std::vector<float>>> per_layer_values() const override {
        std::vector<float> heavy, rank;
        for (const ffsplit_layer_weights& l : m_w->layers) {
            heavy.push_back(static_cast<float>(l.heavy.size()));
            rank.push_back(static_cast<float>(l.rank));
        }
        return {{"heavy_neurons", heavy}, {"rank", rank}};
    }

private:
    std::shared_ptr<const ffsplit_weights> m_w;
};

}  // namespace

result<std::shared_ptr<const ffsplit_weights>> ffsplit_build(const model& m, const calibration& cal,
                                                             const ffsplit_params& params) {
    if (outcome o = ffsplit_validate(m, cal, params); !o) return o.err();
    auto w = std::make_shared<ffsplit_weights>();
    w->mode = params.mode;
    w->heavy_fraction = params.heavy_fraction;
    for (size_t l = 0; l < m.layers.size(); ++l) {
        w->layers.push_back(build_layer(m, cal, params, l, w->randomized_svd));
        if (params.progress && !params.progress(static_cast<float>(l + 1) / static_cast<float>(m.layers.size())))
            return error{"ffsplit: cancelled", true};
    }
    return std::shared_ptr<const ffsplit_weights>(std::move(w));
}

result<std::unique_ptr<sparsity_method>> make_ffsplit(const method_config& cfg, const model& m, const calibration& cal,
                                                      const progress_fn& progress) {
    ffsplit_params params = ffsplit_params_from_config(cfg);
    params.progress = progress;
    auto w = ffsplit_build(m, cal, params);
    if (!w) return w.err();
    return std::unique_ptr<sparsity_method>(std::make_unique<ffsplit_method>(std::move(w).value()));
}

}  // namespace sl

// The split-MLP path of the engine (FFSplit, method_traits::split_mlp): heavy neurons through the dense
// kernels on their exact rows, the light rest through a low-rank GEMV pair per matrix or Q4_0 GEMVs.
#include <algorithm>
#include <cassert>
#include <vector>

#include "sparselens/core/context.h"
#include "sparselens/core/ffsplit.h"
#include "sparselens/kernels/attention.h"
#include "sparselens/kernels/kernels.h"
#include "sparselens/kernels/sparse.h"

namespace sl {

namespace {

// Grow-only scratch of the engine thread: the rank-sized intermediate and the compact light vectors.
struct split_scratch {
    std::vector<float> t, a, b, y;
    void fit(size_t n, size_t dim) {
        for (std::vector<float>* v : {&t, &a, &b}) v->resize(std::max(v->size(), n));
        y.resize(std::max(y.size(), dim));
    }
};

split_scratch& scratch() {
    thread_local split_scratch s;
    return s;
}

// out = W x for a light matrix stored as a rank-r pair (out = a (b x)) or as Q4_0 rows.
void light_rows(const tensor_view& a, const tensor_view& b, const tensor_view& q4, const float* x, float* t,
                float* out, int64_t n, int threads) {
    if (q4.data) {
        kernels::gemv(q4, x, out, threads);
    } else if (b.rows > 0) {
        kernels::gemv(b, x, t, threads);
        kernels::gemv(a, t, out, threads);
    } else {
        std::fill(out, out + n, 0.0f);  // rank 0: the light part is dropped
    }
}

void scatter(const float* compact, const std::vector<int32_t>& idx, float* full) {
    for (size_t k = 0; k < idx.size(); ++k) full[idx[k]] = compact[k];
}

void gather(const float* full, const std::vector<int32_t>& idx, float* compact) {
    for (size_t k = 0; k < idx.size(); ++k) compact[k] = full[idx[k]];
}

float share(uint64_t part, uint64_t whole) {
    return whole ? static_cast<float>(static_cast<double>(part) / static_cast<double>(whole)) : 1.0f;
}

}  // namespace

void context::mlp_split(int32_t l, const token_info& ti, layer_density& d) {
    const ffsplit_layer_weights* s = m_method->split_layer(l);
    assert(s && "a split_mlp method returns every layer's split");
    const int32_t hidden = m_model->hp.hidden_dim, dim = m_model->hp.dim;
    const auto nh = static_cast<int64_t>(s->heavy.size()), nl = static_cast<int64_t>(s->light.size());
    split_scratch& sc = scratch();
    sc.fit(static_cast<size_t>(std::max<int64_t>({nh, nl, s->rank, 1})), static_cast<size_t>(dim));
    const float* x = m_xb.data();

    // Gate and up: heavy rows exact, light rows from the compressed part, each scattered to neuron order.
    for (auto [heavy, a, b, q4, full] :
         {std::tuple{&s->gate_heavy, &s->gate_a, &s->gate_b, &s->gate_q4, m_gate.data()},
          std::tuple{&s->up_heavy, &s->up_a, &s->up_b, &s->up_q4, m_up.data()}}) {
        if (nh > 0) {
            kernels::gemv(heavy->view, x, sc.a.data(), m_threads);
            scatter(sc.a.data(), s->heavy, full);
        }
        if (nl > 0) {
            light_rows(a->view, b->view, q4->view, x, sc.t.data(), sc.b.data(), nl, m_threads);
            scatter(sc.b.data(), s->light, full);
        }
    }
    observe(l, probe::gate_pre, ti.pos, 1, m_gate.data(), hidden);
    observe(l, probe::up_pre, ti.pos, 1, m_up.data(), hidden);
    lap(stage::mlp_in);
    glu(m_gate.data(), m_gate.data(), m_up.data(), hidden);  // SwiGLU or GeGLU, as the architecture says
    observe(l, probe::glu, ti.pos, 1, m_gate.data(), hidden);
    lap(stage::glu);

    // Down: heavy columns (input-major rows) plus the light part's contribution.
    float* y = m_proj.data();
    std::fill(y, y + dim, 0.0f);
    if (nh > 0) {
        gather(m_gate.data(), s->heavy, sc.a.data());
        kernels::gemv_input_sparse(s->down_heavy.view, sc.a.data(), s->iota.data(), nh, y, m_threads);
    }
    if (nl > 0 && (s->down_q4.view.data || s->down_b.view.rows > 0)) {
        gather(m_gate.data(), s->light, sc.b.data());
        if (s->down_q4.view.data) {
            kernels::gemv_input_sparse(s->down_q4.view, sc.b.data(), s->iota.data(), nl, sc.y.data(), m_threads);
        } else {
            kernels::gemv(s->down_b.view, sc.b.data(), sc.t.data(), m_threads);
            kernels::gemv(s->down_a.view, sc.t.data(), sc.y.data(), m_threads);
        }
        for (int32_t i = 0; i < dim; ++i) y[i] += sc.y[static_cast<size_t>(i)];
    }
    lap(stage::down);
    for (int p = 0; p < 3; ++p)
        d.d[static_cast<int>(proj::gate) + p] = share(s->split_bytes[p], s->dense_bytes[p]);
}

}  // namespace sl

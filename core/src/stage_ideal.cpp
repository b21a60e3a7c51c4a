#include "sparselens/core/stage_ideal.h"

#include <algorithm>

#include "sparselens/core/sparsity.h"

namespace sl {

namespace {

// f(p, bytes) for every layer's projection p: its weight bytes scaled by its mean read density (1 when
// there are no densities).
template <class F>
void for_each_projection_read(const stage_bytes_input& in, F&& f) {
    const bool scaled = in.read_sum && in.tokens > 0;
    for (size_t l = 0; l < in.m->layers.size(); ++l) {
        const layer_weights& lw = in.m->layers[l];
        const tensor_view* views[proj_count] = {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down};
        for (int p = 0; p < proj_count; ++p) {
            const double d = scaled && l < in.read_sum->size() ? (*in.read_sum)[l].d[p] / in.tokens : 1.0;
            f(p, d * static_cast<double>(views[p]->bytes()));
        }
    }
}

stage_bytes_input input_of(const context& ctx) {
    stage_bytes_input in;
    in.m = &ctx.get_model();
    if (const sparsity_method* method = ctx.method()) {
        in.read_sum = &ctx.read_density_sum();
        in.tokens = static_cast<double>(ctx.density_tokens());
        in.selection_bytes = static_cast<double>(method->selection_bytes_per_token());
        in.fused = method->traits().fused;
        in.up_first = method->traits().up_first;
    }
    return in;
}

double ms_per_token(const stage_times& t, int s) {
    return t.tokens > 0 ? 1e3 * t.seconds[s] / static_cast<double>(t.tokens) : 0.0;
}

}  // namespace

void stage_weight_bytes(const stage_bytes_input& in, const stage_times& st, double* out) {
    std::fill(out, out + stage_count, 0.0);
    const bool fused = st.at(stage::mlp_fused) > 0;
    const bool mixed = fused && (st.at(stage::down) > 0 || (in.fused && st.at(stage::mlp_in) > 0));
    for_each_projection_read(in, [&](int p, double bytes) {
        stage s = stage::qkv;
        if (p == static_cast<int>(proj::o)) {
            s = stage::o;
        } else if (p >= static_cast<int>(proj::gate)) {
            const bool first = p == static_cast<int>(in.up_first ? proj::up : proj::gate);  // computed whole
            if (mixed && (in.fused || !first)) return;
            s = fused && (in.fused || !first) ? stage::mlp_fused
                : p == static_cast<int>(proj::down) ? stage::down
                                                    : stage::mlp_in;
        }
        out[static_cast<int>(s)] += bytes;
    });
    out[static_cast<int>(stage::logits)] = static_cast<double>(in.m->output.bytes());
    out[static_cast<int>(stage::select)] = in.selection_bytes;
}

void stage_weight_bytes(const context& ctx, const stage_times& st, double* out) {
    stage_weight_bytes(input_of(ctx), st, out);
}

double read_bytes_per_token(const context& ctx) {
    const stage_bytes_input in = input_of(ctx);
    double bytes = static_cast<double>(in.m->output.bytes() + in.m->tok_embd.row_bytes()) + in.selection_bytes;
    for_each_projection_read(in, [&](int, double b) { bytes += b; });
    return bytes;
}

void stage_ideal_ms(const stage_times& dense, const double* dense_bytes, const double* method_bytes, double* ideal) {
    const int mlp_in = static_cast<int>(stage::mlp_in), glu = static_cast<int>(stage::glu),
              down = static_cast<int>(stage::down), fused = static_cast<int>(stage::mlp_fused);
    const bool is_fused = method_bytes[fused] > 0;
    const double mlp_bytes = dense_bytes[mlp_in] + dense_bytes[down];
    // Dense's MLP ms per byte read (with its GLU for a fused stage, which includes the GLU).
    const auto mlp_rate = [&](bool with_glu) {
        const double ms =
            ms_per_token(dense, mlp_in) + ms_per_token(dense, down) + (with_glu ? ms_per_token(dense, glu) : 0.0);
        return mlp_bytes > 0 ? ms / mlp_bytes : 0.0;
    };
    for (int s = 0; s < stage_count; ++s) {
        const auto st = static_cast<stage>(s);
        if (st == stage::fetch) {
            ideal[s] = 0.0;
        } else if (st == stage::select) {
            ideal[s] = mlp_rate(false) * method_bytes[s];  // what it reads, if anything
        } else if (st == stage::mlp_fused) {
            ideal[s] = mlp_rate(true) * method_bytes[fused];
        } else if (is_fused && st == stage::glu) {
            ideal[s] = 0.0;  // inside the fused kernel (mlp_in, down: their bytes)
        } else {
            const double dense_ms = ms_per_token(dense, s);
            ideal[s] = dense_bytes[s] > 0 ? dense_ms * method_bytes[s] / dense_bytes[s] : dense_ms;
        }
    }
}

}  // namespace sl

// Byte and parameter accounting used by `info`, `bench` and (later) the simulator's memory map.
#include "sparselens/core/model_stats.h"

namespace sl {

model_bytes model_count_bytes(const model& m) {
    model_bytes b;
    for (const layer_weights& lw : m.layers) {
        b.attention += static_cast<uint64_t>(lw.wq.bytes() + lw.wk.bytes() + lw.wv.bytes() + lw.wo.bytes());
        b.mlp += static_cast<uint64_t>(lw.w_gate.bytes() + lw.w_up.bytes() + lw.w_down.bytes());
    }
    b.embeddings = static_cast<uint64_t>(m.tok_embd.bytes());
    if (!m.tied_output) b.embeddings += static_cast<uint64_t>(m.output.bytes());
    b.norms = static_cast<uint64_t>(m.hp.dim) * sizeof(float) * (2 * m.layers.size() + 1);
    return b;
}

uint64_t model_count_params(const model& m) {
    uint64_t n = 0;
    for (const layer_weights& lw : m.layers)
        for (const tensor_view* t : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down})
            n += static_cast<uint64_t>(t->rows * t->cols);
    n += static_cast<uint64_t>(m.tok_embd.rows * m.tok_embd.cols);
    if (!m.tied_output) n += static_cast<uint64_t>(m.output.rows * m.output.cols);
    n += static_cast<uint64_t>(m.hp.dim) * (2 * m.layers.size() + 1);
    return n;
}

}  // namespace sl

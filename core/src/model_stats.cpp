// Byte and parameter accounting used by `info`, `bench` and (later) the simulator's memory map.
#include "sparselens/core/model_stats.h"

#include <algorithm>
#include <map>

#include "sparselens/core/chat_format.h"

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

std::vector<type_share> model_type_mix(const model& m) {
    std::map<dtype, type_share> by_type;
    for (const tensor_record& t : m.tensors) {
        type_share& s = by_type[t.type];
        s.type = t.type;
        ++s.tensors;
        uint64_t n = 1;
        for (const int64_t d : t.shape) n *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
        s.elements += t.shape.empty() ? 0 : n;
        s.bytes += t.bytes;
    }
    std::vector<type_share> mix;
    for (const auto& [type, s] : by_type) mix.push_back(s);
    std::stable_sort(mix.begin(), mix.end(), [](const type_share& a, const type_share& b) { return a.bytes > b.bytes; });
    return mix;
}

std::string tokenizer_kind_name(const embedded_vocab& v) {
    if (v.empty()) return v.model.empty() ? "none embedded" : "'" + v.model + "' (not supported)";
    const std::string n = std::to_string(v.tokens.size()) + " tokens";
    if (v.model == "gpt2") return "byte-level BPE (" + (v.pre.empty() ? std::string("default") : v.pre) + "), " + n;
    if (v.model == "llama") return "SentencePiece, " + n;
    return v.model + ", " + n;
}

std::string chat_format_kind(const embedded_vocab& v) {
    if (v.chat_template.empty()) return "none";
    result<chat_family> f = chat_family_of(v.chat_template, "");
    return f ? chat_family_name(*f) : "unrecognised";
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

// Builds an sl::model from a llama-architecture GGUF: hyper-parameters, shape-checked weight views, vocabulary.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "sparselens/core/gguf.h"
#include "vocab_gguf.h"
#include "weight_storage.h"

namespace sl {

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

// Shapes compared with trailing 1s dropped (ggml writes a [n, 1] tensor with one dimension).
std::vector<int64_t> trimmed(std::vector<int64_t> s) {
    while (s.size() > 1 && s.back() == 1) s.pop_back();
    return s;
}

class gguf_model_builder {
public:
    gguf_model_builder(const gguf_file& g, model& m, weight_storage& st) : m_g(g), m_m(m), m_st(st) {}

    error fail(const std::string& what) const { return file_error(m_g.path(), what); }

    // Integer key in [lo, hi]; `fallback` when absent (nullopt = required).
    result<int64_t> int_key(const std::string& key, std::optional<int64_t> fallback, int64_t lo, int64_t hi) const {
        const gguf_value* v = m_g.find(key);
        if (!v) {
            if (fallback) return *fallback;
            return fail("required key '" + key + "' is missing");
        }
        auto i = v->to_int();
        if (!i) return fail("key '" + key + "' has type " + std::string(gguf_type_name(v->type)) + ", expected an integer");
        if (*i < lo || *i > hi)
            return fail("key '" + key + "' = " + std::to_string(*i) + " is out of range [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "]");
        return *i;
    }

    result<float> float_key(const std::string& key, float fallback) const {
        const gguf_value* v = m_g.find(key);
        if (!v) return fallback;
        auto f = v->to_float();
        if (!f) return fail("key '" + key + "' has type " + std::string(gguf_type_name(v->type)) + ", expected a number");
        if (!std::isfinite(*f) || *f <= 0 || *f > 1e12)
            return fail("key '" + key + "' = " + std::to_string(*f) + " is not a positive finite number");
        return static_cast<float>(*f);
    }

    // Looks up a tensor, checks type and shape (ggml order), and returns its view.
    result<tensor_view> matrix(const std::string& name, int64_t cols, int64_t rows, bool required = true) {
        auto t = find(name, {cols, rows}, required);
        if (!t) return t.err();
        if (!t.value()) return tensor_view{};
        const gguf_tensor_info& ti = *t.value();
        tensor_view v;
        v.type = *dtype_from_ggml(ti.ggml_type);
        v.cols = cols;
        v.rows = rows;
        v.data = data_of(ti);
        if (!v.data) return fail("out of memory copying tensor '" + name + "'");
        return v;
    }

    result<const float*> norm(const std::string& name, int64_t dim) {
        auto t = find(name, {dim}, true);
        if (!t) return t.err();
        const gguf_tensor_info& ti = *t.value();
        if (ti.ggml_type != ggml_type_id::f32)
            return fail("tensor '" + name + "' has type " + ggml_type_label(ti.ggml_type) + ", norm weights must be F32");
        const void* p = data_of(ti);
        if (!p) return fail("out of memory copying tensor '" + name + "'");
        return static_cast<const float*>(p);
    }

    outcome read_vocab(int64_t vocab_size);

private:
    // nullptr (not an error) for an absent optional tensor.
    result<const gguf_tensor_info*> find(const std::string& name, const std::vector<int64_t>& expected, bool required) {
        const gguf_tensor_info* ti = m_g.find_tensor(name);
        if (!ti) {
            if (!required) return static_cast<const gguf_tensor_info*>(nullptr);
            return fail("required tensor '" + name + "' is missing");
        }
        if (!dtype_from_ggml(ti->ggml_type))
            return fail("tensor '" + name + "' has unsupported type " + ggml_type_label(ti->ggml_type) +
                        "; supported: F32, F16, BF16, Q8_0, Q4_0");
        if (trimmed(ti->shape) != trimmed(expected))
            return fail("tensor '" + name + "' has shape " + shape_text(ti->shape) + ", expected " + shape_text(expected));
        tensor_record r;
        r.name = name;
        r.type = *dtype_from_ggml(ti->ggml_type);
        r.shape = ti->shape;
        r.bytes = ti->bytes;
        m_m.tensors.push_back(std::move(r));
        return ti;
    }

    // The tensor's bytes in the mapping, or an aligned copy when the file's alignment leaves them
    // unaligned for float/fp16 loads (possible with general.alignment < 4).
    const void* data_of(const gguf_tensor_info& ti) {
        const uint8_t* p = m_g.tensor_data(ti);
        if (reinterpret_cast<uintptr_t>(p) % 4 == 0) return p;
        uint8_t* copy = m_st.alloc(ti.bytes);
        if (copy && ti.bytes) std::memcpy(copy, p, ti.bytes);
        return copy;
    }

    const gguf_file& m_g;
    model& m_m;
    weight_storage& m_st;
};

outcome gguf_model_builder::read_vocab(int64_t vocab_size) { return read_gguf_vocab(m_g, vocab_size, m_m.vocab); }

}  // namespace

result<model> load_gguf_model(std::shared_ptr<const mapped_file> file, const load_progress& progress) {
    auto parsed = gguf_file::parse(file);
    if (!parsed) return parsed.err();
    const gguf_file& g = parsed.value();
    const std::string& path = g.path();

    const gguf_value* arch = g.find("general.architecture");
    if (!arch) return file_error(path, "key 'general.architecture' is missing");
    if (!arch->to_string()) return file_error(path, "key 'general.architecture' is not a string");
    if (*arch->to_string() != "llama")
        return file_error(path, "architecture '" + printable(*arch->to_string()) + "' is not supported (only 'llama')");

    model m;
    m.path = path;
    m.format = "gguf";
    m.file_bytes = g.file_size();
    auto storage = std::make_shared<weight_storage>();
    storage->file = g.file();
    m.storage = storage;
    if (const gguf_value* nm = g.find("general.name"); nm && nm->to_string()) m.name = *nm->to_string();

    gguf_model_builder b(g, m, *storage);
    auto expert = b.int_key("llama.expert_count", int64_t{0}, 0, std::numeric_limits<int32_t>::max());
    if (!expert) return expert.err();
    if (*expert > 0) return file_error(path, "mixture-of-experts llama models (llama.expert_count) are not supported");

    model_hparams& hp = m.hp;
    auto set = [&](int32_t* dst, result<int64_t> r) -> bool {
        if (r) *dst = static_cast<int32_t>(*r);
        return r.ok();
    };
    auto dim = b.int_key("llama.embedding_length", std::nullopt, 1, k_max_dim);
    if (!set(&hp.dim, dim)) return dim.err();
    auto layers = b.int_key("llama.block_count", std::nullopt, 1, k_max_layers);
    if (!set(&hp.n_layers, layers)) return layers.err();
    auto hidden = b.int_key("llama.feed_forward_length", std::nullopt, 1, k_max_hidden);
    if (!set(&hp.hidden_dim, hidden)) return hidden.err();
    auto heads = b.int_key("llama.attention.head_count", std::nullopt, 1, k_max_heads);
    if (!set(&hp.n_heads, heads)) return heads.err();
    auto kv = b.int_key("llama.attention.head_count_kv", int64_t{hp.n_heads}, 1, k_max_heads);
    if (!set(&hp.n_kv_heads, kv)) return kv.err();
    auto ctx = b.int_key("llama.context_length", std::nullopt, 1, k_max_seq_len);
    if (!set(&hp.seq_len, ctx)) return ctx.err();
    if (hp.dim % hp.n_heads != 0)
        return file_error(path, "embedding_length " + std::to_string(hp.dim) + " is not a multiple of head_count " +
                                    std::to_string(hp.n_heads));
    auto rope_dim = b.int_key("llama.rope.dimension_count", int64_t{hp.head_dim()}, 2, hp.head_dim());
    if (!set(&hp.rope_dim, rope_dim)) return rope_dim.err();
    auto theta = b.float_key("llama.rope.freq_base", 10000.0f);
    if (!theta) return theta.err();
    hp.rope_theta = *theta;
    auto eps = b.float_key("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    if (!eps) return eps.err();
    hp.norm_eps = *eps;

    // The vocabulary size comes from the embedding's shape, so read it before the other tensors.
    const gguf_tensor_info* te = g.find_tensor("token_embd.weight");
    if (!te) return file_error(path, "required tensor 'token_embd.weight' is missing");
    if (te->shape.size() < 2 || te->shape[1] < 1 || te->shape[1] > k_max_vocab)
        return file_error(path, "tensor 'token_embd.weight' has shape " + shape_text(te->shape) + ", expected [" +
                                    std::to_string(hp.dim) + ", n_vocab] with 1 <= n_vocab <= " + std::to_string(k_max_vocab));
    hp.vocab_size = static_cast<int32_t>(te->shape[1]);
    auto vk = b.int_key("llama.vocab_size", int64_t{hp.vocab_size}, 1, k_max_vocab);
    if (!vk) return vk.err();
    if (*vk != hp.vocab_size)
        return file_error(path, "llama.vocab_size = " + std::to_string(*vk) + " but token_embd.weight has " +
                                    std::to_string(hp.vocab_size) + " rows");
    if (std::string bad = validate_hparams(hp); !bad.empty()) return file_error(path, bad);
    if (hp.rope_dim % 2 != 0) return file_error(path, "rope.dimension_count " + std::to_string(hp.rope_dim) + " is odd");

    // Tensors of layers beyond block_count mean the count is wrong (a lying or mis-edited header);
    // other extra tensors (e.g. rope_freqs.weight) are left unused.
    for (const auto& t : g.tensors()) {
        if (t.name.rfind("blk.", 0) != 0) continue;
        const int64_t layer = std::strtoll(t.name.c_str() + 4, nullptr, 10);
        if (layer >= hp.n_layers)
            return file_error(path, "tensor '" + printable(t.name) + "' belongs to a layer beyond llama.block_count = " +
                                        std::to_string(hp.n_layers));
    }

    const int64_t d = hp.dim, kvd = hp.kv_dim(), h = hp.hidden_dim, nv = hp.vocab_size;
    const float n_steps = static_cast<float>(2 + 9 * hp.n_layers);
    int step = 0;
    auto tick = [&]() { return progress.report(static_cast<float>(++step) / n_steps); };

    auto emb = b.matrix("token_embd.weight", d, nv);
    if (!emb) return emb.err();
    m.tok_embd = *emb;
    auto onorm = b.norm("output_norm.weight", d);
    if (!onorm) return onorm.err();
    m.output_norm = *onorm;
    auto out = b.matrix("output.weight", d, nv, false);
    if (!out) return out.err();
    m.tied_output = out->data == nullptr;
    m.output = m.tied_output ? m.tok_embd : *out;
    if (!tick()) return progress.cancelled();

    m.layers.resize(static_cast<size_t>(hp.n_layers));
    for (int32_t l = 0; l < hp.n_layers; ++l) {
        layer_weights& L = m.layers[static_cast<size_t>(l)];
        const std::string p = "blk." + std::to_string(l) + ".";
        struct mat { tensor_view* dst; const char* name; int64_t cols, rows; };
        const mat mats[] = {
            {&L.wq, "attn_q.weight", d, d},          {&L.wk, "attn_k.weight", d, kvd},
            {&L.wv, "attn_v.weight", d, kvd},        {&L.wo, "attn_output.weight", d, d},
            {&L.w_gate, "ffn_gate.weight", d, h},    {&L.w_up, "ffn_up.weight", d, h},
            {&L.w_down, "ffn_down.weight", h, d},
        };
        auto an = b.norm(p + "attn_norm.weight", d);
        if (!an) return an.err();
        L.attn_norm = *an;
        auto fn = b.norm(p + "ffn_norm.weight", d);
        if (!fn) return fn.err();
        L.ffn_norm = *fn;
        if (!tick() || !tick()) return progress.cancelled();
        for (const mat& x : mats) {
            auto v = b.matrix(p + x.name, x.cols, x.rows);
            if (!v) return v.err();
            *x.dst = *v;
            if (!tick()) return progress.cancelled();
        }
    }
    if (auto o = b.read_vocab(nv); !o) return o.err();
    if (!tick()) return progress.cancelled();
    return m;
}

}  // namespace sl

// Builds an sl::model from a GGUF of any architecture in the table (model_arch.cpp): hyper-parameters,
// shape-checked weight views (fused tensors split into views), vocabulary.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "model_arch.h"
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

    // An F32 vector (norm weights, biases, RoPE factors); nullptr when optional and absent.
    result<const float*> norm(const std::string& name, int64_t dim, bool required = true) {
        auto t = find(name, {dim}, required);
        if (!t) return t.err();
        if (!t.value()) return static_cast<const float*>(nullptr);
        const gguf_tensor_info& ti = *t.value();
        if (ti.ggml_type != ggml_type_id::f32)
            return fail("tensor '" + name + "' has type " + ggml_type_label(ti.ggml_type) + ", vectors (norms, biases, RoPE factors) must be F32");
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
                        "; supported: " + supported_dtype_names());
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

namespace {

// Rows [r0, r0 + n) of a matrix as a matrix of their own (the halves of a fused tensor).
tensor_view row_slice(const tensor_view& w, int64_t r0, int64_t n) {
    tensor_view v = w;
    v.rows = n;
    v.data = w.row(r0);
    return v;
}

// The architecture's hyper-parameters under its key prefix, checked for consistency.
outcome read_hparams(gguf_model_builder& b, const gguf_file& g, const arch_row& row, model& m) {
    const std::string& path = g.path();
    const std::string pre = std::string(row.name) + ".";
    auto expert = b.int_key(pre + "expert_count", int64_t{0}, 0, std::numeric_limits<int32_t>::max());
    if (!expert) return expert.err();
    if (*expert > 0) return file_error(path, "mixture-of-experts models (" + pre + "expert_count) are not supported");

    model_hparams& hp = m.hp;
    struct int_field { int32_t* dst; const char* key; int64_t hi; };
    const int_field ints[] = {
        {&hp.dim, "embedding_length", k_max_dim},       {&hp.n_layers, "block_count", k_max_layers},
        {&hp.hidden_dim, "feed_forward_length", k_max_hidden}, {&hp.n_heads, "attention.head_count", k_max_heads},
        {&hp.seq_len, "context_length", k_max_seq_len},
    };
    for (const int_field& f : ints) {
        auto r = b.int_key(pre + f.key, std::nullopt, 1, f.hi);
        if (!r) return r.err();
        *f.dst = static_cast<int32_t>(*r);
    }
    auto kv = b.int_key(pre + "attention.head_count_kv", int64_t{hp.n_heads}, 1, k_max_heads);
    if (!kv) return kv.err();
    hp.n_kv_heads = static_cast<int32_t>(*kv);
    if (hp.n_heads % hp.n_kv_heads != 0)
        return file_error(path, "head_count " + std::to_string(hp.n_heads) + " is not a multiple of head_count_kv " +
                                    std::to_string(hp.n_kv_heads));
    // Head width: attention.key_length when present (Gemma's 256, Qwen3's 128 are wider than
    // dim / heads), else dim / heads as llama.cpp assumes. Keys and values must have the same width.
    const bool has_klen = g.find(pre + "attention.key_length") != nullptr;
    if (!has_klen && hp.dim % hp.n_heads != 0)
        return file_error(path, "embedding_length " + std::to_string(hp.dim) + " is not a multiple of head_count " +
                                    std::to_string(hp.n_heads) + " and attention.key_length is absent");
    auto klen = b.int_key(pre + "attention.key_length", int64_t{hp.dim / hp.n_heads}, 2, k_max_head_dim);
    if (!klen) return klen.err();
    auto vlen = b.int_key(pre + "attention.value_length", *klen, 1, k_max_head_dim);
    if (!vlen) return vlen.err();
    if (*vlen != *klen)
        return file_error(path, pre + "attention.value_length = " + std::to_string(*vlen) + " differs from key_length = " +
                                    std::to_string(*klen) + " (not supported)");
    hp.head_width = static_cast<int32_t>(*klen);
    auto rope_dim = b.int_key(pre + "rope.dimension_count", int64_t{hp.head_dim()}, 2, hp.head_dim());
    if (!rope_dim) return rope_dim.err();
    hp.rope_dim = static_cast<int32_t>(*rope_dim);
    if (hp.rope_dim % 2 != 0) return file_error(path, "rope.dimension_count " + std::to_string(hp.rope_dim) + " is odd");
    struct float_field { float* dst; const char* key; float fallback; };
    arch_features& a = m.arch;
    const float_field floats[] = {
        {&hp.rope_theta, "rope.freq_base", 10000.0f},
        {&hp.norm_eps, "attention.layer_norm_rms_epsilon", 1e-5f},
        {&a.rope_attn_factor, "rope.scaling.attn_factor", 1.0f},
        {&a.attn_softcap, "attn_logit_softcapping", row.attn_softcap},
        {&a.final_softcap, "final_logit_softcapping", row.final_softcap},
    };
    for (const float_field& f : floats) {
        // A cap of 0 in the table means "none" and is not a valid value in the file.
        if (f.fallback == 0.0f && !g.find(pre + f.key)) continue;
        auto r = b.float_key(pre + f.key, f.fallback);
        if (!r) return r.err();
        *f.dst = *r;
    }
    auto swa = b.int_key(pre + "attention.sliding_window", int64_t{row.swa_window}, 0, k_max_seq_len);
    if (!swa) return swa.err();
    a.swa_window = row.swa_from_file ? static_cast<int32_t>(*swa) : 0;
    auto period = b.int_key(pre + "attention.sliding_window_pattern", int64_t{row.swa_period}, 1, k_max_layers);
    if (!period) return period.err();
    a.swa_period = static_cast<int32_t>(*period);
    if (row.factors == rope_factor_source::long_short) {
        auto orig = b.int_key(pre + "rope.scaling.original_context_length", int64_t{hp.seq_len}, 1, k_max_seq_len);
        if (!orig) return orig.err();
        m.rope_orig_ctx = static_cast<int32_t>(*orig);
    }
    a.name = row.name;
    a.rope = row.rope;
    a.act = row.act;
    a.qkv_bias = row.qkv_bias;
    a.qk_norm = row.qk_norm;
    a.post_norms = row.post_norms;
    a.embd_scale = row.embd_scale_sqrt_dim ? std::sqrt(static_cast<float>(hp.dim)) : 1.0f;
    if (row.dim_heads_scale_layers > 0 && hp.n_layers == row.dim_heads_scale_layers)
        a.attn_scale = 1.0f / std::sqrt(static_cast<float>(hp.dim / hp.n_heads));
    return {};
}

}  // namespace

result<model> load_gguf_model(std::shared_ptr<const mapped_file> file, const load_progress& progress) {
    auto parsed = gguf_file::parse(file);
    if (!parsed) return parsed.err();
    const gguf_file& g = parsed.value();
    const std::string& path = g.path();

    const gguf_value* arch = g.find("general.architecture");
    if (!arch) return file_error(path, "key 'general.architecture' is missing");
    if (!arch->to_string()) return file_error(path, "key 'general.architecture' is not a string");
    const arch_row* row = find_arch(*arch->to_string());
    if (!row)
        return file_error(path, "architecture '" + printable(*arch->to_string()) + "' is not supported (supported: " +
                                    supported_arch_list() + ")");
    const std::string pre = std::string(row->name) + ".";

    model m;
    m.path = path;
    m.format = "gguf";
    m.file_bytes = g.file_size();
    auto storage = std::make_shared<weight_storage>();
    storage->file = g.file();
    m.storage = storage;
    if (const gguf_value* nm = g.find("general.name"); nm && nm->to_string()) m.name = *nm->to_string();

    gguf_model_builder b(g, m, *storage);
    if (auto o = read_hparams(b, g, *row, m); !o) return o.err();
    model_hparams& hp = m.hp;

    // The vocabulary size comes from the embedding's shape, so read it before the other tensors.
    const gguf_tensor_info* te = g.find_tensor("token_embd.weight");
    if (!te) return file_error(path, "required tensor 'token_embd.weight' is missing");
    if (te->shape.size() < 2 || te->shape[1] < 1 || te->shape[1] > k_max_vocab)
        return file_error(path, "tensor 'token_embd.weight' has shape " + shape_text(te->shape) + ", expected [" +
                                    std::to_string(hp.dim) + ", n_vocab] with 1 <= n_vocab <= " + std::to_string(k_max_vocab));
    hp.vocab_size = static_cast<int32_t>(te->shape[1]);
    auto vk = b.int_key(pre + "vocab_size", int64_t{hp.vocab_size}, 1, k_max_vocab);
    if (!vk) return vk.err();
    if (*vk != hp.vocab_size)
        return file_error(path, pre + "vocab_size = " + std::to_string(*vk) + " but token_embd.weight has " +
                                    std::to_string(hp.vocab_size) + " rows");
    if (std::string bad = validate_hparams(hp); !bad.empty()) return file_error(path, bad);

    // Tensors of layers beyond block_count mean the count is wrong (a lying or mis-edited header);
    // other extra tensors are left unused.
    for (const auto& t : g.tensors()) {
        if (t.name.rfind("blk.", 0) != 0) continue;
        const int64_t layer = std::strtoll(t.name.c_str() + 4, nullptr, 10);
        if (layer >= hp.n_layers)
            return file_error(path, "tensor '" + printable(t.name) + "' belongs to a layer beyond " + pre +
                                        "block_count = " + std::to_string(hp.n_layers));
    }

    const int64_t d = hp.dim, qd = hp.q_dim(), kvd = hp.kv_dim(), h = hp.hidden_dim, nv = hp.vocab_size, hd = hp.head_dim();
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
    const int64_t n_factors = hp.rope_dim / 2;
    if (row->factors == rope_factor_source::freqs) {
        auto f = b.norm("rope_freqs.weight", n_factors, false);
        if (!f) return f.err();
        m.rope_factors = *f;
    } else if (row->factors == rope_factor_source::long_short) {
        auto fs = b.norm("rope_factors_short.weight", n_factors, false);
        if (!fs) return fs.err();
        auto fl = b.norm("rope_factors_long.weight", n_factors, false);
        if (!fl) return fl.err();
        m.rope_factors = *fs;
        m.rope_factors_long = *fl;
    }
    for (const float* f : {m.rope_factors, m.rope_factors_long})
        for (int64_t i = 0; f && i < n_factors; ++i)
            if (!(f[i] > 0.0f) || !std::isfinite(f[i]))
                return file_error(path, "RoPE frequency factor " + std::to_string(i) + " is not a positive finite number");
    if (!tick()) return progress.cancelled();

    const layer_tensor_names& nm = row->names;
    m.layers.resize(static_cast<size_t>(hp.n_layers));
    for (int32_t l = 0; l < hp.n_layers; ++l) {
        layer_weights& L = m.layers[static_cast<size_t>(l)];
        const std::string p = "blk." + std::to_string(l) + ".";
        struct vec { const float** dst; const char* name; int64_t len; bool wanted; };
        const vec vecs[] = {
            {&L.attn_norm, nm.attn_norm, d, true},           {&L.ffn_norm, nm.ffn_norm, d, true},
            {&L.bq, nm.q_bias, qd, row->qkv_bias},           {&L.bk, nm.k_bias, kvd, row->qkv_bias},
            {&L.bv, nm.v_bias, kvd, row->qkv_bias},         {&L.q_norm, nm.q_norm, hd, row->qk_norm},
            {&L.k_norm, nm.k_norm, hd, row->qk_norm},       {&L.post_attn_norm, nm.post_attn_norm, d, row->post_norms},
            {&L.post_ffn_norm, nm.post_ffn_norm, d, row->post_norms},
        };
        for (const vec& x : vecs) {
            if (!x.wanted) continue;
            auto v = b.norm(p + x.name, x.len);
            if (!v) return v.err();
            *x.dst = *v;
        }
        if (!tick() || !tick()) return progress.cancelled();
        struct mat { tensor_view* dst; const char* name; int64_t cols, rows; };
        std::vector<mat> mats = {{&L.wo, nm.o, qd, d}, {&L.w_down, nm.down, h, d}};
        tensor_view qkv, gate_up;
        if (row->fused_qkv) mats.push_back({&qkv, nm.qkv, d, qd + 2 * kvd});
        else mats.insert(mats.end(), {{&L.wq, nm.q, d, qd}, {&L.wk, nm.k, d, kvd}, {&L.wv, nm.v, d, kvd}});
        if (row->fused_gate_up) mats.push_back({&gate_up, nm.up, d, 2 * h});
        else mats.insert(mats.end(), {{&L.w_gate, nm.gate, d, h}, {&L.w_up, nm.up, d, h}});
        for (const mat& x : mats) {
            auto v = b.matrix(p + x.name, x.cols, x.rows);
            if (!v) return v.err();
            *x.dst = *v;
            if (!tick()) return progress.cancelled();
        }
        // Fused tensors become separate views, so every method sees q/k/v and gate/up units of their own.
        if (row->fused_qkv) {
            L.wq = row_slice(qkv, 0, qd);
            L.wk = row_slice(qkv, qd, kvd);
            L.wv = row_slice(qkv, qd + kvd, kvd);
        }
        if (row->fused_gate_up) {
            L.w_gate = row_slice(gate_up, 0, h);
            L.w_up = row_slice(gate_up, h, h);
        }
    }
    if (auto o = b.read_vocab(nv); !o) return o.err();
    if (!tick()) return progress.cancelled();
    return m;
}

}  // namespace sl

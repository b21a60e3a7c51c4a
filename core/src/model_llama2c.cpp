// llama2.c checkpoints: the legacy fp32 layout (run.c) and the "version 2" Q8_0 export (runq.c).
#include <cmath>
#include <cstring>

#include "sparselens/core/gguf.h"
#include "sparselens/kernels/kernels.h"
#include "weight_storage.h"

namespace sl {

namespace {

constexpr uint32_t k_v2_magic = 0x616b3432;  // "ak42"
constexpr uint64_t k_v2_header_bytes = 256;
constexpr uint64_t k_legacy_header_bytes = 7 * 4;

// The seven int32 header fields shared by both layouts, validated into hparams.
result<model_hparams> read_params(const mapped_file& f, uint64_t at, bool allow_negative_vocab, bool* shared) {
    static const char* names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
    const int64_t hi[7] = {k_max_dim, k_max_hidden, k_max_layers, k_max_heads, k_max_heads, k_max_vocab, k_max_seq_len};
    int64_t v[7];
    for (int i = 0; i < 7; ++i) {
        v[i] = load_le<int32_t>(f.data + at + 4 * i);
        int64_t x = v[i];
        if (i == 5 && allow_negative_vocab && x < 0) x = -x;  // negative vocab: unshared classifier
        if (x < 1 || x > hi[i])
            return file_error(f.path, std::string("llama2.c header: ") + names[i] + " = " + std::to_string(v[i]) +
                                          " is out of range [1, " + std::to_string(hi[i]) + "] (not a GGUF or llama2.c model?)");
    }
    *shared = v[5] > 0;
    model_hparams hp;
    hp.dim = static_cast<int32_t>(v[0]);
    hp.hidden_dim = static_cast<int32_t>(v[1]);
    hp.n_layers = static_cast<int32_t>(v[2]);
    hp.n_heads = static_cast<int32_t>(v[3]);
    hp.n_kv_heads = static_cast<int32_t>(v[4]);
    hp.vocab_size = static_cast<int32_t>(v[5] < 0 ? -v[5] : v[5]);
    hp.seq_len = static_cast<int32_t>(v[6]);
    hp.rope_theta = 10000.0f;
    hp.norm_eps = 1e-5f;
    if (std::string bad = validate_hparams(hp); !bad.empty()) return file_error(f.path, "llama2.c header: " + bad);
    hp.rope_dim = hp.head_dim();
    return hp;
}

std::string dims_text(const model_hparams& hp) {
    return "dim=" + std::to_string(hp.dim) + " hidden=" + std::to_string(hp.hidden_dim) + " layers=" +
           std::to_string(hp.n_layers) + " heads=" + std::to_string(hp.n_heads) + "/" + std::to_string(hp.n_kv_heads) +
           " vocab=" + std::to_string(hp.vocab_size) + " seq_len=" + std::to_string(hp.seq_len);
}

error size_mismatch(const mapped_file& f, uint64_t expected, const model_hparams& hp, const char* kind) {
    return file_error(f.path, std::string(f.size < expected ? "truncated: " : "") + "file is " + std::to_string(f.size) +
                                  " bytes but a " + kind + " with " + dims_text(hp) + " is exactly " +
                                  std::to_string(expected) + " bytes");
}

void record(model& m, const std::string& name, dtype t, std::vector<int64_t> shape, uint64_t bytes) {
    m.tensors.push_back({name, t, std::move(shape), bytes});
}

std::string blk(int32_t l, const char* what) { return "blk." + std::to_string(l) + "." + what; }

// One weight matrix of the llama2.c layouts: where it lives and what GGUF name it gets.
struct matrix_slot {
    tensor_view* dst;
    std::string name;
    int64_t rows, cols;
};

// All matrices in file order (token embedding; wq, wk, wv, wo, w1, w2, w3 for all layers; classifier).
std::vector<matrix_slot> matrix_slots(model& m, bool shared) {
    const model_hparams& hp = m.hp;
    const int64_t d = hp.dim, kvd = hp.kv_dim(), h = hp.hidden_dim;
    std::vector<matrix_slot> s;
    s.push_back({&m.tok_embd, "token_embd.weight", hp.vocab_size, d});
    struct kind { tensor_view layer_weights::*w; const char* name; int64_t rows, cols; };
    const kind kinds[] = {
        {&layer_weights::wq, "attn_q.weight", d, d},           {&layer_weights::wk, "attn_k.weight", kvd, d},
        {&layer_weights::wv, "attn_v.weight", kvd, d},         {&layer_weights::wo, "attn_output.weight", d, d},
        {&layer_weights::w_gate, "ffn_gate.weight", h, d},     {&layer_weights::w_down, "ffn_down.weight", d, h},
        {&layer_weights::w_up, "ffn_up.weight", h, d},
    };
    for (const kind& k : kinds)
        for (int32_t l = 0; l < hp.n_layers; ++l)
            s.push_back({&(m.layers[static_cast<size_t>(l)].*k.w), blk(l, k.name), k.rows, k.cols});
    if (!shared) s.push_back({&m.output, "output.weight", hp.vocab_size, d});
    return s;
}

model new_model(const mapped_file& f, const std::shared_ptr<const mapped_file>& file, const model_hparams& hp,
                const char* format, bool shared) {
    model m;
    m.path = f.path;
    m.format = format;
    m.hp = hp;
    m.file_bytes = f.size;
    m.tied_output = shared;
    m.layers.resize(static_cast<size_t>(hp.n_layers));
    auto st = std::make_shared<weight_storage>();
    st->file = file;
    m.storage = st;
    return m;
}

// Points the norm fields at fp32 data laid out as rms_att[L], rms_ffn[L], rms_final.
void set_norms(model& m, const float* att, const float* ffn, const float* final_norm) {
    const model_hparams& hp = m.hp;
    const uint64_t nb = static_cast<uint64_t>(hp.dim) * 4;
    for (int32_t l = 0; l < hp.n_layers; ++l) {
        m.layers[static_cast<size_t>(l)].attn_norm = att + static_cast<int64_t>(l) * hp.dim;
        m.layers[static_cast<size_t>(l)].ffn_norm = ffn + static_cast<int64_t>(l) * hp.dim;
        record(m, blk(l, "attn_norm.weight"), dtype::f32, {hp.dim}, nb);
        record(m, blk(l, "ffn_norm.weight"), dtype::f32, {hp.dim}, nb);
    }
    m.output_norm = final_norm;
    record(m, "output_norm.weight", dtype::f32, {hp.dim}, nb);
}

}  // namespace

result<model> load_llama2c_model(std::shared_ptr<const mapped_file> file, const load_progress& progress) {
    const mapped_file& f = *file;
    if (f.size < k_legacy_header_bytes)
        return file_error(f.path, "file is " + std::to_string(f.size) + " bytes, too small for any model (not GGUF, not llama2.c)");
    bool shared = true;
    auto hpr = read_params(f, 0, true, &shared);
    if (!hpr) return hpr.err();
    const model_hparams& hp = *hpr;
    const uint64_t d = static_cast<uint64_t>(hp.dim), L = static_cast<uint64_t>(hp.n_layers);
    const uint64_t kvd = static_cast<uint64_t>(hp.kv_dim()), h = static_cast<uint64_t>(hp.hidden_dim);
    const uint64_t V = static_cast<uint64_t>(hp.vocab_size), S = static_cast<uint64_t>(hp.seq_len);
    const uint64_t hd = static_cast<uint64_t>(hp.head_dim());
    // Bounded header values keep every product below 2^60, so plain arithmetic cannot overflow here.
    const uint64_t floats = V * d + L * d * 2 + L * d * d * 2 + L * kvd * d * 2 + L * h * d * 3 + d + S * hd +
                            (shared ? 0 : V * d);
    const uint64_t expected = k_legacy_header_bytes + floats * 4;
    if (f.size != expected) return size_mismatch(f, expected, hp, "llama2.c fp32 checkpoint");

    model m = new_model(f, file, hp, "llama2c-f32", shared);
    const float* p = reinterpret_cast<const float*>(f.data + k_legacy_header_bytes);
    auto take = [&](uint64_t n) {
        const float* r = p;
        p += n;
        return r;
    };
    const float* tok = take(V * d);
    const float* att = take(L * d);
    const float* wq = take(L * d * d);
    const float* wk = take(L * kvd * d);
    const float* wv = take(L * kvd * d);
    const float* wo = take(L * d * d);
    const float* ffn = take(L * d);
    const float* w1 = take(L * h * d);
    const float* w2 = take(L * d * h);
    const float* w3 = take(L * h * d);
    const float* fin = take(d);
    take(S * hd);  // freq_cis_real + freq_cis_imag (S * hd / 2 each): unused, RoPE is computed
    const float* cls = shared ? tok : take(V * d);

    set_norms(m, att, ffn, fin);
    auto slots = matrix_slots(m, shared);
    const float* sources[] = {wq, wk, wv, wo, w1, w2, w3};
    for (size_t i = 0; i < slots.size(); ++i) {
        const matrix_slot& s = slots[i];
        const float* src = nullptr;
        if (i == 0) src = tok;
        else if (i <= 7 * L) src = sources[(i - 1) / L] + ((i - 1) % L) * static_cast<uint64_t>(s.rows * s.cols);
        else src = cls;
        *s.dst = tensor_view{dtype::f32, s.rows, s.cols, src};
        record(m, s.name, dtype::f32, {s.cols, s.rows}, static_cast<uint64_t>(s.rows * s.cols) * 4);
        if (!progress.report(static_cast<float>(i + 1) / static_cast<float>(slots.size()))) return progress.cancelled();
    }
    if (shared) m.output = m.tok_embd;
    return m;
}

result<model> load_llama2c_q80_model(std::shared_ptr<const mapped_file> file, const load_progress& progress) {
    const mapped_file& f = *file;
    if (f.size < k_v2_header_bytes)
        return file_error(f.path, "truncated: llama2.c v2 header needs " + std::to_string(k_v2_header_bytes) +
                                      " bytes, file is " + std::to_string(f.size));
    const uint32_t magic = load_le<uint32_t>(f.data);
    const int32_t version = load_le<int32_t>(f.data + 4);
    if (magic != k_v2_magic) return file_error(f.path, "not a llama2.c v2 export (bad magic)");
    if (version != 2)
        return file_error(f.path, "llama2.c export version " + std::to_string(version) + " is not supported (only 2, Q8_0)");
    bool shared_sign = true;
    auto hpr = read_params(f, 8, false, &shared_sign);
    if (!hpr) return hpr.err();
    const model_hparams& hp = *hpr;
    const uint8_t shared_byte = f.data[36];
    const int32_t gs = load_le<int32_t>(f.data + 37);
    if (shared_byte > 1) return file_error(f.path, "llama2.c v2 header: shared_classifier = " + std::to_string(shared_byte) + " (must be 0 or 1)");
    if (gs < 1 || gs > (1 << 20))
        return file_error(f.path, "llama2.c v2 header: group_size = " + std::to_string(gs) + " is out of range [1, 1048576]");
    const bool shared = shared_byte == 1;

    model m = new_model(f, file, hp, "llama2c-q8_0", shared);
    auto slots = matrix_slots(m, shared);
    const uint64_t d = static_cast<uint64_t>(hp.dim), L = static_cast<uint64_t>(hp.n_layers);
    const uint64_t G = static_cast<uint64_t>(gs);
    uint64_t expected = k_v2_header_bytes + (2 * L * d + d) * 4;
    for (const matrix_slot& s : slots) {
        const uint64_t n = static_cast<uint64_t>(s.rows * s.cols);
        if (n % G != 0)
            return file_error(f.path, "tensor '" + s.name + "' has " + std::to_string(n) +
                                          " elements, not a multiple of group_size " + std::to_string(gs));
        expected += n + n / G * 4;
    }
    if (f.size != expected) return size_mismatch(f, expected, hp, "llama2.c v2 Q8_0 export");

    const float* norms = reinterpret_cast<const float*>(f.data + k_v2_header_bytes);
    set_norms(m, norms, norms + L * d, norms + 2 * L * d);
    auto& st = *m.storage;
    const uint8_t* p = f.data + k_v2_header_bytes + (2 * L * d + d) * 4;
    for (size_t i = 0; i < slots.size(); ++i) {
        const matrix_slot& s = slots[i];
        const uint64_t n = static_cast<uint64_t>(s.rows * s.cols);
        const uint8_t* q = p;
        const uint8_t* scales = p + n;  // fp32, possibly unaligned: read with load_le
        p += n + n / G * 4;
        // Groups run over the flattened tensor; they coincide with ggml Q8_0 blocks only when they are
        // 32 wide and never straddle a row.
        const bool as_q8 = gs == qk8_0 && s.cols % qk8_0 == 0;
        tensor_view v{as_q8 ? dtype::q8_0 : dtype::f32, s.rows, s.cols, nullptr};
        uint8_t* out = st.alloc(static_cast<uint64_t>(v.bytes()));
        if (!out) return file_error(f.path, "out of memory converting tensor '" + s.name + "'");
        if (as_q8) {
            auto* blocks = reinterpret_cast<block_q8_0*>(out);
            for (uint64_t b = 0; b < n / qk8_0; ++b) {
                blocks[b].d = kernels::fp32_to_fp16(load_le<float>(scales + 4 * b));
                std::memcpy(blocks[b].qs, q + b * qk8_0, qk8_0);
            }
        } else {
            auto* x = reinterpret_cast<float*>(out);
            for (uint64_t g = 0; g < n / G; ++g) {
                const float sc = load_le<float>(scales + 4 * g);
                for (uint64_t j = 0; j < G; ++j) x[g * G + j] = static_cast<float>(static_cast<int8_t>(q[g * G + j])) * sc;
            }
        }
        v.data = out;
        *s.dst = v;
        record(m, s.name, v.type, {s.cols, s.rows}, static_cast<uint64_t>(v.bytes()));
        if (!progress.report(static_cast<float>(i + 1) / static_cast<float>(slots.size()))) return progress.cancelled();
    }
    if (shared) m.output = m.tok_embd;
    return m;
}

}  // namespace sl

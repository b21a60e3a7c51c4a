// Synthetic llama GGUF writer: deterministic random weights streamed row by row, plus a minimal vocabulary.
#include "sparselens/core/synthetic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "sparselens/core/gguf.h"
#include "sparselens/kernels/kernels.h"
#include "weight_storage.h"

namespace sl {

namespace {

struct shape_row {
    const char* name;
    model_hparams hp;
    bool tied;
};

model_hparams make_hp(int32_t dim, int32_t hidden, int32_t layers, int32_t heads, int32_t kv, int32_t vocab,
                      int32_t ctx, float theta) {
    model_hparams hp;
    hp.dim = dim;
    hp.hidden_dim = hidden;
    hp.n_layers = layers;
    hp.n_heads = heads;
    hp.n_kv_heads = kv;
    hp.vocab_size = vocab;
    hp.seq_len = ctx;
    hp.rope_dim = dim / heads;
    hp.rope_theta = theta;
    hp.norm_eps = 1e-5f;
    return hp;
}

const std::vector<shape_row>& shapes() {
    static const std::vector<shape_row> rows = {
        {"tiny", make_hp(64, 172, 5, 8, 4, 512, 512, 10000.0f), true},
        {"llama-1b", make_hp(2048, 8192, 16, 32, 8, 32000, 2048, 500000.0f), true},
        {"llama-8b-layer", make_hp(4096, 14336, 1, 32, 8, 32000, 8192, 500000.0f), false},
        {"llama-8b-4layer", make_hp(4096, 14336, 4, 32, 8, 32000, 8192, 500000.0f), false},
        {"small-512", make_hp(512, 1536, 4, 8, 4, 1024, 512, 10000.0f), false},
    };
    return rows;
}

const shape_row* find_shape(const std::string& name) {
    for (const auto& s : shapes())
        if (name == s.name) return &s;
    return nullptr;
}

constexpr int32_t k_min_vocab = 3 + 256 + 1;  // specials, byte tokens, at least one piece

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Approximately standard normal: the sum of four 16-bit uniforms (Irwin-Hall), rescaled to unit
// variance. One 64-bit draw per value; tails are cut at +-3.46, which weights do not miss.
float approx_normal(uint64_t& state) {
    const uint64_t r = splitmix64(state);
    const int64_t sum = static_cast<int64_t>(r & 0xffff) + static_cast<int64_t>((r >> 16) & 0xffff) +
                        static_cast<int64_t>((r >> 32) & 0xffff) + static_cast<int64_t>(r >> 48);
    constexpr double scale = 1.7320508075688772 / 65536.0;  // sqrt(3) / 2^16
    return static_cast<float>((static_cast<double>(sum) - 131070.0) * scale);
}

uint64_t tensor_seed(uint64_t seed, const std::string& name) {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the name, so each tensor has its own stream
    for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
    uint64_t s = seed ^ h;
    return splitmix64(s);
}

// Streams a [rows, cols] matrix of N(0, stddev^2) values, converted row by row to `t`.
gguf_writer::fill_fn matrix_fill(uint64_t seed, int64_t rows, int64_t cols, dtype t, float stddev) {
    return [=](gguf_sink& sink) -> outcome {
        uint64_t state = seed;
        const int64_t rb = dtype_row_bytes(t, cols);
        const int64_t per_chunk = std::max<int64_t>(1, (4 << 20) / rb);
        std::vector<float> row(static_cast<size_t>(cols));
        std::vector<uint8_t> chunk(static_cast<size_t>(std::min(per_chunk, rows) * rb));
        for (int64_t r0 = 0; r0 < rows; r0 += per_chunk) {
            const int64_t n = std::min(per_chunk, rows - r0);
            for (int64_t i = 0; i < n; ++i) {
                for (auto& x : row) x = approx_normal(state) * stddev;
                kernels::quantize_row(t, row.data(), chunk.data() + i * rb, cols);
            }
            if (auto o = sink.write(chunk.data(), static_cast<size_t>(n * rb)); !o) return o;
        }
        return {};
    };
}

gguf_writer::fill_fn ones_fill(int64_t n) {
    return [n](gguf_sink& sink) -> outcome {
        const std::vector<float> ones(static_cast<size_t>(n), 1.0f);
        return sink.write(ones.data(), ones.size() * sizeof(float));
    };
}

// <unk>, <s>, </s>, <0x00>..<0xFF>, then "▁x"/"x" letter pieces of growing length until `n` tokens.
void add_vocab(gguf_writer& w, int32_t n) {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<float> scores = {0.0f, 0.0f, 0.0f};
    std::vector<int32_t> types = {2, 3, 3};
    for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        tokens.emplace_back(buf);
        scores.push_back(0.0f);
        types.push_back(6);
    }
    static const std::string letters = "etaoinshrdlcumwfgypbvkjxqz";
    const std::string space = "\xe2\x96\x81";  // U+2581, SentencePiece's word-boundary marker
    std::vector<std::string> level = {""};
    std::unordered_set<std::string> seen(tokens.begin(), tokens.end());
    auto push = [&](const std::string& piece) {
        if (static_cast<int32_t>(tokens.size()) >= n || !seen.insert(piece).second) return;
        scores.push_back(-static_cast<float>(tokens.size()));
        tokens.push_back(piece);
        types.push_back(1);
    };
    push(space);
    while (static_cast<int32_t>(tokens.size()) < n) {
        std::vector<std::string> next;
        for (const auto& prefix : level)
            for (char c : letters) next.push_back(prefix + c);
        for (const auto& p : next) push(space + p);
        for (const auto& p : next) push(p);
        level = std::move(next);
    }
    w.set("tokenizer.ggml.model", gguf_value::string("llama"));
    w.set("tokenizer.ggml.tokens", gguf_value::string_array(std::move(tokens)));
    w.set("tokenizer.ggml.scores", gguf_value::array(scores));
    w.set("tokenizer.ggml.token_type", gguf_value::array(types));
    w.set_u32("tokenizer.ggml.bos_token_id", 1);
    w.set_u32("tokenizer.ggml.eos_token_id", 2);
    w.set_u32("tokenizer.ggml.unknown_token_id", 0);
    w.set_bool("tokenizer.ggml.add_bos_token", true);
}

uint32_t llama_file_type(dtype t) {
    switch (t) {
        case dtype::f32: return 0;
        case dtype::f16: return 1;
        case dtype::q4_0: return 2;
        case dtype::q8_0: return 7;
        case dtype::bf16: return 32;
        default: break;  // synthetic files are written only in encodable types
    }
    return 0;
}

}  // namespace

synthetic_params synthetic_default_params() { return synthetic_params{}; }

std::vector<std::string> synthetic_shape_names() {
    std::vector<std::string> names;
    for (const auto& s : shapes()) names.emplace_back(s.name);
    return names;
}

result<model_hparams> synthetic_shape(const std::string& shape, int32_t vocab) {
    const shape_row* s = find_shape(shape);
    if (!s) {
        std::string known;
        for (const auto& n : synthetic_shape_names()) known += (known.empty() ? "" : ", ") + n;
        return error{"synthetic: unknown shape '" + shape + "' (known: " + known + ")"};
    }
    model_hparams hp = s->hp;
    if (vocab != 0) {
        if (vocab < k_min_vocab || vocab > k_max_vocab)
            return error{"synthetic: vocab " + std::to_string(vocab) + " is out of range [" + std::to_string(k_min_vocab) +
                         ", " + std::to_string(k_max_vocab) + "]"};
        hp.vocab_size = vocab;
    }
    return hp;
}

result<synthetic_summary> synthetic_write(const synthetic_params& p) {
    if (p.path.empty()) return error{"synthetic: no output path given"};
    auto hpr = synthetic_shape(p.shape, p.vocab);
    if (!hpr) return error{p.path + ": " + hpr.message()};
    const model_hparams hp = *hpr;
    const bool tied = find_shape(p.shape)->tied;

    gguf_writer w;
    w.set_str("general.architecture", "llama");
    w.set_str("general.name", "synthetic-" + p.shape);
    w.set_u32("general.file_type", llama_file_type(p.type));
    if (p.type == dtype::q8_0 || p.type == dtype::q4_0) w.set_u32("general.quantization_version", 2);
    w.set("sparselens.synthetic.seed", gguf_value::scalar<uint64_t>(p.seed));
    w.set_u32("llama.context_length", static_cast<uint32_t>(hp.seq_len));
    w.set_u32("llama.embedding_length", static_cast<uint32_t>(hp.dim));
    w.set_u32("llama.block_count", static_cast<uint32_t>(hp.n_layers));
    w.set_u32("llama.feed_forward_length", static_cast<uint32_t>(hp.hidden_dim));
    w.set_u32("llama.attention.head_count", static_cast<uint32_t>(hp.n_heads));
    w.set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(hp.n_kv_heads));
    w.set_u32("llama.rope.dimension_count", static_cast<uint32_t>(hp.rope_dim));
    w.set_f32("llama.attention.layer_norm_rms_epsilon", hp.norm_eps);
    w.set_f32("llama.rope.freq_base", hp.rope_theta);
    w.set_u32("llama.vocab_size", static_cast<uint32_t>(hp.vocab_size));
    add_vocab(w, hp.vocab_size);

    auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) -> outcome {
        const dtype t = cols % dtype_block_elems(p.type) == 0 ? p.type : dtype::f32;
        const float stddev = static_cast<float>(1.0 / std::sqrt(static_cast<double>(cols)));
        return w.add_tensor(name, ggml_from_dtype(t), {cols, rows}, matrix_fill(tensor_seed(p.seed, name), rows, cols, t, stddev));
    };
    auto norm = [&](const std::string& name) {
        return w.add_tensor(name, ggml_type_id::f32, {hp.dim}, ones_fill(hp.dim));
    };
    const int64_t d = hp.dim, kvd = hp.kv_dim(), h = hp.hidden_dim;
    outcome o = matrix("token_embd.weight", hp.vocab_size, d);
    if (o) o = norm("output_norm.weight");
    if (o && !tied) o = matrix("output.weight", hp.vocab_size, d);
    for (int32_t l = 0; o && l < hp.n_layers; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        if (o) o = norm(b + "attn_norm.weight");
        if (o) o = matrix(b + "attn_q.weight", d, d);
        if (o) o = matrix(b + "attn_k.weight", kvd, d);
        if (o) o = matrix(b + "attn_v.weight", kvd, d);
        if (o) o = matrix(b + "attn_output.weight", d, d);
        if (o) o = norm(b + "ffn_norm.weight");
        if (o) o = matrix(b + "ffn_gate.weight", h, d);
        if (o) o = matrix(b + "ffn_down.weight", d, h);
        if (o) o = matrix(b + "ffn_up.weight", h, d);
    }
    if (!o) return error{p.path + ": " + o.message()};  // a bug in the tables above, not bad input

    auto written = w.write(p.path, p.progress);
    if (!written) return written.err();
    synthetic_summary s;
    s.path = p.path;
    s.hp = hp;
    s.tied_output = tied;
    s.n_tensors = static_cast<int32_t>(w.n_tensors());
    s.file_bytes = *written;
    return s;
}

}  // namespace sl

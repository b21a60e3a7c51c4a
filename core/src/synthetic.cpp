// Synthetic GGUF writer (llama, llama3, qwen2, qwen3, phi3, gemma2, gemma): deterministic random weights streamed
// row by row, metadata as llama.cpp's converter writes it, plus a minimal vocabulary.
#include "sparselens/core/synthetic.h"

#include <algorithm>
#include <cctype>
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
                      int32_t ctx, float theta, int32_t head_width = 0) {
    model_hparams hp;
    hp.dim = dim;
    hp.hidden_dim = hidden;
    hp.n_layers = layers;
    hp.n_heads = heads;
    hp.n_kv_heads = kv;
    hp.vocab_size = vocab;
    hp.seq_len = ctx;
    hp.head_width = head_width;
    hp.rope_dim = hp.head_dim();
    hp.rope_theta = theta;
    hp.norm_eps = 1e-5f;
    return hp;
}

const std::vector<shape_row>& shapes() {
    static const std::vector<shape_row> rows = {
        {"tiny", make_hp(64, 172, 5, 8, 4, 512, 512, 10000.0f), true},
        {"small", make_hp(256, 768, 4, 4, 2, 512, 4096, 10000.0f), true},
        {"llama-1b", make_hp(2048, 8192, 16, 32, 8, 32000, 2048, 500000.0f), true},
        {"llama-8b-layer", make_hp(4096, 14336, 1, 32, 8, 32000, 8192, 500000.0f), false},
        {"llama-8b-4layer", make_hp(4096, 14336, 4, 32, 8, 32000, 8192, 500000.0f), false},
        {"small-512", make_hp(512, 1536, 4, 8, 4, 1024, 512, 10000.0f), false},
        // Heads wider than dim / heads, at the ratios of real models but small: Qwen3-0.6B (dim 1024,
        // 16 x 128-wide heads: q is twice dim) and Gemma-2-2B (dim 2304, 8 x 256: q narrower than dim).
        {"qwen3-0.6b-mini", make_hp(256, 768, 4, 4, 2, 512, 4096, 1000000.0f, 128), true},
        {"gemma2-2b-mini", make_hp(768, 1536, 4, 2, 1, 512, 4096, 10000.0f, 256), true},
    };
    return rows;
}

const shape_row* find_shape(const std::string& name) {
    for (const auto& s : shapes())
        if (name == s.name) return &s;
    return nullptr;
}

// What each --arch writes beyond the plain llama tensors; keys and tensor names as llama.cpp's converter
// (convert_hf_to_gguf.py) writes them for that model family.
struct synth_arch {
    const char* name;       // --arch
    const char* gguf_arch;  // general.architecture and key prefix
    float theta = 0.0f;     // 0: the shape's
    int tied = -1;          // -1: the shape's; 0/1 forced (Gemma-2 has no output.weight)
    bool rope_freqs = false, qkv_bias = false, qk_norm = false, fused = false, post_norms = false, gemma = false;
    bool softcaps = false;  // Gemma 2's soft-capping and sliding window
};

const synth_arch k_synth_archs[] = {
    {"llama", "llama"},
    {"llama3", "llama", 500000.0f, 0, true},
    {"qwen2", "qwen2", 1000000.0f, 1, false, true},
    {"qwen3", "qwen3", 1000000.0f, 1, false, false, true},
    {"phi3", "phi3", 10000.0f, 0, false, false, false, true},
    {"gemma2", "gemma2", 10000.0f, 1, false, false, false, false, true, true, true},
    {"gemma", "gemma", 10000.0f, 1, false, false, false, false, false, true},
};

const synth_arch* find_synth_arch(const std::string& name) {
    for (const synth_arch& a : k_synth_archs)
        if (name == a.name) return &a;
    return nullptr;
}

// Llama-3.x "llama3" RoPE scaling as the converter bakes it into rope_freqs.weight (factor 32, low/high
// frequency factors 1 and 4, original context 8192): 1 for high frequencies, 32 for low, smooth between.
std::vector<float> llama3_rope_factors(const model_hparams& hp) {
    constexpr double factor = 32.0, low = 1.0, high = 4.0, orig = 8192.0, pi = 3.14159265358979323846;
    std::vector<float> f;
    for (int32_t j = 0; j < hp.rope_dim / 2; ++j) {
        const double freq = 1.0 / std::pow(static_cast<double>(hp.rope_theta), 2.0 * j / hp.rope_dim);
        const double wavelen = 2.0 * pi / freq;
        if (wavelen < orig / high) {
            f.push_back(1.0f);
        } else if (wavelen > orig / low) {
            f.push_back(static_cast<float>(factor));
        } else {
            const double smooth = (orig / wavelen - low) / (high - low);
            f.push_back(static_cast<float>(1.0 / ((1.0 - smooth) / factor + smooth)));
        }
    }
    return f;
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

// 1 + N(0, jitter^2): norm weights that are not all equal, so a norm applied in the wrong place shows.
gguf_writer::fill_fn vector_fill(uint64_t seed, int64_t n, float center, float jitter) {
    return [=](gguf_sink& sink) -> outcome {
        uint64_t state = seed;
        std::vector<float> v(static_cast<size_t>(n));
        for (auto& x : v) x = center + jitter * approx_normal(state);
        return sink.write(v.data(), v.size() * sizeof(float));
    };
}

gguf_writer::fill_fn values_fill(std::vector<float> v) {
    return [v = std::move(v)](gguf_sink& sink) -> outcome { return sink.write(v.data(), v.size() * sizeof(float)); };
}

gguf_writer::fill_fn ones_fill(int64_t n) {
    return [n](gguf_sink& sink) -> outcome {
        const std::vector<float> ones(static_cast<size_t>(n), 1.0f);
        return sink.write(ones.data(), ones.size() * sizeof(float));
    };
}

// <unk>, <s>, </s>, <0x00>..<0xFF>, then "▁x"/"x" letter pieces of growing length until `n` tokens, the
// last of them replaced by `specials` (control tokens, as Phi-3's <|endoftext|> after its SentencePiece
// pieces; llama.cpp requires that one in a model named phi3).
void add_vocab(gguf_writer& w, int32_t n, const std::vector<std::string>& specials = {}) {
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
    for (size_t i = 0; i < specials.size() && specials.size() < tokens.size(); ++i) {
        const size_t at = tokens.size() - specials.size() + i;
        tokens[at] = specials[i];
        scores[at] = 0.0f;
        types[at] = 3;
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

std::vector<std::string> synthetic_arch_names() {
    std::vector<std::string> names;
    for (const synth_arch& a : k_synth_archs) names.emplace_back(a.name);
    return names;
}

std::string synthetic_arch_names_text() {
    std::string out;
    for (const std::string& n : synthetic_arch_names()) out += (out.empty() ? "" : ", ") + n;
    return out;
}

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
    // The file types quantize_row() can encode (dtype_traits::encodable).
    const auto writable = [](dtype t) { return dtype_info(t).encodable && dtype_is_file_type(t); };
    if (!writable(p.type)) {
        std::string names;
        for (int i = 0; i < n_dtypes; ++i) {
            if (!writable(static_cast<dtype>(i))) continue;
            std::string n(dtype_name(static_cast<dtype>(i)));
            for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            names += (names.empty() ? "" : ", ") + n;
        }
        return error{p.path + ": synthetic: weights of type " + std::string(dtype_name(p.type)) +
                     " cannot be written (" + names + "; quantize a file with ggml for the rest)"};
    }
    const synth_arch* a = find_synth_arch(p.arch);
    if (!a) return error{p.path + ": synthetic: unknown architecture '" + p.arch + "' (known: " + synthetic_arch_names_text() + ")"};
    auto hpr = synthetic_shape(p.shape, p.vocab);
    if (!hpr) return error{p.path + ": " + hpr.message()};
    model_hparams hp = *hpr;
    if (a->theta > 0.0f) hp.rope_theta = a->theta;
    const bool tied = a->tied < 0 ? find_shape(p.shape)->tied : a->tied == 1;
    const bool plain = std::string(a->name) == "llama";  // byte-identical to the files before --arch existed
    const std::string k = std::string(a->gguf_arch) + ".";

    gguf_writer w;
    w.set_str("general.architecture", a->gguf_arch);
    w.set_str("general.name", "synthetic-" + (plain ? "" : std::string(a->name) + "-") + p.shape);
    w.set_u32("general.file_type", llama_file_type(p.type));
    if (p.type == dtype::q8_0 || p.type == dtype::q4_0) w.set_u32("general.quantization_version", 2);
    w.set("sparselens.synthetic.seed", gguf_value::scalar<uint64_t>(p.seed));
    w.set_u32(k + "context_length", static_cast<uint32_t>(hp.seq_len));
    w.set_u32(k + "embedding_length", static_cast<uint32_t>(hp.dim));
    w.set_u32(k + "block_count", static_cast<uint32_t>(hp.n_layers));
    w.set_u32(k + "feed_forward_length", static_cast<uint32_t>(hp.hidden_dim));
    w.set_u32(k + "attention.head_count", static_cast<uint32_t>(hp.n_heads));
    w.set_u32(k + "attention.head_count_kv", static_cast<uint32_t>(hp.n_kv_heads));
    w.set_u32(k + "rope.dimension_count", static_cast<uint32_t>(hp.rope_dim));
    w.set_f32(k + "attention.layer_norm_rms_epsilon", a->gemma ? 1e-6f : hp.norm_eps);
    w.set_f32(k + "rope.freq_base", hp.rope_theta);
    if (plain || a->rope_freqs) w.set_u32(k + "vocab_size", static_cast<uint32_t>(hp.vocab_size));
    if (a->qk_norm || a->gemma || hp.head_width > 0) {
        w.set_u32(k + "attention.key_length", static_cast<uint32_t>(hp.head_dim()));
        w.set_u32(k + "attention.value_length", static_cast<uint32_t>(hp.head_dim()));
    }
    if (a->fused) {
        // Phi-3's converter writes its sliding window and longrope metadata; llama.cpp ignores the window.
        w.set_u32(k + "rope.scaling.original_context_length", static_cast<uint32_t>(hp.seq_len));
        w.set_f32(k + "rope.scaling.attn_factor", 1.1902f);
        w.set_u32(k + "attention.sliding_window", 2047);
    }
    if (a->softcaps) {
        // Caps and window smaller than Gemma-2's (50, 30, 4096) so they bite at test lengths.
        w.set_f32(k + "attn_logit_softcapping", 10.0f);
        w.set_f32(k + "final_logit_softcapping", 5.0f);
        w.set_u32(k + "attention.sliding_window", 16);
    }
    add_vocab(w, hp.vocab_size, a->fused ? std::vector<std::string>{"<|endoftext|>", "<|end|>"} : std::vector<std::string>{});

    auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) -> outcome {
        const dtype t = cols % dtype_block_elems(p.type) == 0 ? p.type : dtype::f32;
        const float stddev = static_cast<float>(1.0 / std::sqrt(static_cast<double>(cols)));
        return w.add_tensor(name, ggml_from_dtype(t), {cols, rows}, matrix_fill(tensor_seed(p.seed, name), rows, cols, t, stddev));
    };
    auto vec = [&](const std::string& name, int64_t n, float center, float jitter) {
        return w.add_tensor(name, ggml_type_id::f32, {n}, vector_fill(tensor_seed(p.seed, name), n, center, jitter));
    };
    auto norm = [&](const std::string& name, int64_t n) {
        return plain ? w.add_tensor(name, ggml_type_id::f32, {n}, ones_fill(n)) : vec(name, n, 1.0f, 0.1f);
    };
    const int64_t d = hp.dim, qd = hp.q_dim(), kvd = hp.kv_dim(), h = hp.hidden_dim, hd = hp.head_dim();
    outcome o = matrix("token_embd.weight", hp.vocab_size, d);
    if (o) o = norm("output_norm.weight", d);
    if (o && !tied) o = matrix("output.weight", hp.vocab_size, d);
    if (o && a->rope_freqs)
        o = w.add_tensor("rope_freqs.weight", ggml_type_id::f32, {hp.rope_dim / 2}, values_fill(llama3_rope_factors(hp)));
    if (o && a->fused) o = vec("rope_factors_long.weight", hp.rope_dim / 2, 4.0f, 0.5f);
    if (o && a->fused) o = vec("rope_factors_short.weight", hp.rope_dim / 2, 1.2f, 0.1f);
    for (int32_t l = 0; o && l < hp.n_layers; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        if (o) o = norm(b + "attn_norm.weight", d);
        if (o && a->fused) o = matrix(b + "attn_qkv.weight", qd + 2 * kvd, d);
        if (o && !a->fused) o = matrix(b + "attn_q.weight", qd, d);
        if (o && !a->fused) o = matrix(b + "attn_k.weight", kvd, d);
        if (o && !a->fused) o = matrix(b + "attn_v.weight", kvd, d);
        if (o && a->qkv_bias) o = vec(b + "attn_q.bias", qd, 0.0f, 0.5f);
        if (o && a->qkv_bias) o = vec(b + "attn_k.bias", kvd, 0.0f, 0.5f);
        if (o && a->qkv_bias) o = vec(b + "attn_v.bias", kvd, 0.0f, 0.5f);
        if (o && a->qk_norm) o = norm(b + "attn_q_norm.weight", hd);
        if (o && a->qk_norm) o = norm(b + "attn_k_norm.weight", hd);
        if (o) o = matrix(b + "attn_output.weight", d, qd);
        if (o && a->post_norms) o = norm(b + "post_attention_norm.weight", d);
        if (o) o = norm(b + "ffn_norm.weight", d);
        if (o && !a->fused) o = matrix(b + "ffn_gate.weight", h, d);
        if (o) o = matrix(b + "ffn_down.weight", d, h);
        if (o) o = matrix(b + "ffn_up.weight", a->fused ? 2 * h : h, d);
        if (o && a->post_norms) o = norm(b + "post_ffw_norm.weight", d);
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

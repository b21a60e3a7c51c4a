// model_load on the six shared stories260K files: hyper-parameters, weights across formats, vocab, progress.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>

#include "sparselens/core/synthetic.h"
#include "sparselens/core/gguf.h"
#include "sparselens/core/model.h"
#include "sparselens/kernels/kernels.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;

const char* const k_files[] = {"models/stories260K_f32.bin", "models/stories260K_q80.bin",
                               "models/gguf/stories260K-F32.gguf", "models/gguf/stories260K-F16.gguf",
                               "models/gguf/stories260K-Q8_0.gguf", "models/gguf/stories260K-Q4_0.gguf"};

sl::model load_ok(const std::string& path, bool mmap = true) {
    sl::model_load_params p = sl::model_default_load_params();
    p.use_mmap = mmap;
    auto m = sl::model_load(path, p);
    if (!m.ok()) ADD_FAILURE() << m.message();
    return m.ok() ? std::move(m).value() : sl::model{};
}

std::vector<float> dequant(const sl::tensor_view& v) {
    std::vector<float> out(static_cast<size_t>(v.rows * v.cols));
    for (int64_t r = 0; r < v.rows; ++r) sl::kernels::dequantize_row(v.type, v.row(r), out.data() + r * v.cols, v.cols);
    return out;
}

// Every weight matrix of a model with a label, in a fixed order.
std::vector<std::pair<std::string, const sl::tensor_view*>> matrices(const sl::model& m) {
    std::vector<std::pair<std::string, const sl::tensor_view*>> out = {{"tok_embd", &m.tok_embd}, {"output", &m.output}};
    for (size_t l = 0; l < m.layers.size(); ++l) {
        const auto& L = m.layers[l];
        const std::string p = "layer " + std::to_string(l) + " ";
        for (auto [n, v] : {std::pair{"wq", &L.wq}, {"wk", &L.wk}, {"wv", &L.wv}, {"wo", &L.wo},
                            {"gate", &L.w_gate}, {"up", &L.w_up}, {"down", &L.w_down}})
            out.emplace_back(p + n, v);
    }
    return out;
}

TEST(model_load, hparams_and_views_of_every_format) {
    for (const char* rel : k_files) {
        for (bool mmap : {true, false}) {
            const std::string path = sl::test::shared_path(rel);
            SCOPED_TRACE(path + (mmap ? " mmap" : " read"));
            const sl::model m = load_ok(path, mmap);
            const auto& hp = m.hp;  // README: dim 64, hidden 172, 5 layers, 8/4 heads, vocab 512, seq 512
            EXPECT_EQ(hp.dim, 64);
            EXPECT_EQ(hp.hidden_dim, 172);
            EXPECT_EQ(hp.n_layers, 5);
            EXPECT_EQ(hp.n_heads, 8);
            EXPECT_EQ(hp.n_kv_heads, 4);
            EXPECT_EQ(hp.vocab_size, 512);
            EXPECT_EQ(hp.seq_len, 512);
            EXPECT_EQ(hp.rope_dim, 8);
            EXPECT_EQ(hp.rope_theta, 10000.0f);
            EXPECT_EQ(hp.norm_eps, 1e-5f);
            EXPECT_EQ(m.path, path);
            EXPECT_EQ(m.file_bytes, fs::file_size(path));
            const bool gguf = path.ends_with(".gguf");
            EXPECT_EQ(m.format, gguf ? "gguf" : path.ends_with("f32.bin") ? "llama2c-f32" : "llama2c-q8_0");
            EXPECT_EQ(m.tied_output, !gguf);  // the GGUFs carry an explicit output.weight copy
            if (gguf) {
                EXPECT_EQ(m.name, "stories260K");
            }
            EXPECT_EQ(m.tensors.size(), gguf ? 48u : 47u);  // llama2.c: no separate output tensor
            EXPECT_TRUE(m.storage != nullptr);
            ASSERT_EQ(m.layers.size(), 5u);
            EXPECT_NE(m.output_norm, nullptr);
            for (const auto& L : m.layers) {
                EXPECT_NE(L.attn_norm, nullptr);
                EXPECT_NE(L.ffn_norm, nullptr);
                EXPECT_EQ(L.wk.rows, 32);
                EXPECT_EQ(L.wk.cols, 64);
                EXPECT_EQ(L.w_down.rows, 64);
                EXPECT_EQ(L.w_down.cols, 172);
                EXPECT_EQ(L.w_up.rows, 172);
            }
            for (const auto& [name, v] : matrices(m)) EXPECT_NE(v->data, nullptr) << name;
            EXPECT_EQ(m.tok_embd.rows, 512);
            EXPECT_EQ(m.output.rows, 512);
        }
    }
}

TEST(model_load, gguf_tensor_types_match_manifest) {
    struct expect { const char* rel; sl::dtype matrix; int n_matrix_type; };
    const expect rows[] = {{"models/gguf/stories260K-F32.gguf", sl::dtype::f32, 48},
                           {"models/gguf/stories260K-F16.gguf", sl::dtype::f16, 37},
                           {"models/gguf/stories260K-Q8_0.gguf", sl::dtype::q8_0, 32},
                           {"models/gguf/stories260K-Q4_0.gguf", sl::dtype::q4_0, 32}};
    for (const auto& e : rows) {
        const sl::model m = load_ok(sl::test::shared_path(e.rel));
        int n = 0;
        for (const auto& t : m.tensors) n += t.type == e.matrix;
        EXPECT_EQ(n, e.n_matrix_type) << e.rel;
        EXPECT_EQ(m.layers[0].w_down.type, e.matrix == sl::dtype::f16 || e.matrix == sl::dtype::f32 ? e.matrix : sl::dtype::f32);
        EXPECT_EQ(m.layers[0].w_gate.type, e.matrix);
    }
}

// Weights read back from each GGUF agree with the fp32 checkpoint within the MANIFEST's measured
// dequantisation error (F32 exact, F16 4.9e-4, Q8_0 4.8e-4, Q4_0 0.129 max / 0.017 rmse).
TEST(model_load, gguf_weights_match_f32_checkpoint) {
    const sl::model ref = load_ok(sl::test::shared_path("models/stories260K_f32.bin"));
    struct expect { const char* rel; double max_err, rmse; };
    const expect rows[] = {{"models/gguf/stories260K-F32.gguf", 0.0, 0.0},
                           {"models/gguf/stories260K-F16.gguf", 5e-4, 1e-3},
                           {"models/gguf/stories260K-Q8_0.gguf", 5e-4, 1e-3},
                           {"models/gguf/stories260K-Q4_0.gguf", 0.13, 0.02}};
    const auto ref_m = matrices(ref);
    for (const auto& e : rows) {
        const sl::model m = load_ok(sl::test::shared_path(e.rel));
        const auto mm = matrices(m);
        double max_err = 0, sq = 0;
        size_t n = 0;
        for (size_t i = 0; i < mm.size(); ++i) {
            const auto a = dequant(*ref_m[i].second), b = dequant(*mm[i].second);
            ASSERT_EQ(a.size(), b.size()) << mm[i].first;
            for (size_t j = 0; j < a.size(); ++j) {
                const double d = std::fabs(static_cast<double>(a[j]) - b[j]);
                max_err = std::max(max_err, d);
                sq += d * d;
            }
            n += a.size();
        }
        const double rmse = std::sqrt(sq / static_cast<double>(n));
        std::printf("%-40s max abs err %.3g  rmse %.3g over %zu weights\n", e.rel, max_err, rmse, n);
        EXPECT_LE(max_err, e.max_err) << e.rel;
        EXPECT_LE(rmse, e.rmse) << e.rel;
        EXPECT_GT(n, 250000u);
        for (int l = 0; l < 5; ++l)
            EXPECT_EQ(0, std::memcmp(ref.layers[l].attn_norm, m.layers[l].attn_norm, 64 * 4)) << e.rel;
        EXPECT_EQ(0, std::memcmp(ref.output_norm, m.output_norm, 64 * 4)) << e.rel;
    }
}

// The legacy loader's views sit where the llama2.c layout (README) puts each tensor.
TEST(model_load, f32_checkpoint_views_follow_layout) {
    const std::string path = sl::test::shared_path("models/stories260K_f32.bin");
    const auto raw = sl::test::read_bytes(path);
    const sl::model m = load_ok(path);
    auto at = [&](uint64_t float_index) { return raw.data() + 28 + 4 * float_index; };
    const uint64_t d = 64, h = 172, L = 5, kv = 32, V = 512;
    const uint64_t tok = 0, att = V * d, wq = att + L * d, wk = wq + L * d * d, wv = wk + L * kv * d, wo = wv + L * kv * d,
                   ffn = wo + L * d * d, w1 = ffn + L * d, w2 = w1 + L * h * d, w3 = w2 + L * d * h, fin = w3 + L * h * d;
    EXPECT_EQ(0, std::memcmp(m.tok_embd.data, at(tok), V * d * 4));
    EXPECT_EQ(m.output.data, m.tok_embd.data);
    EXPECT_EQ(0, std::memcmp(m.layers[2].wq.data, at(wq + 2 * d * d), d * d * 4));
    EXPECT_EQ(0, std::memcmp(m.layers[4].wv.data, at(wv + 4 * kv * d), kv * d * 4));
    EXPECT_EQ(0, std::memcmp(m.layers[1].wo.data, at(wo + 1 * d * d), d * d * 4));
    EXPECT_EQ(0, std::memcmp(m.layers[3].ffn_norm, at(ffn + 3 * d), d * 4));
    EXPECT_EQ(0, std::memcmp(m.layers[4].w_down.data, at(w2 + 4 * d * h), d * h * 4));
    EXPECT_EQ(0, std::memcmp(m.layers[0].w_up.data, at(w3), h * d * 4));
    EXPECT_EQ(0, std::memcmp(m.output_norm, at(fin), d * 4));
    // freq_cis tables follow (seq_len * head_dim floats) and end the file.
    EXPECT_EQ(28 + 4 * (fin + d + 512 * 8), raw.size());
}

// The v2 export is re-encoded as ggml Q8_0 (fp16 scales) where groups align with rows, and
// dequantised to F32 elsewhere; compare against q * s computed here straight from the file.
TEST(model_load, q80_export_conversion) {
    const std::string path = sl::test::shared_path("models/stories260K_q80.bin");
    const auto raw = sl::test::read_bytes(path);
    const sl::model m = load_ok(path);
    const sl::model f32 = load_ok(sl::test::shared_path("models/stories260K_f32.bin"));
    int32_t gs;
    std::memcpy(&gs, raw.data() + 37, 4);
    ASSERT_EQ(gs, 32);
    uint64_t off = 256 + 4 * (2 * 5 * 64 + 64);
    EXPECT_EQ(0, std::memcmp(m.layers[0].attn_norm, raw.data() + 256, 64 * 4));
    // File order: token embedding, then wq, wk, wv, wo, w1, w2, w3 for all layers.
    std::vector<const sl::tensor_view*> order = {&m.tok_embd}, ref_order = {&f32.tok_embd};
    for (auto member : {&sl::layer_weights::wq, &sl::layer_weights::wk, &sl::layer_weights::wv, &sl::layer_weights::wo,
                        &sl::layer_weights::w_gate, &sl::layer_weights::w_down, &sl::layer_weights::w_up})
        for (int l = 0; l < 5; ++l) {
            order.push_back(&(m.layers[l].*member));
            ref_order.push_back(&(f32.layers[l].*member));
        }
    double max_fp16_err = 0, max_vs_f32 = 0;
    for (size_t t = 0; t < order.size(); ++t) {
        const sl::tensor_view& v = *order[t];
        const uint64_t n = static_cast<uint64_t>(v.rows * v.cols);
        std::vector<float> exact(n), bound(n);
        for (uint64_t i = 0; i < n; ++i) {
            float s;
            std::memcpy(&s, raw.data() + off + n + 4 * (i / 32), 4);
            exact[i] = static_cast<float>(static_cast<int8_t>(raw[off + i])) * s;
            // fp16 keeps 11 significant bits (scales here are in its normal range): |s - fp16(s)| <= s * 2^-11.
            bound[i] = std::fabs(exact[i]) * std::ldexp(1.0f, -11) * 1.0001f;
        }
        off += n + n / 32 * 4;
        const bool row_aligned = v.cols % 32 == 0;
        EXPECT_EQ(v.type, row_aligned ? sl::dtype::q8_0 : sl::dtype::f32) << t;
        const auto got = dequant(v);
        const auto ref = dequant(*ref_order[t]);
        for (uint64_t i = 0; i < n; ++i) {
            const double e = std::fabs(static_cast<double>(got[i]) - exact[i]);
            ASSERT_LE(e, bound[i]) << "tensor " << t << " elem " << i;
            if (!row_aligned) {
                ASSERT_EQ(got[i], exact[i]) << "F32 path must be exact, tensor " << t << " elem " << i;
            }
            max_fp16_err = std::max(max_fp16_err, e);
            max_vs_f32 = std::max(max_vs_f32, std::fabs(static_cast<double>(ref[i]) - exact[i]));
        }
    }
    EXPECT_EQ(off, raw.size());
    std::printf("q80 -> ggml Q8_0: max abs error from rounding scales to fp16 = %.3g; f32.bin vs q*s: %.3g\n",
                max_fp16_err, max_vs_f32);
    EXPECT_GT(max_fp16_err, 0.0);  // scales are not all fp16-representable: the check has teeth
    EXPECT_LE(max_vs_f32, 1e-6);   // README: the fp32 file was dequantised from this one
}

std::vector<std::pair<float, std::string>> read_tok512() {
    const auto b = sl::test::read_bytes(sl::test::shared_path("models/tok512.bin"));
    std::vector<std::pair<float, std::string>> out;
    size_t p = 4;
    for (int i = 0; i < 512; ++i) {
        float s;
        int32_t len;
        std::memcpy(&s, b.data() + p, 4);
        std::memcpy(&len, b.data() + p + 4, 4);
        out.emplace_back(s, std::string(b.begin() + static_cast<long>(p) + 8, b.begin() + static_cast<long>(p) + 8 + len));
        p += 8 + static_cast<size_t>(len);
    }
    return out;
}

TEST(model_load, gguf_vocab_matches_tok512) {
    const auto tok = read_tok512();
    const sl::model m = load_ok(sl::test::shared_path("models/gguf/stories260K-Q8_0.gguf"));
    const auto& v = m.vocab;
    ASSERT_EQ(v.tokens.size(), 512u);
    ASSERT_EQ(v.scores.size(), 512u);
    ASSERT_EQ(v.types.size(), 512u);
    EXPECT_EQ(v.bos_id, 1);
    EXPECT_EQ(v.eos_id, 2);
    EXPECT_EQ(v.unk_id, 0);
    EXPECT_EQ(v.tokens[0], "<unk>");
    EXPECT_EQ(v.tokens[1], "<s>");
    EXPECT_EQ(v.tokens[2], "</s>");
    int types[8] = {};
    for (int32_t t : v.types) ++types[t & 7];
    EXPECT_EQ(types[2], 1);
    EXPECT_EQ(types[3], 2);
    EXPECT_EQ(types[6], 256);
    EXPECT_EQ(types[1], 253);
    for (int i = 3; i < 512; ++i) {
        std::string piece = tok[i].second, spaced;
        for (char c : piece) spaced += c == ' ' ? std::string("\xe2\x96\x81") : std::string(1, c);
        EXPECT_EQ(v.tokens[i], spaced) << i;
        EXPECT_EQ(v.scores[i], tok[i].first) << i;
    }
    EXPECT_TRUE(std::signbit(v.scores[259]));  // "▁t" has score -0.0 in the file
    EXPECT_TRUE(load_ok(sl::test::shared_path("models/stories260K_f32.bin")).vocab.empty());
}

TEST(model_load, progress_and_cancel) {
    for (const char* rel : k_files) {
        const std::string path = sl::test::shared_path(rel);
        SCOPED_TRACE(path);
        std::vector<float> seen;
        sl::model_load_params p = sl::model_default_load_params();
        p.progress = [&](float f) { seen.push_back(f); return true; };
        ASSERT_TRUE(sl::model_load(path, p).ok());
        ASSERT_GE(seen.size(), 3u);
        EXPECT_EQ(seen.front(), 0.0f);
        EXPECT_EQ(seen.back(), 1.0f);
        EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
        const size_t calls = seen.size();
        for (size_t stop : {size_t{0}, size_t{1}, calls / 2, calls - 1}) {
            size_t n = 0;
            p.progress = [&](float) { return n++ < stop; };
            auto r = sl::model_load(path, p);
            ASSERT_FALSE(r.ok()) << "stop after " << stop;
            EXPECT_TRUE(r.cancelled());
            EXPECT_EQ(r.message(), path + ": load cancelled");
            EXPECT_EQ(n, stop + 1) << "no callbacks after the one that cancelled";
        }
    }
}

// Rewrites a GGUF through gguf_writer; `edit` may change keys, `tensor` may replace or drop a tensor
// (return true when it handled it).
using tensor_hook = std::function<bool(const sl::gguf_tensor_info&, const uint8_t*, sl::gguf_writer&)>;
std::string rewrite(const std::string& rel, const std::string& out_name, const std::function<void(sl::gguf_writer&)>& edit,
                    const tensor_hook& tensor = {}) {
    auto g = sl::gguf_file::open(sl::test::shared_path(rel));
    EXPECT_TRUE(g.ok());
    sl::gguf_writer w;
    for (const auto& kv : g->kvs()) w.set(kv.key, kv.value);
    if (edit) edit(w);
    for (const auto& t : g->tensors())
        if (!tensor || !tensor(t, g->tensor_data(t), w)) {
            EXPECT_TRUE(w.add_tensor(t.name, t.ggml_type, t.shape, static_cast<const void*>(g->tensor_data(t))).ok());
        }
    const std::string path = sl::test::write_temp(out_name, {});
    auto r = w.write(path);
    EXPECT_TRUE(r.ok()) << r.message();
    return path;
}

TEST(model_load, gguf_without_output_is_tied) {
    const std::string path = rewrite("models/gguf/stories260K-Q8_0.gguf", "tied.gguf", {},
                                     [](const sl::gguf_tensor_info& t, const uint8_t*, sl::gguf_writer&) { return t.name == "output.weight"; });
    const sl::model m = load_ok(path);
    EXPECT_TRUE(m.tied_output);
    EXPECT_EQ(m.output.data, m.tok_embd.data);
    EXPECT_EQ(m.output.type, sl::dtype::q8_0);
    EXPECT_EQ(m.tensors.size(), 47u);
    fs::remove(path);
}

// A vocabulary we cannot tokenize (BERT's WordPiece) must not stop the weights from loading.
TEST(model_load, foreign_vocabulary_loads_weights_without_vocab) {
    const std::string path = rewrite("models/gguf/stories260K-Q8_0.gguf", "bertvocab.gguf",
                                     [](sl::gguf_writer& w) { w.set_str("tokenizer.ggml.model", "bert"); });
    const sl::model m = load_ok(path);
    EXPECT_TRUE(m.vocab.empty());
    EXPECT_EQ(m.vocab.model, "bert");
    EXPECT_EQ(m.hp.vocab_size, 512);
    fs::remove(path);
}

// general.alignment = 1 packs tensors at unaligned offsets; the loader must copy them rather than
// hand out misaligned float pointers, and the values must not change.
TEST(model_load, unaligned_gguf_is_copied_not_misread) {
    const std::string path = rewrite("models/gguf/stories260K-Q8_0.gguf", "align1.gguf",
                                     [](sl::gguf_writer& w) { w.set("general.alignment", sl::gguf_value::scalar<uint32_t>(1)); });
    auto g = sl::gguf_file::open(path);
    ASSERT_TRUE(g.ok()) << g.message();
    EXPECT_NE(g->data_offset() % 4, 0u) << "fixture no longer exercises the unaligned path";
    const sl::model a = load_ok(path), b = load_ok(sl::test::shared_path("models/gguf/stories260K-Q8_0.gguf"));
    const auto ma = matrices(a), mb = matrices(b);
    for (size_t i = 0; i < ma.size(); ++i) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(ma[i].second->data) % 4, 0u) << ma[i].first;
        EXPECT_EQ(0, std::memcmp(ma[i].second->data, mb[i].second->data, mb[i].second->bytes())) << ma[i].first;
    }
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.output_norm) % 4, 0u);
    EXPECT_EQ(0, std::memcmp(a.output_norm, b.output_norm, 256));
    fs::remove(path);
}

TEST(model_load, rejects_unsupported_or_inconsistent_gguf) {
    const std::string q8 = "models/gguf/stories260K-Q8_0.gguf";
    auto set_u32 = [](const char* k, uint32_t v) { return [=](sl::gguf_writer& w) { w.set_u32(k, v); }; };
    auto drop = [](const char* name) {
        return [=](const sl::gguf_tensor_info& t, const uint8_t*, sl::gguf_writer&) { return t.name == name; };
    };
    struct row { std::string what, expected; std::function<void(sl::gguf_writer&)> edit; tensor_hook tensor; };
    const std::vector<row> rows = {
        {"arch", "architecture 'falcon' is not supported (supported: llama, qwen2, qwen3, phi3, gemma2, gemma)",
         [](sl::gguf_writer& w) { w.set_str("general.architecture", "falcon"); }, {}},
        {"kv heads", "head_count 8 is not a multiple of head_count_kv 3", set_u32("llama.attention.head_count_kv", 3), {}},
        {"value length", "llama.attention.value_length = 4 differs from key_length = 8 (not supported)",
         set_u32("llama.attention.value_length", 4), {}},
        {"key length", "tensor 'blk.0.attn_output.weight' has shape", set_u32("llama.attention.key_length", 16), {}},
        {"key length range", "llama.attention.key_length", set_u32("llama.attention.key_length", 4096), {}},
        {"kv heads", "tensor 'blk.0.attn_k.weight' has shape [64, 32], expected [64, 64]", set_u32("llama.attention.head_count_kv", 8), {}},
        {"heads", "not a multiple of head_count", set_u32("llama.attention.head_count", 7), {}},
        {"vocab", "llama.vocab_size = 513", set_u32("llama.vocab_size", 513), {}},
        {"moe", "mixture-of-experts", set_u32("llama.expert_count", 8), {}},
        {"key type", "key 'llama.block_count' has type str", [](sl::gguf_writer& w) { w.set_str("llama.block_count", "5"); }, {}},
        {"layers", "required tensor 'blk.5.attn_norm.weight' is missing", set_u32("llama.block_count", 6), {}},
        {"missing", "required tensor 'blk.3.ffn_gate.weight' is missing", {}, drop("blk.3.ffn_gate.weight")},
        {"missing key", "required key 'llama.embedding_length' is missing",
         [](sl::gguf_writer& w) {
             sl::gguf_writer c;
             for (const auto& kv : w.kvs())
                 if (kv.key != "llama.embedding_length") c.set(kv.key, kv.value);
             w = c;
         }, {}},
        {"tokens", "tokenizer.ggml.tokens has 3 tokens", [](sl::gguf_writer& w) { w.set("tokenizer.ggml.tokens", sl::gguf_value::string_array({"a", "b", "c"})); }, {}},
        {"bos", "tokenizer.ggml.bos_token_id' = 512 is out of range", set_u32("tokenizer.ggml.bos_token_id", 512), {}},
        {"unsupported type", "tensor 'blk.0.ffn_up.weight' has unsupported type I8 (24); supported: F32, F16, BF16, Q8_0, Q4_0, "
                             "Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS", {},
         [](const sl::gguf_tensor_info& t, const uint8_t* data, sl::gguf_writer& w) {
             if (t.name != "blk.0.ffn_up.weight") return false;
             // I8 (1 byte per element) reads no further than the Q8_0 data it relabels.
             EXPECT_TRUE(w.add_tensor(t.name, sl::ggml_type_id::i8, t.shape, static_cast<const void*>(data)).ok());
             return true;
         }},
        {"norm type", "tensor 'output_norm.weight' has type F16 (1), vectors (norms, biases, RoPE factors) must be F32", {},
         [](const sl::gguf_tensor_info& t, const uint8_t* data, sl::gguf_writer& w) {
             if (t.name != "output_norm.weight") return false;
             EXPECT_TRUE(w.add_tensor(t.name, sl::ggml_type_id::f16, t.shape, static_cast<const void*>(data)).ok());
             return true;
         }},
    };
    for (const auto& r : rows) {
        const std::string path = rewrite(q8, "bad.gguf", r.edit, r.tensor);
        auto m = sl::model_load(path);
        ASSERT_FALSE(m.ok()) << r.what;
        EXPECT_EQ(m.message().rfind(path + ": ", 0), 0u) << m.message();
        EXPECT_NE(m.message().find(r.expected), std::string::npos) << r.what << ": " << m.message();
        EXPECT_FALSE(m.cancelled());
        fs::remove(path);
    }
}

// Each non-Llama row of the architecture table: features read from the file, fused tensors split into views
// of the right rows, and one-line errors for what that architecture requires.
TEST(model_load, other_architectures_load_and_reject_broken_files) {
    auto synth = [](const std::string& arch) {
        sl::synthetic_params p = sl::synthetic_default_params();
        p.arch = arch;
        p.shape = "small";
        p.path = sl::test::write_temp(arch + "_small.gguf", {});
        EXPECT_TRUE(sl::synthetic_write(p).ok());
        return p.path;
    };
    const std::string qwen2 = synth("qwen2"), qwen3 = synth("qwen3"), phi3 = synth("phi3"), gemma2 = synth("gemma2");
    const sl::model p3 = load_ok(phi3);
    EXPECT_EQ(p3.arch.rope, sl::rope_layout::neox);
    EXPECT_EQ(p3.arch.swa_window, 0);  // written by the converter, ignored as llama.cpp does
    EXPECT_NE(p3.rope_factors, nullptr);
    const sl::layer_weights& l0 = p3.layers[0];
    EXPECT_EQ(l0.wq.rows, p3.hp.dim);
    EXPECT_EQ(l0.wk.rows, p3.hp.kv_dim());
    EXPECT_EQ(static_cast<const uint8_t*>(l0.wv.data), l0.wq.row(p3.hp.dim + p3.hp.kv_dim()));
    EXPECT_EQ(static_cast<const uint8_t*>(l0.w_up.data), l0.w_gate.row(p3.hp.hidden_dim));
    const sl::model g2 = load_ok(gemma2);
    EXPECT_EQ(g2.arch.act, sl::glu_activation::gelu_tanh);
    EXPECT_FLOAT_EQ(g2.arch.embd_scale, 16.0f);
    EXPECT_TRUE(g2.arch.layer_slides(0));
    EXPECT_FALSE(g2.arch.layer_slides(1));
    EXPECT_TRUE(g2.tied_output);
    EXPECT_NE(load_ok(qwen2).layers[3].bv, nullptr);
    EXPECT_NE(load_ok(qwen3).layers[3].k_norm, nullptr);

    auto drop = [](const char* name) {
        return [=](const sl::gguf_tensor_info& t, const uint8_t*, sl::gguf_writer&) { return t.name == name; };
    };
    struct row { std::string file, expected; std::function<void(sl::gguf_writer&)> edit; tensor_hook tensor; };
    const std::vector<row> rows = {
        {qwen2, "required tensor 'blk.1.attn_k.bias' is missing", {}, drop("blk.1.attn_k.bias")},
        {qwen3, "required tensor 'blk.2.attn_q_norm.weight' is missing", {}, drop("blk.2.attn_q_norm.weight")},
        {qwen3, "head_count 4 is not a multiple of head_count_kv 3",
         [](sl::gguf_writer& w) { w.set_u32("qwen3.attention.head_count_kv", 3); }, {}},
        {phi3, "required tensor 'blk.0.attn_qkv.weight' is missing", {}, drop("blk.0.attn_qkv.weight")},
        {gemma2, "required tensor 'blk.3.post_ffw_norm.weight' is missing", {}, drop("blk.3.post_ffw_norm.weight")},
        // A head width the tensors do not have: the first mis-shaped tensor is named.
        {gemma2, "tensor 'blk.0.attn_output.weight' has shape",
         [](sl::gguf_writer& w) {
             w.set_u32("gemma2.attention.key_length", 128);
             w.set_u32("gemma2.attention.value_length", 128);
         }, {}},
        {gemma2, "gemma2.attention.value_length = 128 differs from key_length = 64",
         [](sl::gguf_writer& w) { w.set_u32("gemma2.attention.value_length", 128); }, {}},
    };
    for (const row& r : rows) {
        const std::string path = rewrite(r.file, "bad_arch.gguf", r.edit, r.tensor);
        auto m = sl::model_load(path);
        ASSERT_FALSE(m.ok()) << r.expected;
        EXPECT_EQ(m.message().rfind(path + ": ", 0), 0u) << m.message();
        EXPECT_NE(m.message().find(r.expected), std::string::npos) << m.message();
        EXPECT_EQ(m.message().find('\n'), std::string::npos);
        fs::remove(path);
    }
    for (const std::string& f : {qwen2, qwen3, phi3, gemma2}) fs::remove(f);
}

TEST(model_load, missing_and_odd_files) {
    auto m = sl::model_load("/nonexistent/x.gguf");
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.message().rfind("/nonexistent/x.gguf: ", 0), 0u) << m.message();
    auto d = sl::model_load(fs::temp_directory_path().string());
    ASSERT_FALSE(d.ok());
    const std::string empty = sl::test::write_temp("empty.bin", {});
    auto e = sl::model_load(empty);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.message().rfind(empty + ": ", 0), 0u);
    fs::remove(empty);
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

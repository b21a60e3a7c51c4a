// Re-encodes stories260K's f32 weights and compares byte for byte with ggml's F16/Q8_0/Q4_0 GGUFs.
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sparselens/kernels/kernels.h"
#include "test_support.h"

namespace {

using sl::dtype;
namespace k = sl::kernels;

// One weight matrix of the llama2.c file: [rows = out, cols = in] f32.
struct f32_matrix {
    int64_t rows = 0, cols = 0;
    const float* data = nullptr;
};

// llama2.c legacy layout: 7 int32 params, then token_embedding, rms_att, wq, wk, wv, wo, rms_ffn,
// w1, w2, w3, ... Maps GGUF tensor names to the matching f32 matrix.
struct llama2c_model {
    std::vector<uint8_t> bytes;
    std::map<std::string, f32_matrix> by_gguf_name;

    bool load(const std::string& path) {
        bytes = sl::test::read_bytes(path);
        if (bytes.size() < 28) return false;
        int32_t p[7];
        std::memcpy(p, bytes.data(), sizeof p);
        const int64_t dim = p[0], hidden = p[1], layers = p[2], heads = p[3], kv_heads = p[4], vocab = p[5];
        const int64_t kv_dim = dim * kv_heads / heads;
        int64_t off = 28;
        auto take = [&](int64_t n) {
            const auto* f = reinterpret_cast<const float*>(bytes.data() + off);
            off += n * 4;
            return f;
        };
        auto per_layer = [&](const char* name, int64_t rows, int64_t cols) {
            const float* base = take(layers * rows * cols);
            for (int64_t l = 0; l < layers; ++l)
                by_gguf_name["blk." + std::to_string(l) + "." + name + ".weight"] = {rows, cols, base + l * rows * cols};
        };
        const float* emb = take(vocab * dim);
        by_gguf_name["token_embd.weight"] = {vocab, dim, emb};
        by_gguf_name["output.weight"] = {vocab, dim, emb};  // shared classifier
        take(layers * dim);  // rms_att
        per_layer("attn_q", dim, dim);
        per_layer("attn_k", kv_dim, dim);
        per_layer("attn_v", kv_dim, dim);
        per_layer("attn_output", dim, dim);
        take(layers * dim);  // rms_ffn
        per_layer("ffn_gate", hidden, dim);
        per_layer("ffn_down", dim, hidden);
        per_layer("ffn_up", hidden, dim);
        return off <= static_cast<int64_t>(bytes.size());
    }
};

struct gguf_tensor {
    std::string name, type;
    int64_t ne0 = 0, ne1 = 0, abs_offset = 0, nbytes = 0;
};

// Tensor table of a *.gguf.txt dump: "id name type [ne0,ne1] offset abs nbytes" after "## tensors".
std::vector<gguf_tensor> read_tensor_table(const std::string& path) {
    std::ifstream f(path);
    std::string line;
    std::vector<gguf_tensor> out;
    bool in_table = false;
    while (std::getline(f, line)) {
        if (line.rfind("## tensors", 0) == 0) {
            in_table = true;
            std::getline(f, line);  // column header
            continue;
        }
        if (!in_table || line.empty()) continue;
        std::istringstream s(line);
        gguf_tensor t;
        std::string id, ne;
        int64_t rel = 0;
        if (!(s >> id >> t.name >> t.type >> ne >> rel >> t.abs_offset >> t.nbytes)) continue;
        if (std::sscanf(ne.c_str(), "[%lld,%lld]", reinterpret_cast<long long*>(&t.ne0),
                        reinterpret_cast<long long*>(&t.ne1)) != 2)
            t.ne1 = 1;
        out.push_back(t);
    }
    return out;
}

class fixture_by_type : public ::testing::TestWithParam<dtype> {};

TEST_P(fixture_by_type, reencoded_weights_match_ggml_bytes) {
    const dtype t = GetParam();
    const std::string file = "models/gguf/stories260K-" + std::string(sl::dtype_name(t)) + ".gguf";
    llama2c_model m;
    ASSERT_TRUE(m.load(sl::test::shared_path("models/stories260K_f32.bin")));
    const std::vector<uint8_t> gguf = sl::test::read_bytes(sl::test::shared_path(file));
    const std::vector<gguf_tensor> table = read_tensor_table(sl::test::shared_path(file + ".txt"));
    ASSERT_EQ(table.size(), 48u);

    std::string type_name(sl::dtype_name(t));
    for (auto& c : type_name) c = static_cast<char>(std::tolower(c));
    int compared = 0;
    for (const gguf_tensor& g : table) {
        if (g.type != type_name) continue;  // norms and ffn_down (172 columns) stay F32
        SCOPED_TRACE(g.name);
        const auto it = m.by_gguf_name.find(g.name);
        ASSERT_NE(it, m.by_gguf_name.end());
        const f32_matrix& src = it->second;
        ASSERT_EQ(src.cols, g.ne0);
        ASSERT_EQ(src.rows, g.ne1);
        const int64_t row_bytes = sl::dtype_row_bytes(t, src.cols);
        ASSERT_EQ(g.nbytes, row_bytes * src.rows);
        ASSERT_LE(g.abs_offset + g.nbytes, static_cast<int64_t>(gguf.size()));

        std::vector<uint8_t> enc(static_cast<size_t>(g.nbytes));
        for (int64_t r = 0; r < src.rows; ++r)
            k::quantize_row(t, src.data + r * src.cols, enc.data() + r * row_bytes, src.cols);
        const uint8_t* theirs = gguf.data() + g.abs_offset;
        for (int64_t i = 0; i < g.nbytes; ++i)
            ASSERT_EQ(enc[i], theirs[i]) << "byte " << i << " (row " << i / row_bytes << ")";

        // The kernels on ggml's bytes: gemv against a double reference over the dequantized rows.
        sl::tensor_view w{t, src.rows, src.cols, theirs};
        std::vector<float> x(static_cast<size_t>(src.cols)), y(static_cast<size_t>(src.rows)), row(x.size());
        for (int64_t c = 0; c < src.cols; ++c) x[c] = std::sin(0.37 * static_cast<double>(c) + 1.0);
        k::gemv(w, x.data(), y.data(), 2);
        double num = 0, den = 0;
        for (int64_t r = 0; r < src.rows; ++r) {
            k::dequantize_row(t, theirs + r * row_bytes, row.data(), src.cols);
            double ref = 0;
            for (int64_t c = 0; c < src.cols; ++c) ref += static_cast<double>(row[c]) * x[c];
            num += (y[r] - ref) * (y[r] - ref);
            den += ref * ref;
        }
        EXPECT_LE(num / den, t == dtype::f16 ? 1e-10 : 1e-4);  // q8/q4: 8-bit activations
        ++compared;
    }
    EXPECT_GE(compared, 32);  // every matrix except the 5 ffn_down
}

INSTANTIATE_TEST_SUITE_P(ggml_files, fixture_by_type, ::testing::Values(dtype::f16, dtype::q8_0, dtype::q4_0),
                         [](const auto& p) { return std::string(sl::dtype_name(p.param)); });

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

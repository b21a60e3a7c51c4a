// Malformed model files: truncations, seeded bit flips and lying headers must fail cleanly, never crash.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "sparselens/core/gguf.h"
#include "sparselens/core/model.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using bytes = std::vector<uint8_t>;

const char* const k_gguf[] = {"models/gguf/stories260K-Q8_0.gguf", "models/gguf/stories260K-F32.gguf",
                              "models/gguf/stories260K-F16.gguf", "models/gguf/stories260K-Q4_0.gguf"};
const char* const k_f32 = "models/stories260K_f32.bin";
const char* const k_q80 = "models/stories260K_q80.bin";

// Reads every byte a loaded model exposes, so a view past the end of its buffer trips ASan.
uint64_t touch(const sl::model& m) {
    uint64_t sum = 0;
    auto view = [&](const sl::tensor_view& v) {
        const auto* p = static_cast<const uint8_t*>(v.data);
        for (int64_t i = 0; i < v.bytes(); ++i) sum += p[i];
    };
    auto norm = [&](const float* p) {
        for (int32_t i = 0; i < m.hp.dim; ++i) sum += p[i] != 0.0f;
    };
    view(m.tok_embd);
    view(m.output);
    norm(m.output_norm);
    for (const auto& L : m.layers) {
        for (const auto* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) view(*v);
        norm(L.attn_norm);
        norm(L.ffn_norm);
    }
    for (const auto& t : m.vocab.tokens) sum += t.size();
    return sum;
}

class corrupt : public ::testing::Test {
protected:
    void SetUp() override {
        m_path = (fs::temp_directory_path() / ("sparselens_corrupt_" + std::to_string(::getpid()) + ".model")).string();
    }
    void TearDown() override { fs::remove(m_path); }

    // Loads `b` from a temp file. Returns true if it loaded. A failure must be a one-line message that
    // starts with the path; a success is only allowed when `may_load` and must expose readable views.
    bool check(const bytes& b, bool may_load, const std::string& what) {
        {
            std::ofstream f(m_path, std::ios::binary | std::ios::trunc);
            f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
        }
        auto m = sl::model_load(m_path);
        ++m_loads;
        if (m.ok()) {
            EXPECT_TRUE(may_load) << what << ": loaded but must fail";
            m_sink += touch(m.value());
            return true;
        }
        EXPECT_EQ(m.message().rfind(m_path + ": ", 0), 0u) << what << ": " << m.message();
        EXPECT_EQ(m.message().find('\n'), std::string::npos) << what << ": " << m.message();
        EXPECT_FALSE(m.cancelled()) << what;
        return false;
    }

    std::string m_path;
    uint64_t m_sink = 0;
    int m_loads = 0;
};

bytes fixture(const char* rel) { return sl::test::read_bytes(sl::test::shared_path(rel)); }

template <class T>
bytes patched(const bytes& b, uint64_t at, T v) {
    bytes c = b;
    std::memcpy(c.data() + at, &v, sizeof v);
    return c;
}

// Offsets of the structural fields of a valid GGUF, found by an independent minimal walk.
struct gguf_layout {
    std::map<std::string, uint64_t> value_at;     // key -> offset of its value (after the type field)
    std::map<std::string, uint64_t> count_at;     // array key -> offset of its element count
    std::vector<uint64_t> key_len_at;
    struct info { std::string name; uint64_t name_len_at, n_dims_at, ne_at, type_at, offset_at; };
    std::vector<info> tensors;
    uint64_t header_end = 0;  // end of the tensor infos
};

gguf_layout walk(const bytes& b) {
    gguf_layout l;
    uint64_t p = 24, n_tensors, n_kv;
    std::memcpy(&n_tensors, b.data() + 8, 8);
    std::memcpy(&n_kv, b.data() + 16, 8);
    auto u64 = [&](uint64_t at) { uint64_t v; std::memcpy(&v, b.data() + at, 8); return v; };
    auto u32 = [&](uint64_t at) { uint32_t v; std::memcpy(&v, b.data() + at, 4); return v; };
    auto str = [&](uint64_t& at) { const uint64_t n = u64(at); std::string s(b.begin() + static_cast<long>(at + 8), b.begin() + static_cast<long>(at + 8 + n)); at += 8 + n; return s; };
    const uint64_t size_of[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    for (uint64_t i = 0; i < n_kv; ++i) {
        l.key_len_at.push_back(p);
        const std::string key = str(p);
        const uint32_t type = u32(p);
        p += 4;
        l.value_at[key] = p;
        if (type == 8) {
            str(p);
        } else if (type == 9) {
            const uint32_t et = u32(p);
            const uint64_t n = u64(p + 4);
            l.count_at[key] = p + 4;
            p += 12;
            for (uint64_t j = 0; j < n; ++j) {
                if (et == 8) str(p);
                else p += size_of[et];
            }
        } else {
            p += size_of[type];
        }
    }
    for (uint64_t i = 0; i < n_tensors; ++i) {
        gguf_layout::info t;
        t.name_len_at = p;
        t.name = str(p);
        t.n_dims_at = p;
        const uint32_t nd = u32(p);
        t.ne_at = p + 4;
        p += 4 + 8 * nd;
        t.type_at = p;
        t.offset_at = p + 4;
        p += 12;
        l.tensors.push_back(t);
    }
    l.header_end = p;
    return l;
}

TEST_F(corrupt, gguf_truncated_everywhere) {
    for (const char* rel : k_gguf) {
        const bytes good = fixture(rel);
        auto g = sl::gguf_file::open_memory("t.gguf", good);
        ASSERT_TRUE(g.ok()) << g.message();
        const uint64_t data_offset = g->data_offset();
        // Every length through the header region (for one file; every 13th for the others, which
        // share its metadata layout), parsed in memory: all must fail.
        const uint64_t step = rel == k_gguf[0] ? 1 : 13;
        for (uint64_t len = 0; len < data_offset + 64; len += step) {
            auto t = sl::gguf_file::open_memory("t.gguf", bytes(good.begin(), good.begin() + static_cast<long>(len)));
            ASSERT_FALSE(t.ok()) << rel << " truncated to " << len;
            ASSERT_EQ(t.message().rfind("t.gguf: ", 0), 0u) << t.message();
        }
        // Through model_load at a spread of lengths over the whole file, down to the last byte.
        std::vector<uint64_t> lens = {0, 1, 3, 4, 7, 8, 23, 24, 100, data_offset - 1, data_offset, good.size() - 1};
        for (uint64_t k = 1; k < 60; ++k) lens.push_back(good.size() * k / 60 + k % 7);
        for (uint64_t len : lens)
            check(bytes(good.begin(), good.begin() + static_cast<long>(len)), false, std::string(rel) + " len " + std::to_string(len));
    }
}

TEST_F(corrupt, llama2c_truncated_and_extended) {
    for (const char* rel : {k_f32, k_q80}) {
        const bytes good = fixture(rel);
        std::vector<uint64_t> lens;
        for (uint64_t len = 0; len <= 300; ++len) lens.push_back(len);
        for (uint64_t k = 1; k < 40; ++k) lens.push_back(good.size() * k / 40 + k % 5);
        lens.push_back(good.size() - 1);
        for (uint64_t len : lens)
            check(bytes(good.begin(), good.begin() + static_cast<long>(len)), false, std::string(rel) + " len " + std::to_string(len));
        bytes longer = good;
        longer.resize(good.size() + 4);
        check(longer, false, std::string(rel) + " + 4 bytes");
    }
}

TEST_F(corrupt, bit_flips) {
    std::mt19937_64 rng(20240601);
    int loaded = 0, failed = 0;
    for (const char* rel : {k_gguf[0], k_gguf[1], k_gguf[2], k_gguf[3], k_f32, k_q80}) {
        const bytes good = fixture(rel);
        const bool gguf = std::string(rel).ends_with(".gguf");
        uint64_t header = 28;
        if (gguf) header = sl::gguf_file::open_memory("x", good)->data_offset();
        else if (std::string(rel) == k_q80) header = 41;  // magic .. group_size; the rest is padding
        for (int trial = 0; trial < 80; ++trial) {
            bytes b = good;
            const int n_flips = 1 + static_cast<int>(rng() % 3);
            const bool in_header = trial % 4 != 0;
            bool hit_seq_len = false;
            for (int f = 0; f < n_flips; ++f) {
                const uint64_t at = rng() % (in_header ? header : b.size());
                b[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
                hit_seq_len |= std::string(rel) == k_q80 && at >= 32 && at < 36;
            }
            // A llama2.c header has no slack: any change to it must be caught by the size check --
            // except seq_len in the v2 export, which stores no RoPE tables to check it against.
            const bool may_load = gguf || !in_header || hit_seq_len;
            if (check(b, may_load, std::string(rel) + " trial " + std::to_string(trial))) ++loaded;
            else ++failed;
        }
    }
    std::printf("bit flips: %d loaded (payload/benign), %d rejected\n", loaded, failed);
    EXPECT_GT(failed, 150);
}

TEST_F(corrupt, gguf_lying_headers) {
    const bytes good = fixture(k_gguf[0]);
    const gguf_layout l = walk(good);
    ASSERT_EQ(l.tensors.size(), 48u);
    const uint64_t big = uint64_t{1} << 62, huge = ~uint64_t{0}, fsize = good.size();
    std::vector<std::pair<std::string, bytes>> cases;
    auto add = [&](const std::string& what, bytes b) { cases.emplace_back(what, std::move(b)); };
    for (uint64_t v : {huge, big, uint64_t{1} << 32, uint64_t{49}, uint64_t{47}, uint64_t{0}}) add("n_tensors " + std::to_string(v), patched(good, 8, v));
    for (uint64_t v : {huge, big, uint64_t{1} << 32, uint64_t{23}, uint64_t{21}, uint64_t{0}}) add("n_kv " + std::to_string(v), patched(good, 16, v));
    for (uint64_t v : {huge, big, fsize, fsize - 30}) add("key length " + std::to_string(v), patched(good, l.key_len_at[0], v));
    add("arch value length", patched(good, l.value_at.at("general.architecture"), big));
    add("kv type 13", patched(good, l.value_at.at("general.name") - 4, uint32_t{13}));
    add("kv type string->u64", patched(good, l.value_at.at("general.name") - 4, uint32_t{10}));
    add("kv type u32->array", patched(good, l.value_at.at("llama.block_count") - 4, uint32_t{9}));
    const uint64_t tokens = l.count_at.at("tokenizer.ggml.tokens");
    for (uint64_t v : {huge, big, fsize, uint64_t{513}, uint64_t{511}}) add("token count " + std::to_string(v), patched(good, tokens, v));
    add("token elem type 13", patched(good, tokens - 4, uint32_t{13}));
    add("token elem type array", patched(good, tokens - 4, uint32_t{9}));
    add("token string length", patched(good, tokens + 8, big));
    add("scores count", patched(good, l.count_at.at("tokenizer.ggml.scores"), big));
    add("scores elem type f64", patched(good, l.count_at.at("tokenizer.ggml.scores") - 4, uint32_t{12}));
    for (uint64_t v : {uint64_t{1}, uint64_t{4}, uint64_t{0x1000}}) add("block_count " + std::to_string(v), patched(good, l.value_at.at("llama.block_count"), uint32_t(v)));
    add("embedding_length 0", patched(good, l.value_at.at("llama.embedding_length"), uint32_t{0}));
    add("embedding_length huge", patched(good, l.value_at.at("llama.embedding_length"), uint32_t{0xffffffff}));
    add("head_count 0", patched(good, l.value_at.at("llama.attention.head_count"), uint32_t{0}));
    add("head_count_kv 3", patched(good, l.value_at.at("llama.attention.head_count_kv"), uint32_t{3}));
    add("rope dim 9", patched(good, l.value_at.at("llama.rope.dimension_count"), uint32_t{9}));
    add("eps NaN", patched(good, l.value_at.at("llama.attention.layer_norm_rms_epsilon"), uint32_t{0x7fc00000}));
    add("eps negative", patched(good, l.value_at.at("llama.attention.layer_norm_rms_epsilon"), -1.0f));
    add("bos id", patched(good, l.value_at.at("tokenizer.ggml.bos_token_id"), uint32_t{100000}));
    add("bool 7", patched(good, l.value_at.at("tokenizer.ggml.add_bos_token"), uint8_t{7}));
    add("version 1", patched(good, 4, uint32_t{1}));
    add("version 4", patched(good, 4, uint32_t{4}));
    add("magic", patched(good, 0, uint32_t{0x46554746}));
    for (size_t i : {size_t{0}, size_t{4}, size_t{47}}) {
        const auto& t = l.tensors[i];
        const std::string n = "tensor " + t.name + " ";
        add(n + "name length", patched(good, t.name_len_at, big));
        for (uint32_t v : {0u, 5u, 0x80000000u}) add(n + "n_dims " + std::to_string(v), patched(good, t.n_dims_at, v));
        for (int64_t v : {int64_t{-1}, int64_t{1} << 62, int64_t{1} << 40, int64_t{0}, int64_t{65}})
            add(n + "ne0 " + std::to_string(v), patched(good, t.ne_at, v));
        add(n + "ne1 huge", patched(good, t.ne_at + 8, int64_t{1} << 62));
        // 10-14 and 23 are K-quant / IQ4_XS ids: 256-element blocks cannot tile these 64-wide rows.
        for (uint32_t v : {4u, 5u, 10u, 11u, 12u, 13u, 14u, 23u, 31u, 77u, 0xffffffffu}) add(n + "type " + std::to_string(v), patched(good, t.type_at, v));
        uint64_t off;
        std::memcpy(&off, good.data() + t.offset_at, 8);
        for (uint64_t v : {huge, big, fsize, off + 1, off + 32 * 100000, huge - 31}) add(n + "offset " + std::to_string(v), patched(good, t.offset_at, v));
    }
    // Two tensors with one name: rename blk.0.attn_k to blk.0.attn_q (same length).
    {
        bytes b = good;
        const auto& t = l.tensors[5];
        ASSERT_EQ(t.name, "blk.0.attn_k.weight");
        b[t.name_len_at + 8 + 11] = 'q';
        add("duplicate tensor name", b);
    }
    // Two keys with one name: rename general.name to general.arch... (same length impossible) -> reuse
    // "llama.block_count" spelled over "llama.vocab_size" is not the same length either; use the
    // bos/eos pair, which differ in one letter.
    {
        bytes b = good;
        const uint64_t at = l.value_at.at("tokenizer.ggml.eos_token_id") - 4 - std::string("tokenizer.ggml.eos_token_id").size();
        std::memcpy(b.data() + at, "tokenizer.ggml.bos_token_id", 27);
        add("duplicate key", b);
    }
    for (const auto& [what, b] : cases) check(b, false, what);
    std::printf("%zu lying GGUF headers rejected\n", cases.size());
}

TEST_F(corrupt, llama2c_lying_headers) {
    for (const char* rel : {k_f32, k_q80}) {
        const bytes good = fixture(rel);
        const bool q80 = std::string(rel) == k_q80;
        const uint64_t params = q80 ? 8 : 0;
        std::vector<std::pair<std::string, bytes>> cases;
        int32_t orig[7];
        std::memcpy(orig, good.data() + params, sizeof orig);
        const char* names[7] = {"dim", "hidden", "layers", "heads", "kv_heads", "vocab", "seq_len"};
        for (int i = 0; i < 7; ++i)
            for (int32_t v : {-1, 0, INT32_MIN, INT32_MAX, orig[i] * 2, orig[i] + 1, -orig[i]})
                cases.emplace_back(std::string(names[i]) + "=" + std::to_string(v), patched(good, params + 4 * i, v));
        // The v2 export stores no RoPE tables, so a different plausible seq_len is not detectable.
        auto may_load = [&](const std::string& what) { return q80 && (what == "seq_len=1024" || what == "seq_len=513"); };
        if (q80) {
            for (int32_t v : {1, 3, -2}) cases.emplace_back("version " + std::to_string(v), patched(good, 4, v));
            for (int32_t v : {0, -32, 33, 64, 16, INT32_MAX, INT32_MIN})
                cases.emplace_back("group_size " + std::to_string(v), patched(good, 37, v));
            for (uint8_t v : {uint8_t{0}, uint8_t{2}, uint8_t{255}}) cases.emplace_back("shared " + std::to_string(v), patched(good, 36, v));
        }
        for (const auto& [what, b] : cases) check(b, may_load(what), std::string(rel) + " " + what);
    }
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

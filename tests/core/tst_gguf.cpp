// GGUF reader/writer against the shared stories260K GGUF files and ggml's own dumps of them.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sparselens/core/gguf.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;

// ---- the *.gguf.txt dump written by ggml's reader, parsed independently of our reader ----------

struct dump_value {
    std::string type;                // "u32", "str", "f32", "bool", or the element type of an array
    bool is_array = false;
    std::string scalar;              // raw text after " = "
    std::vector<std::string> items;  // raw text of each "  [i] ..." line
};

struct dump_tensor {
    std::string name, type;
    std::vector<int64_t> ne;
    uint64_t offset = 0, abs = 0, nbytes = 0;
};

struct gguf_dump {
    uint64_t file_size = 0, version = 0, alignment = 0, data_offset = 0, n_kv = 0, n_tensors = 0;
    std::vector<std::pair<std::string, dump_value>> kvs;
    std::vector<dump_tensor> tensors;
};

gguf_dump parse_dump(const std::string& path) {
    gguf_dump d;
    std::ifstream in(path);
    std::string line;
    bool in_tensors = false;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') {
            if (line.rfind("## tensors", 0) == 0) {
                in_tensors = true;
                std::getline(in, line);  // column header
            }
            continue;
        }
        if (in_tensors) {
            std::istringstream ss(line);
            dump_tensor t;
            int id;
            std::string ne;
            ss >> id >> t.name >> t.type >> ne >> t.offset >> t.abs >> t.nbytes;
            ne = ne.substr(1, ne.size() - 2);  // "[64,512]"
            std::stringstream ns(ne);
            for (std::string x; std::getline(ns, x, ',');) t.ne.push_back(std::stoll(x));
            d.tensors.push_back(t);
            continue;
        }
        if (line.rfind("  [", 0) == 0) {
            d.kvs.back().second.items.push_back(line.substr(line.find("] ") + 2));
            continue;
        }
        const size_t colon = line.find(": ");
        const std::string key = line.substr(0, colon), rest = line.substr(colon + 2);
        if (key == "file_size") d.file_size = std::stoull(rest);
        else if (key == "version") d.version = std::stoull(rest);
        else if (key == "alignment") d.alignment = std::stoull(rest);
        else if (key == "data_offset") d.data_offset = std::stoull(rest);
        else if (key == "n_kv") d.n_kv = std::stoull(rest);
        else if (key == "n_tensors") d.n_tensors = std::stoull(rest);
        else {
            dump_value v;
            if (rest.rfind("array[", 0) == 0) {
                v.is_array = true;
                v.type = rest.substr(6, rest.find(']') - 6);
            } else {
                v.type = rest.substr(0, rest.find(' '));
                v.scalar = rest.substr(rest.find(" = ") + 3);
            }
            d.kvs.emplace_back(key, v);
        }
    }
    return d;
}

std::string unquote(const std::string& s) {
    std::string out;
    for (size_t i = 1; i + 1 < s.size(); ++i) {
        if (s[i] == '\\' && i + 2 < s.size()) {
            ++i;
            out += s[i] == 'n' ? '\n' : s[i];
        } else {
            out += s[i];
        }
    }
    return out;
}

// "9.99999975e-06 (0x3727c5ac)" -> the bit pattern.
uint32_t float_bits_of(const std::string& s) { return static_cast<uint32_t>(std::stoul(s.substr(s.find("(0x") + 3), nullptr, 16)); }

void expect_scalar(const std::string& type, const std::string& text, uint64_t bits, const std::string& where) {
    if (type == "f32") EXPECT_EQ(bits, float_bits_of(text)) << where;
    else if (type == "bool") EXPECT_EQ(bits, text == "true" ? 1u : 0u) << where;
    else if (type == "i32") EXPECT_EQ(static_cast<int32_t>(bits), std::stol(text)) << where;
    else EXPECT_EQ(bits, std::stoull(text)) << where;
}

std::vector<std::string> fixture_ggufs() {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(sl::test::shared_dir() / "models" / "gguf"))
        if (e.path().extension() == ".gguf") out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    return out;
}

std::string lower(std::string_view s) {
    std::string r(s);
    for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return r;
}

TEST(gguf, fixtures_present) { EXPECT_EQ(fixture_ggufs().size(), 4u); }

TEST(gguf, matches_ggml_dump) {
    for (const auto& path : fixture_ggufs()) {
        SCOPED_TRACE(path);
        const gguf_dump d = parse_dump(path + ".txt");
        ASSERT_EQ(d.kvs.size(), d.n_kv);
        ASSERT_EQ(d.tensors.size(), d.n_tensors);
        auto g = sl::gguf_file::open(path);
        ASSERT_TRUE(g.ok()) << g.message();
        const auto raw = sl::test::read_bytes(path);
        EXPECT_EQ(g->file_size(), d.file_size);
        EXPECT_EQ(g->version(), d.version);
        EXPECT_EQ(g->alignment(), d.alignment);
        EXPECT_EQ(g->data_offset(), d.data_offset);
        ASSERT_EQ(g->kvs().size(), d.n_kv);
        for (size_t i = 0; i < d.kvs.size(); ++i) {
            const auto& [key, dv] = d.kvs[i];
            const sl::gguf_kv& kv = g->kvs()[i];
            ASSERT_EQ(kv.key, key) << "key order";
            EXPECT_EQ(g->find(key), &kv.value);
            if (!dv.is_array) {
                ASSERT_EQ(sl::gguf_type_name(kv.value.type), dv.type) << key;
                if (dv.type == "str") EXPECT_EQ(kv.value.str, unquote(dv.scalar)) << key;
                else expect_scalar(dv.type, dv.scalar, kv.value.bits, key);
                continue;
            }
            ASSERT_TRUE(kv.value.is_array()) << key;
            ASSERT_EQ(sl::gguf_type_name(kv.value.elem_type), dv.type) << key;
            ASSERT_EQ(kv.value.count, dv.items.size()) << key;
            for (size_t j = 0; j < dv.items.size(); ++j) {
                const std::string where = key + "[" + std::to_string(j) + "]";
                if (dv.type == "str") {
                    EXPECT_EQ(kv.value.strs[j], unquote(dv.items[j])) << where;
                } else {
                    uint64_t bits = 0;
                    const uint32_t sz = sl::gguf_type_size(kv.value.elem_type);
                    std::memcpy(&bits, kv.value.raw.data() + j * sz, sz);
                    expect_scalar(dv.type, dv.items[j], bits, where);
                }
            }
        }
        ASSERT_EQ(g->tensors().size(), d.n_tensors);
        for (size_t i = 0; i < d.tensors.size(); ++i) {
            const auto& dt = d.tensors[i];
            const auto& t = g->tensors()[i];
            EXPECT_EQ(t.name, dt.name);
            EXPECT_EQ(lower(sl::ggml_type_info(t.ggml_type)->name), dt.type) << dt.name;
            EXPECT_EQ(t.shape, dt.ne) << dt.name;
            EXPECT_EQ(t.offset, dt.offset) << dt.name;
            EXPECT_EQ(g->data_offset() + t.offset, dt.abs) << dt.name;
            EXPECT_EQ(t.bytes, dt.nbytes) << dt.name;
            EXPECT_EQ(g->find_tensor(dt.name), &t);
            EXPECT_EQ(0, std::memcmp(g->tensor_data(t), raw.data() + dt.abs, t.bytes)) << dt.name;
        }
    }
}

// Lossless round trip: re-writing what we read (same key order, same alignment) reproduces the file.
TEST(gguf, writer_round_trip_is_byte_identical) {
    for (const auto& path : fixture_ggufs()) {
        SCOPED_TRACE(path);
        auto g = sl::gguf_file::open(path);
        ASSERT_TRUE(g.ok()) << g.message();
        sl::gguf_writer w;
        for (const auto& kv : g->kvs()) w.set(kv.key, kv.value);
        for (const auto& t : g->tensors())
            ASSERT_TRUE(w.add_tensor(t.name, t.ggml_type, t.shape, static_cast<const void*>(g->tensor_data(t))).ok());
        EXPECT_EQ(w.file_size(), g->file_size());
        const std::string out = sl::test::write_temp("roundtrip.gguf", {});
        auto r = w.write(out);
        ASSERT_TRUE(r.ok()) << r.message();
        EXPECT_EQ(*r, g->file_size());
        const auto a = sl::test::read_bytes(path), b = sl::test::read_bytes(out);
        EXPECT_TRUE(a == b) << "written file differs from the original";
        // And semantically: the re-read file holds equal values and tensor bytes.
        auto g2 = sl::gguf_file::open(out, false);
        ASSERT_TRUE(g2.ok()) << g2.message();
        ASSERT_EQ(g2->kvs().size(), g->kvs().size());
        for (size_t i = 0; i < g->kvs().size(); ++i) EXPECT_TRUE(g2->kvs()[i].value == g->kvs()[i].value) << g->kvs()[i].key;
        for (size_t i = 0; i < g->tensors().size(); ++i) {
            const auto& t = g->tensors()[i];
            EXPECT_EQ(0, std::memcmp(g->tensor_data(t), g2->tensor_data(g2->tensors()[i]), t.bytes)) << t.name;
        }
        fs::remove(out);
    }
}

TEST(gguf, heap_copy_equals_mapping) {
    const std::string path = sl::test::shared_path("models/gguf/stories260K-Q8_0.gguf");
    auto a = sl::gguf_file::open(path, true);
    auto b = sl::gguf_file::open(path, false);
    auto c = sl::gguf_file::open_memory(path, sl::test::read_bytes(path));
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    for (const auto* x : {&b.value(), &c.value()}) {
        ASSERT_EQ(x->tensors().size(), a->tensors().size());
        for (size_t i = 0; i < a->tensors().size(); ++i)
            EXPECT_EQ(0, std::memcmp(a->tensor_data(a->tensors()[i]), x->tensor_data(x->tensors()[i]), a->tensors()[i].bytes));
    }
}

// The F32 GGUF's tensors are bit-identical to the llama2.c checkpoint (README); locate each one in
// the .bin from the llama2.c layout, independently of the loaders.
TEST(gguf, f32_tensors_equal_llama2c_weights) {
    auto g = sl::gguf_file::open(sl::test::shared_path("models/gguf/stories260K-F32.gguf"));
    ASSERT_TRUE(g.ok()) << g.message();
    const auto bin = sl::test::read_bytes(sl::test::shared_path("models/stories260K_f32.bin"));
    int32_t h[7];
    std::memcpy(h, bin.data(), sizeof h);
    const uint64_t dim = h[0], hid = h[1], L = h[2], kvd = dim / h[3] * h[4], V = h[5];
    // Section sizes in floats, in file order.
    struct section { const char* name; uint64_t per_layer; bool layered; };
    const section order[] = {{"token_embd", V * dim, false}, {"attn_norm", dim, true},  {"attn_q", dim * dim, true},
                             {"attn_k", kvd * dim, true},    {"attn_v", kvd * dim, true}, {"attn_output", dim * dim, true},
                             {"ffn_norm", dim, true},        {"ffn_gate", hid * dim, true}, {"ffn_down", dim * hid, true},
                             {"ffn_up", hid * dim, true},    {"output_norm", dim, false}};
    uint64_t off = 28;
    int checked = 0;
    for (const auto& s : order) {
        for (uint64_t l = 0; l < (s.layered ? L : 1); ++l) {
            const std::string name = s.layered ? "blk." + std::to_string(l) + "." + s.name + ".weight" : std::string(s.name) + ".weight";
            const auto* t = g->find_tensor(name);
            ASSERT_NE(t, nullptr) << name;
            ASSERT_EQ(t->bytes, s.per_layer * 4) << name;
            EXPECT_EQ(0, std::memcmp(g->tensor_data(*t), bin.data() + off, t->bytes)) << name;
            off += s.per_layer * 4;
            ++checked;
        }
    }
    // output.weight is an explicit copy of the (shared) embedding.
    const auto* out = g->find_tensor("output.weight");
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(0, std::memcmp(g->tensor_data(*out), bin.data() + 28, out->bytes));
    EXPECT_EQ(checked + 1, static_cast<int>(g->tensors().size()));
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

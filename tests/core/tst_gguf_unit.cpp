// GGUF writer -> reader round trips over every value type, plus writer/reader error paths (no fixtures).
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include <gtest/gtest.h>

#include "sparselens/core/gguf.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using sl::gguf_type;
using sl::gguf_value;

std::string temp_path(const std::string& name) {
    return (fs::temp_directory_path() / ("sparselens_gguf_unit_" + std::to_string(::getpid()) + "_" + name)).string();
}

sl::gguf_writer all_types_writer(std::vector<float>& f32_data, std::vector<uint8_t>& q8_data) {
    sl::gguf_writer w;
    w.set("general.alignment", gguf_value::scalar<uint32_t>(64));
    w.set("u8", gguf_value::scalar<uint8_t>(250));
    w.set("i8", gguf_value::scalar<int8_t>(-100));
    w.set("u16", gguf_value::scalar<uint16_t>(65000));
    w.set("i16", gguf_value::scalar<int16_t>(-32000));
    w.set("u32", gguf_value::scalar<uint32_t>(4000000000u));
    w.set("i32", gguf_value::scalar<int32_t>(-2000000000));
    w.set("f32", gguf_value::scalar<float>(-0.0f));
    w.set("bool", gguf_value::scalar<bool>(true));
    w.set("str", gguf_value::string("h\xc3\xa9llo \"q\"\n"));
    w.set("empty_str", gguf_value::string(""));
    w.set("u64", gguf_value::scalar<uint64_t>(std::numeric_limits<uint64_t>::max()));
    w.set("i64", gguf_value::scalar<int64_t>(std::numeric_limits<int64_t>::min()));
    w.set("f64", gguf_value::scalar<double>(3.141592653589793));
    w.set("arr.u8", gguf_value::array(std::vector<uint8_t>{1, 2, 255}));
    w.set("arr.i16", gguf_value::array(std::vector<int16_t>{-1, 7}));
    w.set("arr.i32", gguf_value::array(std::vector<int32_t>{-5, 0, 5}));
    w.set("arr.f32", gguf_value::array(std::vector<float>{1.5f, std::numeric_limits<float>::quiet_NaN(), -0.0f}));
    w.set("arr.bool", gguf_value::array(std::vector<bool>{true, false, true}));
    w.set("arr.u64", gguf_value::array(std::vector<uint64_t>{1ull << 63}));
    w.set("arr.f64", gguf_value::array(std::vector<double>{-2.25}));
    w.set("arr.empty", gguf_value::array(std::vector<int32_t>{}));
    w.set("arr.str", gguf_value::string_array({"a", "", "\xe2\x96\x81the"}));
    w.set("arr.nested", gguf_value::nested_array({gguf_value::array(std::vector<int32_t>{1, 2}),
                                                  gguf_value::string_array({"x"}),
                                                  gguf_value::nested_array({gguf_value::array(std::vector<float>{9.0f})})}));
    w.set("u8", gguf_value::scalar<uint8_t>(251));  // replacing keeps the first position
    f32_data = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    q8_data.assign(2 * 34, 0);
    for (size_t i = 0; i < q8_data.size(); ++i) q8_data[i] = static_cast<uint8_t>(i * 7);
    EXPECT_TRUE(w.add_tensor("a", sl::ggml_type_id::f32, {4, 3}, static_cast<const void*>(f32_data.data())).ok());
    EXPECT_TRUE(w.add_tensor("b", sl::ggml_type_id::q8_0, {32, 2}, static_cast<const void*>(q8_data.data())).ok());
    // A type SparseLens cannot compute with is still a valid GGUF tensor (streamed).
    EXPECT_TRUE(w.add_tensor("c", sl::ggml_type_id::q5_k, {256, 1}, [](sl::gguf_sink& s) -> sl::outcome {
                    std::vector<uint8_t> b(176, 0xab);
                    return s.write(b.data(), b.size());
                }).ok());
    return w;
}

TEST(gguf_unit, every_value_type_round_trips) {
    std::vector<float> f32;
    std::vector<uint8_t> q8;
    auto w = all_types_writer(f32, q8);
    const std::string path = temp_path("all.gguf");
    auto written = w.write(path);
    ASSERT_TRUE(written.ok()) << written.message();
    EXPECT_EQ(*written, fs::file_size(path));
    auto g = sl::gguf_file::open(path);
    ASSERT_TRUE(g.ok()) << g.message();
    ASSERT_EQ(g->kvs().size(), w.kvs().size());
    for (size_t i = 0; i < w.kvs().size(); ++i) {
        EXPECT_EQ(g->kvs()[i].key, w.kvs()[i].key);
        EXPECT_TRUE(g->kvs()[i].value == w.kvs()[i].value) << w.kvs()[i].key;
    }
    EXPECT_EQ(g->kvs()[1].key, "u8");
    EXPECT_EQ(g->find("u8")->to_int(), 251);
    EXPECT_EQ(g->find("i64")->to_int(), std::numeric_limits<int64_t>::min());
    EXPECT_FALSE(g->find("u64")->to_int().has_value());  // above INT64_MAX
    EXPECT_EQ(g->find("f64")->to_float(), 3.141592653589793);
    EXPECT_TRUE(std::signbit(*g->find("f32")->to_float()));
    EXPECT_EQ(*g->find("str")->to_string(), "h\xc3\xa9llo \"q\"\n");
    EXPECT_EQ(g->find("arr.i32")->int_at(0), -5);
    EXPECT_FALSE(g->find("arr.i32")->int_at(3).has_value());
    EXPECT_TRUE(std::isnan(*g->find("arr.f32")->float_at(1)));
    EXPECT_EQ(g->find("arr.nested")->items[2].items[0].float_at(0), 9.0);
    EXPECT_EQ(g->find("arr.str")->to_display(), "array[str] n=3 [\"a\", \"\", \"\xe2\x96\x81the\"]");
    EXPECT_EQ(g->find("u32")->to_display(), "u32 = 4000000000");

    EXPECT_EQ(g->alignment(), 64u);
    EXPECT_EQ(g->data_offset() % 64, 0u);
    ASSERT_EQ(g->tensors().size(), 3u);
    for (const auto& t : g->tensors()) EXPECT_EQ(t.offset % 64, 0u) << t.name;
    EXPECT_EQ(0, std::memcmp(g->tensor_data(*g->find_tensor("a")), f32.data(), 48));
    EXPECT_EQ(0, std::memcmp(g->tensor_data(*g->find_tensor("b")), q8.data(), q8.size()));
    EXPECT_EQ(g->find_tensor("c")->bytes, 176u);
    EXPECT_EQ(g->tensor_data(*g->find_tensor("c"))[175], 0xab);
    EXPECT_EQ(g->file_size(), w.file_size());
    fs::remove(path);
}

TEST(gguf_unit, type_table) {
    EXPECT_EQ(sl::ggml_type_label(13), "Q5_K (13)");
    EXPECT_EQ(sl::ggml_type_label(4), "unknown type id 4");
    EXPECT_EQ(sl::ggml_type_info(sl::ggml_type_id::q8_0)->block_bytes, 34);
    EXPECT_EQ(sl::ggml_type_info(sl::ggml_type_id::q4_0)->block_bytes, 18);
    EXPECT_EQ(sl::ggml_type_info(sl::ggml_type_id::bf16)->block_bytes, 2);
    for (int i = 0; i < sl::n_dtypes; ++i) {  // every weight type's traits row agrees with the GGUF table
        const auto t = static_cast<sl::dtype>(i);
        if (!sl::dtype_is_file_type(t)) {  // layout-only forms (x8): no id a file could use names them
            EXPECT_FALSE(sl::dtype_from_ggml(sl::ggml_from_dtype(t)).has_value()) << sl::dtype_name(t);
            EXPECT_EQ(sl::supported_dtype_names().find(sl::dtype_name(t)), std::string::npos);
            continue;
        }
        EXPECT_EQ(sl::dtype_from_ggml(sl::ggml_from_dtype(t)), t);
        const auto* info = sl::ggml_type_info(sl::ggml_from_dtype(t));
        EXPECT_EQ(info->block_bytes, sl::dtype_block_bytes(t));
        EXPECT_EQ(info->block_elems, sl::dtype_block_elems(t));
        EXPECT_EQ(info->name, sl::dtype_name(t));
    }
    EXPECT_EQ(sl::dtype_from_ggml(sl::ggml_type_id::q5_k), sl::dtype::q5_k);
    EXPECT_FALSE(sl::dtype_from_ggml(sl::ggml_type_id::q8_k).has_value());  // activation-only type
    EXPECT_FALSE(sl::dtype_from_ggml(sl::ggml_type_id::iq2_xxs).has_value());
}

TEST(gguf_unit, writer_rejects_bad_tensors) {
    sl::gguf_writer w;
    float x[64] = {};
    EXPECT_TRUE(w.add_tensor("t", sl::ggml_type_id::f32, {64}, static_cast<const void*>(x)).ok());
    EXPECT_FALSE(w.add_tensor("t", sl::ggml_type_id::f32, {64}, static_cast<const void*>(x)).ok());      // duplicate
    EXPECT_FALSE(w.add_tensor("q", sl::ggml_type_id::q8_0, {48}, static_cast<const void*>(x)).ok());     // 48 % 32
    EXPECT_FALSE(w.add_tensor("u", 77, {64}, static_cast<const void*>(x)).ok());                         // unknown
    EXPECT_FALSE(w.add_tensor("d", sl::ggml_type_id::f32, {1, 1, 1, 1, 1}, static_cast<const void*>(x)).ok());
    EXPECT_FALSE(w.add_tensor("n", sl::ggml_type_id::f32, {-1}, static_cast<const void*>(x)).ok());
}

TEST(gguf_unit, short_stream_fails_and_leaves_no_file) {
    sl::gguf_writer w;
    ASSERT_TRUE(w.add_tensor("t", sl::ggml_type_id::f32, {8}, [](sl::gguf_sink& s) -> sl::outcome {
                     float v[4] = {};
                     return s.write(v, sizeof v);  // 16 of 32 bytes
                 }).ok());
    const std::string path = temp_path("short.gguf");
    auto r = w.write(path);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.message().rfind(path + ":", 0), 0u) << r.message();
    EXPECT_FALSE(fs::exists(path));
    EXPECT_FALSE(fs::exists(path + ".partial"));
}

TEST(gguf_unit, write_cancel) {
    std::vector<float> f32;
    std::vector<uint8_t> q8;
    auto w = all_types_writer(f32, q8);
    const std::string path = temp_path("cancel.gguf");
    for (int stop_at : {0, 1, 2}) {
        int calls = 0;
        auto r = w.write(path, [&](float) { return calls++ < stop_at; });
        ASSERT_FALSE(r.ok());
        EXPECT_TRUE(r.cancelled()) << r.message();
        EXPECT_EQ(r.message(), path + ": write cancelled");
        EXPECT_FALSE(fs::exists(path));
        EXPECT_FALSE(fs::exists(path + ".partial"));
    }
    std::vector<float> seen;
    ASSERT_TRUE(w.write(path, [&](float f) { seen.push_back(f); return true; }).ok());
    ASSERT_FALSE(seen.empty());
    EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
    EXPECT_EQ(seen.back(), 1.0f);
    fs::remove(path);
}

// Header-level rejections that need a valid file to start from.
TEST(gguf_unit, reader_rejects_bad_headers) {
    std::vector<float> f32;
    std::vector<uint8_t> q8;
    auto w = all_types_writer(f32, q8);
    const std::string path = temp_path("base.gguf");
    ASSERT_TRUE(w.write(path).ok());
    const auto good = sl::test::read_bytes(path);
    fs::remove(path);
    ASSERT_TRUE(sl::gguf_file::open_memory("m.gguf", good).ok());
    auto expect_error = [](std::vector<uint8_t> b, const std::string& needle) {
        auto g = sl::gguf_file::open_memory("m.gguf", std::move(b));
        ASSERT_FALSE(g.ok()) << needle;
        EXPECT_EQ(g.message().rfind("m.gguf: ", 0), 0u) << g.message();
        EXPECT_NE(g.message().find(needle), std::string::npos) << g.message();
        EXPECT_EQ(g.message().find('\n'), std::string::npos) << "one line";
    };
    auto patched = [&](size_t at, const void* v, size_t n) {
        auto b = good;
        std::memcpy(b.data() + at, v, n);
        return b;
    };
    uint32_t v1 = 1, vbe = 0x03000000;
    uint64_t huge = 1ull << 62;
    expect_error(patched(0, "GGUG", 4), "bad magic");
    expect_error(patched(4, &v1, 4), "version 1");
    expect_error(patched(4, &vbe, 4), "big-endian");
    expect_error(patched(8, &huge, 8), "tensors");
    expect_error(patched(16, &huge, 8), "metadata keys");
    expect_error(patched(24, &huge, 8), "length");
    expect_error({}, "bad magic");
    // general.alignment is the first key: u32 value right after key length (8), key (17), type (4).
    uint32_t al48 = 48, al0 = 0, type_i32 = 5;
    expect_error(patched(24 + 8 + 17 + 4, &al48, 4), "power of two");
    expect_error(patched(24 + 8 + 17 + 4, &al0, 4), "power of two");
    expect_error(patched(24 + 8 + 17, &type_i32, 4), "must be u32");
    // Dropping the last tensor's trailing padding is a truncated data section.
    auto cut = good;
    cut.resize(cut.size() - 1);
    expect_error(cut, "truncated");
}

}  // namespace

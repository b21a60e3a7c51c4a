// GGUF metadata values and the ggml tensor-type table shared by the reader, writer and loaders.
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "sparselens/core/gguf.h"

namespace sl {

namespace {

struct type_row {
    uint32_t id;
    ggml_type_traits traits;
};

// Block sizes from ggml's block layouts (QK_K = 256 super-blocks for the K and IQ families).
constexpr std::array<type_row, 29> k_ggml_types{{
    {0, {"F32", 1, 4}},        {1, {"F16", 1, 2}},        {2, {"Q4_0", 32, 18}},
    {3, {"Q4_1", 32, 20}},     {6, {"Q5_0", 32, 22}},     {7, {"Q5_1", 32, 24}},
    {8, {"Q8_0", 32, 34}},     {9, {"Q8_1", 32, 36}},     {10, {"Q2_K", 256, 84}},
    {11, {"Q3_K", 256, 110}},  {12, {"Q4_K", 256, 144}},  {13, {"Q5_K", 256, 176}},
    {14, {"Q6_K", 256, 210}},  {15, {"Q8_K", 256, 292}},  {16, {"IQ2_XXS", 256, 66}},
    {17, {"IQ2_XS", 256, 74}}, {18, {"IQ3_XXS", 256, 98}}, {19, {"IQ1_S", 256, 50}},
    {20, {"IQ4_NL", 32, 18}},  {21, {"IQ3_S", 256, 110}}, {22, {"IQ2_S", 256, 82}},
    {23, {"IQ4_XS", 256, 136}}, {24, {"I8", 1, 1}},       {25, {"I16", 1, 2}},
    {26, {"I32", 1, 4}},       {27, {"I64", 1, 8}},       {28, {"F64", 1, 8}},
    {29, {"IQ1_M", 256, 56}},  {30, {"BF16", 1, 2}},
}};

}  // namespace

const ggml_type_traits* ggml_type_info(uint32_t type_id) {
    for (const auto& row : k_ggml_types)
        if (row.id == type_id) return &row.traits;
    return nullptr;
}

std::string ggml_type_label(uint32_t type_id) {
    if (const auto* t = ggml_type_info(type_id)) return std::string(t->name) + " (" + std::to_string(type_id) + ")";
    return "unknown type id " + std::to_string(type_id);
}

std::optional<dtype> dtype_from_ggml(uint32_t type_id) {
    for (int i = 0; i < n_dtypes; ++i)  // layout-only forms have no id a file could name
        if (dtype_is_file_type(static_cast<dtype>(i)) && k_dtype_traits[i].ggml_id == type_id) return static_cast<dtype>(i);
    return std::nullopt;
}

uint32_t ggml_from_dtype(dtype t) { return dtype_info(t).ggml_id; }

std::string supported_dtype_names() {
    std::string s;
    for (const dtype_traits& t : k_dtype_traits)
        if (t.ggml_id != k_no_ggml_id) s += (s.empty() ? "" : ", ") + std::string(t.name);
    return s;
}

std::string_view gguf_type_name(gguf_type t) {
    switch (t) {
        case gguf_type::u8: return "u8";
        case gguf_type::i8: return "i8";
        case gguf_type::u16: return "u16";
        case gguf_type::i16: return "i16";
        case gguf_type::u32: return "u32";
        case gguf_type::i32: return "i32";
        case gguf_type::f32: return "f32";
        case gguf_type::boolean: return "bool";
        case gguf_type::string: return "str";
        case gguf_type::array: return "array";
        case gguf_type::u64: return "u64";
        case gguf_type::i64: return "i64";
        case gguf_type::f64: return "f64";
    }
    return "?";
}

uint32_t gguf_type_size(gguf_type t) {
    switch (t) {
        case gguf_type::u8: case gguf_type::i8: case gguf_type::boolean: return 1;
        case gguf_type::u16: case gguf_type::i16: return 2;
        case gguf_type::u32: case gguf_type::i32: case gguf_type::f32: return 4;
        case gguf_type::u64: case gguf_type::i64: case gguf_type::f64: return 8;
        case gguf_type::string: case gguf_type::array: return 0;
    }
    return 0;
}

bool gguf_type_valid(uint32_t raw) { return raw <= static_cast<uint32_t>(gguf_type::f64); }

namespace {

// Integer view of a fixed-size value whose little-endian bits are zero-extended into b.
std::optional<int64_t> int_from_bits(gguf_type t, uint64_t b) {
    switch (t) {
        case gguf_type::u8: return static_cast<int64_t>(static_cast<uint8_t>(b));
        case gguf_type::i8: return static_cast<int64_t>(static_cast<int8_t>(b));
        case gguf_type::u16: return static_cast<int64_t>(static_cast<uint16_t>(b));
        case gguf_type::i16: return static_cast<int64_t>(static_cast<int16_t>(b));
        case gguf_type::u32: return static_cast<int64_t>(static_cast<uint32_t>(b));
        case gguf_type::i32: return static_cast<int64_t>(static_cast<int32_t>(b));
        case gguf_type::boolean: return static_cast<int64_t>(b != 0);
        case gguf_type::u64:
            if (b > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
            return static_cast<int64_t>(b);
        case gguf_type::i64: return static_cast<int64_t>(b);
        default: return std::nullopt;
    }
}

std::optional<double> float_from_bits(gguf_type t, uint64_t b) {
    if (t == gguf_type::f32) {
        float f;
        const uint32_t u = static_cast<uint32_t>(b);
        std::memcpy(&f, &u, 4);
        return f;
    }
    if (t == gguf_type::f64) {
        double d;
        std::memcpy(&d, &b, 8);
        return d;
    }
    if (t == gguf_type::u64) return static_cast<double>(b);
    if (auto i = int_from_bits(t, b)) return static_cast<double>(*i);
    return std::nullopt;
}

uint64_t element_bits(const gguf_value& v, uint64_t i) {
    const uint32_t sz = gguf_type_size(v.elem_type);
    uint64_t b = 0;
    std::memcpy(&b, v.raw.data() + i * sz, sz);
    return b;
}

bool has_fixed_elem(const gguf_value& v, uint64_t i) {
    return v.type == gguf_type::array && gguf_type_size(v.elem_type) > 0 && i < v.count;
}

}  // namespace

std::optional<int64_t> gguf_value::to_int() const { return int_from_bits(type, bits); }
std::optional<double> gguf_value::to_float() const { return float_from_bits(type, bits); }

std::optional<int64_t> gguf_value::int_at(uint64_t i) const {
    if (!has_fixed_elem(*this, i)) return std::nullopt;
    return int_from_bits(elem_type, element_bits(*this, i));
}

std::optional<double> gguf_value::float_at(uint64_t i) const {
    if (!has_fixed_elem(*this, i)) return std::nullopt;
    return float_from_bits(elem_type, element_bits(*this, i));
}

gguf_value gguf_value::string(std::string s) {
    gguf_value r;
    r.type = gguf_type::string;
    r.str = std::move(s);
    return r;
}

gguf_value gguf_value::string_array(std::vector<std::string> v) {
    gguf_value r;
    r.type = gguf_type::array;
    r.elem_type = gguf_type::string;
    r.count = v.size();
    r.strs = std::move(v);
    return r;
}

gguf_value gguf_value::nested_array(std::vector<gguf_value> arrays) {
    gguf_value r;
    r.type = gguf_type::array;
    r.elem_type = gguf_type::array;
    r.count = arrays.size();
    r.items = std::move(arrays);
    return r;
}

namespace {

std::string quote(const std::string& s, size_t max_chars = 48) {
    std::string out = "\"";
    for (size_t i = 0; i < s.size() && i < max_chars; ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c == '"' || c == '\\') { out += '\\'; out += static_cast<char>(c); }
        else if (c == '\n') out += "\\n";
        else if (c < 0x20) { char buf[8]; std::snprintf(buf, sizeof buf, "\\x%02x", c); out += buf; }
        else out += static_cast<char>(c);
    }
    if (s.size() > max_chars) out += "...";
    return out + "\"";
}

std::string scalar_text(gguf_type t, uint64_t b) {
    if (t == gguf_type::boolean) return b ? "true" : "false";
    if (t == gguf_type::f32 || t == gguf_type::f64) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.9g", *float_from_bits(t, b));
        return buf;
    }
    if (t == gguf_type::u64) return std::to_string(b);
    return std::to_string(*int_from_bits(t, b));
}

}  // namespace

std::string gguf_value::to_display(size_t max_items) const {
    if (type == gguf_type::string) return "str = " + quote(str);
    if (type != gguf_type::array) return std::string(gguf_type_name(type)) + " = " + scalar_text(type, bits);
    std::string out = "array[" + std::string(gguf_type_name(elem_type)) + "] n=" + std::to_string(count) + " [";
    for (uint64_t i = 0; i < count && i < max_items; ++i) {
        if (i) out += ", ";
        if (elem_type == gguf_type::string) out += quote(strs[i], 24);
        else if (elem_type == gguf_type::array) {  // piecewise: GCC 12 misreports "lit" + string&& (-Wrestrict)
            out += '[';
            out += items[i].to_display(0);
            out += ']';
        }
        else out += scalar_text(elem_type, element_bits(*this, i));
    }
    if (count > max_items) out += max_items ? ", ..." : "...";
    return out + "]";
}

}  // namespace sl

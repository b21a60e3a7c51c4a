// GGUF v2/v3 model files: typed metadata values, a validating reader over a mapped file, a streaming writer.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sparselens/core/result.h"
#include "sparselens/kernels/types.h"

namespace sl {

struct mapped_file;  // core/src/mapped_file.h

// ---- ggml tensor types -------------------------------------------------------------------------

// ggml tensor type ids as stored in GGUF tensor infos (ids 4 and 5 were removed from ggml).
namespace ggml_type_id {
inline constexpr uint32_t f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9,
                          q2_k = 10, q3_k = 11, q4_k = 12, q5_k = 13, q6_k = 14, q8_k = 15, iq2_xxs = 16,
                          iq2_xs = 17, iq3_xxs = 18, iq1_s = 19, iq4_nl = 20, iq3_s = 21, iq2_s = 22,
                          iq4_xs = 23, i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28, iq1_m = 29, bf16 = 30;
}

struct ggml_type_traits {
    std::string_view name;  // "Q5_K"
    int64_t block_elems = 0;
    int64_t block_bytes = 0;
};

// Traits of a known ggml type id, or nullptr for ids ggml does not define (or no longer supports).
const ggml_type_traits* ggml_type_info(uint32_t type_id);
// "Q5_K (13)", or "unknown type id 77".
std::string ggml_type_label(uint32_t type_id);
// The weight types SparseLens computes with; nullopt for every other ggml type.
std::optional<dtype> dtype_from_ggml(uint32_t type_id);
uint32_t ggml_from_dtype(dtype t);
// Names of the weight types the engine loads, comma-separated (for error messages).
std::string supported_dtype_names();

// ---- metadata values ---------------------------------------------------------------------------

// Metadata value types, numbered as in the GGUF specification.
enum class gguf_type : uint32_t {
    u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
    string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};
std::string_view gguf_type_name(gguf_type t);
// Bytes of one fixed-size value; 0 for string and array.
uint32_t gguf_type_size(gguf_type t);
bool gguf_type_valid(uint32_t raw);

// One metadata value. Scalars keep their raw bits so a read/write round trip is bit-exact
// (NaN payloads, -0.0f); arrays keep fixed-size elements packed exactly as in the file, which
// keeps memory proportional to the file even for 128k-token vocabularies.
struct gguf_value {
    gguf_type type = gguf_type::u8;
    uint64_t bits = 0;                  // fixed-size scalar: little-endian bits, zero-extended
    std::string str;                    // type == string
    gguf_type elem_type = gguf_type::u8;  // type == array: element type
    uint64_t count = 0;                 // type == array: number of elements
    std::vector<uint8_t> raw;           // array of fixed-size elements, packed
    std::vector<std::string> strs;      // array of strings
    std::vector<gguf_value> items;      // array of arrays (each item has type == array)

    bool is_array() const { return type == gguf_type::array; }
    // Integer or bool scalar as int64 (nullopt for other types or a u64 above INT64_MAX).
    std::optional<int64_t> to_int() const;
    // Float scalar (f32/f64) or integer scalar, as double.
    std::optional<double> to_float() const;
    const std::string* to_string() const { return type == gguf_type::string ? &str : nullptr; }
    // Element i of an array of integers/bools (to_int rules) or of numbers (to_float rules).
    std::optional<int64_t> int_at(uint64_t i) const;
    std::optional<double> float_at(uint64_t i) const;

    // Short human-readable rendering for `info` ("u32 = 512", "array[str] n=512 [\"<unk>\", ...]").
    std::string to_display(size_t max_items = 6) const;

    bool operator==(const gguf_value& o) const = default;

    template <class T> static gguf_value scalar(T v);
    static gguf_value string(std::string s);
    template <class T> static gguf_value array(const std::vector<T>& v);
    static gguf_value string_array(std::vector<std::string> v);
    static gguf_value nested_array(std::vector<gguf_value> arrays);  // every item must be an array
};

struct gguf_kv {
    std::string key;
    gguf_value value;
};

// ---- reader ------------------------------------------------------------------------------------

struct gguf_tensor_info {
    std::string name;
    uint32_t ggml_type = 0;
    std::vector<int64_t> shape;  // ggml order: shape[0] = row length; 1..4 dims
    uint64_t offset = 0;         // relative to the data section (a multiple of the alignment)
    uint64_t bytes = 0;
    int64_t n_elements = 0;
};

// A parsed GGUF file. Every count, length, offset and byte range has been checked against the file
// size, so tensor_data() always points at `bytes` readable bytes.
class gguf_file {
public:
    // Errors start with the path: "x.gguf: tensor 'a' data [10, 90) exceeds data section size 64".
    static result<gguf_file> open(const std::string& path, bool use_mmap = true);
    // Parses bytes already in memory; `label` stands for the path in messages.
    static result<gguf_file> open_memory(const std::string& label, std::vector<uint8_t> bytes);
    // Parses an already opened file (the model loader maps a file once to detect its format).
    static result<gguf_file> parse(std::shared_ptr<const mapped_file> file);

    const std::string& path() const { return m_path; }
    uint32_t version() const { return m_version; }
    uint64_t file_size() const { return m_file_size; }
    uint32_t alignment() const { return m_alignment; }
    uint64_t data_offset() const { return m_data_offset; }

    const std::vector<gguf_kv>& kvs() const { return m_kvs; }
    const gguf_value* find(std::string_view key) const;
    const std::vector<gguf_tensor_info>& tensors() const { return m_tensors; }
    const gguf_tensor_info* find_tensor(std::string_view name) const;
    const uint8_t* tensor_data(const gguf_tensor_info& t) const;

    // Keeps the bytes alive (weight views point into them).
    const std::shared_ptr<const mapped_file>& file() const { return m_file; }

private:
    friend class gguf_parser;

    std::shared_ptr<const mapped_file> m_file;
    std::string m_path;
    uint32_t m_version = 0;
    uint64_t m_file_size = 0;
    uint32_t m_alignment = 32;
    uint64_t m_data_offset = 0;
    std::vector<gguf_kv> m_kvs;
    std::vector<gguf_tensor_info> m_tensors;
    std::unordered_map<std::string, size_t> m_kv_index;
    std::unordered_map<std::string, size_t> m_tensor_index;
};

// ---- writer ------------------------------------------------------------------------------------

// Destination of a streamed tensor's bytes during gguf_writer::write.
class gguf_sink {
public:
    virtual ~gguf_sink() = default;
    virtual outcome write(const void* data, size_t n) = 0;
};

// Collects metadata and tensors, then writes a GGUF v3 file. Key and tensor order are kept, offsets
// are packed in order with each tensor padded to the alignment (as ggml does), so re-writing what
// gguf_file read gives a byte-identical file.
class gguf_writer {
public:
    // Produces exactly the tensor's byte count, in order; may be called once per write().
    using fill_fn = std::function<outcome(gguf_sink& sink)>;

    // Sets or replaces a key (a replaced key keeps its position).
    void set(const std::string& key, gguf_value v);
    void set_u32(const std::string& key, uint32_t v) { set(key, gguf_value::scalar(v)); }
    void set_i32(const std::string& key, int32_t v) { set(key, gguf_value::scalar(v)); }
    void set_f32(const std::string& key, float v) { set(key, gguf_value::scalar(v)); }
    void set_bool(const std::string& key, bool v) { set(key, gguf_value::scalar(v)); }
    void set_str(const std::string& key, std::string v) { set(key, gguf_value::string(std::move(v))); }
    const gguf_value* find(const std::string& key) const;
    const std::vector<gguf_kv>& kvs() const { return m_kvs; }

    // A tensor whose bytes the caller keeps alive until write() returns.
    outcome add_tensor(const std::string& name, uint32_t ggml_type, std::vector<int64_t> shape, const void* data);
    // A tensor whose bytes are generated during write() (streamed; nothing is held in memory).
    outcome add_tensor(const std::string& name, uint32_t ggml_type, std::vector<int64_t> shape, fill_fn fill);
    size_t n_tensors() const { return m_tensors.size(); }

    // general.alignment if set (must be a power-of-two u32), else 32.
    uint32_t alignment() const;
    // Total file size write() will produce.
    uint64_t file_size() const;

    // Writes to path + ".partial" and renames on success. progress: fraction of tensor bytes;
    // returning false stops, removes the partial file and returns error{"<path>: write cancelled", true}.
    result<uint64_t> write(const std::string& path, const progress_fn& progress = {}) const;

private:
    struct tensor_entry {
        gguf_tensor_info info;
        const void* data = nullptr;
        fill_fn fill;
    };
    outcome add_entry(tensor_entry e);

    std::vector<gguf_kv> m_kvs;
    std::vector<tensor_entry> m_tensors;
    std::unordered_map<std::string, size_t> m_tensor_index;
};

// ---- template definitions ----------------------------------------------------------------------

namespace detail {
template <class T> constexpr gguf_type gguf_type_of();
template <> constexpr gguf_type gguf_type_of<uint8_t>() { return gguf_type::u8; }
template <> constexpr gguf_type gguf_type_of<int8_t>() { return gguf_type::i8; }
template <> constexpr gguf_type gguf_type_of<uint16_t>() { return gguf_type::u16; }
template <> constexpr gguf_type gguf_type_of<int16_t>() { return gguf_type::i16; }
template <> constexpr gguf_type gguf_type_of<uint32_t>() { return gguf_type::u32; }
template <> constexpr gguf_type gguf_type_of<int32_t>() { return gguf_type::i32; }
template <> constexpr gguf_type gguf_type_of<float>() { return gguf_type::f32; }
template <> constexpr gguf_type gguf_type_of<bool>() { return gguf_type::boolean; }
template <> constexpr gguf_type gguf_type_of<uint64_t>() { return gguf_type::u64; }
template <> constexpr gguf_type gguf_type_of<int64_t>() { return gguf_type::i64; }
template <> constexpr gguf_type gguf_type_of<double>() { return gguf_type::f64; }
}  // namespace detail

template <class T>
gguf_value gguf_value::scalar(T v) {
    gguf_value r;
    r.type = detail::gguf_type_of<T>();
    if constexpr (std::is_same_v<T, bool>) {
        r.bits = v ? 1 : 0;
    } else {
        static_assert(sizeof(T) <= 8);
        std::memcpy(&r.bits, &v, sizeof(T));
    }
    return r;
}

template <class T>
gguf_value gguf_value::array(const std::vector<T>& v) {
    gguf_value r;
    r.type = gguf_type::array;
    r.elem_type = detail::gguf_type_of<T>();
    r.count = v.size();
    if constexpr (std::is_same_v<T, bool>) {
        for (bool b : v) r.raw.push_back(b ? 1 : 0);
    } else {
        r.raw.resize(v.size() * sizeof(T));
        if (!v.empty()) std::memcpy(r.raw.data(), v.data(), r.raw.size());
    }
    return r;
}

}  // namespace sl

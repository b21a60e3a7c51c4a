// GGUF v2/v3 reader: parses header, metadata and tensor infos, validating every size against the file.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "mapped_file.h"
#include "sparselens/core/gguf.h"

namespace sl {

static_assert(std::endian::native == std::endian::little, "GGUF files are little-endian; big-endian hosts are not supported");

namespace {

constexpr uint32_t k_max_dims = 4;
constexpr int k_max_array_depth = 8;
// Metadata is held in memory; a lying header must not make us allocate without bound even when the
// file is large (zero-filled tensor data would otherwise parse as millions of empty strings).
constexpr uint64_t k_metadata_budget = 512ull << 20;
// Smallest encodings: a KV is key length (8) + type (4) + a 1-byte value; a tensor info is name
// length (8) + n_dims (4) + one dim (8) + type (4) + offset (8).
constexpr uint64_t k_min_kv_bytes = 13;
constexpr uint64_t k_min_tensor_info_bytes = 32;

}  // namespace

// Cursor over the file bytes; the first failure is kept and everything after it is a no-op.
class gguf_parser {
public:
    gguf_parser(const mapped_file& f) : m_p(f.data), m_size(f.size), m_path(f.path) {}

    result<gguf_file> run(std::shared_ptr<const mapped_file> file);

private:
    bool fail(const std::string& what) {
        if (m_err.empty()) m_err = what;
        return false;
    }
    uint64_t remaining() const { return m_size - m_pos; }
    // Names are composed only on failure: a 128k-token vocabulary must not build 128k strings.
    static std::string name(const std::string& what, int64_t index, const char* suffix) {
        std::string s = what;
        if (index >= 0) {  // appended piecewise: GCC 12 misreports "lit" + string&& (-Wrestrict)
            s += '[';
            s += std::to_string(index);
            s += ']';
        }
        return s + suffix;
    }
    bool need(uint64_t n, const std::string& what, const char* suffix = "", int64_t index = -1) {
        if (n <= remaining()) return true;
        return fail("truncated: " + name(what, index, suffix) + " needs " + std::to_string(n) + " bytes at offset " +
                    std::to_string(m_pos) + ", file size is " + std::to_string(m_size));
    }
    template <class T>
    bool read(T* out, const std::string& what, const char* suffix = "", int64_t index = -1) {
        if (!need(sizeof(T), what, suffix, index)) return false;
        *out = load_le<T>(m_p + m_pos);
        m_pos += sizeof(T);
        return true;
    }
    bool charge(uint64_t bytes) {
        if (bytes <= m_budget) {
            m_budget -= bytes;
            return true;
        }
        return fail("metadata needs more than " + std::to_string(k_metadata_budget >> 20) + " MiB of memory");
    }
    bool read_string(std::string* out, const std::string& what, int64_t index = -1);
    bool read_value(gguf_type t, gguf_value* v, const std::string& what, int depth);
    bool read_array(gguf_value* v, const std::string& what, int depth);
    bool read_tensor_info(gguf_file& g, uint64_t index, uint32_t alignment);

    const uint8_t* m_p;
    uint64_t m_size;
    uint64_t m_pos = 0;
    uint64_t m_budget = k_metadata_budget;
    std::string m_path;
    std::string m_err;
};

bool gguf_parser::read_string(std::string* out, const std::string& what, int64_t index) {
    uint64_t len = 0;
    if (!read(&len, what, " length", index)) return false;
    if (len > remaining())
        return fail(name(what, index, "") + " length " + std::to_string(len) + " at offset " + std::to_string(m_pos - 8) +
                    " exceeds the " + std::to_string(remaining()) + " bytes left in the file");
    if (!charge(len + sizeof(std::string))) return false;
    out->assign(reinterpret_cast<const char*>(m_p + m_pos), len);
    m_pos += len;
    return true;
}

bool gguf_parser::read_value(gguf_type t, gguf_value* v, const std::string& what, int depth) {
    v->type = t;
    if (t == gguf_type::string) return read_string(&v->str, what);
    if (t == gguf_type::array) return read_array(v, what, depth + 1);
    const uint32_t sz = gguf_type_size(t);
    if (!need(sz, what)) return false;
    v->bits = 0;
    std::memcpy(&v->bits, m_p + m_pos, sz);
    m_pos += sz;
    if (t == gguf_type::boolean && v->bits > 1)
        return fail(what + " is a bool with value " + std::to_string(v->bits) + " (must be 0 or 1)");
    return true;
}

bool gguf_parser::read_array(gguf_value* v, const std::string& what, int depth) {
    if (depth > k_max_array_depth)
        return fail(what + " nests arrays deeper than " + std::to_string(k_max_array_depth) + " levels");
    uint32_t raw_type = 0;
    uint64_t n = 0;
    if (!read(&raw_type, what, " element type") || !read(&n, what, " element count")) return false;
    if (!gguf_type_valid(raw_type))
        return fail(what + " has invalid element type " + std::to_string(raw_type));
    const auto et = static_cast<gguf_type>(raw_type);
    const uint64_t fixed = gguf_type_size(et);
    const uint64_t min_elem = fixed ? fixed : (et == gguf_type::string ? 8 : 12);
    if (n > remaining() / min_elem)
        return fail(what + " claims " + std::to_string(n) + " " + std::string(gguf_type_name(et)) +
                    " elements but only " + std::to_string(remaining()) + " bytes remain");
    v->elem_type = et;
    v->count = n;
    if (fixed) {
        const uint64_t bytes = n * fixed;  // cannot overflow: bounded by remaining()
        if (!charge(bytes)) return false;
        v->raw.assign(m_p + m_pos, m_p + m_pos + bytes);
        m_pos += bytes;
        if (et == gguf_type::boolean)
            for (uint64_t i = 0; i < n; ++i)
                if (v->raw[i] > 1) return fail(what + "[" + std::to_string(i) + "] is a bool with value " +
                                               std::to_string(v->raw[i]));
        return true;
    }
    if (et == gguf_type::string) {
        v->strs.reserve(std::min<uint64_t>(n, 1u << 16));
        for (uint64_t i = 0; i < n; ++i) {
            v->strs.emplace_back();
            if (!read_string(&v->strs.back(), what, static_cast<int64_t>(i))) return false;
        }
        return true;
    }
    v->items.reserve(std::min<uint64_t>(n, 1u << 12));
    for (uint64_t i = 0; i < n; ++i) {
        if (!charge(sizeof(gguf_value))) return false;
        v->items.emplace_back();
        if (!read_value(gguf_type::array, &v->items.back(), name(what, static_cast<int64_t>(i), ""), depth))
            return false;
    }
    return true;
}

bool gguf_parser::read_tensor_info(gguf_file& g, uint64_t index, uint32_t alignment) {
    gguf_tensor_info ti;
    const std::string label = "tensor info #" + std::to_string(index) + " name";
    if (!read_string(&ti.name, label)) return false;
    const std::string tn = "tensor '" + printable(ti.name) + "'";
    uint32_t n_dims = 0;
    if (!read(&n_dims, tn, " n_dims")) return false;
    if (n_dims == 0 || n_dims > k_max_dims)
        return fail(tn + " has " + std::to_string(n_dims) + " dimensions (must be 1.." + std::to_string(k_max_dims) + ")");
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
        int64_t ne = 0;
        if (!read(&ne, tn, " dimension", d)) return false;
        if (ne < 0) return fail(tn + " has negative dimension " + std::to_string(ne));
        if (__builtin_mul_overflow(n_elements, ne, &n_elements))
            return fail(tn + " element count overflows (dimension " + std::to_string(d) + " = " + std::to_string(ne) + ")");
        ti.shape.push_back(ne);
    }
    ti.n_elements = n_elements;
    if (!read(&ti.ggml_type, tn, " type") || !read(&ti.offset, tn, " offset")) return false;
    const ggml_type_traits* tt = ggml_type_info(ti.ggml_type);
    if (!tt) return fail(tn + " has " + ggml_type_label(ti.ggml_type));
    if (ti.shape[0] % tt->block_elems != 0)
        return fail(tn + " (" + std::string(tt->name) + ") row length " + std::to_string(ti.shape[0]) +
                    " is not a multiple of the block size " + std::to_string(tt->block_elems));
    uint64_t bytes = 0;
    if (!checked_mul(static_cast<uint64_t>(n_elements / tt->block_elems), static_cast<uint64_t>(tt->block_bytes), &bytes))
        return fail(tn + " byte size overflows");
    ti.bytes = bytes;
    if (ti.offset % alignment != 0)
        return fail(tn + " offset " + std::to_string(ti.offset) + " is not a multiple of the alignment " +
                    std::to_string(alignment));
    if (g.m_tensor_index.count(ti.name)) return fail("duplicate tensor name '" + printable(ti.name) + "'");
    g.m_tensor_index.emplace(ti.name, g.m_tensors.size());
    g.m_tensors.push_back(std::move(ti));
    return true;
}

result<gguf_file> gguf_parser::run(std::shared_ptr<const mapped_file> file) {
    gguf_file g;
    g.m_file = file;
    g.m_path = m_path;
    g.m_file_size = m_size;
    auto bad = [&]() -> result<gguf_file> { return file_error(m_path, m_err); };

    if (m_size < 4 || std::memcmp(m_p, "GGUF", 4) != 0) return file_error(m_path, "not a GGUF file (bad magic)");
    m_pos = 4;
    uint32_t version = 0;
    uint64_t n_tensors = 0, n_kv = 0;
    if (!read(&version, "header", " version")) return bad();
    if ((version & 0xffffu) == 0 && version != 0)
        return file_error(m_path, "GGUF version field " + std::to_string(version) +
                                      " looks byte-swapped; big-endian GGUF files are not supported");
    if (version != 2 && version != 3)
        return file_error(m_path, "GGUF version " + std::to_string(version) + " is not supported (only 2 and 3)");
    g.m_version = version;
    if (!read(&n_tensors, "header", " tensor count") || !read(&n_kv, "header", " key count")) return bad();
    if (n_kv > remaining() / k_min_kv_bytes)
        return file_error(m_path, "header claims " + std::to_string(n_kv) + " metadata keys but only " +
                                      std::to_string(remaining()) + " bytes follow the header");
    if (n_tensors > remaining() / k_min_tensor_info_bytes)
        return file_error(m_path, "header claims " + std::to_string(n_tensors) + " tensors but only " +
                                      std::to_string(remaining()) + " bytes follow the header");

    g.m_kvs.reserve(std::min<uint64_t>(n_kv, 4096));
    for (uint64_t i = 0; i < n_kv; ++i) {
        gguf_kv kv;
        uint32_t raw_type = 0;
        if (!read_string(&kv.key, "key #" + std::to_string(i))) return bad();
        const std::string what = "key '" + printable(kv.key) + "'";
        if (!read(&raw_type, what, " type")) return bad();
        if (!gguf_type_valid(raw_type)) return file_error(m_path, what + " has invalid value type " + std::to_string(raw_type));
        if (!read_value(static_cast<gguf_type>(raw_type), &kv.value, what, 0)) return bad();
        if (g.m_kv_index.count(kv.key)) return file_error(m_path, "duplicate key '" + printable(kv.key) + "'");
        g.m_kv_index.emplace(kv.key, g.m_kvs.size());
        g.m_kvs.push_back(std::move(kv));
    }

    if (const gguf_value* a = g.find("general.alignment")) {
        if (a->type != gguf_type::u32)
            return file_error(m_path, "general.alignment has type " + std::string(gguf_type_name(a->type)) + " (must be u32)");
        const auto al = static_cast<uint32_t>(a->bits);
        if (al == 0 || (al & (al - 1)) != 0)
            return file_error(m_path, "general.alignment " + std::to_string(al) + " is not a power of two");
        g.m_alignment = al;
    }

    g.m_tensors.reserve(std::min<uint64_t>(n_tensors, 4096));
    for (uint64_t i = 0; i < n_tensors; ++i)
        if (!read_tensor_info(g, i, g.m_alignment)) return bad();

    // The data section starts at the next multiple of the alignment (the writer pads with zeros).
    const uint64_t al = g.m_alignment;
    uint64_t data_offset = 0;
    if (!checked_add(m_pos, al - 1, &data_offset)) return file_error(m_path, "data offset overflows");
    data_offset -= data_offset % al;
    g.m_data_offset = data_offset;
    if (n_tensors == 0) return g;
    if (data_offset > m_size)
        return file_error(m_path, "truncated: data section would start at " + std::to_string(data_offset) +
                                      ", file size is " + std::to_string(m_size));
    const uint64_t data_size = m_size - data_offset;
    uint64_t needed = 0;  // end of the padded data section
    for (const auto& t : g.m_tensors) {
        uint64_t end = 0, padded = 0;
        if (!checked_add(t.offset, t.bytes, &end) || end > data_size)
            return file_error(m_path, "tensor '" + printable(t.name) + "' data [" + std::to_string(t.offset) + ", " +
                                          (end >= t.offset ? std::to_string(end) : std::string("overflow")) +
                                          ") exceeds the data section size " + std::to_string(data_size));
        if (!checked_add(end, al - 1, &padded)) return file_error(m_path, "tensor '" + printable(t.name) + "' end overflows");
        needed = std::max(needed, padded - padded % al);
    }
    if (needed > data_size)
        return file_error(m_path, "truncated: the data section needs " + std::to_string(needed) +
                                      " bytes including alignment padding, the file has " + std::to_string(data_size));
    return g;
}

result<gguf_file> gguf_file::parse(std::shared_ptr<const mapped_file> file) {
    gguf_parser p(*file);
    return p.run(std::move(file));
}

result<gguf_file> gguf_file::open(const std::string& path, bool use_mmap) {
    auto f = mapped_file::open(path, use_mmap);
    if (!f) return f.err();
    return parse(std::move(f.value()));
}

result<gguf_file> gguf_file::open_memory(const std::string& label, std::vector<uint8_t> bytes) {
    return parse(mapped_file::from_bytes(label, std::move(bytes)));
}

const gguf_value* gguf_file::find(std::string_view key) const {
    auto it = m_kv_index.find(std::string(key));
    return it == m_kv_index.end() ? nullptr : &m_kvs[it->second].value;
}

const gguf_tensor_info* gguf_file::find_tensor(std::string_view name) const {
    auto it = m_tensor_index.find(std::string(name));
    return it == m_tensor_index.end() ? nullptr : &m_tensors[it->second];
}

const uint8_t* gguf_file::tensor_data(const gguf_tensor_info& t) const {
    return m_file->data + m_data_offset + t.offset;
}

}  // namespace sl

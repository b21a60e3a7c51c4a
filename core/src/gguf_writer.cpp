// GGUF v3 writer: metadata + tensor infos up front, then tensor data streamed with alignment padding.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "mapped_file.h"
#include "sparselens/core/gguf.h"

namespace sl {

namespace {

constexpr uint32_t k_default_alignment = 32;
constexpr uint64_t k_progress_step = 4ull << 20;  // report (and allow cancelling) every 4 MiB and per tensor

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Buffered file output that remembers the first error and reports progress over tensor bytes.
class file_sink final : public gguf_sink {
public:
    file_sink(std::FILE* f, std::string path, const progress_fn& progress, uint64_t total)
        : m_f(f), m_path(std::move(path)), m_progress(progress), m_total(total) {}

    outcome raw(const void* data, size_t n) {
        if (n && std::fwrite(data, 1, n, m_f) != n)
            return file_error(m_path, std::string("write failed: ") + std::strerror(errno));
        m_pos += n;
        return {};
    }
    uint64_t position() const { return m_pos; }
    outcome zeros(uint64_t n) {
        static const uint8_t z[256] = {};
        while (n) {
            const size_t k = static_cast<size_t>(std::min<uint64_t>(n, sizeof z));
            if (auto o = raw(z, k); !o) return o;
            n -= k;
        }
        return {};
    }
    template <class T>
    outcome pod(T v) { return raw(&v, sizeof v); }
    outcome str(const std::string& s) {
        if (auto o = pod<uint64_t>(s.size()); !o) return o;
        return raw(s.data(), s.size());
    }

    // Tensor payload: counted against the current tensor's budget, with progress and cancel.
    outcome write(const void* data, size_t n) override {
        if (n > m_tensor_left)
            return file_error(m_path, "tensor '" + m_tensor_name + "' produced more than its " +
                                          std::to_string(m_tensor_bytes) + " bytes");
        const auto* p = static_cast<const uint8_t*>(data);
        while (n) {
            const size_t k = static_cast<size_t>(std::min<uint64_t>(n, k_progress_step - m_since_report));
            if (auto o = raw(p, k); !o) return o;
            p += k;
            n -= k;
            m_tensor_left -= k;
            m_done += k;
            m_since_report += k;
            if (m_since_report >= k_progress_step) {
                m_since_report = 0;
                if (auto o = report(); !o) return o;
            }
        }
        return {};
    }
    void begin_tensor(const std::string& name, uint64_t bytes) {
        m_tensor_name = name;
        m_tensor_bytes = m_tensor_left = bytes;
    }
    uint64_t tensor_left() const { return m_tensor_left; }
    outcome report() {
        if (m_progress && !m_progress(m_total ? static_cast<float>(static_cast<double>(m_done) / static_cast<double>(m_total)) : 1.0f))
            return error{m_path + ": write cancelled", true};
        return {};
    }

private:
    std::FILE* m_f;
    std::string m_path;
    const progress_fn& m_progress;
    uint64_t m_total;
    uint64_t m_pos = 0;
    uint64_t m_done = 0;
    uint64_t m_since_report = 0;
    std::string m_tensor_name;
    uint64_t m_tensor_bytes = 0;
    uint64_t m_tensor_left = 0;
};

outcome write_value(file_sink& out, const gguf_value& v, bool with_type) {
    if (with_type)
        if (auto o = out.pod<uint32_t>(static_cast<uint32_t>(v.type)); !o) return o;
    if (v.type == gguf_type::string) return out.str(v.str);
    if (v.type != gguf_type::array) return out.raw(&v.bits, gguf_type_size(v.type));
    if (auto o = out.pod<uint32_t>(static_cast<uint32_t>(v.elem_type)); !o) return o;
    if (auto o = out.pod<uint64_t>(v.count); !o) return o;
    if (v.elem_type == gguf_type::string) {
        for (const auto& s : v.strs)
            if (auto o = out.str(s); !o) return o;
        return {};
    }
    if (v.elem_type == gguf_type::array) {
        for (const auto& item : v.items)
            if (auto o = write_value(out, item, false); !o) return o;
        return {};
    }
    return out.raw(v.raw.data(), v.raw.size());
}

// A value the writer can serialise faithfully (its counts agree with its storage).
bool value_consistent(const gguf_value& v) {
    if (v.type != gguf_type::array) return gguf_type_valid(static_cast<uint32_t>(v.type));
    if (v.elem_type == gguf_type::string) return v.strs.size() == v.count;
    if (v.elem_type == gguf_type::array)
        return v.items.size() == v.count &&
               std::all_of(v.items.begin(), v.items.end(), [](const gguf_value& i) { return i.is_array() && value_consistent(i); });
    return gguf_type_valid(static_cast<uint32_t>(v.elem_type)) && v.raw.size() == v.count * gguf_type_size(v.elem_type);
}

}  // namespace

void gguf_writer::set(const std::string& key, gguf_value v) {
    for (auto& kv : m_kvs)
        if (kv.key == key) {
            kv.value = std::move(v);
            return;
        }
    m_kvs.push_back({key, std::move(v)});
}

const gguf_value* gguf_writer::find(const std::string& key) const {
    for (const auto& kv : m_kvs)
        if (kv.key == key) return &kv.value;
    return nullptr;
}

uint32_t gguf_writer::alignment() const {
    const gguf_value* a = find("general.alignment");
    if (!a || a->type != gguf_type::u32) return k_default_alignment;
    return static_cast<uint32_t>(a->bits);
}

outcome gguf_writer::add_entry(tensor_entry e) {
    auto& ti = e.info;
    const std::string tn = "tensor '" + ti.name + "'";
    if (m_tensor_index.count(ti.name)) return error{"gguf_writer: duplicate " + tn};
    const ggml_type_traits* tt = ggml_type_info(ti.ggml_type);
    if (!tt) return error{"gguf_writer: " + tn + " has " + ggml_type_label(ti.ggml_type)};
    if (ti.shape.empty() || ti.shape.size() > 4) return error{"gguf_writer: " + tn + " must have 1..4 dimensions"};
    int64_t n = 1;
    for (int64_t d : ti.shape)
        if (d < 0 || __builtin_mul_overflow(n, d, &n)) return error{"gguf_writer: " + tn + " has an invalid shape"};
    if (ti.shape[0] % tt->block_elems != 0)
        return error{"gguf_writer: " + tn + " row length " + std::to_string(ti.shape[0]) + " is not a multiple of " +
                     std::to_string(tt->block_elems)};
    ti.n_elements = n;
    ti.bytes = static_cast<uint64_t>(n / tt->block_elems) * static_cast<uint64_t>(tt->block_bytes);
    m_tensor_index.emplace(ti.name, m_tensors.size());
    m_tensors.push_back(std::move(e));
    return {};
}

outcome gguf_writer::add_tensor(const std::string& name, uint32_t ggml_type, std::vector<int64_t> shape, const void* data) {
    tensor_entry e;
    e.info.name = name;
    e.info.ggml_type = ggml_type;
    e.info.shape = std::move(shape);
    e.data = data;
    return add_entry(std::move(e));
}

outcome gguf_writer::add_tensor(const std::string& name, uint32_t ggml_type, std::vector<int64_t> shape, fill_fn fill) {
    tensor_entry e;
    e.info.name = name;
    e.info.ggml_type = ggml_type;
    e.info.shape = std::move(shape);
    e.fill = std::move(fill);
    return add_entry(std::move(e));
}

uint64_t gguf_writer::file_size() const {
    const uint64_t al = alignment();
    uint64_t n = 4 + 4 + 8 + 8;
    auto value_size = [](auto&& self, const gguf_value& v) -> uint64_t {
        if (v.type == gguf_type::string) return 8 + v.str.size();
        if (v.type != gguf_type::array) return gguf_type_size(v.type);
        uint64_t s = 4 + 8;
        if (v.elem_type == gguf_type::string)
            for (const auto& x : v.strs) s += 8 + x.size();
        else if (v.elem_type == gguf_type::array)
            for (const auto& x : v.items) s += self(self, x);
        else
            s += v.raw.size();
        return s;
    };
    for (const auto& kv : m_kvs) n += 8 + kv.key.size() + 4 + value_size(value_size, kv.value);
    for (const auto& t : m_tensors) n += 8 + t.info.name.size() + 4 + 8 * t.info.shape.size() + 4 + 8;
    n = align_up(n, al);
    for (const auto& t : m_tensors) n += align_up(t.info.bytes, al);
    return n;
}

result<uint64_t> gguf_writer::write(const std::string& path, const progress_fn& progress) const {
    const uint32_t al = alignment();
    if (al == 0 || (al & (al - 1)) != 0)
        return file_error(path, "general.alignment " + std::to_string(al) + " is not a power of two");
    for (const auto& kv : m_kvs)
        if (!value_consistent(kv.value)) return file_error(path, "metadata value of key '" + kv.key + "' is inconsistent");

    uint64_t total = 0;
    for (const auto& t : m_tensors) total += t.info.bytes;

    const std::string tmp = path + ".partial";
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) return file_error(path, std::string("cannot create: ") + std::strerror(errno));
    std::vector<char> buffer(1 << 20);
    std::setvbuf(f, buffer.data(), _IOFBF, buffer.size());
    file_sink out(f, path, progress, total);

    auto body = [&]() -> outcome {
        if (auto o = out.raw("GGUF", 4); !o) return o;
        if (auto o = out.pod<uint32_t>(3); !o) return o;
        if (auto o = out.pod<uint64_t>(m_tensors.size()); !o) return o;
        if (auto o = out.pod<uint64_t>(m_kvs.size()); !o) return o;
        for (const auto& kv : m_kvs) {
            if (auto o = out.str(kv.key); !o) return o;
            if (auto o = write_value(out, kv.value, true); !o) return o;
        }
        uint64_t offset = 0;
        for (const auto& t : m_tensors) {
            if (auto o = out.str(t.info.name); !o) return o;
            if (auto o = out.pod<uint32_t>(static_cast<uint32_t>(t.info.shape.size())); !o) return o;
            for (int64_t d : t.info.shape)
                if (auto o = out.pod<int64_t>(d); !o) return o;
            if (auto o = out.pod<uint32_t>(t.info.ggml_type); !o) return o;
            if (auto o = out.pod<uint64_t>(offset); !o) return o;
            offset += align_up(t.info.bytes, al);
        }
        const uint64_t pos = out.position();
        if (auto o = out.zeros(align_up(pos, al) - pos); !o) return o;
        if (auto o = out.report(); !o) return o;
        for (const auto& t : m_tensors) {
            out.begin_tensor(t.info.name, t.info.bytes);
            if (t.fill) {
                if (auto o = t.fill(out); !o) return o;
            } else if (t.info.bytes) {
                if (!t.data) return file_error(path, "tensor '" + t.info.name + "' has no data");
                if (auto o = out.write(t.data, t.info.bytes); !o) return o;
            }
            if (out.tensor_left() != 0)
                return file_error(path, "tensor '" + t.info.name + "' produced " +
                                            std::to_string(t.info.bytes - out.tensor_left()) + " of its " +
                                            std::to_string(t.info.bytes) + " bytes");
            if (auto o = out.zeros(align_up(t.info.bytes, al) - t.info.bytes); !o) return o;
            if (auto o = out.report(); !o) return o;
        }
        return {};
    };

    outcome o = body();
    const bool close_ok = std::fclose(f) == 0;
    if (o && !close_ok) o = file_error(path, std::string("write failed: ") + std::strerror(errno));
    if (o) {
        std::error_code ec;
        std::filesystem::rename(tmp, path, ec);
        if (ec) o = file_error(path, "cannot rename the finished file into place: " + ec.message());
    }
    if (!o) {
        std::error_code ec;
        std::filesystem::remove(tmp, ec);
        return o.err();
    }
    return file_size();
}

}  // namespace sl

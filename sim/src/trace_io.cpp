// Trace file format v1: fixed little-endian header with CRC32, then per token and stream a varint
// count followed by varint gaps between ascending ids; the payload carries its own CRC32.
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "sparselens/sim/trace.h"

namespace sl::sim {

namespace {

constexpr char magic[8] = {'S', 'L', 'T', 'R', 'A', 'C', 'E', '\x1a'};
constexpr size_t fixed_header = 74;  // bytes before the name and label (see docs/simulator.md)
constexpr uint32_t max_name = 256;
constexpr uint32_t max_label = 65536;

constexpr std::array<uint32_t, 256> crc_table() {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[i] = c;
    }
    return t;
}
constexpr std::array<uint32_t, 256> crc_lut = crc_table();

uint32_t crc32(const uint8_t* p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; ++i) c = crc_lut[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

void put_u16(std::vector<uint8_t>& b, uint16_t v) {
    for (int i = 0; i < 2; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u32(std::vector<uint8_t>& b, uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u64(std::vector<uint8_t>& b, uint64_t v) {
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void set_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_varint(std::vector<uint8_t>& b, uint32_t v) {
    while (v >= 0x80) {
        b.push_back(static_cast<uint8_t>(v | 0x80));
        v >>= 7;
    }
    b.push_back(static_cast<uint8_t>(v));
}

uint16_t get_u16(const uint8_t* p) {
    return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
uint32_t get_u32(const uint8_t* p) {
    return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}
uint64_t get_u64(const uint8_t* p) {
    return uint64_t{get_u32(p)} | (uint64_t{get_u32(p + 4)} << 32);
}

// Bounded LEB128 reader: false on truncation or an over-long / over-large value.
bool get_varint(const uint8_t*& p, const uint8_t* end, uint32_t& out) {
    uint32_t v = 0;
    for (int i = 0; i < 5; ++i) {
        if (p == end) return false;
        const uint8_t byte = *p++;
        if (i == 4 && byte > 0x0f) return false;
        v |= uint32_t{byte & 0x7fu} << (7 * i);
        if (!(byte & 0x80)) {
            out = v;
            return true;
        }
    }
    return false;
}

}  // namespace

std::vector<uint8_t> trace_encode(const trace& t) {
    std::vector<uint8_t> b;
    b.reserve(fixed_header + t.shape.name.size() + t.label.size() + 4 + t.ids.size() * 2 + t.offsets.size());
    for (char c : magic) b.push_back(static_cast<uint8_t>(c));
    put_u32(b, trace_format_version);
    const uint32_t name_len = static_cast<uint32_t>(std::min<size_t>(t.shape.name.size(), max_name));
    const uint32_t label_len = static_cast<uint32_t>(std::min<size_t>(t.label.size(), max_label));
    put_u32(b, static_cast<uint32_t>(fixed_header + name_len + label_len + 4));
    for (int32_t v : {t.shape.dim, t.shape.hidden_dim, t.shape.n_layers, t.shape.n_heads, t.shape.n_kv_heads,
                      t.shape.vocab_size, t.shape.max_context})
        put_u32(b, static_cast<uint32_t>(v));
    b.push_back(t.shape.tied_embeddings ? 1 : 0);
    b.push_back(static_cast<uint8_t>(t.layout.groups.size()));
    put_u16(b, static_cast<uint16_t>(t.shape.head_width));  // was reserved (0): 0 still means dim / n_heads
    for (size_t g = 0; g < 4; ++g)
        b.push_back(g < t.layout.groups.size() ? static_cast<uint8_t>(t.layout.groups[g]) : 0xff);
    put_u32(b, t.n_tokens);
    const size_t payload_size_at = b.size();
    put_u64(b, 0);
    put_u32(b, 0);  // payload CRC, patched below
    put_u16(b, static_cast<uint16_t>(name_len));
    put_u32(b, label_len);
    b.insert(b.end(), t.shape.name.begin(), t.shape.name.begin() + name_len);
    b.insert(b.end(), t.label.begin(), t.label.begin() + label_len);
    const size_t header_crc_at = b.size();
    put_u32(b, 0);

    const size_t payload_at = b.size();
    const size_t rows = t.offsets.size() - 1;
    for (size_t r = 0; r < rows; ++r) {
        const uint64_t lo = t.offsets[r], hi = t.offsets[r + 1];
        put_varint(b, static_cast<uint32_t>(hi - lo));
        uint32_t prev = 0;
        for (uint64_t i = lo; i < hi; ++i) {
            const uint32_t id = t.ids[i];
            put_varint(b, i == lo ? id : id - prev - 1);
            prev = id;
        }
    }
    const uint64_t payload_bytes = b.size() - payload_at;
    for (int i = 0; i < 8; ++i) b[payload_size_at + i] = static_cast<uint8_t>(payload_bytes >> (8 * i));
    set_u32(b, payload_size_at + 8, crc32(b.data() + payload_at, payload_bytes));
    set_u32(b, header_crc_at, crc32(b.data(), header_crc_at));
    return b;
}

result<trace> trace_decode(const uint8_t* data, size_t size, const std::string& name) {
    auto fail = [&](const std::string& what) { return error{name + ": " + what}; };
    if (size < 12) return fail("too short to be a trace (" + std::to_string(size) + " bytes)");
    if (std::memcmp(data, magic, 8) != 0) return fail("not a SparseLens trace (bad magic)");
    const uint32_t version = get_u32(data + 8);
    if (version != trace_format_version)
        return fail("unsupported trace version " + std::to_string(version) + " (this build reads version " +
                    std::to_string(trace_format_version) + ")");
    if (size < fixed_header + 4) return fail("truncated header (" + std::to_string(size) + " bytes)");
    const uint32_t header_bytes = get_u32(data + 12);
    const uint32_t name_len = get_u16(data + 68);
    const uint32_t label_len = get_u32(data + 70);
    if (name_len > max_name || label_len > max_label) return fail("header name or label length out of range");
    if (header_bytes != fixed_header + name_len + label_len + 4) return fail("inconsistent header length");
    if (size < header_bytes)
        return fail("truncated header (" + std::to_string(size) + " of " + std::to_string(header_bytes) + " bytes)");
    if (crc32(data, header_bytes - 4) != get_u32(data + header_bytes - 4)) return fail("header checksum mismatch");

    trace t;
    int32_t* fields[] = {&t.shape.dim,        &t.shape.hidden_dim, &t.shape.n_layers,   &t.shape.n_heads,
                         &t.shape.n_kv_heads, &t.shape.vocab_size, &t.shape.max_context};
    for (size_t i = 0; i < 7; ++i) {
        const uint32_t v = get_u32(data + 16 + 4 * i);
        if (v > INT32_MAX) return fail("shape field out of range");
        *fields[i] = static_cast<int32_t>(v);
    }
    const uint8_t flags = data[44];
    const uint8_t n_groups = data[45];
    if (flags > 1) return fail("unknown header flags");
    t.shape.tied_embeddings = flags & 1;
    t.shape.head_width = get_u16(data + 46);
    t.shape.name.assign(reinterpret_cast<const char*>(data + fixed_header), name_len);
    t.label.assign(reinterpret_cast<const char*>(data + fixed_header + name_len), label_len);
    if (auto o = shape_validate(t.shape, name); !o) return o.err();
    if (n_groups < 1 || n_groups > 4) return fail("unit group count " + std::to_string(n_groups) + " outside [1, 4]");
    t.layout.groups.clear();
    for (uint8_t g = 0; g < n_groups; ++g) {
        if (data[48 + g] >= unit_kind_count) return fail("unknown unit kind " + std::to_string(data[48 + g]));
        t.layout.groups.push_back(static_cast<unit_kind>(data[48 + g]));
    }
    if (auto o = layout_validate(t.layout); !o) return fail(o.message());
    t.n_tokens = get_u32(data + 52);
    const uint64_t payload_bytes = get_u64(data + 56);
    const uint64_t available = size - header_bytes;
    if (payload_bytes != available)
        return fail("payload is " + std::to_string(available) + " bytes but the header says " +
                    std::to_string(payload_bytes) + " (truncated or trailing data)");
    const uint8_t* p = data + header_bytes;
    const uint8_t* end = data + size;
    if (crc32(p, available) != get_u32(data + 64)) return fail("payload checksum mismatch");

    // Every row takes at least one byte, every id at least one: bounds what we may allocate.
    const uint64_t rows = uint64_t{t.n_tokens} * t.n_streams();
    if (rows > payload_bytes) return fail("header claims more rows than the payload can hold");
    t.offsets.assign(1, 0);
    t.offsets.reserve(rows + 1);
    for (uint64_t r = 0; r < rows; ++r) {
        const uint32_t units = t.stream_units(static_cast<uint32_t>(r % t.n_streams()));
        uint32_t count = 0;
        if (!get_varint(p, end, count)) return fail("corrupt count at row " + std::to_string(r));
        if (count > units || count > static_cast<uint64_t>(end - p))
            return fail("row " + std::to_string(r) + " claims " + std::to_string(count) + " active units");
        uint64_t prev = 0;
        for (uint32_t i = 0; i < count; ++i) {
            uint32_t v = 0;
            if (!get_varint(p, end, v)) return fail("corrupt unit id at row " + std::to_string(r));
            const uint64_t id = i == 0 ? uint64_t{v} : prev + 1 + v;
            if (id >= units) return fail("unit id " + std::to_string(id) + " out of range at row " + std::to_string(r));
            t.ids.push_back(static_cast<uint32_t>(id));
            prev = id;
        }
        t.offsets.push_back(t.ids.size());
    }
    if (p != end) return fail(std::to_string(end - p) + " unused bytes after the last row");
    return t;
}

outcome trace_write(const std::string& path, const trace& t) {
    if (auto o = trace_validate(t, path); !o) return o;
    for (unit_kind k : t.layout.groups)
        if (static_cast<uint8_t>(k) >= unit_kind_count)
            return error{path + ": a trace file cannot hold the split layout " + layout_name(t.layout) +
                         " (FFSplit reads every unit every token: replay it in memory or simulate online)"};
    const std::vector<uint8_t> b = trace_encode(t);
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) return error{path + ": cannot open for writing"};
        f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
        if (!f) return error{path + ": write failed"};
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::filesystem::remove(tmp, ec);
        return error{path + ": cannot rename the finished file into place"};
    }
    return {};
}

result<trace> trace_read(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return error{path + ": no such file"};
    const uintmax_t size = std::filesystem::file_size(path, ec);
    if (ec) return error{path + ": cannot read its size"};
    std::ifstream f(path, std::ios::binary);
    if (!f) return error{path + ": cannot open"};
    std::vector<uint8_t> b(static_cast<size_t>(size));
    f.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(size));
    if (static_cast<uintmax_t>(f.gcount()) != size) return error{path + ": short read"};
    return trace_decode(b.data(), b.size(), path);
}

}  // namespace sl::sim

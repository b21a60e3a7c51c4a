// Writing, opening and verifying MLP packs (format: docs/offload.md).
#include "sparselens/sim/offload_pack.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "sparselens/core/calibration.h"
#include "sparselens/core/fingerprint.h"
#include "sparselens/kernels/sparse.h"
#include "sparselens/sim/offload_direct_io.h"

namespace sl::offload {

namespace {

constexpr char k_magic[8] = {'S', 'L', 'P', 'A', 'C', 'K', '\x1a', '\n'};
constexpr uint32_t k_max_groups = 4;
constexpr uint32_t k_max_index = 1u << 20;

uint64_t align_up(uint64_t v) { return (v + pack_align - 1) / pack_align * pack_align; }

const tensor_view& matrix_of(const layer_weights& lw, uint8_t i) { return i == 0 ? lw.w_gate : i == 1 ? lw.w_up : lw.w_down; }

struct writer {
    std::vector<uint8_t> b;
    template <class T>
    void put(T v) {
        const auto* p = reinterpret_cast<const uint8_t*>(&v);
        b.insert(b.end(), p, p + sizeof(T));
    }
};

struct reader {
    const uint8_t* p;
    size_t n, at = 0;
    bool ok = true;
    template <class T>
    T get() {
        T v{};
        if (at + sizeof(T) > n) {
            ok = false;
            return v;
        }
        std::memcpy(&v, p + at, sizeof(T));
        at += sizeof(T);
        return v;
    }
};

std::vector<uint8_t> index_bytes(const pack_info& p) {
    writer w;
    w.b.insert(w.b.end(), k_magic, k_magic + 8);
    w.put(pack_version);
    w.put<uint64_t>(p.data_offset);
    w.put<uint64_t>(p.file_bytes);
    w.b.insert(w.b.end(), p.model_sha256.begin(), p.model_sha256.end());
    w.put<uint64_t>(p.model_file_bytes);
    w.put(p.dim);
    w.put(p.hidden);
    w.put(p.n_layers);
    w.put(static_cast<uint32_t>(p.groups.size()));
    for (const pack_group& g : p.groups) {
        w.put(static_cast<uint8_t>(g.kind));
        w.put(g.units);
    }
    for (const pack_region& r : p.regions) {
        w.put(r.offset);
        w.put(r.bytes);
        w.put(r.checksum);
        w.put(r.unit_bytes);
        w.put(static_cast<uint32_t>(r.segments.size()));
        for (const pack_segment& s : r.segments) {
            w.put(s.matrix);
            w.put(static_cast<uint8_t>(s.cols_major));
            w.put(static_cast<uint8_t>(s.type));
            w.put(s.len);
        }
    }
    w.put(fnv1a64(w.b.data(), w.b.size()));
    return w.b;
}

}  // namespace

uint64_t pack_info::mlp_bytes() const {
    uint64_t s = 0;
    for (const pack_region& r : regions) s += r.bytes;
    return s;
}

uint64_t pack_unit_bytes(const std::vector<pack_segment>& segments) {
    uint64_t b = 0;
    for (const pack_segment& s : segments) b += s.bytes();
    return b;
}

std::vector<pack_segment> pack_segments(sim::unit_kind kind, const model& m, size_t layer) {
    const layer_weights& lw = m.layers[layer];
    auto row = [&](uint8_t i) { return pack_segment{i, false, matrix_of(lw, i).type, matrix_of(lw, i).cols}; };
    auto col = [&](uint8_t i) {
        const tensor_view& w = matrix_of(lw, i);
        return pack_segment{i, true, kernels::input_major_type(w), w.rows};
    };
    using k = sim::unit_kind;
    switch (kind) {
        case k::neuron_bundle: return {row(0), row(1), col(2)};
        case k::up_down_bundle: return {row(1), col(2)};
        case k::gate_row: return {row(0)};
        case k::up_row: return {row(1)};
        case k::down_column: return {col(2)};
        case k::input_column_pair: return {col(1), col(0)};
        case k::up_column: return {col(1)};
        case k::gate_column: return {col(0)};
        case k::split_heavy:
        case k::split_light: break;  // FFSplit layouts are not packed
    }
    return {};
}

std::string pack_layout_tag(const sim::mlp_layout& l) {
    for (const char* name : {"dip", "bundle", "cats"})
        if (auto p = sim::layout_parse(name); p && p->groups == l.groups) return name;
    std::string tag = sim::layout_name(l);
    std::replace(tag.begin(), tag.end(), ',', '+');
    return tag;
}

std::string pack_default_path(const std::string& model_path, const sim::mlp_layout& layout) {
    return model_path + "." + pack_layout_tag(layout) + ".slpack";
}

outcome pack_write(const model& m, const std::string& model_path, const sim::mlp_layout& layout,
                   const std::string& out_path, const progress_fn& progress) {
    if (m.layers.empty()) return error{model_path + ": model has no layers"};
    if (auto v = sim::layout_validate(layout); !v) return v.err();
    auto sha = sha256_file(model_path, [&](float f) { return !progress || progress(0.1f * f); });
    if (!sha) return sha.err();
    pack_info p;
    p.model_sha256 = *sha;
    p.model_file_bytes = std::filesystem::file_size(model_path);
    p.dim = m.hp.dim;
    p.hidden = m.hp.hidden_dim;
    p.n_layers = static_cast<int32_t>(m.layers.size());
    p.layout = sim::layout_name(layout);
    const sim::model_shape shape = sim::shape_from_model(m);
    for (sim::unit_kind kind : layout.groups) p.groups.push_back({kind, sim::unit_kind_units(kind, shape), 0});
    // Offsets first (the index size does not depend on them), then the data.
    p.regions.resize(p.groups.size() * m.layers.size());
    for (size_t i = 0; i < p.regions.size(); ++i) {
        pack_region& r = p.regions[i];
        pack_group& g = p.groups[i % p.groups.size()];
        r.segments = pack_segments(g.kind, m, i / p.groups.size());
        r.unit_bytes = pack_unit_bytes(r.segments);
        r.bytes = r.unit_bytes * g.units;
        g.max_unit_bytes = std::max(g.max_unit_bytes, r.unit_bytes);
    }
    const uint64_t index_size = index_bytes(p).size();
    p.data_offset = align_up(index_size);
    uint64_t at = p.data_offset;
    for (pack_region& r : p.regions) {
        r.offset = at;
        at = align_up(at + r.bytes);
    }
    p.file_bytes = at;

    const std::string tmp = out_path + ".part";
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) return error{out_path + ": cannot write: " + std::strerror(errno)};
    auto fail = [&](const std::string& msg, bool cancelled = false) {
        std::fclose(f);
        std::remove(tmp.c_str());
        return outcome(error{msg, cancelled});
    };
    std::vector<uint8_t> region;
    for (size_t l = 0; l < m.layers.size(); ++l) {
        const layer_weights& lw = m.layers[l];
        kernels::owned_matrix cols[3];
        for (size_t gi = 0; gi < p.groups.size(); ++gi) {
            const pack_group& g = p.groups[gi];
            pack_region& r = p.regions[l * p.groups.size() + gi];
            for (const pack_segment& s : r.segments)
                if (s.cols_major && cols[s.matrix].bytes.empty())
                    cols[s.matrix] = kernels::to_input_major(matrix_of(lw, s.matrix), s.type);
            region.assign(align_up(r.bytes), 0);
            for (uint32_t u = 0; u < g.units; ++u) {
                uint8_t* dst = region.data() + uint64_t{u} * r.unit_bytes;
                for (const pack_segment& s : r.segments) {
                    const tensor_view& v = s.cols_major ? cols[s.matrix].view : matrix_of(lw, s.matrix);
                    std::memcpy(dst, v.row(u), s.bytes());
                    dst += s.bytes();
                }
            }
            r.checksum = fnv1a64(region.data(), r.bytes);
            if (std::fseek(f, static_cast<long>(r.offset), SEEK_SET) != 0 ||
                std::fwrite(region.data(), 1, region.size(), f) != region.size())
                return fail(out_path + ": write failed: " + std::strerror(errno));
        }
        if (progress && !progress(0.1f + 0.9f * static_cast<float>(l + 1) / static_cast<float>(m.layers.size())))
            return fail(out_path + ": pack cancelled", true);
    }
    const std::vector<uint8_t> idx = index_bytes(p);
    if (std::fseek(f, 0, SEEK_SET) != 0 || std::fwrite(idx.data(), 1, idx.size(), f) != idx.size() ||
        std::fflush(f) != 0 || ::fsync(fileno(f)) != 0)
        return fail(out_path + ": write failed: " + std::strerror(errno));
    std::fclose(f);
    std::error_code ec;
    std::filesystem::rename(tmp, out_path, ec);
    if (ec) {
        std::remove(tmp.c_str());
        return error{out_path + ": cannot rename the finished pack: " + ec.message()};
    }
    return {};
}

result<pack_info> pack_open(const std::string& path, const model& m, const std::string& model_sha256) {
    auto bad = [&](const std::string& what) { return error{path + ": " + what}; };
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f)
        return bad(errno == ENOENT ? "no such pack (write it with `sparselens pack MODEL --config C`)"
                                   : std::string("cannot open: ") + std::strerror(errno));
    std::vector<uint8_t> head(k_max_index);
    const size_t got = std::fread(head.data(), 1, head.size(), f);
    std::fclose(f);
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(path, ec);
    if (got < 8 || std::memcmp(head.data(), k_magic, 8) != 0) return bad("not a SparseLens MLP pack (bad magic)");
    reader r{head.data(), got, 8};
    pack_info p;
    p.path = path;
    const uint32_t version = r.get<uint32_t>();
    if (version < pack_version)
        return bad("stale pack (format version " + std::to_string(version) + ", this build writes " +
                   std::to_string(pack_version) + "): run `sparselens pack` again");
    if (version != pack_version)
        return bad("pack version " + std::to_string(version) + " is not supported (this build reads " +
                   std::to_string(pack_version) + ")");
    p.data_offset = r.get<uint64_t>();
    p.file_bytes = r.get<uint64_t>();
    if (r.at + 64 > got) return bad("index truncated");
    p.model_sha256.assign(reinterpret_cast<const char*>(head.data() + r.at), 64);
    r.at += 64;
    p.model_file_bytes = r.get<uint64_t>();
    p.dim = r.get<int32_t>();
    p.hidden = r.get<int32_t>();
    p.n_layers = r.get<int32_t>();
    const uint32_t n_groups = r.get<uint32_t>();
    if (!r.ok || n_groups == 0 || n_groups > k_max_groups) return bad("index truncated or corrupted");
    if (p.dim != m.hp.dim || p.hidden != m.hp.hidden_dim || p.n_layers != static_cast<int32_t>(m.layers.size()))
        return bad("pack is for a model of shape dim " + std::to_string(p.dim) + ", hidden " + std::to_string(p.hidden) +
                   ", " + std::to_string(p.n_layers) + " layers, not this one");
    sim::mlp_layout layout;
    layout.groups.clear();
    const sim::model_shape shape = sim::shape_from_model(m);
    for (uint32_t gi = 0; gi < n_groups && r.ok; ++gi) {
        pack_group g;
        const uint8_t kind = r.get<uint8_t>();
        g.units = r.get<uint32_t>();
        if (kind >= sim::unit_kind_count) return bad("index corrupted (unit group)");
        g.kind = static_cast<sim::unit_kind>(kind);
        if (g.units != sim::unit_kind_units(g.kind, shape))
            return bad("unit layout differs from this model's weights (stale or foreign pack)");
        layout.groups.push_back(g.kind);
        p.groups.push_back(g);
    }
    p.layout = sim::layout_name(layout);
    p.regions.resize(static_cast<size_t>(p.n_layers) * n_groups);
    for (size_t i = 0; i < p.regions.size() && r.ok; ++i) {
        pack_region& reg = p.regions[i];
        reg.offset = r.get<uint64_t>();
        reg.bytes = r.get<uint64_t>();
        reg.checksum = r.get<uint64_t>();
        reg.unit_bytes = r.get<uint64_t>();
        const uint32_t n_seg = r.get<uint32_t>();
        if (!r.ok || n_seg == 0 || n_seg > 3) return bad("index truncated or corrupted (region " + std::to_string(i) + ")");
        for (uint32_t k = 0; k < n_seg && r.ok; ++k) {
            pack_segment seg;
            seg.matrix = r.get<uint8_t>();
            seg.cols_major = r.get<uint8_t>() != 0;
            seg.type = static_cast<dtype>(r.get<uint8_t>());
            seg.len = r.get<int64_t>();
            reg.segments.push_back(seg);
        }
        // The layout must be exactly what this build writes for this layer (types, lengths, sizes).
        pack_group& g = p.groups[i % n_groups];
        const std::vector<pack_segment> want = pack_segments(g.kind, m, i / n_groups);
        bool same = want.size() == reg.segments.size();
        for (size_t k = 0; same && k < want.size(); ++k)
            same = want[k].matrix == reg.segments[k].matrix && want[k].cols_major == reg.segments[k].cols_major &&
                   want[k].type == reg.segments[k].type && want[k].len == reg.segments[k].len;
        if (r.ok && (!same || pack_unit_bytes(want) != reg.unit_bytes))
            return bad("unit layout of layer " + std::to_string(i / n_groups) +
                       " differs from this model's weights (stale or foreign pack): run `sparselens pack` again");
        g.max_unit_bytes = std::max(g.max_unit_bytes, reg.unit_bytes);
    }
    const size_t body = r.at;
    const uint64_t sum = r.get<uint64_t>();
    if (!r.ok) return bad("index truncated");
    if (sum != fnv1a64(head.data(), body)) return bad("index checksum mismatch (corrupted pack)");
    if (size != p.file_bytes)
        return bad("file is " + std::to_string(size) + " bytes, the index says " + std::to_string(p.file_bytes) +
                   " (truncated or modified pack)");
    for (size_t i = 0; i < p.regions.size(); ++i) {
        const pack_region& reg = p.regions[i];
        const pack_group& g = p.groups[i % n_groups];
        if (reg.offset % pack_align || reg.offset < p.data_offset || reg.bytes != reg.unit_bytes * g.units ||
            reg.offset + reg.bytes > p.file_bytes)
            return bad("index corrupted (region " + std::to_string(i) + ")");
    }
    if (!model_sha256.empty() && model_sha256 != p.model_sha256)
        return bad("pack was made from another model file (sha256 " + p.model_sha256.substr(0, 12) + "… vs " +
                   model_sha256.substr(0, 12) + "…): run `sparselens pack` again");
    return p;
}

outcome pack_verify(const pack_info& p, const progress_fn& progress) {
    auto rd = direct_reader::open(p.path, "auto");
    if (!rd) return rd.err();
    uint64_t largest = 0;
    for (const pack_region& r : p.regions) largest = std::max(largest, align_up(r.bytes));
    aligned_buffer buf(largest);
    if (!buf.data) return error{p.path + ": out of memory verifying the pack"};
    for (size_t i = 0; i < p.regions.size(); ++i) {
        const pack_region& r = p.regions[i];
        const read_request req{r.offset, align_up(r.bytes), buf.data};
        if (auto o = (*rd)->read({&req, 1}); !o) return o;
        if (fnv1a64(buf.data, r.bytes) != r.checksum)
            return error{p.path + ": checksum mismatch in layer " + std::to_string(i / p.groups.size()) +
                         " (modified or corrupted pack): run `sparselens pack` again"};
        if (progress && !progress(static_cast<float>(i + 1) / static_cast<float>(p.regions.size())))
            return error{p.path + ": verification cancelled", true};
    }
    return {};
}

}  // namespace sl::offload

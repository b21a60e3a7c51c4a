// Calibration file format: magic, version, JSON header with an array index, binary payload, FNV-1a checksum.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "sparselens/core/calibration.h"

namespace sl {

namespace {

using nlohmann::json;

constexpr char magic[8] = {'S', 'L', 'C', 'A', 'L', 'I', 'B', '\0'};
constexpr uint64_t max_file_bytes = uint64_t{1} << 36;

template <class T>
void put_le(std::vector<uint8_t>& out, T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));  // the format is little-endian, as is every supported host
    out.insert(out.end(), b, b + sizeof(T));
}

template <class T>
T get_le(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

std::string layer_key(size_t l, const char* field) { return "L" + std::to_string(l) + "." + field; }

// Appends arrays to the payload (8-byte aligned) and records them in the JSON index.
struct payload_writer {
    std::vector<uint8_t> bytes;
    json index = json::array();

    template <class T>
    void put(const std::string& name, const char* type, const std::vector<T>& v) {
        while (bytes.size() % 8) bytes.push_back(0);
        index.push_back({{"name", name}, {"type", type}, {"offset", bytes.size()}, {"count", v.size()}});
        const auto* p = reinterpret_cast<const uint8_t*>(v.data());
        bytes.insert(bytes.end(), p, p + v.size() * sizeof(T));
    }
};

struct array_ref {
    std::string type;
    uint64_t offset = 0, count = 0;
};

// Reads the header fields and arrays; any inconsistency throws bad_file with a message.
struct bad_file {
    std::string what;
};

class reader {
public:
    reader(const json& header, std::span<const uint8_t> payload) : m_payload(payload) {
        const json& idx = field(header, "arrays");
        if (!idx.is_array()) throw bad_file{"'arrays' is not a list"};
        for (const json& a : idx) {
            const std::string name = get<std::string>(a, "name");
            array_ref r{get<std::string>(a, "type"), get<uint64_t>(a, "offset"), get<uint64_t>(a, "count")};
            const uint64_t elem = r.type == "f32" ? 4 : r.type == "u64" ? 8 : 0;
            if (elem == 0) throw bad_file{"array '" + name + "' has unknown type '" + r.type + "'"};
            if (r.offset > payload.size() || r.count > (payload.size() - r.offset) / elem)
                throw bad_file{"array '" + name + "' [" + std::to_string(r.offset) + " + " + std::to_string(r.count) +
                               " x " + std::to_string(elem) + ") exceeds the payload of " + std::to_string(payload.size()) + " bytes"};
            if (!m_arrays.emplace(name, r).second) throw bad_file{"array '" + name + "' appears twice"};
        }
    }

    static const json& field(const json& j, const char* key) {
        if (!j.is_object() || !j.contains(key)) throw bad_file{std::string("missing field '") + key + "'"};
        return j.at(key);
    }

    template <class T>
    static T get(const json& j, const char* key) {
        const json& v = field(j, key);
        if constexpr (std::is_same_v<T, std::string>) {
            if (!v.is_string()) throw bad_file{std::string("field '") + key + "' is not a string"};
        } else if constexpr (std::is_floating_point_v<T>) {
            if (!v.is_number()) throw bad_file{std::string("field '") + key + "' is not a number"};
        } else if constexpr (std::is_unsigned_v<T>) {
            if (!v.is_number_unsigned() || v.get<uint64_t>() > std::numeric_limits<T>::max())
                throw bad_file{std::string("field '") + key + "' is not a non-negative integer in range"};
        } else {
            if (!v.is_number_integer()) throw bad_file{std::string("field '") + key + "' is not an integer"};
            const int64_t x = v.get<int64_t>();
            if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max())
                throw bad_file{std::string("field '") + key + "' is out of range"};
        }
        return v.get<T>();
    }

    template <class T>
    std::vector<T> array(const std::string& name, const char* type, uint64_t expect_count, bool exact = true) const {
        const auto it = m_arrays.find(name);
        if (it == m_arrays.end()) throw bad_file{"array '" + name + "' is missing"};
        const array_ref& r = it->second;
        if (r.type != type) throw bad_file{"array '" + name + "' has type " + r.type + ", expected " + type};
        if (exact ? r.count != expect_count : r.count > expect_count)
            throw bad_file{"array '" + name + "' has " + std::to_string(r.count) + " entries, expected " +
                           (exact ? "" : "at most ") + std::to_string(expect_count)};
        std::vector<T> v(r.count);
        std::memcpy(v.data(), m_payload.data() + r.offset, r.count * sizeof(T));
        return v;
    }

private:
    std::span<const uint8_t> m_payload;
    std::map<std::string, array_ref> m_arrays;
};

json float_list(std::span<const float> v) { return json(std::vector<float>(v.begin(), v.end())); }

template <size_t N>
std::array<float, N> fixed_floats(const json& j, const char* key, float lo, float hi) {
    const json& v = reader::field(j, key);
    if (!v.is_array() || v.size() != N) throw bad_file{std::string("field '") + key + "' is not a list of " + std::to_string(N)};
    std::array<float, N> out{};
    for (size_t i = 0; i < N; ++i) {
        if (!v[i].is_number()) throw bad_file{std::string("field '") + key + "' holds a non-number"};
        out[i] = v[i].get<float>();
        if (!(out[i] >= lo && out[i] <= hi)) throw bad_file{std::string("field '") + key + "' holds an out-of-range value"};
    }
    return out;
}

calibration parse(const json& h, std::span<const uint8_t> payload) {
    reader rd(h, payload);
    calibration cal;
    const json& mj = reader::field(h, "model");
    calibration_fingerprint& f = cal.model;
    f.model_path = reader::get<std::string>(mj, "path");
    f.model_format = reader::get<std::string>(mj, "format");
    f.model_name = reader::get<std::string>(mj, "name");
    f.file_bytes = reader::get<uint64_t>(mj, "file_bytes");
    f.dim = reader::get<int32_t>(mj, "dim");
    f.hidden_dim = reader::get<int32_t>(mj, "hidden_dim");
    f.n_layers = reader::get<int32_t>(mj, "n_layers");
    f.n_heads = reader::get<int32_t>(mj, "n_heads");
    f.n_kv_heads = reader::get<int32_t>(mj, "n_kv_heads");
    f.vocab_size = reader::get<int32_t>(mj, "vocab_size");
    f.weights_hash = reader::get<uint64_t>(mj, "weights_hash");
    if (f.dim <= 0 || f.hidden_dim <= 0 || f.n_layers <= 0 || f.n_layers > 65536)
        throw bad_file{"model shape dim " + std::to_string(f.dim) + ", hidden " + std::to_string(f.hidden_dim) + ", " +
                       std::to_string(f.n_layers) + " layers is not valid"};

    cal.n_ctx = reader::get<int32_t>(h, "n_ctx");
    cal.bos_id = reader::get<int32_t>(h, "bos_id");
    // Absent in files written before architectures other than Llama's: those are SiLU.
    if (h.contains("activation")) {
        const std::string act = reader::get<std::string>(h, "activation");
        if (act != "silu" && act != "gelu_tanh") throw bad_file{"activation '" + act + "' is not silu or gelu_tanh"};
        cal.act = act == "silu" ? glu_activation::silu : glu_activation::gelu_tanh;
    }
    cal.hist_octave_bits = reader::get<int32_t>(h, "hist_octave_bits");
    cal.n_tokens = reader::get<int64_t>(h, "n_tokens");
    cal.n_windows = reader::get<int32_t>(h, "n_windows");
    cal.text_hash = reader::get<uint64_t>(h, "text_hash");
    cal.created = reader::get<std::string>(h, "created");
    cal.seconds = reader::get<double>(h, "seconds");
    if (cal.n_ctx < 4 || cal.n_windows <= 0 || cal.n_tokens != int64_t{cal.n_windows} * cal.n_ctx)
        throw bad_file{"token counts (" + std::to_string(cal.n_windows) + " windows of " + std::to_string(cal.n_ctx) + ", " +
                       std::to_string(cal.n_tokens) + " tokens) are inconsistent"};
    if (cal.hist_octave_bits < 4 || cal.hist_octave_bits > 10) throw bad_file{"histogram resolution is outside 4..10"};
    if (fixed_floats<calibration_topk_densities.size()>(h, "topk_densities", 0, 1) != calibration_topk_densities ||
        fixed_floats<calibration_flock_fractions.size()>(h, "flock_fractions", 0, 1) != calibration_flock_fractions)
        throw bad_file{"top-k densities or flocking fractions differ from this version's"};

    const json& lj = reader::field(h, "layers");
    if (!lj.is_array() || lj.size() != static_cast<size_t>(f.n_layers))
        throw bad_file{"'layers' does not list " + std::to_string(f.n_layers) + " layers"};
    const auto dim = static_cast<uint64_t>(f.dim), hidden = static_cast<uint64_t>(f.hidden_dim);
    const uint64_t max_bins = uint64_t{0x7f800000u} >> (23 - cal.hist_octave_bits);
    cal.layers.resize(static_cast<size_t>(f.n_layers));
    for (size_t l = 0; l < cal.layers.size(); ++l) {
        layer_calibration& c = cal.layers[l];
        const json& L = lj[l];
        c.flock_within = fixed_floats<calibration_flock_fractions.size()>(L, "flock_within", 0, 1);
        c.flock_between = fixed_floats<calibration_flock_fractions.size()>(L, "flock_between", 0, 1);
        const json& hj = reader::field(L, "hist");
        for (int s = 0; s < hist_slot_count; ++s) {
            const std::string name(hist_slot_name(static_cast<hist_slot>(s)));
            const json& e = reader::field(hj, name.c_str());
            const auto first = reader::get<uint32_t>(e, "first_bin");
            const auto zeros = reader::get<uint64_t>(e, "zeros");
            const auto nonfinite = reader::get<uint64_t>(e, "nonfinite");
            const auto max_abs = reader::get<float>(e, "max_abs");
            auto counts = rd.array<uint64_t>(layer_key(l, ("hist." + name).c_str()), "u64", max_bins, false);
            if (!c.hist[static_cast<size_t>(s)].assign(cal.hist_octave_bits, first, std::move(counts), zeros, nonfinite, max_abs))
                throw bad_file{"layer " + std::to_string(l) + " histogram " + name + " is inconsistent"};
        }
        // Every histogram holds one entry per token and channel; the signed gate pair shares them.
        auto entries = [&c](hist_slot s) {
            const magnitude_histogram& hg = c.hist[static_cast<size_t>(s)];
            return hg.count() + hg.nonfinite();
        };
        for (int s = 0; s <= static_cast<int>(hist_slot::gate_pre_pos); ++s) {
            const auto slot = static_cast<hist_slot>(s);
            const uint64_t width = s <= static_cast<int>(hist_slot::mlp_in) ? dim : hidden;
            const uint64_t got = slot == hist_slot::gate_pre_pos ? entries(slot) + entries(hist_slot::gate_pre_neg) : entries(slot);
            if (got != static_cast<uint64_t>(cal.n_tokens) * width)
                throw bad_file{"layer " + std::to_string(l) + " histogram " + std::string(hist_slot_name(slot)) + " holds " +
                               std::to_string(got) + " entries, expected " + std::to_string(static_cast<uint64_t>(cal.n_tokens) * width)};
        }
        auto f32 = [&](const char* field, uint64_t n) { return rd.array<float>(layer_key(l, field), "f32", n); };
        c.mean_abs_up = f32("mean_abs_up", hidden);
        c.mean_abs_gate_act = f32("mean_abs_gate_act", hidden);
        c.mean_abs_glu = f32("mean_abs_glu", hidden);
        c.mean_sq_glu = f32("mean_sq_glu", hidden);
        c.down_col_norm = f32("down_col_norm", hidden);
        c.heavy_hitter = f32("heavy_hitter", hidden);
        for (size_t i = 0; i < c.topk_freq.size(); ++i)
            c.topk_freq[i] = f32(("topk_freq" + std::to_string(i)).c_str(), hidden);
        c.mlp_in_mean_abs = f32("mlp_in_mean_abs", dim);
        c.mlp_in_max_abs = f32("mlp_in_max_abs", dim);
        c.attn_in_mean_abs = f32("attn_in_mean_abs", dim);
        c.attn_in_max_abs = f32("attn_in_max_abs", dim);
    }
    return cal;
}

}  // namespace

std::vector<uint8_t> calibration_serialize(const calibration& cal) {
    payload_writer pw;
    json layers = json::array();
    for (size_t l = 0; l < cal.layers.size(); ++l) {
        const layer_calibration& c = cal.layers[l];
        json hist = json::object();
        for (int s = 0; s < hist_slot_count; ++s) {
            const magnitude_histogram& hg = c.hist[static_cast<size_t>(s)];
            const std::string name(hist_slot_name(static_cast<hist_slot>(s)));
            hist[name] = {{"first_bin", hg.first_bin()}, {"zeros", hg.zeros()}, {"nonfinite", hg.nonfinite()},
                          {"max_abs", hg.max_abs()}};
            pw.put(layer_key(l, ("hist." + name).c_str()), "u64", hg.counts());
        }
        layers.push_back({{"flock_within", float_list(c.flock_within)}, {"flock_between", float_list(c.flock_between)},
                          {"hist", hist}});
        pw.put(layer_key(l, "mean_abs_up"), "f32", c.mean_abs_up);
        pw.put(layer_key(l, "mean_abs_gate_act"), "f32", c.mean_abs_gate_act);
        pw.put(layer_key(l, "mean_abs_glu"), "f32", c.mean_abs_glu);
        pw.put(layer_key(l, "mean_sq_glu"), "f32", c.mean_sq_glu);
        pw.put(layer_key(l, "down_col_norm"), "f32", c.down_col_norm);
        pw.put(layer_key(l, "heavy_hitter"), "f32", c.heavy_hitter);
        for (size_t i = 0; i < c.topk_freq.size(); ++i)
            pw.put(layer_key(l, ("topk_freq" + std::to_string(i)).c_str()), "f32", c.topk_freq[i]);
        pw.put(layer_key(l, "mlp_in_mean_abs"), "f32", c.mlp_in_mean_abs);
        pw.put(layer_key(l, "mlp_in_max_abs"), "f32", c.mlp_in_max_abs);
        pw.put(layer_key(l, "attn_in_mean_abs"), "f32", c.attn_in_mean_abs);
        pw.put(layer_key(l, "attn_in_max_abs"), "f32", c.attn_in_max_abs);
    }
    const calibration_fingerprint& f = cal.model;
    const json header = {
        {"format", "sparselens-calibration"},
        {"model",
         {{"path", f.model_path}, {"format", f.model_format}, {"name", f.model_name}, {"file_bytes", f.file_bytes},
          {"dim", f.dim}, {"hidden_dim", f.hidden_dim}, {"n_layers", f.n_layers}, {"n_heads", f.n_heads},
          {"n_kv_heads", f.n_kv_heads}, {"vocab_size", f.vocab_size}, {"weights_hash", f.weights_hash}}},
        {"n_ctx", cal.n_ctx}, {"bos_id", cal.bos_id}, {"hist_octave_bits", cal.hist_octave_bits},
        {"activation", cal.act == glu_activation::gelu_tanh ? "gelu_tanh" : "silu"},
        {"n_tokens", cal.n_tokens}, {"n_windows", cal.n_windows}, {"text_hash", cal.text_hash},
        {"created", cal.created}, {"seconds", cal.seconds},
        {"topk_densities", float_list(calibration_topk_densities)},
        {"flock_fractions", float_list(calibration_flock_fractions)},
        {"layers", layers}, {"arrays", pw.index}};
    // Invalid UTF-8 in a model path must not make the dump throw.
    const std::string hs = header.dump(-1, ' ', false, json::error_handler_t::replace);

    std::vector<uint8_t> out(magic, magic + sizeof magic);
    put_le<uint32_t>(out, calibration_file_version);
    put_le<uint32_t>(out, static_cast<uint32_t>(hs.size()));
    out.insert(out.end(), hs.begin(), hs.end());
    put_le<uint64_t>(out, pw.bytes.size());
    out.insert(out.end(), pw.bytes.begin(), pw.bytes.end());
    put_le<uint64_t>(out, fnv1a64(out.data() + sizeof magic, out.size() - sizeof magic));
    return out;
}

result<calibration> calibration_deserialize(std::span<const uint8_t> b, const std::string& name) {
    auto fail = [&name](const std::string& what) { return error{name + ": " + what}; };
    if (b.size() < sizeof magic || std::memcmp(b.data(), magic, sizeof magic) != 0)
        return fail(b.size() < sizeof magic ? "truncated calibration file (" + std::to_string(b.size()) + " bytes)"
                                            : "not a SparseLens calibration file (bad magic)");
    constexpr size_t fixed = sizeof magic + 4 + 4;
    if (b.size() < fixed + 16) return fail("truncated calibration file (" + std::to_string(b.size()) + " bytes)");
    const auto version = get_le<uint32_t>(b.data() + 8);
    if (version != calibration_file_version)
        return fail("calibration file version " + std::to_string(version) + " is not supported (this build reads " +
                    std::to_string(calibration_file_version) + ")");
    const uint64_t header_bytes = get_le<uint32_t>(b.data() + 12);
    if (header_bytes > b.size() - fixed - 16)
        return fail("truncated calibration file: header of " + std::to_string(header_bytes) + " bytes exceeds the file");
    const uint8_t* pp = b.data() + fixed + header_bytes;
    const uint64_t payload_bytes = get_le<uint64_t>(pp);
    const uint64_t room = b.size() - fixed - header_bytes - 16;
    if (payload_bytes != room)
        return fail(payload_bytes > room ? "truncated calibration file: payload of " + std::to_string(payload_bytes) +
                                               " bytes exceeds the file"
                                         : "calibration file has " + std::to_string(room - payload_bytes) + " trailing bytes");
    const uint64_t stored = get_le<uint64_t>(b.data() + b.size() - 8);
    if (stored != fnv1a64(b.data() + sizeof magic, b.size() - sizeof magic - 8))
        return fail("calibration file checksum mismatch (corrupted)");

    const json header = json::parse(b.data() + fixed, b.data() + fixed + header_bytes, nullptr, false);
    if (header.is_discarded() || !header.is_object()) return fail("calibration header is not valid JSON");
    try {
        if (reader::get<std::string>(header, "format") != "sparselens-calibration")
            return fail("header format is not 'sparselens-calibration'");
        return parse(header, {pp + 8, static_cast<size_t>(payload_bytes)});
    } catch (const bad_file& e) {
        return fail("malformed calibration: " + e.what);
    } catch (const json::exception& e) {
        return fail(std::string("malformed calibration header: ") + e.what());
    }
}

outcome calibration_save(const calibration& cal, const std::string& path) {
    const std::vector<uint8_t> bytes = calibration_serialize(cal);
    const std::string tmp = path + ".partial";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) return error{path + ": cannot write: " + std::strerror(errno)};
        f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        f.close();
        if (!f) {
            std::remove(tmp.c_str());
            return error{path + ": write failed (disk full?)"};
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::remove(tmp.c_str());
        return error{path + ": cannot write: " + ec.message()};
    }
    return outcome::success();
}

result<calibration> calibration_load(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) return error{path + ": is a directory, not a calibration file"};
    const uintmax_t size = std::filesystem::file_size(path, ec);
    if (ec) return error{path + ": cannot open: " + ec.message()};
    if (size > max_file_bytes) return error{path + ": " + std::to_string(size) + " bytes is too large for a calibration file"};
    std::ifstream f(path, std::ios::binary);
    if (!f) return error{path + ": cannot open: " + std::strerror(errno)};
    std::vector<uint8_t> bytes(static_cast<size_t>(size));
    f.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (static_cast<uint64_t>(f.gcount()) != size) return error{path + ": read failed"};
    return calibration_deserialize(bytes, path);
}

}  // namespace sl

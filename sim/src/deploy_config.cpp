// Deployment configs: canonical JSON writer, strict reader, checksummed calibration sidecar, model identity.
#include "sparselens/sim/deploy_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sparselens/core/fingerprint.h"
#include "sparselens/core/text_format.h"
#include "sparselens/sim/memory_map.h"

namespace sl::sim {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

constexpr size_t max_config_bytes = size_t{64} << 20;

// Per-layer values may be infinite (a threshold that keeps nothing); JSON has no infinity.
ojson layer_value_json(float f) {
    if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
    return float_shortest(f);
}

bool is_sha256_hex(const std::string& s) {
    if (s.size() != 64) return false;
    for (char ch : s)
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
    return true;
}

std::string short_hash(const std::string& h) { return h.size() > 12 ? h.substr(0, 12) + "…" : h; }

// At most 40 bytes, cut between UTF-8 sequences: messages stay short and valid UTF-8.
std::string clipped(std::string s) {
    if (s.size() <= 40) return s;
    size_t n = 37;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    return s.substr(0, n) + "...";
}

std::string shown(const ojson& v) { return clipped(v.dump(-1, ' ', false, ojson::error_handler_t::replace)); }

// A string from the file as a message quotes it: control characters escaped (errors are one line), clipped.
std::string quote_text(const std::string& s) {
    const std::string e = ojson(s).dump(-1, ' ', false, ojson::error_handler_t::replace);
    return clipped(e.substr(1, e.size() - 2));
}

struct bad_field : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Strict access to one JSON object: every key must be known, every field present and of its type.
class fields {
public:
    fields(const ojson& j, std::string path) : m_j(j), m_path(std::move(path)) {
        if (!m_j.is_object()) fail(m_path.empty() ? "top level must be a JSON object" : "'" + m_path + "' must be an object");
    }
    [[noreturn]] static void fail(const std::string& what) { throw bad_field(what); }

    void only(std::initializer_list<const char*> keys) const {
        for (auto it = m_j.begin(); it != m_j.end(); ++it) {
            bool known = false;
            for (const char* k : keys) known = known || it.key() == k;
            if (!known) fail("unknown field '" + name(quote_text(it.key()).c_str()) + "'");
        }
    }
    const ojson& at(const char* key) const {
        auto it = m_j.find(key);
        if (it == m_j.end()) fail("missing field '" + name(key) + "'");
        return *it;
    }
    bool has(const char* key) const { return m_j.contains(key); }
    std::string name(const char* key) const { return m_path.empty() ? key : m_path + "." + key; }

    std::string str(const char* key) const {
        const ojson& v = at(key);
        if (!v.is_string()) fail("field '" + name(key) + "' must be a string (got " + shown(v) + ")");
        return v.get<std::string>();
    }
    int64_t integer(const char* key, int64_t lo, int64_t hi) const {
        const ojson& v = at(key);
        if (!v.is_number_integer()) fail("field '" + name(key) + "' must be an integer (got " + shown(v) + ")");
        if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
            fail("field '" + name(key) + "' = " + shown(v) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
        const int64_t x = v.get<int64_t>();
        if (x < lo || x > hi)
            fail("field '" + name(key) + "' = " + std::to_string(x) + " is outside [" + std::to_string(lo) + ", " +
                 std::to_string(hi) + "]");
        return x;
    }
    uint64_t count(const char* key) const {
        const ojson& v = at(key);
        if (!v.is_number_unsigned()) fail("field '" + name(key) + "' must be a non-negative integer (got " + shown(v) + ")");
        return v.get<uint64_t>();
    }
    double number(const char* key, double lo, double hi) const {
        const ojson& v = at(key);
        if (!v.is_number()) fail("field '" + name(key) + "' must be a number (got " + shown(v) + ")");
        const double x = v.get<double>();
        if (!std::isfinite(x) || x < lo || x > hi) {
            std::ostringstream os;
            os << "field '" << name(key) << "' = " << x << " is outside [" << lo << ", " << hi << "]";
            fail(os.str());
        }
        return x;
    }
    float real(const char* key, float lo, float hi) const { return static_cast<float>(number(key, lo, hi)); }
    bool boolean(const char* key) const {
        const ojson& v = at(key);
        if (!v.is_boolean()) fail("field '" + name(key) + "' must be true or false (got " + shown(v) + ")");
        return v.get<bool>();
    }
    std::string sha(const char* key) const {
        std::string s = str(key);
        if (!is_sha256_hex(s)) fail("field '" + name(key) + "' must be 64 lowercase hex digits (SHA-256)");
        return s;
    }
    fields sub(const char* key) const { return fields(at(key), name(key)); }

private:
    const ojson& m_j;
    std::string m_path;
};

ojson device_json(const device_profile& d) {
    ojson aliases = ojson::array();
    for (const std::string& a : d.aliases) aliases.push_back(a);
    ojson j;
    j["name"] = d.name;
    j["display_name"] = d.display_name;
    j["description"] = d.description;
    j["aliases"] = aliases;
    j["dram_bytes"] = d.dram_bytes;
    j["dram_bandwidth"] = d.dram_bandwidth;
    j["flash_bandwidth"] = d.flash_bandwidth;
    j["flash_page_bytes"] = d.flash_page_bytes;
    j["flash_read_latency_s"] = d.flash_read_latency_s;
    j["flash_iops"] = d.flash_iops;
    // Written only when set, so configs of profiles without them stay as they were.
    if (d.flash_batch_latency_s > 0) j["flash_batch_latency_s"] = d.flash_batch_latency_s;
    if (d.flash_merge_gap_pages >= 0) j["flash_merge_gap_pages"] = d.flash_merge_gap_pages;
    j["overlap_io_compute"] = d.overlap_io_compute;
    return j;
}

device_profile device_from(const fields& f) {
    f.only({"name", "display_name", "description", "aliases", "dram_bytes", "dram_bandwidth", "flash_bandwidth",
            "flash_page_bytes", "flash_read_latency_s", "flash_iops", "flash_batch_latency_s",
            "flash_merge_gap_pages", "overlap_io_compute"});
    device_profile d;
    d.name = f.str("name");
    if (d.name.empty()) fields::fail("field 'device.name' must not be empty (use null for no device)");
    d.display_name = f.str("display_name");
    d.description = f.str("description");
    const ojson& aliases = f.at("aliases");
    if (!aliases.is_array()) fields::fail("field 'device.aliases' must be an array of strings");
    for (const ojson& a : aliases) {
        if (!a.is_string()) fields::fail("field 'device.aliases' must be an array of strings (got " + shown(a) + ")");
        d.aliases.push_back(a.get<std::string>());
    }
    d.dram_bytes = f.count("dram_bytes");
    d.dram_bandwidth = f.number("dram_bandwidth", 0, 1e18);
    d.flash_bandwidth = f.number("flash_bandwidth", 0, 1e18);
    d.flash_page_bytes = static_cast<uint32_t>(f.integer("flash_page_bytes", 0, int64_t{1} << 30));
    d.flash_read_latency_s = f.number("flash_read_latency_s", 0, 10);
    d.flash_iops = f.number("flash_iops", 0, 1e15);
    if (f.has("flash_batch_latency_s")) d.flash_batch_latency_s = f.number("flash_batch_latency_s", 0, 10);
    if (f.has("flash_merge_gap_pages"))
        d.flash_merge_gap_pages = static_cast<int32_t>(f.integer("flash_merge_gap_pages", -1, 1 << 20));
    d.overlap_io_compute = f.boolean("overlap_io_compute");
    if (outcome o = device_validate(d, "device"); !o) fields::fail(o.message());
    return d;
}

outcome write_file(const std::string& path, const void* data, size_t n) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) return error{path + ": cannot open for writing"};
        f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
        if (!f.flush()) return error{path + ": write failed"};
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
        fs::remove(tmp, ec);
        return error{path + ": cannot replace the file"};
    }
    return {};
}

result<std::vector<uint8_t>> read_file(const std::string& path, size_t limit, const char* what) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) return error{path + ": no such file"};
    const auto size = fs::file_size(path, ec);
    if (ec) return error{path + ": cannot read its size"};
    if (size > limit) return error{path + ": larger than " + std::to_string(limit >> 20) + " MiB, not " + what};
    std::ifstream f(path, std::ios::binary);
    if (!f) return error{path + ": cannot open"};
    std::vector<uint8_t> bytes(static_cast<size_t>(size));
    f.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (f.gcount() != static_cast<std::streamsize>(bytes.size())) return error{path + ": read failed"};
    return bytes;
}

}  // namespace

std::string deploy_default_layout(const std::string& method) {
    return method == "dip" || method == "dip-ca" ? "dip" : "bundle";
}

std::string deploy_sidecar_path(const std::string& config_path) {
    fs::path p(config_path);
    p.replace_extension(".calib");
    return p.string();
}

result<deploy_model> deploy_model_identity(const std::string& model_path, const model& m, const progress_fn& progress) {
    auto sha = sha256_file(model_path, progress);
    if (!sha) return sha.err();
    deploy_model id;
    id.file_name = fs::path(model_path).filename().string();
    std::error_code ec;
    id.file_bytes = fs::file_size(model_path, ec);
    if (ec) return error{model_path + ": cannot read its size"};
    id.sha256 = std::move(sha).value();
    id.format = m.format;
    id.dim = m.hp.dim;
    id.hidden_dim = m.hp.hidden_dim;
    id.n_layers = m.hp.n_layers;
    id.n_heads = m.hp.n_heads;
    id.n_kv_heads = m.hp.n_kv_heads;
    id.vocab_size = m.hp.vocab_size;
    id.seq_len = m.hp.seq_len;
    return id;
}

outcome deploy_config_matches(const deploy_config& c, const deploy_model& id, bool allow_other_weights) {
    const deploy_model& w = c.model;
    const std::pair<const char*, std::pair<int32_t, int32_t>> shape[] = {
        {"dim", {w.dim, id.dim}},           {"hidden_dim", {w.hidden_dim, id.hidden_dim}},
        {"n_layers", {w.n_layers, id.n_layers}}, {"n_heads", {w.n_heads, id.n_heads}},
        {"n_kv_heads", {w.n_kv_heads, id.n_kv_heads}}, {"vocab_size", {w.vocab_size, id.vocab_size}},
        {"seq_len", {w.seq_len, id.seq_len}}};
    for (const auto& [name, v] : shape)
        if (v.first != v.second)
            return error{"config is for a model with " + std::string(name) + " " + std::to_string(v.first) +
                         ", this model has " + std::to_string(v.second)};
    if (w.sha256 != id.sha256 && !allow_other_weights)
        return error{"model file differs from the one tuned (sha256 " + short_hash(w.sha256) + " vs " +
                     short_hash(id.sha256) + ", " + w.file_name + " vs " + id.file_name +
                     "); pass --allow-other-weights to use it anyway"};
    return {};
}

std::string deploy_config_to_json(const deploy_config& c) {
    ojson j;
    j["schema"] = deploy_config_schema;
    j["version"] = c.version;
    j["created"] = c.created;
    j["tool"] = c.tool;
    j["note"] = c.note;

    const deploy_model& m = c.model;
    ojson mj;
    mj["file_name"] = m.file_name;
    mj["file_bytes"] = m.file_bytes;
    mj["sha256"] = m.sha256;
    mj["format"] = m.format;
    mj["dim"] = m.dim;
    mj["hidden_dim"] = m.hidden_dim;
    mj["n_layers"] = m.n_layers;
    mj["n_heads"] = m.n_heads;
    mj["n_kv_heads"] = m.n_kv_heads;
    mj["vocab_size"] = m.vocab_size;
    mj["seq_len"] = m.seq_len;
    j["model"] = mj;

    const method_config& mc = c.method;
    ojson me;
    me["name"] = mc.name;
    me["density"] = float_shortest(mc.density);
    me["d_in"] = float_shortest(mc.d_in);
    me["d_down"] = float_shortest(mc.d_down);
    me["gamma"] = float_shortest(mc.gamma);
    me["attn_density"] = float_shortest(mc.attn_density);
    me["rank"] = mc.rank;
    me["pin_fraction"] = float_shortest(mc.pin_fraction);
    me["ffsplit_mode"] = mc.ffsplit_mode;
    me["ffsplit_heavy"] = float_shortest(mc.ffsplit_heavy);
    j["method"] = me;

    ojson pl = ojson::object();
    for (const auto& [name, values] : c.per_layer) {
        ojson a = ojson::array();
        for (float v : values) a.push_back(layer_value_json(v));
        pl[name] = a;
    }
    j["per_layer"] = pl;

    if (c.calibration_file.empty())
        j["calibration"] = nullptr;
    else
        j["calibration"] = ojson{{"file", c.calibration_file}, {"sha256", c.calibration_sha256}};
    j["device"] = c.has_device() ? device_json(c.device) : ojson(nullptr);
    ojson s;
    s["policy"] = cache_policy_name(c.policy);
    s["window_tokens"] = c.window_tokens;
    s["bits"] = c.bits;
    s["group_size"] = c.group_size;
    s["scale_bits"] = c.scale_bits;
    s["embedding_bits"] = c.embedding_bits;
    s["context_tokens"] = c.context_tokens;
    s["layout"] = c.layout.empty() ? deploy_default_layout(mc.name) : c.layout;
    s["cache_fraction"] = float_shortest(c.cache_fraction);
    j["simulation"] = s;

    const deploy_expectations& e = c.expected;
    ojson ej;
    ej["eval_text"] = e.eval_text;
    ej["eval_text_sha256"] = e.eval_text_sha256;
    ej["n_ctx"] = e.n_ctx;
    ej["windows"] = e.windows;
    ej["offset"] = e.offset;
    ej["scored_tokens"] = e.scored_tokens;
    ej["ppl_dense"] = e.ppl_dense;
    ej["ppl"] = e.ppl;
    ej["kld_mean"] = e.kld_mean;
    ej["kld_p99"] = e.kld_p99;
    ej["top1_agreement"] = e.top1_agreement;
    ej["mlp_density"] = e.mlp_density;
    ej["attn_density"] = e.attn_density;
    ej["cpu_tokens_per_s"] = e.cpu_tokens_per_s;
    ej["cpu_dense_tokens_per_s"] = e.cpu_dense_tokens_per_s;
    ej["sim_tokens"] = e.sim_tokens;
    ej["sim_tokens_per_s"] = e.sim_tokens_per_s;
    ej["sim_hit_rate"] = e.sim_hit_rate;
    j["expected"] = ej;
    // File names and the note come from outside (a Latin-1 file name is not UTF-8): such bytes become U+FFFD
    // instead of an exception.
    return j.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

result<deploy_config> deploy_config_from_json(const std::string& text, const std::string& origin) {
    ojson j;
    try {
        j = ojson::parse(text);
    } catch (const nlohmann::json::exception& e) {
        const auto* pe = dynamic_cast<const nlohmann::json::parse_error*>(&e);
        return error{origin + ": not valid JSON" + (pe ? " (syntax error at byte " + std::to_string(pe->byte) + ")" : "")};
    }
    deploy_config c;
    try {
        const fields top(j, "");
        const ojson& schema = top.at("schema");
        if (!schema.is_string() || schema.get<std::string>() != deploy_config_schema)
            fields::fail("not a SparseLens deployment config (field 'schema' is " + shown(schema) + ", expected \"" +
                         deploy_config_schema + "\")");
        const ojson& version = top.at("version");
        if (!version.is_number_integer()) fields::fail("field 'version' must be an integer (got " + shown(version) + ")");
        if (version.is_number_unsigned() && version.get<uint64_t>() > static_cast<uint64_t>(deploy_config_version))
            fields::fail("config version " + version.dump() + " is newer than this build supports (" +
                         std::to_string(deploy_config_version) + ")");
        if (version.get<int64_t>() < 1) fields::fail("config version " + version.dump() + " is invalid (versions start at 1)");
        c.version = static_cast<int32_t>(version.get<int64_t>());
        top.only({"schema", "version", "created", "tool", "note", "model", "method", "per_layer", "calibration", "device",
                  "simulation", "expected"});
        c.created = top.str("created");
        c.tool = top.str("tool");
        c.note = top.str("note");

        const fields m = top.sub("model");
        m.only({"file_name", "file_bytes", "sha256", "format", "dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads",
                "vocab_size", "seq_len"});
        deploy_model& dm = c.model;
        dm.file_name = m.str("file_name");
        dm.file_bytes = m.count("file_bytes");
        dm.sha256 = m.sha("sha256");
        dm.format = m.str("format");
        if (dm.format.empty()) fields::fail("field 'model.format' must not be empty");
        constexpr int64_t big = int64_t{1} << 24;
        dm.dim = static_cast<int32_t>(m.integer("dim", 1, big));
        dm.hidden_dim = static_cast<int32_t>(m.integer("hidden_dim", 1, big));
        dm.n_layers = static_cast<int32_t>(m.integer("n_layers", 1, 4096));
        dm.n_heads = static_cast<int32_t>(m.integer("n_heads", 1, big));
        dm.n_kv_heads = static_cast<int32_t>(m.integer("n_kv_heads", 1, big));
        dm.vocab_size = static_cast<int32_t>(m.integer("vocab_size", 1, big));
        dm.seq_len = static_cast<int32_t>(m.integer("seq_len", 1, big));

        const fields me = top.sub("method");
        me.only({"name", "density", "d_in", "d_down", "gamma", "attn_density", "rank", "pin_fraction", "ffsplit_mode",
                 "ffsplit_heavy"});
        method_config& mc = c.method;
        mc.name = me.str("name");
        bool known = false;
        std::string names;
        for (const std::string& n : method_names()) {
            known = known || n == mc.name;
            names += (names.empty() ? "" : ", ") + n;
        }
        if (!known) fields::fail("unknown method '" + quote_text(mc.name) + "' (this build knows " + names + ")");
        mc.density = me.real("density", 0, 1);
        mc.d_in = me.real("d_in", -1, 1);
        mc.d_down = me.real("d_down", -1, 1);
        if ((mc.d_in < 0 && mc.d_in != -1.0f) || (mc.d_down < 0 && mc.d_down != -1.0f))
            fields::fail("fields 'method.d_in' and 'method.d_down' must be in [0, 1] or -1 (derived from density)");
        mc.gamma = me.real("gamma", 0, 1);
        mc.attn_density = me.real("attn_density", 0, 1);
        // Version 1 builds ran TEAL with one budget over all seven projections whatever attn_density said:
        // read it as that (1), so an old config runs what it ran when it was tuned.
        if (c.version < 2 && mc.name.rfind("teal", 0) == 0) mc.attn_density = 1.0f;
        mc.rank = static_cast<int32_t>(me.integer("rank", 0, big));
        mc.pin_fraction = me.real("pin_fraction", 0, 1);
        mc.ffsplit_mode = me.str("ffsplit_mode");
        if (mc.ffsplit_mode != "svd" && mc.ffsplit_mode != "q4")
            fields::fail("field 'method.ffsplit_mode' is '" + quote_text(mc.ffsplit_mode) + "', expected \"svd\" or \"q4\"");
        mc.ffsplit_heavy = me.real("ffsplit_heavy", 0, 1);

        (void)top.sub("per_layer");  // must be an object
        for (auto it = top.at("per_layer").begin(); it != top.at("per_layer").end(); ++it) {
            const std::string key = "per_layer." + quote_text(it.key());
            if (it.key().empty()) fields::fail("'per_layer' has an empty name");
            if (!it->is_array()) fields::fail("field '" + key + "' must be an array of numbers");
            if (it->size() != static_cast<size_t>(dm.n_layers))
                fields::fail("field '" + key + "' has " + std::to_string(it->size()) + " values, the model " +
                             std::to_string(dm.n_layers) + " layers");
            std::vector<float> values;
            for (const ojson& v : *it) {
                if (v.is_number() && std::isfinite(v.get<double>()))
                    values.push_back(static_cast<float>(v.get<double>()));
                else if (v.is_string() && (v.get<std::string>() == "inf" || v.get<std::string>() == "-inf"))
                    values.push_back(v.get<std::string>() == "inf" ? INFINITY : -INFINITY);
                else
                    fields::fail("field '" + key + "' must hold numbers, \"inf\" or \"-inf\" (got " + shown(v) + ")");
            }
            c.per_layer.emplace_back(it.key(), std::move(values));
        }

        const ojson& cal = top.at("calibration");
        if (!cal.is_null()) {
            const fields cf = top.sub("calibration");
            cf.only({"file", "sha256"});
            c.calibration_file = cf.str("file");
            const fs::path p(c.calibration_file);
            const bool control = std::any_of(c.calibration_file.begin(), c.calibration_file.end(),
                                             [](char ch) { return static_cast<unsigned char>(ch) < 0x20; });
            if (c.calibration_file.empty() || c.calibration_file.size() > 255 || control || p.filename() != p ||
                c.calibration_file == "." || c.calibration_file == "..")
                fields::fail("field 'calibration.file' must be a plain file name beside the config (got '" +
                             quote_text(c.calibration_file) + "')");
            c.calibration_sha256 = cf.sha("sha256");
        } else if (method_config_needs_calibration(mc)) {
            fields::fail("method '" + mc.name + "' needs a calibration but field 'calibration' is null");
        }

        if (!top.at("device").is_null()) c.device = device_from(top.sub("device"));

        const fields s = top.sub("simulation");
        s.only({"policy", "window_tokens", "bits", "group_size", "scale_bits", "embedding_bits", "context_tokens",
                "layout", "cache_fraction"});
        const std::string policy = s.str("policy");
        if (!cache_policy_parse(policy, c.policy))
            fields::fail("unknown cache policy '" + quote_text(policy) + "' (none, lru, lfu, belady, window)");
        c.window_tokens = static_cast<uint32_t>(s.integer("window_tokens", 1, int64_t{1} << 30));
        c.bits = static_cast<uint32_t>(s.integer("bits", 1, 32));
        c.group_size = static_cast<uint32_t>(s.integer("group_size", 0, int64_t{1} << 20));
        c.scale_bits = static_cast<uint32_t>(s.integer("scale_bits", 1, 32));
        c.embedding_bits = static_cast<uint32_t>(s.integer("embedding_bits", 0, 32));
        const quant_format q{c.bits, c.group_size, c.scale_bits, c.embedding_bits};
        if (outcome o = quant_validate(q); !o) fields::fail("'simulation': " + o.message());
        c.context_tokens = static_cast<uint32_t>(s.integer("context_tokens", 1, int64_t{1} << 24));
        c.layout = s.str("layout");
        if (auto l = layout_parse(c.layout); !l)  // its message quotes the text as is
            fields::fail(quote_text(c.layout) == c.layout ? "field 'simulation.layout': " + l.message()
                                                      : "field 'simulation.layout' is not an MLP layout (got '" +
                                                            quote_text(c.layout) + "')");
        c.cache_fraction = s.real("cache_fraction", 0, 1);

        const fields e = top.sub("expected");
        e.only({"eval_text", "eval_text_sha256", "n_ctx", "windows", "offset", "scored_tokens", "ppl_dense", "ppl",
                "kld_mean", "kld_p99", "top1_agreement", "mlp_density", "attn_density", "cpu_tokens_per_s",
                "cpu_dense_tokens_per_s", "sim_tokens", "sim_tokens_per_s", "sim_hit_rate"});
        deploy_expectations& x = c.expected;
        x.eval_text = e.str("eval_text");
        x.eval_text_sha256 = e.str("eval_text_sha256");
        if (!x.eval_text_sha256.empty() && !is_sha256_hex(x.eval_text_sha256))
            fields::fail("field 'expected.eval_text_sha256' must be 64 lowercase hex digits or empty");
        x.n_ctx = static_cast<int32_t>(e.integer("n_ctx", 0, int64_t{1} << 20));
        if (x.n_ctx != 0 && x.n_ctx < 4) fields::fail("field 'expected.n_ctx' must be 0 (not measured) or >= 4");
        x.windows = static_cast<int32_t>(e.integer("windows", 0, int64_t{1} << 30));
        x.offset = e.integer("offset", 0, INT64_MAX);
        x.scored_tokens = e.integer("scored_tokens", 0, INT64_MAX);
        x.ppl_dense = e.number("ppl_dense", 0, 1e300);
        x.ppl = e.number("ppl", 0, 1e300);
        x.kld_mean = e.number("kld_mean", 0, 1e300);
        x.kld_p99 = e.number("kld_p99", 0, 1e300);
        x.top1_agreement = e.number("top1_agreement", 0, 1);
        x.mlp_density = e.number("mlp_density", 0, 1);
        x.attn_density = e.number("attn_density", 0, 1);
        x.cpu_tokens_per_s = e.number("cpu_tokens_per_s", 0, 1e300);
        x.cpu_dense_tokens_per_s = e.number("cpu_dense_tokens_per_s", 0, 1e300);
        x.sim_tokens = static_cast<uint32_t>(e.integer("sim_tokens", 0, UINT32_MAX));
        x.sim_tokens_per_s = e.number("sim_tokens_per_s", 0, 1e300);
        x.sim_hit_rate = e.number("sim_hit_rate", 0, 1);
    } catch (const bad_field& e) {
        return error{origin + ": " + e.what()};
    } catch (const nlohmann::json::exception& e) {  // a type the accessors did not foresee: never crash
        return error{origin + ": malformed config (" + std::string(e.what()) + ")"};
    }
    return c;
}

outcome deploy_config_write(const std::string& path, deploy_config c, const calibration* calib) {
    if (c.created.empty()) c.created = utc_now_iso8601();
    if (c.layout.empty()) c.layout = deploy_default_layout(c.method.name);
    c.version = deploy_config_version;
    std::vector<uint8_t> calib_bytes;
    if (calib) {
        calib_bytes = calibration_serialize(*calib);
        c.calibration_file = fs::path(deploy_sidecar_path(path)).filename().string();
        c.calibration_sha256 = sha256_hex(calib_bytes);
    } else {
        c.calibration_file.clear();
        c.calibration_sha256.clear();
    }
    const std::string text = deploy_config_to_json(c);
    // Never write what the reader would refuse (NaN metrics, out-of-range fields, a missing calibration).
    if (auto back = deploy_config_from_json(text, path); !back) return back.err();
    if (calib) {
        if (outcome o = write_file(deploy_sidecar_path(path), calib_bytes.data(), calib_bytes.size()); !o) return o;
    }
    return write_file(path, text.data(), text.size());
}

result<loaded_deploy_config> deploy_config_read(const std::string& path) {
    auto bytes = read_file(path, max_config_bytes, "a deployment config");
    if (!bytes) return bytes.err();
    auto c = deploy_config_from_json(std::string(bytes->begin(), bytes->end()), path);
    if (!c) return c.err();
    loaded_deploy_config out{std::move(c).value(), std::nullopt};
    const deploy_config& cfg = out.config;
    if (cfg.calibration_file.empty()) return out;

    const std::string side = (fs::path(path).parent_path() / cfg.calibration_file).string();
    std::error_code ec;
    if (!fs::exists(side, ec))
        return error{side + ": missing: the calibration sidecar named by " + path +
                     " was not found (it must sit beside the config)"};
    auto side_bytes = read_file(side, size_t{4} << 30, "a calibration");
    if (!side_bytes) return side_bytes.err();
    if (sha256_hex(*side_bytes) != cfg.calibration_sha256)
        return error{side + ": checksum mismatch: the sidecar does not belong to " + path + " or is corrupted"};
    auto cal = calibration_deserialize(*side_bytes, side);
    if (!cal) return cal.err();
    const calibration_fingerprint& f = cal->model;
    const deploy_model& m = cfg.model;
    if (f.dim != m.dim || f.hidden_dim != m.hidden_dim || f.n_layers != m.n_layers || f.n_heads != m.n_heads ||
        f.n_kv_heads != m.n_kv_heads || f.vocab_size != m.vocab_size)
        return error{side + ": calibration is for a model of dim " + std::to_string(f.dim) + ", hidden_dim " +
                     std::to_string(f.hidden_dim) + ", " + std::to_string(f.n_layers) + " layers; " + path +
                     " is for dim " + std::to_string(m.dim) + ", hidden_dim " + std::to_string(m.hidden_dim) + ", " +
                     std::to_string(m.n_layers) + " layers"};
    out.calib = std::move(cal).value();
    return out;
}

outcome deploy_check_per_layer(const deploy_config& c, const per_layer_table& resolved) {
    auto find = [](const per_layer_table& t, const std::string& name) -> const std::vector<float>* {
        for (const auto& [n, v] : t)
            if (n == name) return &v;
        return nullptr;
    };
    const std::string why =
        ": the calibration, the model's weights or this build's method differ from the ones the config was tuned with";
    for (const auto& [name, values] : resolved) {
        const std::vector<float>* stored = find(c.per_layer, name);
        if (!stored) return error{"per_layer has no '" + name + "', which method " + c.method.name + " resolves" + why};
        if (stored->size() != values.size())
            return error{"per_layer '" + name + "' has " + std::to_string(stored->size()) + " values, the method " +
                         std::to_string(values.size()) + why};
        for (size_t l = 0; l < values.size(); ++l) {
            const float a = (*stored)[l], b = values[l];
            if (a == b || (std::isnan(a) && std::isnan(b))) continue;
            char buf[160];
            std::snprintf(buf, sizeof buf, "per_layer '%s' of layer %zu is %.9g in the config but resolves to %.9g",
                          name.c_str(), l, static_cast<double>(a), static_cast<double>(b));
            return error{buf + why};
        }
    }
    for (const auto& [name, values] : c.per_layer)
        if (!find(resolved, name))
            return error{"per_layer '" + name + "' is not a value method " + c.method.name + " resolves" + why};
    return {};
}

std::string deploy_device_to_json(const device_profile& d) { return device_json(d).dump(); }

result<device_profile> deploy_device_from_json(const std::string& text, const std::string& origin) {
    try {
        const ojson j = ojson::parse(text);
        return device_from(fields(j, "device"));
    } catch (const bad_field& e) {
        return error{origin + ": " + e.what()};
    } catch (const nlohmann::json::exception& e) {
        return error{origin + ": device: " + e.what()};
    }
}

}  // namespace sl::sim

// Strict JSON field readers shared by the device and model-shape profile loaders.
#include "json_fields.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sparselens/sim/device.h"

namespace sl::sim::detail {

namespace {

std::string shown(const nlohmann::json& v) {
    std::string s = v.dump();
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return s;
}

}  // namespace

const nlohmann::json& json_fields::field(const char* key, bool required) const {
    static const nlohmann::json null_value;
    auto it = m_j.find(key);
    if (it == m_j.end()) {
        if (required) fail(std::string("missing field '") + key + "'");
        return null_value;
    }
    return *it;
}

void json_fields::expect_schema(const char* schema, uint32_t version) const {
    if (!m_j.is_object()) fail("top level must be a JSON object");
    const std::string s = string("schema", true);
    if (s != schema) fail("field 'schema' is '" + s + "', expected '" + schema + "'");
    const int64_t v = integer("version", 0, INT32_MAX, true);
    if (v != version)
        fail("unsupported version " + std::to_string(v) + " of '" + schema + "' (this build reads version " +
             std::to_string(version) + ")");
}

void json_fields::reject_unknown(std::initializer_list<const char*> allowed) const {
    for (auto it = m_j.begin(); it != m_j.end(); ++it) {
        bool known = false;
        for (const char* a : allowed) known = known || it.key() == a;
        if (!known) fail("unknown field '" + it.key() + "'");
    }
}

std::string json_fields::string(const char* key, bool required, const std::string& fallback) const {
    const nlohmann::json& v = field(key, required);
    if (v.is_null()) return fallback;
    if (!v.is_string()) fail(std::string("field '") + key + "' must be a string (got " + shown(v) + ")");
    return v.get<std::string>();
}

int64_t json_fields::integer(const char* key, int64_t lo, int64_t hi, bool required, int64_t fallback) const {
    const nlohmann::json& v = field(key, required);
    if (v.is_null()) return fallback;
    if (!v.is_number_integer()) fail(std::string("field '") + key + "' must be an integer (got " + shown(v) + ")");
    const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : v.get<int64_t>();
    if (x < lo || x > hi)
        fail(std::string("field '") + key + "' = " + std::to_string(x) + " is outside [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "]");
    return x;
}

double json_fields::number(const char* key, double lo, double hi, bool required, double fallback) const {
    const nlohmann::json& v = field(key, required);
    if (v.is_null()) return fallback;
    if (!v.is_number()) fail(std::string("field '") + key + "' must be a number (got " + shown(v) + ")");
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) {
        std::ostringstream os;
        os << "field '" << key << "' = " << x << " is outside [" << lo << ", " << hi << "]";
        fail(os.str());
    }
    return x;
}

bool json_fields::boolean(const char* key, bool required, bool fallback) const {
    const nlohmann::json& v = field(key, required);
    if (v.is_null()) return fallback;
    if (!v.is_boolean()) fail(std::string("field '") + key + "' must be true or false (got " + shown(v) + ")");
    return v.get<bool>();
}

uint64_t json_fields::size(const char* key, bool required, uint64_t fallback) const {
    const nlohmann::json& v = field(key, required);
    if (v.is_null()) return fallback;
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer()) fail(std::string("field '") + key + "' must not be negative (got " + shown(v) + ")");
    if (v.is_string()) {
        auto r = parse_size(v.get<std::string>());
        if (!r) fail(std::string("field '") + key + "': " + r.message());
        return *r;
    }
    if (v.is_number()) {
        const double x = v.get<double>();
        if (!std::isfinite(x) || x < 0 || x > 9.2e18)
            fail(std::string("field '") + key + "' is out of range (got " + shown(v) + ")");
        return static_cast<uint64_t>(std::llround(x));
    }
    fail(std::string("field '") + key + "' must be a byte count or a size like \"4GB\" (got " + shown(v) + ")");
}

double json_fields::rate(const char* key, bool required, double fallback) const {
    const nlohmann::json& v = field(key, required);
    if (v.is_null()) return fallback;
    if (v.is_string()) {
        auto r = parse_rate(v.get<std::string>());
        if (!r) fail(std::string("field '") + key + "': " + r.message());
        return *r;
    }
    if (!v.is_number())
        fail(std::string("field '") + key + "' must be bytes/s or a rate like \"60GB/s\" (got " + shown(v) + ")");
    return v.get<double>();
}

std::vector<std::string> json_fields::strings(const char* key) const {
    const nlohmann::json& v = field(key, false);
    std::vector<std::string> out;
    if (v.is_null()) return out;
    if (!v.is_array()) fail(std::string("field '") + key + "' must be an array of strings");
    for (const auto& e : v) {
        if (!e.is_string()) fail(std::string("field '") + key + "' must be an array of strings (got " + shown(e) + ")");
        out.push_back(e.get<std::string>());
    }
    return out;
}

outcome read_json_file(const std::string& path, nlohmann::json& out) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return error{path + ": no such file"};
    std::ifstream f(path, std::ios::binary);
    if (!f) return error{path + ": cannot open"};
    std::ostringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    if (text.size() > (16u << 20)) return error{path + ": larger than 16 MiB, not a profile"};
    try {
        out = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        return error{path + ": not valid JSON (syntax error at byte " + std::to_string(e.byte) + ")"};
    } catch (const nlohmann::json::exception&) {
        // out_of_range 406: a number such as 1e99999 that no double holds (found by fuzz_deploy_config).
        return error{path + ": not valid JSON (a number out of range)"};
    }
    return {};
}

std::string base_name(const std::string& path) {
    return std::filesystem::path(path).filename().string();
}

}  // namespace sl::sim::detail

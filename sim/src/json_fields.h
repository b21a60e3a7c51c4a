// Strict field access for the versioned JSON profiles: one-line errors naming the file and the field.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "sparselens/core/result.h"

namespace sl::sim::detail {

// Thrown inside the loaders only and turned into an error value before leaving them.
struct field_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class json_fields {
public:
    json_fields(const nlohmann::json& j, std::string origin) : m_j(j), m_origin(std::move(origin)) {}

    [[noreturn]] void fail(const std::string& what) const { throw field_error(m_origin + ": " + what); }

    void expect_schema(const char* schema, uint32_t version) const;
    void reject_unknown(std::initializer_list<const char*> allowed) const;

    bool has(const char* key) const { return m_j.contains(key); }
    std::string string(const char* key, bool required, const std::string& fallback = {}) const;
    int64_t integer(const char* key, int64_t lo, int64_t hi, bool required, int64_t fallback = 0) const;
    double number(const char* key, double lo, double hi, bool required, double fallback = 0) const;
    bool boolean(const char* key, bool required, bool fallback = false) const;
    uint64_t size(const char* key, bool required, uint64_t fallback = 0) const;  // number or "4GB"
    double rate(const char* key, bool required, double fallback = 0) const;      // number or "60GB/s"
    std::vector<std::string> strings(const char* key) const;                     // optional array

    const std::string& origin() const { return m_origin; }

private:
    const nlohmann::json& field(const char* key, bool required) const;
    const nlohmann::json& m_j;
    std::string m_origin;
};

// Reads and parses a JSON file into `out`; the error names the file (and the parse position).
outcome read_json_file(const std::string& path, nlohmann::json& out);

// File name without directories, for messages.
std::string base_name(const std::string& path);

}  // namespace sl::sim::detail

// Device profiles: loading, validation, lookup by name or alias; byte sizes and rates with units.
#include "sparselens/sim/device.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "json_fields.h"

#ifndef SPARSELENS_ASSETS_DIR
#define SPARSELENS_ASSETS_DIR "assets"
#endif

namespace sl::sim {

namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string trim(const std::string& s) {
    size_t a = 0, b = s.size();
    while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
    while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
    return s.substr(a, b - a);
}

// Number followed by an optional unit; returns the value in bytes as a double.
result<double> parse_quantity(const std::string& text, const char* what) {
    const std::string t = trim(text);
    const std::string bad = std::string("invalid ") + what + " '" + text + "'";
    if (t.empty()) return error{bad};
    double x = 0;
    const char* first = t.data();
    const char* last = t.data() + t.size();
    auto [p, ec] = std::from_chars(first, last, x);
    if (ec != std::errc() || p == first) return error{bad + " (expected a number with an optional unit, e.g. 4GB)"};
    std::string unit = lower(trim(std::string(p, last)));
    struct unit_scale {
        const char* name;
        double scale;
    };
    static const unit_scale units[] = {{"", 1},
                                       {"b", 1},
                                       {"k", 1e3},
                                       {"kb", 1e3},
                                       {"m", 1e6},
                                       {"mb", 1e6},
                                       {"g", 1e9},
                                       {"gb", 1e9},
                                       {"t", 1e12},
                                       {"tb", 1e12},
                                       {"ki", 1024.0},
                                       {"kib", 1024.0},
                                       {"mi", 1048576.0},
                                       {"mib", 1048576.0},
                                       {"gi", 1073741824.0},
                                       {"gib", 1073741824.0},
                                       {"ti", 1099511627776.0},
                                       {"tib", 1099511627776.0}};
    for (const unit_scale& u : units) {
        if (unit != u.name) continue;
        const double v = x * u.scale;
        if (!std::isfinite(v) || v < 0) return error{bad + " (must be a non-negative finite value)"};
        return v;
    }
    return error{bad + " (unknown unit '" + unit + "'; use B, KB, MB, GB, TB or KiB, MiB, GiB, TiB)"};
}

}  // namespace

result<uint64_t> parse_size(const std::string& text) {
    auto q = parse_quantity(text, "size");
    if (!q) return q.err();
    if (*q > 9.0e18) return error{"invalid size '" + text + "' (too large)"};
    return static_cast<uint64_t>(std::llround(*q));
}

result<double> parse_rate(const std::string& text) {
    std::string t = trim(text);
    const std::string l = lower(t);
    if (l.size() >= 2 && l.compare(l.size() - 2, 2, "/s") == 0) t = t.substr(0, t.size() - 2);
    auto q = parse_quantity(t, "rate");
    if (!q) return error{"invalid rate '" + text + "' (expected e.g. 60GB/s or a number of bytes/s)"};
    return *q;
}

std::string assets_dir(const std::string& explicit_dir) {
    if (!explicit_dir.empty()) return explicit_dir;
    if (const char* env = std::getenv("SPARSELENS_ASSETS_DIR"); env && *env) return env;
    return SPARSELENS_ASSETS_DIR;
}

outcome device_validate(const device_profile& d, const std::string& origin) {
    auto bad = [&](const std::string& what) { return error{origin + ": " + what}; };
    if (d.dram_bytes == 0) return bad("field 'dram_bytes' must be > 0");
    if (!(d.dram_bandwidth > 0) || !std::isfinite(d.dram_bandwidth))
        return bad("field 'dram_bandwidth' must be a positive number of bytes/s");
    if (!(d.flash_bandwidth > 0) || !std::isfinite(d.flash_bandwidth))
        return bad("field 'flash_bandwidth' must be a positive number of bytes/s");
    if (d.flash_page_bytes > (1u << 30)) return bad("field 'flash_page_bytes' is larger than 1 GiB");
    if (!(d.flash_read_latency_s >= 0) || !std::isfinite(d.flash_read_latency_s) || d.flash_read_latency_s > 10)
        return bad("field 'flash_read_latency_s' must be in [0, 10] seconds");
    if (!(d.flash_iops >= 0) || !std::isfinite(d.flash_iops))
        return bad("field 'flash_iops' must be >= 0 (0 = unlimited)");
    if (!(d.flash_batch_latency_s >= 0) || !std::isfinite(d.flash_batch_latency_s) || d.flash_batch_latency_s > 10)
        return bad("field 'flash_batch_latency_s' must be in [0, 10] seconds");
    if (d.flash_merge_gap_pages < -1 || d.flash_merge_gap_pages > (1 << 20))
        return bad("field 'flash_merge_gap_pages' must be in [-1, 1048576]");
    return {};
}

result<device_profile> device_load(const std::string& path) {
    nlohmann::json j;
    if (auto o = detail::read_json_file(path, j); !o) return o.err();
    device_profile d;
    try {
        detail::json_fields f(j, path);
        f.expect_schema("sparselens.device", 1);
        f.reject_unknown({"schema", "version", "name", "display_name", "description", "aliases", "notes", "dram_bytes",
                          "dram_bandwidth", "flash_bandwidth", "flash_page_bytes", "flash_read_latency_s", "flash_iops",
                          "flash_batch_latency_s", "flash_merge_gap_pages", "overlap_io_compute"});
        d.name = f.string("name", true);
        if (d.name.empty()) f.fail("field 'name' must not be empty");
        d.display_name = f.string("display_name", false, d.name);
        d.description = f.string("description", false);
        d.aliases = f.strings("aliases");
        d.dram_bytes = f.size("dram_bytes", true);
        d.dram_bandwidth = f.rate("dram_bandwidth", true);
        d.flash_bandwidth = f.rate("flash_bandwidth", true);
        const uint64_t page = f.size("flash_page_bytes", true);
        if (page > (1u << 30)) f.fail("field 'flash_page_bytes' is larger than 1 GiB");
        d.flash_page_bytes = static_cast<uint32_t>(page);
        d.flash_read_latency_s = f.number("flash_read_latency_s", 0, 10, false, 0);
        d.flash_iops = f.number("flash_iops", 0, 1e12, false, 0);
        d.flash_batch_latency_s = f.number("flash_batch_latency_s", 0, 10, false, 0);
        d.flash_merge_gap_pages = static_cast<int32_t>(f.integer("flash_merge_gap_pages", -1, 1 << 20, false, -1));
        d.overlap_io_compute = f.boolean("overlap_io_compute", true);
    } catch (const detail::field_error& e) {
        return error{e.what()};
    }
    if (auto o = device_validate(d, path); !o) return o.err();
    return d;
}

std::string user_devices_dir() {
    if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) return (fs::path(x) / "sparselens" / "devices").string();
    if (const char* h = std::getenv("HOME"); h && *h) return (fs::path(h) / ".config" / "sparselens" / "devices").string();
    return {};
}

namespace {
// Where profiles are looked up: the assets' devices, then (default lookups only) the user's.
std::vector<fs::path> device_dirs(const std::string& assets) {
    std::vector<fs::path> dirs{fs::path(assets_dir(assets)) / "devices"};
    if (assets.empty() && !user_devices_dir().empty()) dirs.emplace_back(user_devices_dir());
    return dirs;
}
}  // namespace

std::vector<std::string> device_list(const std::string& assets) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const fs::path& dir : device_dirs(assets)) {
        std::vector<std::string> here;
        for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
            if (it->path().extension() == ".json" && std::find(out.begin(), out.end(), it->path().stem().string()) == out.end())
                here.push_back(it->path().stem().string());
        std::sort(here.begin(), here.end());
        out.insert(out.end(), here.begin(), here.end());
    }
    return out;
}

result<device_profile> device_find(const std::string& name_or_path, const std::string& assets) {
    std::error_code ec;
    if (name_or_path.find('/') != std::string::npos || fs::path(name_or_path).extension() == ".json")
        return device_load(name_or_path);
    const std::vector<fs::path> dirs = device_dirs(assets);
    for (const fs::path& dir : dirs) {
        const fs::path direct = dir / (name_or_path + ".json");
        if (fs::is_regular_file(direct, ec)) return device_load(direct.string());
    }
    for (const fs::path& dir : dirs)
        for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
            if (it->path().extension() != ".json") continue;
            auto d = device_load(it->path().string());
            if (!d) continue;
            for (const std::string& a : d->aliases)
                if (lower(a) == lower(name_or_path)) return d;
        }
    const std::vector<std::string> names = device_list(assets);
    std::string known;
    for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
    return error{"device '" + name_or_path + "' not found in " + dirs.front().string() +
                 (known.empty() ? " (no profiles there; set SPARSELENS_ASSETS_DIR)" : " (available: " + known + ")")};
}

}  // namespace sl::sim

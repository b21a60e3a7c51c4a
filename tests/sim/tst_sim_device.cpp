// Device profiles: the shipped files, lookup by name / alias / path / $SPARSELENS_ASSETS_DIR, one-line
// errors naming the file and field for every kind of broken profile, and size / rate parsing.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "sparselens/sim/device.h"
#include "test_support.h"

namespace {

using namespace sl::sim;
namespace fs = std::filesystem;

const std::string assets = std::string(SPARSELENS_SOURCE_DIR) + "/assets";

std::string write_profile(const std::string& name, const std::string& text) {
    return sl::test::write_temp(name, std::vector<uint8_t>(text.begin(), text.end()));
}

const char* good_body =
    R"("name": "t", "dram_bytes": "4GB", "dram_bandwidth": "60GB/s", "flash_bandwidth": 1e9,
       "flash_page_bytes": 4096, "overlap_io_compute": true)";

std::string subst(std::string s, const std::string& from, const std::string& to) {
    const size_t at = s.find(from);
    if (at != std::string::npos) s.replace(at, from.size(), to);
    return s;
}

std::string profile(const std::string& extra, const std::string& version = "1") {
    return "{\"schema\": \"sparselens.device\", \"version\": " + version + ", " + good_body + extra + "}";
}

TEST(SimDevice, ShippedProfilesLoadWithTheirNumbers) {
    const std::vector<std::string> names = device_list(assets);
    for (const char* want : {"apple-a18", "snapdragon-8s-gen3", "laptop-nvme", "custom"})
        EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
    for (const std::string& n : names) {
        auto d = device_find(n, assets);
        ASSERT_TRUE(d.ok()) << d.message();
        EXPECT_EQ(d->name, n);
    }
    auto a18 = device_find("a18", assets);  // alias
    ASSERT_TRUE(a18.ok()) << a18.message();
    EXPECT_EQ(a18->name, "apple-a18");
    EXPECT_EQ(a18->dram_bytes, 4'000'000'000ull);
    EXPECT_DOUBLE_EQ(a18->dram_bandwidth, 60e9);
    EXPECT_DOUBLE_EQ(a18->flash_bandwidth, 1e9);
    auto sd = device_find("snapdragon-8s-gen3", assets);
    ASSERT_TRUE(sd.ok());
    EXPECT_DOUBLE_EQ(sd->flash_bandwidth, 4e9);
    EXPECT_NE(sd->description.find("ESTIMATES"), std::string::npos);
}

TEST(SimDevice, LookupByPathAndEnvironment) {
    const std::string path = write_profile("dev_ok.json", profile(""));
    auto d = device_find(path);
    ASSERT_TRUE(d.ok()) << d.message();
    EXPECT_EQ(d->name, "t");
    EXPECT_EQ(d->dram_bytes, 4'000'000'000ull);
    EXPECT_DOUBLE_EQ(d->flash_read_latency_s, 0.0);  // optional fields default to 0

    const fs::path dir = fs::temp_directory_path() / ("sparselens_assets_" + std::to_string(::getpid()));
    fs::create_directories(dir / "devices");
    fs::copy_file(path, dir / "devices" / "mine.json", fs::copy_options::overwrite_existing);
    ::setenv("SPARSELENS_ASSETS_DIR", dir.c_str(), 1);
    EXPECT_EQ(assets_dir(), dir.string());
    EXPECT_EQ(assets_dir("/explicit"), "/explicit");
    auto e = device_find("mine");
    ::unsetenv("SPARSELENS_ASSETS_DIR");
    ASSERT_TRUE(e.ok()) << e.message();
    EXPECT_EQ(e->name, "t");
    auto missing = device_find("no-such-device", dir.string());
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.message().find("available: mine"), std::string::npos) << missing.message();
    fs::remove_all(dir);
    std::remove(path.c_str());
}

struct bad_case {
    const char* file;
    std::string text;
    const char* must_mention;
};

TEST(SimDevice, BrokenProfilesGiveOneLineErrorsNamingFileAndField) {
    const std::vector<bad_case> cases = {
        {"dev_version.json", profile("", "2"), "unsupported version 2"},
        {"dev_schema.json", "{\"schema\": \"other\", \"version\": 1}", "'schema'"},
        {"dev_noversion.json", "{\"schema\": \"sparselens.device\"}", "'version'"},
        {"dev_missing.json",
         R"({"schema": "sparselens.device", "version": 1, "name": "t", "dram_bytes": 1, "flash_bandwidth": 1,
             "flash_page_bytes": 1, "overlap_io_compute": true})",
         "'dram_bandwidth'"},
        {"dev_unknown.json", profile(", \"dram_byte\": 5"), "'dram_byte'"},
        {"dev_type.json", profile(", \"flash_iops\": \"many\""), "'flash_iops'"},
        {"dev_negative.json", profile(", \"flash_read_latency_s\": -1"), "'flash_read_latency_s'"},
        {"dev_size.json",
         R"({"schema": "sparselens.device", "version": 1, "name": "t", "dram_bytes": "4XB", "dram_bandwidth": 1,
             "flash_bandwidth": 1, "flash_page_bytes": 1, "overlap_io_compute": true})",
         "'dram_bytes'"},
        {"dev_zero.json",
         R"({"schema": "sparselens.device", "version": 1, "name": "t", "dram_bytes": 0, "dram_bandwidth": 1,
             "flash_bandwidth": 1, "flash_page_bytes": 1, "overlap_io_compute": true})",
         "'dram_bytes'"},
        {"dev_bw.json",
         R"({"schema": "sparselens.device", "version": 1, "name": "t", "dram_bytes": 1, "dram_bandwidth": 0,
             "flash_bandwidth": 1, "flash_page_bytes": 1, "overlap_io_compute": true})",
         "'dram_bandwidth'"},
        {"dev_bool.json", subst(profile(""), "\"overlap_io_compute\": true", "\"overlap_io_compute\": 1"),
         "'overlap_io_compute'"},
        {"dev_page.json", subst(profile(""), "\"flash_page_bytes\": 4096", "\"flash_page_bytes\": \"2GiB\""),
         "'flash_page_bytes'"},
        {"dev_syntax.json", "{\"schema\": \"sparselens.device\", ", "not valid JSON"},
        // fuzz_deploy_config found this one: nlohmann throws out_of_range, not parse_error, for it.
        {"dev_huge_number.json", profile(", \"flash_iops\": 1e056540"), "a number out of range"},
        {"dev_array.json", "[1, 2, 3]", "object"},
        {"dev_aliases.json", profile(", \"aliases\": [1]"), "'aliases'"},
    };
    for (const bad_case& c : cases) {
        const std::string path = write_profile(c.file, c.text);
        auto d = device_load(path);
        ASSERT_FALSE(d.ok()) << c.file;
        EXPECT_NE(d.message().find(path), std::string::npos) << d.message();
        EXPECT_NE(d.message().find(c.must_mention), std::string::npos) << c.file << ": " << d.message();
        EXPECT_EQ(d.message().find('\n'), std::string::npos) << d.message();
        std::remove(path.c_str());
    }
    auto none = device_load("/nonexistent/dev.json");
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.message().find("/nonexistent/dev.json"), std::string::npos);
}

TEST(SimDevice, ValidateChecksRuntimeOverrides) {
    device_profile d = device_find("apple-a18", assets).value();
    EXPECT_TRUE(device_validate(d, "x").ok());
    d.flash_bandwidth = -1;
    EXPECT_FALSE(device_validate(d, "x").ok());
    d = device_find("apple-a18", assets).value();
    d.flash_iops = std::nan("");
    EXPECT_FALSE(device_validate(d, "x").ok());
}

TEST(SimDevice, SizesAndRates) {
    struct size_case {
        const char* text;
        uint64_t bytes;
    };
    for (const size_case& c :
         {size_case{"4GB", 4'000'000'000ull}, size_case{"4GiB", 4ull << 30}, size_case{"512MB", 512'000'000ull},
          size_case{"512 MiB", 512ull << 20}, size_case{"1.5G", 1'500'000'000ull}, size_case{"4096", 4096},
          size_case{"4gb", 4'000'000'000ull}, size_case{" 16KiB ", 16384}, size_case{"0", 0},
          size_case{"2TB", 2'000'000'000'000ull}, size_case{"100B", 100}}) {
        auto r = parse_size(c.text);
        ASSERT_TRUE(r.ok()) << c.text << ": " << r.message();
        EXPECT_EQ(*r, c.bytes) << c.text;
    }
    for (const char* bad : {"", "GB", "-1GB", "4XB", "1e400", "four", "4 G B", "nan"}) {
        auto r = parse_size(bad);
        EXPECT_FALSE(r.ok()) << "'" << bad << "' parsed as " << (r.ok() ? *r : 0);
    }
    EXPECT_DOUBLE_EQ(parse_rate("60GB/s").value(), 60e9);
    EXPECT_DOUBLE_EQ(parse_rate("1 GiB/s").value(), 1073741824.0);
    EXPECT_DOUBLE_EQ(parse_rate("2.5e9").value(), 2.5e9);
    EXPECT_FALSE(parse_rate("fast").ok());
}

}  // namespace

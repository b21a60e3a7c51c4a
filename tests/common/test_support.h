// Shared helpers for the test executables: where the fixtures live and a main() that skips cleanly.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

namespace sl::test {

// ../shared (or $SPARSELENS_SHARED_DIR), where the real model, tokenizer and references live.
inline std::filesystem::path shared_dir() {
    if (const char* env = std::getenv("SPARSELENS_SHARED_DIR"); env && *env) return env;
    return SPARSELENS_SHARED_DIR_DEFAULT;
}

inline std::string shared_path(const std::string& rel) { return (shared_dir() / rel).string(); }

inline bool have_shared() {
    return std::filesystem::exists(shared_dir() / "models" / "stories260K_f32.bin");
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Every file write_temp() made is removed when the test process exits (only by the process that made
// it, not by a forked child), so suites do not leave gigabytes of fixtures in /tmp.
struct temp_files {
    std::vector<std::filesystem::path> paths;
    pid_t owner = ::getpid();
    ~temp_files() {
        if (::getpid() != owner) return;
        std::error_code ec;
        for (const auto& p : paths) std::filesystem::remove(p, ec);
    }
    static temp_files& get() {
        static temp_files t;
        return t;
    }
};

inline std::string write_temp(const std::string& name, const std::vector<uint8_t>& bytes) {
    auto p = std::filesystem::temp_directory_path() / ("sparselens_test_" + std::to_string(::getpid()) + "_" + name);
    auto& reg = temp_files::get().paths;
    if (std::find(reg.begin(), reg.end(), p) == reg.end()) reg.push_back(p);
    std::ofstream f(p, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return p.string();
}

}  // namespace sl::test

// For tests that need ../shared: skip the whole executable (exit 77) when it is absent.
#define SL_TEST_MAIN_NEEDS_SHARED()                                                        \
    int main(int argc, char** argv) {                                                      \
        if (!sl::test::have_shared()) {                                                    \
            std::printf("SKIP: fixtures not found at %s\n", sl::test::shared_dir().c_str()); \
            return 77;                                                                     \
        }                                                                                  \
        ::testing::InitGoogleTest(&argc, argv);                                            \
        return RUN_ALL_TESTS();                                                            \
    }

// The llama.cpp peer harness (tests/peer/llama_peer.cpp) as the `peer` tests use it: run a subcommand,
// read its binary outputs, and skip cleanly only when npm (and so the peer) cannot exist here.
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli_runner.h"

namespace sl::test {

inline bool peer_built() { return std::strlen(SPARSELENS_PEER_EXE) > 0; }

inline bool npm_on_path() { return std::system("command -v npm >/dev/null 2>&1") == 0; }

// Runs `sl-llama-peer <args>`; stdout and stderr captured.
inline run_result run_peer(const std::string& args) { return run_command(std::string(SPARSELENS_PEER_EXE) + " " + args); }

template <typename T>
std::vector<T> read_array(const std::string& path) {
    const std::vector<uint8_t> raw = read_bytes(path);
    std::vector<T> v(raw.size() / sizeof(T));
    if (!v.empty()) std::memcpy(v.data(), raw.data(), v.size() * sizeof(T));
    return v;
}

template <typename T>
std::string write_array(const std::string& name, const std::vector<T>& v) {
    std::vector<uint8_t> raw(v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(raw.data(), v.data(), raw.size());
    return write_temp(name, raw);
}

}  // namespace sl::test

// For `peer` tests: exit 77 (skipped) when npm is absent, fail loudly when npm is here but the harness
// was not built (the install step was skipped), and also skip when ../shared is needed but missing.
#define SL_TEST_MAIN_NEEDS_PEER(needs_shared)                                                                  \
    int main(int argc, char** argv) {                                                                          \
        if (!sl::test::peer_built()) {                                                                         \
            if (!sl::test::npm_on_path()) {                                                                    \
                std::printf("SKIP: npm is not installed, so the llama.cpp peer (node-llama-cpp) cannot be\n"); \
                return 77;                                                                                     \
            }                                                                                                  \
            std::printf("FAIL: npm is here but the llama.cpp peer was not built: run scripts/test.sh (it\n"    \
                        "installs node-llama-cpp into .peer/) and re-configure\n");                            \
            return 1;                                                                                          \
        }                                                                                                      \
        if ((needs_shared) && !sl::test::have_shared()) {                                                      \
            std::printf("SKIP: fixtures not found at %s\n", sl::test::shared_dir().c_str());                   \
            return 77;                                                                                         \
        }                                                                                                      \
        ::testing::InitGoogleTest(&argc, argv);                                                                \
        return RUN_ALL_TESTS();                                                                                \
    }

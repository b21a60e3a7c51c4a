// Helpers shared by the libFuzzer targets: a per-process scratch file for path-based parsers and
// checksum re-sealing, so mutations reach the parsers behind a file's checksum instead of stopping at it.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sparselens/core/calibration.h"

namespace sl::fuzz {

// Writes `data` to one file per process (in /dev/shm when it exists: no disk I/O per input) and
// returns its path; the file is rewritten for every input.
inline std::string scratch_file(const uint8_t* data, size_t size, const char* suffix) {
    static const std::string path = [suffix] {
        const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        return std::string(dir) + "/sl_fuzz_" + std::to_string(getpid()) + suffix;
    }();
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) std::abort();  // the harness's own environment, not the input: fail loudly
    if (size && std::fwrite(data, 1, size, f) != size) std::abort();
    std::fclose(f);
    return path;
}

inline uint32_t get_u32(const std::vector<uint8_t>& b, size_t at) {
    uint32_t v;
    std::memcpy(&v, b.data() + at, 4);
    return v;
}
inline void set_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
inline void set_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

inline uint32_t crc32(const uint8_t* p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; ++i) {
        c ^= p[i];
        for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xffffffffu;
}

// Trace v1 (docs/simulator.md): u32 header_bytes at 12, u64 payload bytes at 56, payload CRC32 at 64,
// header CRC32 in the header's last 4 bytes. Returns false when the header is too short to reseal.
inline bool reseal_trace(std::vector<uint8_t>& b) {
    if (b.size() < 74) return false;
    const uint32_t hb = get_u32(b, 12);
    if (hb < 74 || hb > b.size()) return false;
    set_u64(b, 56, b.size() - hb);
    set_u32(b, 64, crc32(b.data() + hb, b.size() - hb));
    set_u32(b, hb - 4, crc32(b.data(), hb - 4));
    return true;
}

// Calibration files end with FNV-1a 64 of every byte after the 8-byte magic.
inline bool reseal_calibration(std::vector<uint8_t>& b) {
    if (b.size() < 24) return false;
    set_u64(b, b.size() - 8, fnv1a64(b.data() + 8, b.size() - 16));
    return true;
}

}  // namespace sl::fuzz

// SHA-256 fingerprints of files and byte strings (OpenSSL libcrypto), as lowercase hex.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "sparselens/core/result.h"

namespace sl {

// 64 lowercase hex digits.
std::string sha256_hex(std::span<const uint8_t> bytes);
std::string sha256_hex(std::string_view text);

// Streams the file in 1 MiB blocks; `progress` gets the fraction read and may cancel. Errors name the path.
result<std::string> sha256_file(const std::string& path, const progress_fn& progress = {});

}  // namespace sl

#include "sparselens/core/fingerprint.h"

#include <openssl/evp.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

namespace sl {
namespace {

struct md_ctx_deleter {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using md_ctx = std::unique_ptr<EVP_MD_CTX, md_ctx_deleter>;

std::string to_hex(const unsigned char* d, unsigned n) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s(size_t{n} * 2, '0');
    for (unsigned i = 0; i < n; ++i) {
        s[2 * i] = digits[d[i] >> 4];
        s[2 * i + 1] = digits[d[i] & 15];
    }
    return s;
}

md_ctx start() {
    md_ctx c(EVP_MD_CTX_new());
    if (!c || EVP_DigestInit_ex(c.get(), EVP_sha256(), nullptr) != 1) return nullptr;
    return c;
}

std::string finish(EVP_MD_CTX* c) {
    std::array<unsigned char, EVP_MAX_MD_SIZE> d{};
    unsigned n = 0;
    EVP_DigestFinal_ex(c, d.data(), &n);
    return to_hex(d.data(), n);
}

}  // namespace

std::string sha256_hex(std::span<const uint8_t> bytes) {
    md_ctx c = start();
    assert(c && "OpenSSL SHA-256 unavailable");
    EVP_DigestUpdate(c.get(), bytes.data(), bytes.size());
    return finish(c.get());
}

std::string sha256_hex(std::string_view text) {
    return sha256_hex(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

result<std::string> sha256_file(const std::string& path, const progress_fn& progress) {
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
    if (!f) return error{path + ": cannot open: " + std::strerror(errno)};
    std::fseek(f.get(), 0, SEEK_END);
    const long size = std::ftell(f.get());
    std::fseek(f.get(), 0, SEEK_SET);
    md_ctx c = start();
    if (!c) return error{path + ": SHA-256 is unavailable in this OpenSSL build"};
    std::vector<unsigned char> buf(size_t{1} << 20);
    uint64_t done = 0;
    for (;;) {
        const size_t n = std::fread(buf.data(), 1, buf.size(), f.get());
        if (n > 0) EVP_DigestUpdate(c.get(), buf.data(), n);
        done += n;
        if (n < buf.size()) {
            if (std::ferror(f.get())) return error{path + ": read error: " + std::strerror(errno)};
            break;
        }
        if (progress && size > 0 && !progress(static_cast<float>(done) / static_cast<float>(size)))
            return error{path + ": fingerprint cancelled", true};
    }
    return finish(c.get());
}

}  // namespace sl

// Read-only view of a whole file (mmap, or a heap copy when mapping is off or fails) + checked size math.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sparselens/core/result.h"

namespace sl {

// The bytes of one file. Immutable once opened; shared by gguf_file and weight_storage so the
// weight views stay valid for as long as any model refers to them.
struct mapped_file {
    std::string path;
    const uint8_t* data = nullptr;
    uint64_t size = 0;
    bool mmapped = false;

    mapped_file() = default;
    mapped_file(const mapped_file&) = delete;
    mapped_file& operator=(const mapped_file&) = delete;
    ~mapped_file();

    // Errors name the path ("x.gguf: cannot open: No such file or directory").
    // weights: the caller streams the whole file (a model load), so a mapping may be copied into huge
    // pages (huge_page_weights_wanted); readers of headers or the vocabulary leave it false.
    // progress (weights only, may be null or empty): the huge-page copy's fraction done, every 64 MiB;
    // returning false cancels the open (a cancelled error naming the path).
    static result<std::shared_ptr<const mapped_file>> open(const std::string& path, bool use_mmap, bool weights = false,
                                                           const progress_fn* progress = nullptr);
    // Drops this process's resident pages wholly inside [p, p + bytes) when they are mapped from the
    // file (a read-only private mapping: a later read faults them back in from the file, so this is
    // safe while views still point there). A no-op for heap copies and for ranges outside the file.
    // True when the range's whole pages were handed back (false: nothing was, the bytes stay resident).
    bool release(const void* p, uint64_t bytes) const;
    // True when the bytes were copied from the file mapping into anonymous memory on transparent huge
    // pages (huge_page_weights_wanted(); mmapped stays true: release() maps the file back over a range).
    bool on_huge_pages() const { return m_anon_bytes != 0; }
    // Bytes already in memory; `label` plays the role of the path in messages.
    static std::shared_ptr<const mapped_file> from_bytes(const std::string& label, std::vector<uint8_t> bytes);

private:
    // False when `progress` cancelled (the file mapping is then kept, as on any failure).
    bool copy_to_huge_pages(int fd, const progress_fn* progress);
    std::vector<uint8_t> m_buffer;  // used when not mmapped
    uint64_t m_anon_bytes = 0;      // length of the huge-page copy at data (0: data is the file mapping)
    int m_fd = -1;                  // kept open for the huge-page copy: release() maps file pages back
};

// Whether a mapped model file of file_bytes is copied into huge pages: SPARSELENS_HUGE_WEIGHTS=1/0 decides;
// by default yes when transparent huge pages are enabled (always/madvise) and the file is at most half of
// MemAvailable (docs/results.md, "Weights in huge pages": decode faster, load slower, measured).
bool huge_page_weights_wanted(uint64_t file_bytes);

// Overflow-checked unsigned arithmetic for sizes that come from untrusted headers.
inline bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
inline bool checked_add(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }

// Unaligned little-endian loads (files are little-endian; we only build for little-endian hosts).
template <class T>
inline T load_le(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

// Untrusted text (keys, tensor names from a file) made safe for a one-line message: control and
// non-ASCII bytes are escaped as \xNN and long text is cut.
inline std::string printable(std::string_view s, size_t max_chars = 80) {
    static const char hex[] = "0123456789abcdef";
    std::string out;
    for (size_t i = 0; i < s.size() && i < max_chars; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            out += static_cast<char>(c);
        } else {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    if (s.size() > max_chars) out += "...";
    return out;
}

// The file's name as it should lead an error message: the path as given by the caller.
inline error file_error(const std::string& path, const std::string& what) { return error{path + ": " + what}; }

}  // namespace sl

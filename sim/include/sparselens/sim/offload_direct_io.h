// Batched O_DIRECT reads of one file: io_uring (liburing) when the kernel allows it, else a pool of
// pread threads. Offsets, lengths and buffers are multiples of 4 KiB, so the page cache never serves them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "sparselens/core/result.h"

namespace sl::offload {

struct read_request {
    uint64_t offset = 0;
    uint64_t bytes = 0;
    uint8_t* dest = nullptr;
};

class direct_reader {
public:
    // backend: "auto" (io_uring, pread pool if it cannot be set up), "uring", "pread".
    static result<std::unique_ptr<direct_reader>> open(const std::string& path, const std::string& backend = "auto",
                                                       uint32_t queue_depth = 32);
    ~direct_reader();
    // Reads every request (split into pieces of at most 1 MiB, at most queue_depth in flight); a short
    // read or an I/O error is a one-line error naming the file and the offset.
    outcome read(std::span<const read_request> reqs);
    // read() in two halves: start() queues the requests (io_uring: the first queue_depth go to the
    // device at once) and returns; finish() waits for all of them. The caller may work in between (the
    // runtime copies its cache hits) but must not touch the destinations. pread does all in finish().
    outcome start(std::span<const read_request> reqs);
    outcome finish();
    const char* backend() const;
    uint64_t requests() const;  // pieces submitted so far
    uint64_t bytes() const;     // bytes read so far

private:
    direct_reader() = default;
    struct impl;
    std::unique_ptr<impl> m;
};

// 4 KiB-aligned buffer (O_DIRECT destinations).
struct aligned_buffer {
    uint8_t* data = nullptr;
    uint64_t size = 0;
    explicit aligned_buffer(uint64_t bytes = 0);
    ~aligned_buffer();
    aligned_buffer(aligned_buffer&& o) noexcept;
    aligned_buffer& operator=(aligned_buffer&& o) noexcept;
    aligned_buffer(const aligned_buffer&) = delete;
    aligned_buffer& operator=(const aligned_buffer&) = delete;
};

}  // namespace sl::offload

// Private: a growable byte buffer of anonymous pages straight from mmap.
#pragma once

#include <cstdint>

namespace sl {

// len bytes of fresh anonymous read-write memory (zero pages on first touch); from 2 MiB on, 2 MiB-aligned
// and advised onto transparent huge pages, so they can back all of it (len then a multiple of 2 MiB).
// extra_flags are or'ed into mmap's (e.g. MAP_NORESERVE). nullptr when the system refuses; free with
// munmap(p, len).
uint8_t* map_anonymous(uint64_t len, int extra_flags = 0);

// Page-aligned anonymous memory for large buffers that are written before they are read (copies of
// weights). Unlike std::vector it is not filled with zeros by the program (the kernel hands out zero
// pages on first touch), it is advised onto transparent huge pages from 2 MiB on, and reset() returns
// it to the system at once (a freed vector of MiBs can stay in malloc's heap). GRIFFIN's first
// llama-1b Q4_0 token after each prompt copies 226 MB of experts: ~200 ms with a zero-filled vector on
// 4 KiB pages and one copying thread, 55-65 ms with this buffer and two (110-120 ms on 4 KiB pages);
// on the KVM guest it was measured on, the first prompts after a load took 100-300 ms while the host
// backed fresh guest memory.
class anon_buffer {
public:
    anon_buffer() = default;
    ~anon_buffer() { reset(); }
    anon_buffer(const anon_buffer&) = delete;
    anon_buffer& operator=(const anon_buffer&) = delete;
    anon_buffer(anon_buffer&& o) noexcept : m_data(o.m_data), m_size(o.m_size), m_mapped(o.m_mapped) {
        o.m_data = nullptr;
        o.m_size = o.m_mapped = 0;
    }
    anon_buffer& operator=(anon_buffer&& o) noexcept;

    uint8_t* data() { return m_data; }
    const uint8_t* data() const { return m_data; }
    uint64_t size() const { return m_size; }

    // At least `bytes` long, the first size() bytes kept (bytes beyond them read as zero). Throws
    // std::bad_alloc when the system refuses the memory.
    void grow(uint64_t bytes);
    // Unmaps everything (size() 0).
    void reset();

private:
    uint8_t* m_data = nullptr;
    uint64_t m_size = 0;    // bytes in use
    uint64_t m_mapped = 0;  // bytes mapped at m_data (>= m_size)
};

}  // namespace sl

#include "anon_buffer.h"

#include <sys/mman.h>

#include <cstring>
#include <new>
#include <utility>

namespace sl {

namespace {

constexpr uint64_t k_page = 4096, k_huge = uint64_t{2} << 20;

}  // namespace

uint8_t* map_anonymous(uint64_t len, int extra_flags) {
    const bool huge = len >= k_huge;
    const uint64_t slack = huge ? k_huge : 0;
    void* raw = ::mmap(nullptr, len + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    const auto r = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t a = huge ? (r + k_huge - 1) / k_huge * k_huge : r;
    if (a > r) ::munmap(raw, a - r);  // trim to the aligned start and exactly len bytes
    if (r + slack > a) ::munmap(reinterpret_cast<void*>(a + len), r + slack - a);
#ifdef MADV_HUGEPAGE
    if (huge) ::madvise(reinterpret_cast<void*>(a), len, MADV_HUGEPAGE);  // advisory only
#endif
    return reinterpret_cast<uint8_t*>(a);
}

anon_buffer& anon_buffer::operator=(anon_buffer&& o) noexcept {
    if (this != &o) {
        reset();
        std::swap(m_data, o.m_data);
        std::swap(m_size, o.m_size);
        std::swap(m_mapped, o.m_mapped);
    }
    return *this;
}

void anon_buffer::grow(uint64_t bytes) {
    if (bytes <= m_size) return;
    if (bytes <= m_mapped) {  // zero already: never written, or zeroed by reset's unmap
        m_size = bytes;
        return;
    }
    const uint64_t unit = bytes >= k_huge ? k_huge : k_page;
    const uint64_t len = (bytes + unit - 1) / unit * unit;
    uint8_t* fresh = map_anonymous(len);
    if (!fresh) throw std::bad_alloc();
    if (m_size > 0) std::memcpy(fresh, m_data, m_size);
    reset();
    m_data = fresh;
    m_size = bytes;
    m_mapped = len;
}

void anon_buffer::reset() {
    if (m_data) ::munmap(m_data, m_mapped);
    m_data = nullptr;
    m_size = m_mapped = 0;
}

}  // namespace sl

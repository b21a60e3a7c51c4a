// mapped_file: read-only mmap of a model file with a read-into-memory fallback.
#include "mapped_file.h"

#include "anon_buffer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sl {

mapped_file::~mapped_file() {
    if (mmapped && data) ::munmap(const_cast<uint8_t*>(data), m_anon_bytes ? m_anon_bytes : size);
    if (m_fd >= 0) ::close(m_fd);
}

bool mapped_file::release(const void* p, uint64_t bytes) const {
    const auto b = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(data);
    if (!mmapped || !data || b < base || b + bytes > base + size || bytes == 0) return false;
    const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t lo = (b + page - 1) / page * page, hi = (b + bytes) / page * page;
    if (hi <= lo) return false;
    if (m_anon_bytes == 0)  // advisory: failure keeps pages
        return ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED) == 0;
    // The huge-page copy: put the file's pages back over the range (same bytes, faulted in on a later
    // read, as for the plain mapping) so its anonymous memory is freed. On failure the copy stays.
    return ::mmap(reinterpret_cast<void*>(lo), hi - lo, PROT_READ, MAP_PRIVATE | MAP_FIXED, m_fd,
                  static_cast<off_t>(lo - base)) != MAP_FAILED;
}

namespace {

// Transparent huge pages usable for an madvise'd region: "[always]" or "[madvise]" selected.
bool thp_available() {
    std::FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return false;
    char buf[128] = {};
    const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = 0;
    return std::strstr(buf, "[never]") == nullptr && (std::strstr(buf, "[always]") || std::strstr(buf, "[madvise]"));
}

// MemAvailable from /proc/meminfo in bytes, 0 when unknown.
uint64_t mem_available_bytes() {
    std::FILE* f = std::fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    std::fclose(f);
    return static_cast<uint64_t>(kb) * 1024;
}

}  // namespace

bool huge_page_weights_wanted(uint64_t file_bytes) {
    if (const char* v = std::getenv("SPARSELENS_HUGE_WEIGHTS"); v != nullptr && (v[0] == '0' || v[0] == '1'))
        return v[0] == '1' && thp_available();
    // Default: only when the copy surely fits. Anonymous memory cannot be dropped under pressure the way
    // clean file pages can, so a model near the size of RAM stays on the (evictable) file mapping.
    return thp_available() && file_bytes <= mem_available_bytes() / 2;
}

// Decode streams every weight once per token; on 4 KiB pages that is one dTLB miss (and page walk) per
// 4 KiB, on 2 MiB pages one per 2 MiB. File-backed pages are not huge here (no THP for this page cache),
// so the file is read (pread: no faults on the never-touched file mapping, which is then unmapped) into
// anonymous MADV_HUGEPAGE memory: resident memory stays one copy. Anything failing leaves the file
// mapping in place (same bytes, 4 KiB pages).
bool mapped_file::copy_to_huge_pages(int fd, const progress_fn* progress) {
    constexpr uint64_t huge = 2u << 20, chunk = 64u << 20;
    const uint64_t len = (size + huge - 1) / huge * huge;
    uint8_t* dst = map_anonymous(len, MAP_NORESERVE);  // 2 MiB-aligned, advised onto huge pages
    if (!dst) return true;
    // Seconds for a file of GBs (0.7 s for 2 GB warm, 4-15 s on fresh memory under load): say how far.
    for (uint64_t done = 0; done < size;) {
        if (progress && *progress && !(*progress)(static_cast<float>(static_cast<double>(done) / static_cast<double>(size)))) {
            ::munmap(dst, len);
            return false;
        }
        const ssize_t n = ::pread(fd, dst + done, std::min(chunk, size - done), static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {  // keep the mapping (which reports its own errors on access as before)
            ::munmap(dst, len);
            return true;
        }
        done += static_cast<uint64_t>(n);
    }
    ::mprotect(dst, len, PROT_READ);
    ::munmap(const_cast<uint8_t*>(data), size);
    data = dst;
    m_anon_bytes = len;
    return true;
}

result<std::shared_ptr<const mapped_file>> mapped_file::open(const std::string& path, bool use_mmap, bool weights,
                                                             const progress_fn* progress) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return file_error(path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int e = errno;
        ::close(fd);
        return file_error(path, std::string("cannot stat: ") + std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        return file_error(path, "not a regular file");
    }
    auto f = std::make_shared<mapped_file>();
    f->path = path;
    f->size = static_cast<uint64_t>(st.st_size);
    if (f->size == 0) {
        ::close(fd);
        return file_error(path, "file is empty");
    }
    if (use_mmap) {
        void* p = ::mmap(nullptr, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            f->data = static_cast<const uint8_t*>(p);
            f->mmapped = true;
            if (weights && huge_page_weights_wanted(f->size) && !f->copy_to_huge_pages(fd, progress)) {
                ::close(fd);
                return error{path + ": load cancelled", true};
            }
            if (f->on_huge_pages())
                f->m_fd = fd;
            else
                ::close(fd);
            return std::shared_ptr<const mapped_file>(std::move(f));
        }
        // fall through: some filesystems cannot be mapped; a heap copy still works
    }
    try {
        f->m_buffer.resize(f->size);
    } catch (const std::bad_alloc&) {
        ::close(fd);
        return file_error(path, "out of memory reading " + std::to_string(f->size) + " bytes");
    }
    uint64_t done = 0;
    while (done < f->size) {
        const ssize_t n = ::pread(fd, f->m_buffer.data() + done, f->size - done, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int e = errno;
            ::close(fd);
            return file_error(path, n == 0 ? std::string("file shrank while reading")
                                           : std::string("read error: ") + std::strerror(e));
        }
        done += static_cast<uint64_t>(n);
    }
    ::close(fd);
    f->data = f->m_buffer.data();
    return std::shared_ptr<const mapped_file>(std::move(f));
}

std::shared_ptr<const mapped_file> mapped_file::from_bytes(const std::string& label, std::vector<uint8_t> bytes) {
    auto f = std::make_shared<mapped_file>();
    f->path = label;
    f->m_buffer = std::move(bytes);
    f->data = f->m_buffer.data();
    f->size = f->m_buffer.size();
    return f;
}

}  // namespace sl

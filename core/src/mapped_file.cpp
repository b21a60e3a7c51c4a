// mapped_file: read-only mmap of a model file with a read-into-memory fallback.
#include "mapped_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sl {

mapped_file::~mapped_file() {
    if (mmapped && data) ::munmap(const_cast<uint8_t*>(data), size);
}

void mapped_file::release(const void* p, uint64_t bytes) const {
    const auto b = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(data);
    if (!mmapped || !data || b < base || b + bytes > base + size || bytes == 0) return;
    const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t lo = (b + page - 1) / page * page, hi = (b + bytes) / page * page;
    if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);  // advisory: failure keeps pages
}

result<std::shared_ptr<const mapped_file>> mapped_file::open(const std::string& path, bool use_mmap) {
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

// O_DIRECT batched reads: io_uring keeps up to queue_depth reads in flight from one thread; the pread
// fallback spreads the same pieces over a few threads.
#include "sparselens/sim/offload_direct_io.h"

#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

namespace sl::offload {

namespace {
constexpr uint64_t k_piece = 1 << 20;
constexpr uint64_t k_align = 4096;
}  // namespace

aligned_buffer::aligned_buffer(uint64_t bytes) {
    if (!bytes) return;
    size = (bytes + k_align - 1) / k_align * k_align;
    data = static_cast<uint8_t*>(std::aligned_alloc(k_align, size));
    if (!data) size = 0;
}
aligned_buffer::~aligned_buffer() { std::free(data); }
aligned_buffer::aligned_buffer(aligned_buffer&& o) noexcept
    : data(std::exchange(o.data, nullptr)), size(std::exchange(o.size, 0)) {}
aligned_buffer& aligned_buffer::operator=(aligned_buffer&& o) noexcept {
    std::swap(data, o.data);
    std::swap(size, o.size);
    return *this;
}

struct direct_reader::impl {
    std::string path;
    int fd = -1;
    bool uring = false;
    io_uring ring{};
    uint32_t depth = 32;
    uint64_t n_requests = 0, n_bytes = 0;
    std::vector<read_request> pieces;

    ~impl() {
        if (uring) io_uring_queue_exit(&ring);
        if (fd >= 0) ::close(fd);
    }

    std::string short_read(const read_request& r, int64_t got) const {
        if (got < 0)
            return path + ": read of " + std::to_string(r.bytes) + " bytes at offset " + std::to_string(r.offset) +
                   " failed: " + std::strerror(static_cast<int>(-got));
        return path + ": short read at offset " + std::to_string(r.offset) + " (" + std::to_string(got) + " of " +
               std::to_string(r.bytes) + " bytes): the file shrank or is truncated";
    }

    size_t next = 0, done = 0, inflight = 0;
    std::string err;

    // Queues pieces up to the depth; `wait_for` completions are awaited in the same system call.
    outcome submit_more(unsigned wait_for) {
        while (next < pieces.size() && inflight < depth) {
            io_uring_sqe* sqe = io_uring_get_sqe(&ring);
            if (!sqe) break;
            const read_request& r = pieces[next];
            io_uring_prep_read(sqe, fd, r.dest, static_cast<unsigned>(r.bytes), r.offset);
            io_uring_sqe_set_data64(sqe, next);
            ++next;
            ++inflight;
        }
        const int s = wait_for ? io_uring_submit_and_wait(&ring, wait_for) : io_uring_submit(&ring);
        if (s < 0) return error{path + ": io_uring submit failed: " + std::strerror(-s)};
        return {};
    }

    outcome start_uring() {
        next = done = inflight = 0;
        err.clear();
        return submit_more(0);
    }

    outcome finish_uring() {
        while (done < pieces.size()) {
            if (auto o = submit_more(1); !o) return o;
            io_uring_cqe* cqe = nullptr;
            unsigned head = 0, seen = 0;
            io_uring_for_each_cqe(&ring, head, cqe) {
                const read_request& r = pieces[io_uring_cqe_get_data64(cqe)];
                if (err.empty() && static_cast<uint64_t>(std::max(cqe->res, 0)) != r.bytes) err = short_read(r, cqe->res);
                ++seen;
            }
            io_uring_cq_advance(&ring, seen);
            done += seen;
            inflight -= seen;
        }
        if (!err.empty()) return error{err};
        return {};
    }

    outcome read_pread() {
        const unsigned n_threads = std::min<unsigned>(depth, std::min<size_t>(8, pieces.size()));
        std::atomic<size_t> next{0};
        std::vector<std::string> errs(n_threads);
        auto work = [&](unsigned t) {
            for (size_t i; (i = next.fetch_add(1)) < pieces.size();) {
                const read_request& r = pieces[i];
                const ssize_t got = ::pread(fd, r.dest, r.bytes, static_cast<off_t>(r.offset));
                if (got != static_cast<ssize_t>(r.bytes) && errs[t].empty())
                    errs[t] = short_read(r, got < 0 ? -errno : got);
            }
        };
        std::vector<std::thread> pool;
        for (unsigned t = 1; t < n_threads; ++t) pool.emplace_back(work, t);
        work(0);
        for (std::thread& th : pool) th.join();
        for (const std::string& e : errs)
            if (!e.empty()) return error{e};
        return {};
    }
};

result<std::unique_ptr<direct_reader>> direct_reader::open(const std::string& path, const std::string& backend,
                                                           uint32_t queue_depth) {
    if (backend != "auto" && backend != "uring" && backend != "pread")
        return error{"unknown I/O backend '" + backend + "' (auto, uring, pread)"};
    std::unique_ptr<direct_reader> r(new direct_reader());
    r->m = std::make_unique<impl>();
    r->m->path = path;
    r->m->depth = std::clamp<uint32_t>(queue_depth, 1, 256);
    r->m->fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (r->m->fd < 0) return error{path + ": cannot open with O_DIRECT: " + std::strerror(errno)};
    if (backend != "pread") {
        const int e = io_uring_queue_init(r->m->depth, &r->m->ring, 0);
        if (e == 0)
            r->m->uring = true;
        else if (backend == "uring")
            return error{path + ": io_uring is not available: " + std::strerror(-e)};
    }
    return r;
}

direct_reader::~direct_reader() = default;

outcome direct_reader::start(std::span<const read_request> reqs) {
    m->pieces.clear();
    m->next = m->done = m->inflight = 0;
    for (const read_request& r : reqs) {
        if (r.offset % k_align || r.bytes % k_align || reinterpret_cast<uintptr_t>(r.dest) % k_align)
            return error{m->path + ": unaligned O_DIRECT request at offset " + std::to_string(r.offset)};
        for (uint64_t o = 0; o < r.bytes; o += k_piece)
            m->pieces.push_back({r.offset + o, std::min(k_piece, r.bytes - o), r.dest + o});
    }
    if (m->pieces.empty()) return {};
    m->n_requests += m->pieces.size();
    for (const read_request& p : m->pieces) m->n_bytes += p.bytes;
    return m->uring ? m->start_uring() : outcome{};
}

outcome direct_reader::finish() {
    if (m->pieces.empty()) return {};
    outcome o = m->uring ? m->finish_uring() : m->read_pread();
    m->pieces.clear();
    return o;
}

outcome direct_reader::read(std::span<const read_request> reqs) {
    if (auto o = start(reqs); !o) return o;
    return finish();
}

const char* direct_reader::backend() const { return m->uring ? "io_uring" : "pread"; }
uint64_t direct_reader::requests() const { return m->n_requests; }
uint64_t direct_reader::bytes() const { return m->n_bytes; }

}  // namespace sl::offload

// Save As for sessions: VACUUM INTO a temporary file beside the destination, then move it into place.
#include "sparselens/sessions/session_copy.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <unistd.h>

#include "sparselens/sessions/session_store.h"
#include "sqlite_util.h"

namespace sl::sessions {

namespace fs = std::filesystem;
using detail::connection;
using detail::statement;

namespace {

// Writes the snapshot of `src` into `tmp` and makes it a WAL session like the ones create() makes.
outcome write_snapshot(const std::string& src, const std::string& tmp, const std::string& name) {
    {
        result<connection> c = connection::open(src, SQLITE_OPEN_READONLY);
        if (!c.ok()) return c.err();
        sqlite3_busy_timeout(c->get(), 5000);
        result<statement> s = statement::prepare(*c, "VACUUM INTO ?1");
        if (!s.ok()) return s.err();
        s->bind(1, std::string_view(tmp));
        if (outcome o = s->run("cannot write a copy"); !o.ok()) return o;
    }
    result<connection> c = connection::open(tmp, SQLITE_OPEN_READWRITE);
    if (!c.ok()) return c.err();
    if (!name.empty()) {
        result<statement> s = statement::prepare(*c, "UPDATE meta SET value = ?1 WHERE key = 'name'");
        if (!s.ok()) return s.err();
        s->bind(1, std::string_view(name));
        if (outcome o = s->run("cannot rename the session"); !o.ok()) return o;
    }
    return c->exec("PRAGMA journal_mode = WAL", "cannot switch to WAL");
    // closing checkpoints and removes the copy's -wal file: the temporary file is complete on its own
}

}  // namespace

outcome session_copy(const std::string& src, const std::string& dst, const session_copy_params& p) {
    if (dst.empty()) return error{src + ": no destination to save the session to"};
    std::error_code ec;
    const bool dst_exists = fs::exists(dst, ec);
    if (dst_exists && fs::equivalent(src, dst, ec)) return error{dst + ": is the session itself; choose another file"};
    if (dst_exists && !p.overwrite) return error{dst + ": already exists"};
    if (result<session_info> i = session_store::probe(src); !i.ok()) return i.err();

    const std::string tmp = dst + ".saving-" + std::to_string(::getpid());
    ::unlink(tmp.c_str());
    auto fail = [&](const error& e) -> outcome {
        ::unlink(tmp.c_str());
        ::unlink((tmp + "-wal").c_str());
        ::unlink((tmp + "-shm").c_str());
        // SQLite names the temporary file in its messages; the user chose `dst`.
        std::string msg = e.message;
        if (msg.compare(0, tmp.size(), tmp) == 0) msg = dst + msg.substr(tmp.size());
        return error{msg};
    };
    if (outcome o = write_snapshot(src, tmp, p.name); !o.ok()) return fail(o.err());
    if (result<session_info> i = session_store::probe(tmp); !i.ok()) return fail(i.err());
    // The read-only probe leaves an empty -wal / -shm beside the temporary name (a read-only connection
    // cannot remove them); nothing else knows that name.
    ::unlink((tmp + "-wal").c_str());
    ::unlink((tmp + "-shm").c_str());

    int rc = 0;
    if (dst_exists) {
        // A -wal left beside the old file would be replayed into the new one on its next open.
        ::unlink((dst + "-wal").c_str());
        ::unlink((dst + "-shm").c_str());
        rc = ::rename(tmp.c_str(), dst.c_str());
    } else {
        // link() refuses to replace a file that appeared meanwhile; rename() is the fallback for file
        // systems without hard links.
        rc = ::link(tmp.c_str(), dst.c_str());
        if (rc != 0 && errno != EEXIST) rc = ::rename(tmp.c_str(), dst.c_str());
    }
    const int err = errno;
    if (rc != 0)
        return fail(error{dst + (err == EEXIST ? ": already exists" : ": cannot save: " + std::string(std::strerror(err)))});
    ::unlink(tmp.c_str());
    return {};
}

}  // namespace sl::sessions

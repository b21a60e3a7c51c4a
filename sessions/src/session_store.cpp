// Creating, validating, opening and migrating session files.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "schema.h"
#include "sparselens/core/text_format.h"
#include "store_impl.h"

namespace sl::sessions {

using detail::connection;

namespace {

// Long enough for another process's run insert or a checkpoint; the GUI's engine thread waits at most this.
constexpr int busy_timeout_ms = 5000;

// Checks what can be checked without SQLite: a regular file, the SQLite magic, our application_id.
// Foreign files are thereby refused before SQLite opens them at all.
outcome check_header(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return error{path + ": cannot open: " + std::strerror(errno)};
    if (!S_ISREG(st.st_mode)) return error{path + ": not a SparseLens session (not a regular file)"};
    std::array<unsigned char, 100> h{};
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return error{path + ": cannot open: " + std::strerror(errno)};
    const size_t n = std::fread(h.data(), 1, h.size(), f);
    std::fclose(f);
    static constexpr char magic[] = "SQLite format 3";  // 16 bytes with the terminating NUL
    if (n < h.size() || std::memcmp(h.data(), magic, sizeof magic) != 0)
        return error{path + ": not a SparseLens session (not an SQLite database)"};
    const uint32_t app = (uint32_t(h[68]) << 24) | (uint32_t(h[69]) << 16) | (uint32_t(h[70]) << 8) | uint32_t(h[71]);
    if (app != application_id) {
        char buf[96];
        std::snprintf(buf, sizeof buf, " (an SQLite database with application_id 0x%08x, expected 0x%08x)", app,
                      application_id);
        return error{path + ": not a SparseLens session" + buf};
    }
    return {};
}

// SQLite's integrity reports span lines ("*** in database main ***\nPage 5: ..."); errors are one line.
std::string one_line(std::string m) {
    for (const char* noise : {"*** in database main ***\n", "*** in database main ***"})
        for (size_t at; (at = m.find(noise)) != std::string::npos;) m.erase(at, std::strlen(noise));
    for (char& ch : m)
        if (ch == '\n' || ch == '\r') ch = ' ';
    return m;
}

// Read-only validation: integrity, meta table and schema version. Returns the version.
result<int32_t> validate(connection& c) {
    result<std::string> qc = detail::query_text(c, "PRAGMA quick_check(1)", "cannot check integrity");
    if (!qc.ok()) {
        // "database disk image is malformed" and the like: the message after the path says it.
        const std::string& m = qc.message();
        return error{c.path() + ": corrupt session (" + one_line(m.substr(m.rfind(": ") + 2)) + ")"};
    }
    if (*qc != "ok") return error{c.path() + ": corrupt session (" + one_line(*qc) + ")"};
    result<int32_t> v = detail::schema_version_of(c);
    if (!v.ok()) return v;
    if (*v > schema_version_current)
        return error{c.path() + ": session schema version " + std::to_string(*v) +
                     " is newer than this SparseLens supports (" + std::to_string(schema_version_current) +
                     "): update SparseLens"};
    return v;
}

result<connection> open_validated_read_only(const std::string& path, int32_t& version) {
    if (outcome o = check_header(path); !o.ok()) return o.err();
    result<connection> c = connection::open(path, SQLITE_OPEN_READONLY);
    if (!c.ok()) return c;
    sqlite3_busy_timeout(c->get(), busy_timeout_ms);
    result<int32_t> v = validate(*c);
    if (!v.ok()) return v.err();
    version = *v;
    return c;
}

outcome configure_writer(connection& c) {
    sqlite3_busy_timeout(c.get(), busy_timeout_ms);
    // WAL: readers (the GUI, `session list`) never block the writer and a killed writer leaves the
    // committed prefix. synchronous=FULL fsyncs the WAL at every commit so a run the CLI reported as
    // recorded survives power loss too (NORMAL only protects against process crashes); runs are
    // written seconds apart, so the fsync costs nothing that matters.
    return c.exec("PRAGMA foreign_keys = ON; PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL",
                  "cannot configure the connection");
}

void fsync_dir_of(const std::string& path) {
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

outcome create_file(const std::string& path, const std::string& name, int32_t version) {
    if (path.empty()) return error{"session: empty file name"};
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) return error{path + ": already exists"};
    const std::string tmp = path + ".creating-" + std::to_string(::getpid());
    ::unlink(tmp.c_str());
    {
        result<connection> c = connection::open(tmp, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
        if (!c.ok()) return error{path + ": cannot create: " + c.message().substr(tmp.size() + 2)};
        outcome o = c->exec("PRAGMA synchronous = FULL", "cannot configure the connection");
        if (o.ok()) o = detail::schema_create(*c, version, name);
        if (o.ok()) o = c->exec("PRAGMA journal_mode = WAL", "cannot switch to WAL");
        if (!o.ok()) {
            c->close();
            ::unlink(tmp.c_str());
            return error{path + ": cannot create: " + o.message().substr(tmp.size() + 2)};
        }
    }  // closing checkpoints and removes the -wal file: the temporary file is complete on its own
    // link() refuses to replace a file that appeared meanwhile; rename() is the fallback for file
    // systems without hard links.
    int rc = ::link(tmp.c_str(), path.c_str());
    if (rc != 0 && errno != EEXIST && ::lstat(path.c_str(), &st) != 0) rc = ::rename(tmp.c_str(), path.c_str());
    const int err = errno;
    ::unlink(tmp.c_str());
    if (rc != 0) return error{path + (err == EEXIST ? ": already exists" : ": cannot create: " + std::string(std::strerror(err)))};
    fsync_dir_of(path);
    return {};
}

}  // namespace


session_store::session_store(std::unique_ptr<impl> p) : m(std::move(p)) {}
session_store::session_store(session_store&&) noexcept = default;
session_store& session_store::operator=(session_store&&) noexcept = default;
session_store::~session_store() = default;

const std::string& session_store::path() const { return m->db.path(); }
bool session_store::read_only() const { return m->read_only; }

result<session_store> session_store::create(const std::string& path, const std::string& name) {
    if (outcome o = create_file(path, name, schema_version_current); !o.ok()) return o.err();
    return open(path, false);
}

outcome create_session_at_version(const std::string& path, const std::string& name, int32_t version) {
    if (version < 1 || version > schema_version_current)
        return error{path + ": no schema version " + std::to_string(version)};
    return create_file(path, name, version);
}

result<session_store> session_store::open(const std::string& path, bool read_only) {
    int32_t version = 0;
    result<connection> ro = open_validated_read_only(path, version);
    if (!ro.ok()) return ro.err();
    auto p = std::make_unique<impl>();
    if (read_only) {
        if (version < schema_version_current)
            return error{path + ": session schema version " + std::to_string(version) + " is older than this SparseLens's (" +
                         std::to_string(schema_version_current) + "): open it writable once to migrate it"};
        p->db = std::move(*ro);
        p->read_only = true;
        return session_store(std::move(p));
    }
    ro->close();
    // No SQLITE_OPEN_CREATE: a file removed since validation is an error, not a new empty database.
    result<connection> rw = connection::open(path, SQLITE_OPEN_READWRITE);
    if (!rw.ok()) return rw.err();
    if (outcome o = configure_writer(*rw); !o.ok()) return o.err();
    if (outcome o = detail::schema_migrate(*rw); !o.ok()) return o.err();
    result<int32_t> v = detail::schema_version_of(*rw);  // another process may have written a newer one
    if (!v.ok()) return v.err();
    if (*v != schema_version_current)
        return error{path + ": session schema version " + std::to_string(*v) + " is newer than this SparseLens supports (" +
                     std::to_string(schema_version_current) + "): update SparseLens"};
    p->db = std::move(*rw);
    return session_store(std::move(p));
}

namespace detail {

result<session_info> read_info(const connection& c) {
    session_info info;
    info.path = c.path();
    result<int32_t> v = schema_version_of(c);
    if (!v.ok()) return v.err();
    info.schema_version = *v;
    result<statement> s = statement::prepare(c, "SELECT key, value FROM meta");
    if (!s.ok()) return s.err();
    for (;;) {
        result<bool> row = s->step("cannot read the meta table");
        if (!row.ok()) return row.err();
        if (!*row) break;
        const std::string k = s->text(0);
        if (k == "name") info.name = s->text(1);
        else if (k == "created") info.created = s->text(1);
        else if (k == "tool") info.tool = s->text(1);
    }
    const std::pair<const char*, int64_t*> counts[] = {{"models", &info.models}, {"texts", &info.texts},
                                                       {"calibrations", &info.calibrations}, {"runs", &info.runs},
                                                       {"sweeps", &info.sweeps}, {"exports", &info.exports}};
    for (auto [table, out] : counts) {
        result<bool> exists = table_exists(c, table);
        if (!exists.ok()) return exists.err();
        if (!*exists) continue;
        result<int64_t> n = query_i64(c, std::string("SELECT count(*) FROM ") + table, "cannot count rows");
        if (!n.ok()) return n.err();
        *out = *n;
    }
    struct stat st {};
    if (::stat(c.path().c_str(), &st) == 0) {
        info.file_bytes = st.st_size;
        info.modified = utc_iso8601(st.st_mtime);
    }
    return info;
}

}  // namespace detail

result<session_info> session_store::probe(const std::string& path) {
    int32_t version = 0;
    result<connection> c = open_validated_read_only(path, version);
    if (!c.ok()) return c.err();
    return detail::read_info(*c);
}

result<session_info> session_store::info() const { return detail::read_info(m->db); }

outcome session_store::set_name(const std::string& name) {
    if (outcome o = m->check_writable(); !o.ok()) return o;
    result<detail::statement> s = detail::statement::prepare(m->db, "UPDATE meta SET value = ?1 WHERE key = 'name'");
    if (!s.ok()) return s.err();
    s->bind(1, name);
    return s->run("cannot rename the session");
}

outcome session_store::in_transaction(const std::function<outcome()>& body) {
    if (outcome o = m->check_writable(); !o.ok()) return o;
    result<detail::transaction> t = detail::transaction::begin(m->db);
    if (!t.ok()) return t.err();
    if (outcome o = body(); !o.ok()) return o;
    return t->commit();
}

}  // namespace sl::sessions

// RAII wrappers over the SQLite C API.
#include "sqlite_util.h"

#include <utility>

namespace sl::sessions::detail {

connection& connection::operator=(connection&& o) noexcept {
    if (this != &o) {
        close();
        m_db = std::exchange(o.m_db, nullptr);
        m_path = std::move(o.m_path);
    }
    return *this;
}

result<connection> connection::open(const std::string& path, int flags) {
    connection c;
    c.m_path = path;
    const int rc = sqlite3_open_v2(path.c_str(), &c.m_db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
        std::string msg = c.m_db ? sqlite3_errmsg(c.m_db) : sqlite3_errstr(rc);
        return error{path + ": cannot open: " + msg};
    }
    sqlite3_extended_result_codes(c.m_db, 1);
    return c;
}

void connection::close() {
    if (m_db) {
        sqlite3_close_v2(m_db);
        m_db = nullptr;
    }
}

error connection::fail(std::string_view what) const {
    return error{m_path + ": " + std::string(what) + ": " + (m_db ? sqlite3_errmsg(m_db) : "not open")};
}

outcome connection::exec(const std::string& sql, std::string_view what) {
    char* err = nullptr;
    if (sqlite3_exec(m_db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        std::string msg = m_path + ": " + std::string(what) + ": " + (err ? err : sqlite3_errmsg(m_db));
        sqlite3_free(err);
        return error{msg};
    }
    return {};
}

result<statement> statement::prepare(const connection& c, std::string_view sql) {
    statement s;
    s.m_db = c.get();
    s.m_path = c.path();
    if (sqlite3_prepare_v2(c.get(), sql.data(), static_cast<int>(sql.size()), &s.m_stmt, nullptr) != SQLITE_OK)
        return c.fail("cannot prepare a query (" + std::string(sql.substr(0, 40)) + "...)");
    return s;
}

statement& statement::bind(int i, int64_t v) {
    sqlite3_bind_int64(m_stmt, i, v);
    return *this;
}
statement& statement::bind(int i, double v) {
    sqlite3_bind_double(m_stmt, i, v);
    return *this;
}
statement& statement::bind(int i, std::string_view v) {
    sqlite3_bind_text64(m_stmt, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
    return *this;
}
statement& statement::bind_blob(int i, const void* data, size_t n) {
    sqlite3_bind_blob64(m_stmt, i, n ? data : "", n, SQLITE_TRANSIENT);
    return *this;
}
statement& statement::bind_null(int i) {
    sqlite3_bind_null(m_stmt, i);
    return *this;
}

result<bool> statement::step(std::string_view what) {
    const int rc = sqlite3_step(m_stmt);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return error{m_path + ": " + std::string(what) + ": " + sqlite3_errmsg(m_db)};
}

outcome statement::run(std::string_view what) {
    result<bool> r = step(what);
    if (!r.ok()) return r.err();
    return {};
}

std::string statement::text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(m_stmt, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(m_stmt, col))) : std::string();
}

result<transaction> transaction::begin(connection& c) {
    const bool nested = sqlite3_get_autocommit(c.get()) == 0;
    if (outcome o = c.exec(nested ? "SAVEPOINT sl_write" : "BEGIN IMMEDIATE", "cannot start a write"); !o.ok())
        return o.err();
    return transaction(c, nested);
}

transaction::~transaction() {
    if (m_done) return;
    // Best effort: the error of the statement that failed is what the caller reports.
    if (m_nested)
        sqlite3_exec(m_c->get(), "ROLLBACK TO sl_write; RELEASE sl_write", nullptr, nullptr, nullptr);
    else
        sqlite3_exec(m_c->get(), "ROLLBACK", nullptr, nullptr, nullptr);
}

outcome transaction::commit() {
    outcome o = m_c->exec(m_nested ? "RELEASE sl_write" : "COMMIT", "cannot commit");
    if (o.ok()) m_done = true;
    return o;
}

result<int64_t> query_i64(const connection& c, std::string_view sql, std::string_view what) {
    result<statement> s = statement::prepare(c, sql);
    if (!s.ok()) return s.err();
    result<bool> row = s->step(what);
    if (!row.ok()) return row.err();
    if (!*row) return error{c.path() + ": " + std::string(what) + ": no result"};
    return s->i64(0);
}

result<std::string> query_text(const connection& c, std::string_view sql, std::string_view what) {
    result<statement> s = statement::prepare(c, sql);
    if (!s.ok()) return s.err();
    result<bool> row = s->step(what);
    if (!row.ok()) return row.err();
    if (!*row) return error{c.path() + ": " + std::string(what) + ": no result"};
    return s->text(0);
}

result<bool> table_exists(const connection& c, std::string_view table) {
    result<statement> s = statement::prepare(c, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1");
    if (!s.ok()) return s.err();
    s->bind(1, table);
    return s->step("cannot read the schema");
}

}  // namespace sl::sessions::detail

// Small RAII wrappers over the SQLite C API (connection, prepared statement, transaction); private to sessions/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <sqlite3.h>

#include "sparselens/core/result.h"

namespace sl::sessions::detail {

// Owns one sqlite3 connection; closes it (and so checkpoints a WAL database on the last close) on destruction.
class connection {
public:
    connection() = default;
    ~connection() { close(); }
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;
    connection(connection&& o) noexcept : m_db(o.m_db), m_path(std::move(o.m_path)) { o.m_db = nullptr; }
    connection& operator=(connection&& o) noexcept;

    // `flags`: SQLITE_OPEN_* (NOMUTEX is added: a connection belongs to one thread). Errors name `path`.
    static result<connection> open(const std::string& path, int flags);

    sqlite3* get() const { return m_db; }
    const std::string& path() const { return m_path; }
    bool is_open() const { return m_db != nullptr; }
    void close();

    // Runs one or more statements without results; errors are "PATH: what failed: sqlite message".
    outcome exec(const std::string& sql, std::string_view what);
    // "PATH: what: <sqlite3_errmsg>".
    error fail(std::string_view what) const;

private:
    sqlite3* m_db = nullptr;
    std::string m_path;
};

// One prepared statement. Binding indices are 1-based, column indices 0-based (as in SQLite).
class statement {
public:
    statement() = default;
    ~statement() { sqlite3_finalize(m_stmt); }
    statement(const statement&) = delete;
    statement& operator=(const statement&) = delete;
    statement(statement&& o) noexcept : m_stmt(o.m_stmt), m_db(o.m_db), m_path(std::move(o.m_path)) { o.m_stmt = nullptr; }

    static result<statement> prepare(const connection& c, std::string_view sql);

    statement& bind(int i, int64_t v);
    statement& bind(int i, double v);
    statement& bind(int i, std::string_view v);
    statement& bind_blob(int i, const void* data, size_t n);
    statement& bind_null(int i);
    statement& bind(int i, const std::optional<double>& v) { return v ? bind(i, *v) : bind_null(i); }
    statement& bind(int i, const std::optional<int64_t>& v) { return v ? bind(i, *v) : bind_null(i); }

    // SQLITE_ROW → true, SQLITE_DONE → false, anything else → the error (with `what`).
    result<bool> step(std::string_view what);
    // Steps a statement that returns no rows.
    outcome run(std::string_view what);
    void reset() { sqlite3_reset(m_stmt); sqlite3_clear_bindings(m_stmt); }

    bool is_null(int col) const { return sqlite3_column_type(m_stmt, col) == SQLITE_NULL; }
    int64_t i64(int col) const { return sqlite3_column_int64(m_stmt, col); }
    double f64(int col) const { return sqlite3_column_double(m_stmt, col); }
    std::string text(int col) const;
    std::optional<double> opt_f64(int col) const { return is_null(col) ? std::nullopt : std::optional(f64(col)); }
    std::optional<int64_t> opt_i64(int col) const { return is_null(col) ? std::nullopt : std::optional(i64(col)); }

private:
    sqlite3_stmt* m_stmt = nullptr;
    sqlite3* m_db = nullptr;
    std::string m_path;
};

// A write transaction: BEGIN IMMEDIATE when the connection is in autocommit mode (so the write lock is
// taken up front and busy_timeout applies, instead of failing on lock upgrade), else a SAVEPOINT nested
// in the caller's transaction. Rolls back on destruction unless commit() succeeded.
class transaction {
public:
    static result<transaction> begin(connection& c);
    transaction(transaction&& o) noexcept : m_c(o.m_c), m_nested(o.m_nested), m_done(o.m_done) { o.m_done = true; }
    transaction(const transaction&) = delete;
    transaction& operator=(const transaction&) = delete;
    ~transaction();
    outcome commit();

private:
    transaction(connection& c, bool nested) : m_c(&c), m_nested(nested) {}
    connection* m_c;
    bool m_nested;
    bool m_done = false;
};

// Single-value queries.
result<int64_t> query_i64(const connection& c, std::string_view sql, std::string_view what);
result<std::string> query_text(const connection& c, std::string_view sql, std::string_view what);
result<bool> table_exists(const connection& c, std::string_view table);

}  // namespace sl::sessions::detail

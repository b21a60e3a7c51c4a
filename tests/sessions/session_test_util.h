// Helpers for the session tests: temporary session paths and raw SQLite access (for what the store hides).
#pragma once

#include <sqlite3.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "sparselens/core/fingerprint.h"
#include "sparselens/sessions/session_store.h"
#include "test_support.h"

namespace sl::test {

// A fresh directory per test under the temp dir; removed at destruction.
struct temp_dir {
    std::filesystem::path path;
    temp_dir() {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        path = std::filesystem::temp_directory_path() /
               ("sl_sessions_" + std::to_string(::getpid()) + "_" + (info ? info->name() : "x"));
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~temp_dir() { std::filesystem::remove_all(path); }
    std::string file(const std::string& name) const { return (path / name).string(); }
};

// A raw connection, for checks and for writing rows of old schema versions as old builds did.
struct raw_db {
    sqlite3* db = nullptr;
    explicit raw_db(const std::string& path, bool read_only = false) {
        sqlite3_open_v2(path.c_str(), &db, read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE, nullptr);
    }
    ~raw_db() { sqlite3_close(db); }
    void exec(const std::string& sql) {
        char* err = nullptr;
        const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
        ASSERT_EQ(rc, SQLITE_OK) << (err ? err : "") << "\n" << sql;
    }
    // Every row of a query as "a|b|c" strings (NULL as "NULL").
    std::vector<std::string> rows(const std::string& sql) {
        std::vector<std::string> out;
        sqlite3_stmt* s = nullptr;
        if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
            ADD_FAILURE() << sqlite3_errmsg(db) << ": " << sql;
            return out;
        }
        while (sqlite3_step(s) == SQLITE_ROW) {
            std::string row;
            for (int i = 0; i < sqlite3_column_count(s); ++i) {
                if (i) row += "|";
                const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
                row += t ? t : "NULL";
            }
            out.push_back(row);
        }
        sqlite3_finalize(s);
        return out;
    }
    std::string one(const std::string& sql) {
        auto r = rows(sql);
        return r.empty() ? std::string("<no row>") : r.front();
    }
};

inline std::string file_sha(const std::string& path) {
    auto h = sl::sha256_file(path);
    return h.ok() ? h.value() : std::string("unreadable: ") + h.message();
}

inline std::string hex64(char c) { return std::string(64, c); }

}  // namespace sl::test

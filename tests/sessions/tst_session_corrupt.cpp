// Files that are not valid sessions: each gives a one-line error naming the file, and its bytes are unchanged.
#include <random>

#include "session_test_util.h"

using namespace sl;
using namespace sl::sessions;
using sl::test::file_sha;
using sl::test::raw_db;
using sl::test::temp_dir;

namespace {

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A session with some runs, checkpointed into one file.
std::string make_session(const temp_dir& d, const std::string& name, int runs) {
    const std::string p = d.file(name);
    auto s = session_store::create(p, "victim");
    EXPECT_TRUE(s.ok()) << s.message();
    model_record m;
    m.sha256 = sl::test::hex64('e');
    m.path = "/m.bin";
    m.format = "gguf";
    auto mid = s->add_model(m);
    EXPECT_TRUE(mid.ok());
    for (int i = 0; i < runs; ++i) {
        run_record r;
        r.method = "dip";
        r.model_id = *mid;
        r.per_layer_json = std::string(2000, 'x');  // spread the rows over several pages
        EXPECT_TRUE(s->add_run(r).ok());
    }
    return p;
}

// Opening (writable and read-only) and probing must all fail with `expect` in a one-line message naming
// the file, and leave the file's bytes as they were.
void expect_refused(const std::string& path, const std::string& expect) {
    const std::string before = file_sha(path);
    for (int mode = 0; mode < 3; ++mode) {
        std::string msg;
        if (mode == 2) {
            auto r = session_store::probe(path);
            ASSERT_FALSE(r.ok()) << path;
            msg = r.message();
        } else {
            auto r = session_store::open(path, mode == 1);
            ASSERT_FALSE(r.ok()) << path;
            msg = r.message();
        }
        EXPECT_EQ(msg.rfind(path, 0), 0u) << msg;
        EXPECT_NE(msg.find(expect), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
        EXPECT_EQ(file_sha(path), before) << "mode " << mode << " modified " << path;
    }
}

}  // namespace

TEST(session_corrupt, random_bytes_are_not_an_sqlite_database) {
    temp_dir d;
    std::mt19937 rng(7);
    std::vector<uint8_t> bytes(8192);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    const std::string p = d.file("random.slsession");
    write_bytes(p, bytes);
    expect_refused(p, "not a SparseLens session (not an SQLite database)");
}

TEST(session_corrupt, empty_and_short_files_are_refused_not_initialised) {
    temp_dir d;
    const std::string empty = d.file("empty.slsession");
    write_bytes(empty, {});
    expect_refused(empty, "not an SQLite database");
    EXPECT_EQ(std::filesystem::file_size(empty), 0u);
    const std::string text = d.file("text.slsession");
    write_bytes(text, {'S', 'Q', 'L', 'i', 't', 'e'});
    expect_refused(text, "not an SQLite database");
}

TEST(session_corrupt, missing_file_and_directory) {
    temp_dir d;
    auto r = session_store::open(d.file("nope.slsession"));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find("nope.slsession: cannot open"), std::string::npos) << r.message();
    EXPECT_FALSE(std::filesystem::exists(d.file("nope.slsession")));
    auto dir = session_store::open(d.path.string());
    ASSERT_FALSE(dir.ok());
    EXPECT_NE(dir.message().find("not a regular file"), std::string::npos) << dir.message();
}

TEST(session_corrupt, foreign_sqlite_database_is_refused_unopened) {
    temp_dir d;
    const std::string p = d.file("foreign.db");
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(p.c_str(), &db), SQLITE_OK);
        sqlite3_exec(db, "CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT); INSERT INTO photos (path) VALUES ('a.jpg');"
                         "CREATE TABLE meta (key TEXT, value TEXT); INSERT INTO meta VALUES ('schema_version', '1');",
                     nullptr, nullptr, nullptr);
        sqlite3_close(db);
    }
    expect_refused(p, "not a SparseLens session (an SQLite database with application_id 0x00000000");
    // SQLite never opened it: no journal files appeared beside it.
    EXPECT_FALSE(std::filesystem::exists(p + "-wal"));
    EXPECT_FALSE(std::filesystem::exists(p + "-shm"));
}

TEST(session_corrupt, our_application_id_without_a_meta_table) {
    temp_dir d;
    const std::string p = d.file("nometa.slsession");
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(p.c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, ("PRAGMA application_id = " + std::to_string(static_cast<int32_t>(application_id)) +
                      "; CREATE TABLE other (x INTEGER);").c_str(),
                 nullptr, nullptr, nullptr);
    sqlite3_close(db);
    expect_refused(p, "not a SparseLens session (no meta table)");
}

TEST(session_corrupt, newer_schema_version_is_refused) {
    temp_dir d;
    const std::string p = make_session(d, "future.slsession", 2);
    {
        raw_db db(p);
        db.exec("UPDATE meta SET value = '" + std::to_string(schema_version_current + 1) + "' WHERE key = 'schema_version'");
    }
    expect_refused(p, "session schema version " + std::to_string(schema_version_current + 1) +
                          " is newer than this SparseLens supports");
}

TEST(session_corrupt, garbage_schema_version_is_refused) {
    temp_dir d;
    const std::string p = make_session(d, "garbage.slsession", 1);
    {
        raw_db db(p);
        db.exec("UPDATE meta SET value = '2x' WHERE key = 'schema_version'");
    }
    expect_refused(p, "schema_version '2x' is not a positive number");
}

TEST(session_corrupt, truncated_session_is_refused) {
    temp_dir d;
    const std::string p = make_session(d, "whole.slsession", 40);
    const std::vector<uint8_t> whole = sl::test::read_bytes(p);
    ASSERT_GT(whole.size(), 40000u);
    for (size_t keep : {size_t{100}, size_t{4096}, whole.size() / 2, whole.size() - 4096}) {
        const std::string t = d.file("cut" + std::to_string(keep) + ".slsession");
        write_bytes(t, std::vector<uint8_t>(whole.begin(), whole.begin() + static_cast<long>(keep)));
        SCOPED_TRACE(keep);
        expect_refused(t, "corrupt session");
    }
}

TEST(session_corrupt, overwritten_pages_are_refused) {
    temp_dir d;
    const std::string p = make_session(d, "scribbled.slsession", 40);
    std::vector<uint8_t> bytes = sl::test::read_bytes(p);
    // Scribble over the second page onwards (the first holds the header and schema): b-tree pages break.
    std::mt19937 rng(11);
    for (size_t i = 4096; i < bytes.size() && i < 4096 * 6; ++i) bytes[i] = static_cast<uint8_t>(rng());
    write_bytes(p, bytes);
    expect_refused(p, "corrupt session");
}

namespace {

// Opening (writable and read-only) and probing a damaged file: each either succeeds or fails with a
// one-line message naming the file, and a failure leaves the file's bytes as they were.
void expect_refused_or_opened(const std::string& path, const std::string& what) {
    for (int mode = 0; mode < 3; ++mode) {
        const std::string before = file_sha(path);
        std::string msg;
        bool ok = false;
        if (mode == 2) {
            auto r = session_store::probe(path);
            ok = r.ok();
            if (!ok) msg = r.message();
        } else {
            auto r = session_store::open(path, mode == 1);
            ok = r.ok();
            if (ok) {
                (void)r->info();  // reads every table's row count: must not crash either
            } else {
                msg = r.message();
            }
        }
        if (ok) continue;
        EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << what << " mode " << mode << ": " << msg;
        EXPECT_EQ(msg.find_first_of("\n\r"), std::string::npos) << what << " mode " << mode << ": " << msg;
        EXPECT_EQ(file_sha(path), before) << what << ": mode " << mode << " failed but modified the file";
    }
}

}  // namespace

TEST(session_corrupt, every_page_overwritten_in_turn) {
    temp_dir d;
    const std::string p = make_session(d, "pages.slsession", 40);
    const std::vector<uint8_t> whole = sl::test::read_bytes(p);
    constexpr size_t page = 4096;
    ASSERT_EQ(whole.size() % page, 0u);
    ASSERT_GE(whole.size() / page, 10u);
    std::mt19937 rng(13);
    int refused = 0;
    for (size_t at = 0; at < whole.size(); at += page) {
        std::vector<uint8_t> bytes = whole;
        for (size_t i = at; i < at + page; ++i) bytes[i] = static_cast<uint8_t>(rng());
        const std::string t = d.file("page" + std::to_string(at / page) + ".slsession");
        write_bytes(t, bytes);
        expect_refused_or_opened(t, "page " + std::to_string(at / page));
        refused += !session_store::probe(t).ok();
        std::filesystem::remove(t);
        std::filesystem::remove(t + "-wal");
        std::filesystem::remove(t + "-shm");
    }
    // The header page and the b-tree pages holding the schema and the runs are all checked.
    EXPECT_GE(refused, static_cast<int>(whole.size() / page) / 2);
    EXPECT_EQ(file_sha(p), sl::sha256_hex(whole)) << "the original was never touched";
}

TEST(session_corrupt, truncated_at_many_sizes) {
    temp_dir d;
    const std::string p = make_session(d, "cut.slsession", 40);
    const std::vector<uint8_t> whole = sl::test::read_bytes(p);
    std::vector<size_t> sizes = {1, 15, 16, 99, 100, 101, 1000, 4095, 4097, 8192, 12000, whole.size() - 1};
    for (size_t k = 3 * 4096; k < whole.size(); k += 3 * 4096) sizes.push_back(k);
    for (size_t keep : sizes) {
        const std::string t = d.file("cut" + std::to_string(keep) + ".slsession");
        write_bytes(t, std::vector<uint8_t>(whole.begin(), whole.begin() + static_cast<long>(keep)));
        expect_refused_or_opened(t, "truncated to " + std::to_string(keep));
        // Whole pages missing are always noticed; a partial last page reads as zeros and may hold nothing.
        if (keep < 100 || keep % 4096 == 0) {
            EXPECT_FALSE(session_store::probe(t).ok()) << "truncated to " << keep;
        }
    }
}

// Crash safety: a writer killed with SIGKILL in the middle of writing leaves a valid session in which
// every run it committed is intact, and no half-written transaction.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "session_test_util.h"

using namespace sl;
using namespace sl::sessions;
using sl::test::raw_db;
using sl::test::temp_dir;

namespace {

// The run the child writes as its i-th: every field derived from i, so the parent can check them all.
run_record run_number(int64_t i, int64_t model_id, int64_t text_id) {
    run_record r;
    r.method = i % 2 ? "dip" : "cats";
    r.label = "run " + std::to_string(i);
    r.params_json = "{\"i\":" + std::to_string(i) + "}";
    r.model_id = model_id;
    r.text_id = text_id;
    r.n_ctx = 128;
    r.windows = static_cast<int32_t>(i);
    r.ppl = 3.0 + 0.001 * static_cast<double>(i);
    r.cpu_tok_s = static_cast<double>(i);
    r.sim_tok_s = 2.0 * static_cast<double>(i);
    // Large enough that each commit spans several WAL frames: a kill lands mid-write often.
    r.per_layer_json = std::string(3000 + static_cast<size_t>(i % 7) * 1000, static_cast<char>('a' + i % 26));
    return r;
}

// Child: writes runs, each together with a text in one transaction, reporting each committed id on the
// pipe. The `big_at`-th transaction instead inserts runs without end; once it has written its first
// rows it reports -1, so the parent's SIGKILL surely lands inside an open write transaction.
[[noreturn]] void writer(const std::string& path, int fd, int64_t big_at) {
    auto s = session_store::open(path);
    if (!s.ok()) _exit(3);
    model_record m;
    m.sha256 = sl::test::hex64('d');
    m.path = "/m.bin";
    m.format = "gguf";
    auto mid = s->add_model(m);
    if (!mid.ok()) _exit(4);
    for (int64_t i = 1;; ++i) {
        int64_t id = 0;
        if (i == big_at) {
            (void)s->in_transaction([&]() -> outcome {
                for (int64_t k = 0;; ++k) {
                    if (!s->add_run(run_number(1000000 + k, *mid, 1)).ok()) _exit(7);
                    const int64_t started = -1;
                    if (k == 50 && ::write(fd, &started, sizeof started) != sizeof started) _exit(6);
                }
            });
        }
        const std::string text = "text of run " + std::to_string(i);
        outcome o = s->in_transaction([&]() -> outcome {
            auto tid = s->add_text("t" + std::to_string(i), std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
            if (!tid.ok()) return tid.err();
            auto rid = s->add_run(run_number(i, *mid, *tid));
            if (!rid.ok()) return rid.err();
            id = *rid;
            return {};
        });
        if (!o.ok()) _exit(5);
        if (::write(fd, &id, sizeof id) != sizeof id) _exit(6);
    }
}

}  // namespace

TEST(session_crash, sigkill_during_writes_keeps_every_committed_run) {
    temp_dir d;
    const std::string p = d.file("crash.slsession");
    ASSERT_TRUE(session_store::create(p, "crash").ok());
    int64_t total_committed = 0;
    for (int round = 0; round < 3; ++round) {
        SCOPED_TRACE(round);
        int fds[2];
        ASSERT_EQ(::pipe(fds), 0);
        const pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            ::close(fds[0]);
            // Round 0 is killed wherever its small transactions happen to be; later rounds inside the
            // big transaction.
            writer(p, fds[1], round == 0 ? -1 : 10 + 17 * round);
        }
        ::close(fds[1]);
        std::vector<int64_t> committed;
        const size_t want = 25;
        bool in_big = false;
        int64_t id = 0;
        while (!in_big && (round > 0 || committed.size() < want) && ::read(fds[0], &id, sizeof id) == sizeof id) {
            if (id == -1) in_big = true;
            else committed.push_back(id);
        }
        ::kill(pid, SIGKILL);
        // Ids the child reported between our last read and the kill are committed too.
        while (::read(fds[0], &id, sizeof id) == sizeof id)
            if (id != -1) committed.push_back(id);
        ::close(fds[0]);
        EXPECT_EQ(in_big, round > 0);
        int status = 0;
        ASSERT_EQ(::waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFSIGNALED(status)) << "writer exited with " << WEXITSTATUS(status);
        ASSERT_EQ(committed.size() >= want, true);

        // The raw file as the killed writer left it (WAL not checkpointed) passes SQLite's integrity check.
        EXPECT_TRUE(std::filesystem::exists(p + "-wal"));
        {
            raw_db db(p, true);
            EXPECT_EQ(db.one("PRAGMA integrity_check"), "ok");
            // Text and run were written in one transaction: neither appears without the other.
            EXPECT_EQ(db.one("SELECT count(*) FROM runs WHERE text_id IS NULL OR text_id NOT IN (SELECT id FROM texts)"), "0");
            EXPECT_EQ(db.one("SELECT count(*) FROM texts WHERE id NOT IN (SELECT text_id FROM runs WHERE text_id IS NOT NULL)"), "0");
        }
        auto s = session_store::open(p);
        ASSERT_TRUE(s.ok()) << s.message();
        auto models = s->models();
        ASSERT_TRUE(models.ok());
        for (int64_t rid : committed) {
            auto r = s->run(rid);
            ASSERT_TRUE(r.ok()) << r.message();
            // The child numbered its runs from 1 in every round; the label says which.
            const int64_t i = std::stoll(r->label.substr(4));
            const run_record want_r = run_number(i, r->model_id, *r->text_id);
            EXPECT_EQ(r->method, want_r.method);
            EXPECT_EQ(r->params_json, want_r.params_json);
            EXPECT_EQ(r->windows, want_r.windows);
            EXPECT_DOUBLE_EQ(r->ppl, want_r.ppl);
            EXPECT_EQ(r->sim_tok_s, want_r.sim_tok_s);
            EXPECT_EQ(r->per_layer_json, want_r.per_layer_json);
            auto text = s->text_content(*r->text_id);
            ASSERT_TRUE(text.ok());
            EXPECT_EQ(std::string(text->begin(), text->end()), "text of run " + std::to_string(i));
        }
        // Nothing of the interrupted big transaction survived: exactly the committed runs are there
        // (rounds accumulate runs in one file).
        auto info = s->info();
        ASSERT_TRUE(info.ok());
        total_committed += static_cast<int64_t>(committed.size());
        if (round > 0) EXPECT_EQ(info->runs, total_committed);
        else EXPECT_GE(info->runs, total_committed);
        total_committed = info->runs;
        auto big = s->runs();
        ASSERT_TRUE(big.ok());
        for (const run_record& r : *big) EXPECT_LT(std::stoll(r.label.substr(4)), 1000000) << "rolled-back row survived";
    }
}

// Session schema: creation (pragmas, meta, application_id) and step-by-step migrations from every earlier
// version with their data preserved, ending in exactly the schema a new session has.
#include "session_test_util.h"

using namespace sl;
using namespace sl::sessions;
using sl::test::raw_db;
using sl::test::temp_dir;

namespace {

// The shape of every table and index (columns with type, not-null, default, key; foreign keys; index
// columns), independent of how the DDL text was written (ALTER TABLE edits it in place).
std::vector<std::string> schema_shape(const std::string& path) {
    raw_db db(path, true);
    std::vector<std::string> out;
    for (const std::string& t : db.rows("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")) {
        for (const std::string& c : db.rows("SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info('" + t + "')"))
            out.push_back(t + " col " + c);
        for (const std::string& f : db.rows("SELECT \"table\", \"from\", \"to\", on_delete FROM pragma_foreign_key_list('" + t + "')"))
            out.push_back(t + " fk " + f);
    }
    for (const std::string& i : db.rows("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name")) {
        const std::string name = i.substr(0, i.find('|'));
        for (const std::string& c : db.rows("SELECT name FROM pragma_index_info('" + name + "')")) out.push_back(i + " idx " + c);
    }
    return out;
}

}  // namespace

TEST(session_schema, new_session_has_current_schema_wal_and_application_id) {
    temp_dir d;
    const std::string p = d.file("new.slsession");
    {
        auto s = session_store::create(p, "my study");
        ASSERT_TRUE(s.ok()) << s.message();
        auto info = s->info();
        ASSERT_TRUE(info.ok()) << info.message();
        EXPECT_EQ(info->name, "my study");
        EXPECT_EQ(info->schema_version, schema_version_current);
        EXPECT_EQ(info->runs, 0);
        EXPECT_FALSE(info->created.empty());
        EXPECT_EQ(info->tool, "sparselens 0.1.0");
    }
    raw_db db(p, true);
    EXPECT_EQ(db.one("PRAGMA application_id"), std::to_string(static_cast<int32_t>(application_id)));
    EXPECT_EQ(db.one("PRAGMA journal_mode"), "wal");
    EXPECT_EQ(db.one("SELECT value FROM meta WHERE key = 'schema_version'"), std::to_string(schema_version_current));
    // No leftovers of the temporary file the session was built in.
    int files = 0;
    for (const auto& e : std::filesystem::directory_iterator(d.path)) files += e.path().filename().string().find(".creating-") == std::string::npos ? 0 : 1;
    EXPECT_EQ(files, 0);
}

TEST(session_schema, create_refuses_an_existing_file_and_leaves_it_alone) {
    temp_dir d;
    const std::string p = d.file("taken.slsession");
    {
        std::ofstream f(p);
        f << "precious";
    }
    const std::string before = sl::test::file_sha(p);
    auto s = session_store::create(p, "x");
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("already exists"), std::string::npos) << s.message();
    EXPECT_EQ(sl::test::file_sha(p), before);
}

TEST(session_schema, writer_connection_has_foreign_keys_on) {
    temp_dir d;
    auto s = session_store::create(d.file("fk.slsession"), "fk");
    ASSERT_TRUE(s.ok()) << s.message();
    run_record r;
    r.method = "dense";
    r.model_id = 42;  // no such model
    auto id = s->add_run(r);
    ASSERT_FALSE(id.ok());
    EXPECT_NE(id.message().find("FOREIGN KEY"), std::string::npos) << id.message();
    EXPECT_NE(id.message().find("fk.slsession"), std::string::npos) << id.message();
}

TEST(session_schema, every_version_migrates_to_the_schema_of_a_new_session) {
    temp_dir d;
    const std::string fresh = d.file("fresh.slsession");
    ASSERT_TRUE(create_session_at_version(fresh, "fresh", schema_version_current).ok());
    const auto want = schema_shape(fresh);
    ASSERT_GT(want.size(), 50u);
    for (int32_t v = 1; v < schema_version_current; ++v) {
        const std::string p = d.file("v" + std::to_string(v) + ".slsession");
        auto c = create_session_at_version(p, "old", v);
        ASSERT_TRUE(c.ok()) << c.message();
        EXPECT_NE(schema_shape(p), want) << "version " << v << " should differ from the current schema";
        {
            auto s = session_store::open(p);
            ASSERT_TRUE(s.ok()) << s.message();
            EXPECT_EQ(s->info()->schema_version, schema_version_current);
        }
        EXPECT_EQ(schema_shape(p), want) << "migrated from version " << v;
        raw_db db(p, true);
        EXPECT_EQ(db.one("PRAGMA integrity_check"), "ok");
        EXPECT_EQ(db.one("SELECT count(*) FROM pragma_foreign_key_check"), "0");
    }
}

TEST(session_schema, migration_from_v1_keeps_runs_and_folds_calibrations) {
    temp_dir d;
    const std::string p = d.file("v1.slsession");
    ASSERT_TRUE(create_session_at_version(p, "old one", 1).ok());
    const std::string a = sl::test::hex64('a'), b = sl::test::hex64('b'), c = sl::test::hex64('c');
    {
        // Rows as a version-1 build wrote them: the calibration as path + sha256 on each run.
        raw_db db(p);
        db.exec("INSERT INTO models (sha256, path, format, name, file_bytes, dim, hidden_dim, n_layers, n_heads, n_kv_heads, "
                "vocab_size, seq_len, added) VALUES ('" + a + "', '/m/a.bin', 'llama2c-f32', 'a', 1000, 64, 172, 5, 8, 4, 512, 512, '2024-01-01T00:00:00Z')");
        db.exec("INSERT INTO texts (sha256, name, kind, bytes, content, added) VALUES ('" + b + "', 't.txt', 'eval', 3, x'616263', '2024-01-01T00:00:00Z')");
        const char* cols = "INSERT INTO runs (created, label, method, params_json, model_id, text_id, calib_path, calib_sha256, n_ctx, "
                           "windows, offset_tokens, ppl, ppl_dense, kld_mean, kld_p99, top1, mlp_density, attn_density, n_scored, "
                           "per_layer_json, cpu_tok_s, cpu_tok_s_dense, duration_s) VALUES ";
        db.exec(std::string(cols) + "('2024-01-02T00:00:00Z', 'r1', 'chess', '{\"name\":\"chess\",\"density\":0.6}', 1, 1, '/c/old.calib', '" + c +
                "', 128, 16, 0, 4.5, 3.0, 0.2, 1.1, 0.8, 0.6, 1.0, 992, '', 100.0, 120.0, 2.5)");
        db.exec(std::string(cols) + "('2024-01-03T00:00:00Z', 'r2', 'cats', '{\"name\":\"cats\",\"density\":0.5}', 1, 1, '/c/new.calib', '" + c +
                "', 128, 16, 0, 5.5, 3.0, 0.3, 1.2, 0.7, 0.5, 1.0, 992, '', 110.0, 120.0, 2.0)");
        db.exec(std::string(cols) + "('2024-01-04T00:00:00Z', 'r3', 'dip', '{\"name\":\"dip\",\"density\":0.5}', 1, NULL, NULL, NULL, "
                "64, 4, 10, 6.5, 3.0, 0.4, 1.3, 0.6, 0.5, 1.0, 124, '', 90.0, 120.0, 1.0)");
    }
    auto s = session_store::open(p);
    ASSERT_TRUE(s.ok()) << s.message();
    auto info = s->info();
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->name, "old one");
    EXPECT_EQ(info->runs, 3);
    EXPECT_EQ(info->models, 1);
    EXPECT_EQ(info->texts, 1);
    // One calibration row for the sha256 both runs used, at the path of the latest of them.
    auto cals = s->calibrations();
    ASSERT_TRUE(cals.ok()) << cals.message();
    ASSERT_EQ(cals->size(), 1u);
    EXPECT_EQ((*cals)[0].sha256, c);
    EXPECT_EQ((*cals)[0].path, "/c/new.calib");
    EXPECT_EQ((*cals)[0].model_id, 1);
    auto runs = s->runs();
    ASSERT_TRUE(runs.ok()) << runs.message();
    ASSERT_EQ(runs->size(), 3u);
    EXPECT_EQ((*runs)[0].label, "r1");
    EXPECT_EQ((*runs)[0].calibration_id, (*cals)[0].id);
    EXPECT_EQ((*runs)[1].calibration_id, (*cals)[0].id);
    EXPECT_FALSE((*runs)[2].calibration_id.has_value());
    EXPECT_FALSE((*runs)[2].text_id.has_value());
    EXPECT_DOUBLE_EQ((*runs)[0].ppl, 4.5);
    EXPECT_DOUBLE_EQ((*runs)[1].cpu_tok_s, 110.0);
    EXPECT_EQ((*runs)[2].offset, 10);
    EXPECT_EQ((*runs)[2].n_ctx, 64);
    // Columns that arrived later read as "not simulated".
    EXPECT_FALSE((*runs)[0].sim_tok_s.has_value());
    EXPECT_TRUE((*runs)[0].device_json.empty());
    EXPECT_FALSE((*runs)[0].sweep_id.has_value());
    // And the migrated file takes new rows of every kind.
    sweep_record sw;
    sw.model_id = 1;
    auto sid = s->add_sweep(sw);
    ASSERT_TRUE(sid.ok()) << sid.message();
    run_record r = (*runs)[0];
    r.sweep_id = *sid;
    r.sim_tok_s = 12.5;
    auto rid = s->add_run(r);
    ASSERT_TRUE(rid.ok()) << rid.message();
    export_record e;
    e.run_id = *rid;
    e.path = "/x.json";
    ASSERT_TRUE(s->add_export(e).ok());
}

TEST(session_schema, migration_from_v2_keeps_sweeps_and_calibrations) {
    temp_dir d;
    const std::string p = d.file("v2.slsession");
    ASSERT_TRUE(create_session_at_version(p, "two", 2).ok());
    const std::string a = sl::test::hex64('1'), c = sl::test::hex64('2');
    {
        raw_db db(p);
        db.exec("INSERT INTO models (sha256, path, format, name, file_bytes, dim, hidden_dim, n_layers, n_heads, n_kv_heads, "
                "vocab_size, seq_len, added) VALUES ('" + a + "', '/m/b.gguf', 'gguf', 'b', 2000, 288, 768, 6, 6, 6, 32000, 256, 't')");
        db.exec("INSERT INTO calibrations (sha256, path, model_id, params_json, added) VALUES ('" + c + "', '/c/b.calib', 1, '{\"n_ctx\":128}', 't')");
        db.exec("INSERT INTO sweeps (created, label, params_json, model_id, text_id) VALUES ('t', 'grid', '{\"densities\":[0.5]}', 1, NULL)");
        db.exec("INSERT INTO runs (created, label, method, params_json, model_id, text_id, n_ctx, windows, offset_tokens, ppl, ppl_dense, "
                "kld_mean, kld_p99, top1, mlp_density, attn_density, n_scored, per_layer_json, cpu_tok_s, cpu_tok_s_dense, duration_s, "
                "calibration_id, sweep_id) VALUES ('2024-05-01T00:00:00Z', 'sw1', 'teal', '{\"name\":\"teal\"}', 1, NULL, 128, 8, 0, 7.0, "
                "6.0, 0.1, 0.9, 0.9, 0.5, 0.5, 496, '', 50.0, 60.0, 3.0, 1, 1)");
    }
    auto s = session_store::open(p);
    ASSERT_TRUE(s.ok()) << s.message();
    auto sweeps = s->sweeps();
    ASSERT_TRUE(sweeps.ok());
    ASSERT_EQ(sweeps->size(), 1u);
    EXPECT_EQ((*sweeps)[0].label, "grid");
    EXPECT_EQ((*sweeps)[0].n_runs, 1);
    auto runs = s->runs();
    ASSERT_TRUE(runs.ok());
    ASSERT_EQ(runs->size(), 1u);
    EXPECT_EQ((*runs)[0].sweep_id, 1);
    EXPECT_EQ((*runs)[0].calibration_id, 1);
    EXPECT_DOUBLE_EQ((*runs)[0].attn_density, 0.5);
    EXPECT_EQ((*runs)[0].device_name, "");
    auto cal = s->calibration(1);
    ASSERT_TRUE(cal.ok());
    EXPECT_EQ(cal->params_json, "{\"n_ctx\":128}");
    EXPECT_EQ(s->exports()->size(), 0u);
}

TEST(session_schema, read_only_open_refuses_to_migrate_and_leaves_the_file) {
    temp_dir d;
    const std::string p = d.file("v1ro.slsession");
    ASSERT_TRUE(create_session_at_version(p, "ro", 1).ok());
    const std::string before = sl::test::file_sha(p);
    auto s = session_store::open(p, true);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("schema version 1 is older"), std::string::npos) << s.message();
    EXPECT_EQ(sl::test::file_sha(p), before);
    // probe() still summarises it (what `session list` shows) without migrating.
    auto info = session_store::probe(p);
    ASSERT_TRUE(info.ok()) << info.message();
    EXPECT_EQ(info->schema_version, 1);
    EXPECT_EQ(info->calibrations, 0);
    EXPECT_EQ(sl::test::file_sha(p), before);
}

TEST(session_schema, read_only_store_refuses_writes) {
    temp_dir d;
    const std::string p = d.file("ro.slsession");
    ASSERT_TRUE(session_store::create(p, "ro").ok());
    auto s = session_store::open(p, true);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(s->read_only());
    auto t = s->add_text("t", std::span<const uint8_t>());
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.message().find("read-only"), std::string::npos);
    EXPECT_FALSE(s->delete_run(1).ok());
}

// Session schema history. Never edit the DDL of a released version: add a version and a migration step.
//   v1  meta, models, texts, runs (calibration as a path + sha256 per run)
//   v2  calibrations and sweeps tables; runs.calibration_id (v1's per-run calibration columns are folded
//       into calibrations rows) and runs.sweep_id
//   v3  exports table; the simulated-device columns of runs (device_name, device_json, sim_tok_s, hit_rate)
#include "schema.h"

#include <charconv>

#include "sparselens/core/text_format.h"
#include "sparselens/sessions/session_store.h"

namespace sl::sessions::detail {

namespace {

constexpr const char* ddl_v1 = R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE models (
  id INTEGER PRIMARY KEY,
  sha256 TEXT NOT NULL UNIQUE,
  path TEXT NOT NULL,
  format TEXT NOT NULL,
  name TEXT NOT NULL DEFAULT '',
  file_bytes INTEGER NOT NULL,
  dim INTEGER NOT NULL, hidden_dim INTEGER NOT NULL, n_layers INTEGER NOT NULL, n_heads INTEGER NOT NULL,
  n_kv_heads INTEGER NOT NULL, vocab_size INTEGER NOT NULL, seq_len INTEGER NOT NULL,
  added TEXT NOT NULL);
CREATE TABLE texts (
  id INTEGER PRIMARY KEY,
  sha256 TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  kind TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  content BLOB NOT NULL,
  added TEXT NOT NULL);
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  created TEXT NOT NULL,
  label TEXT NOT NULL DEFAULT '',
  method TEXT NOT NULL,
  params_json TEXT NOT NULL,
  model_id INTEGER NOT NULL REFERENCES models(id),
  text_id INTEGER REFERENCES texts(id),
  calib_path TEXT,
  calib_sha256 TEXT,
  n_ctx INTEGER NOT NULL, windows INTEGER NOT NULL, offset_tokens INTEGER NOT NULL,
  ppl REAL, ppl_dense REAL, kld_mean REAL, kld_p99 REAL, top1 REAL, mlp_density REAL, attn_density REAL,
  n_scored INTEGER NOT NULL DEFAULT 0,
  per_layer_json TEXT NOT NULL DEFAULT '',
  cpu_tok_s REAL, cpu_tok_s_dense REAL, duration_s REAL);
CREATE INDEX runs_by_method ON runs(method);
CREATE INDEX runs_by_model ON runs(model_id);
)sql";

// v2 = v1 with the runs columns in the order a migrated v1 file has them (migration appends).
constexpr const char* ddl_v2 = R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE models (
  id INTEGER PRIMARY KEY,
  sha256 TEXT NOT NULL UNIQUE,
  path TEXT NOT NULL,
  format TEXT NOT NULL,
  name TEXT NOT NULL DEFAULT '',
  file_bytes INTEGER NOT NULL,
  dim INTEGER NOT NULL, hidden_dim INTEGER NOT NULL, n_layers INTEGER NOT NULL, n_heads INTEGER NOT NULL,
  n_kv_heads INTEGER NOT NULL, vocab_size INTEGER NOT NULL, seq_len INTEGER NOT NULL,
  added TEXT NOT NULL);
CREATE TABLE texts (
  id INTEGER PRIMARY KEY,
  sha256 TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  kind TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  content BLOB NOT NULL,
  added TEXT NOT NULL);
CREATE TABLE calibrations (
  id INTEGER PRIMARY KEY,
  sha256 TEXT NOT NULL UNIQUE,
  path TEXT NOT NULL,
  model_id INTEGER NOT NULL REFERENCES models(id),
  params_json TEXT NOT NULL DEFAULT '{}',
  added TEXT NOT NULL);
CREATE TABLE sweeps (
  id INTEGER PRIMARY KEY,
  created TEXT NOT NULL,
  label TEXT NOT NULL DEFAULT '',
  params_json TEXT NOT NULL,
  model_id INTEGER NOT NULL REFERENCES models(id),
  text_id INTEGER REFERENCES texts(id));
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  created TEXT NOT NULL,
  label TEXT NOT NULL DEFAULT '',
  method TEXT NOT NULL,
  params_json TEXT NOT NULL,
  model_id INTEGER NOT NULL REFERENCES models(id),
  text_id INTEGER REFERENCES texts(id),
  n_ctx INTEGER NOT NULL, windows INTEGER NOT NULL, offset_tokens INTEGER NOT NULL,
  ppl REAL, ppl_dense REAL, kld_mean REAL, kld_p99 REAL, top1 REAL, mlp_density REAL, attn_density REAL,
  n_scored INTEGER NOT NULL DEFAULT 0,
  per_layer_json TEXT NOT NULL DEFAULT '',
  cpu_tok_s REAL, cpu_tok_s_dense REAL, duration_s REAL,
  calibration_id INTEGER REFERENCES calibrations(id),
  sweep_id INTEGER REFERENCES sweeps(id) ON DELETE SET NULL);
CREATE INDEX runs_by_method ON runs(method);
CREATE INDEX runs_by_model ON runs(model_id);
CREATE INDEX runs_by_sweep ON runs(sweep_id);
)sql";

constexpr const char* ddl_v3 = R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE models (
  id INTEGER PRIMARY KEY,
  sha256 TEXT NOT NULL UNIQUE,
  path TEXT NOT NULL,
  format TEXT NOT NULL,
  name TEXT NOT NULL DEFAULT '',
  file_bytes INTEGER NOT NULL,
  dim INTEGER NOT NULL, hidden_dim INTEGER NOT NULL, n_layers INTEGER NOT NULL, n_heads INTEGER NOT NULL,
  n_kv_heads INTEGER NOT NULL, vocab_size INTEGER NOT NULL, seq_len INTEGER NOT NULL,
  added TEXT NOT NULL);
CREATE TABLE texts (
  id INTEGER PRIMARY KEY,
  sha256 TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  kind TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  content BLOB NOT NULL,
  added TEXT NOT NULL);
CREATE TABLE calibrations (
  id INTEGER PRIMARY KEY,
  sha256 TEXT NOT NULL UNIQUE,
  path TEXT NOT NULL,
  model_id INTEGER NOT NULL REFERENCES models(id),
  params_json TEXT NOT NULL DEFAULT '{}',
  added TEXT NOT NULL);
CREATE TABLE sweeps (
  id INTEGER PRIMARY KEY,
  created TEXT NOT NULL,
  label TEXT NOT NULL DEFAULT '',
  params_json TEXT NOT NULL,
  model_id INTEGER NOT NULL REFERENCES models(id),
  text_id INTEGER REFERENCES texts(id));
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  created TEXT NOT NULL,
  label TEXT NOT NULL DEFAULT '',
  method TEXT NOT NULL,
  params_json TEXT NOT NULL,
  model_id INTEGER NOT NULL REFERENCES models(id),
  text_id INTEGER REFERENCES texts(id),
  n_ctx INTEGER NOT NULL, windows INTEGER NOT NULL, offset_tokens INTEGER NOT NULL,
  ppl REAL, ppl_dense REAL, kld_mean REAL, kld_p99 REAL, top1 REAL, mlp_density REAL, attn_density REAL,
  n_scored INTEGER NOT NULL DEFAULT 0,
  per_layer_json TEXT NOT NULL DEFAULT '',
  cpu_tok_s REAL, cpu_tok_s_dense REAL, duration_s REAL,
  calibration_id INTEGER REFERENCES calibrations(id),
  sweep_id INTEGER REFERENCES sweeps(id) ON DELETE SET NULL,
  device_name TEXT NOT NULL DEFAULT '',
  device_json TEXT NOT NULL DEFAULT '',
  sim_tok_s REAL,
  hit_rate REAL);
CREATE INDEX runs_by_method ON runs(method);
CREATE INDEX runs_by_model ON runs(model_id);
CREATE INDEX runs_by_sweep ON runs(sweep_id);
CREATE TABLE exports (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  created TEXT NOT NULL,
  path TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  config_json TEXT NOT NULL);
CREATE INDEX exports_by_run ON exports(run_id);
)sql";

// v1 -> v2: a calibration used by several runs becomes one calibrations row (by sha256, keeping the
// path of its latest run and the model of its first); runs then reference it.
constexpr const char* migrate_1_to_2 = R"sql(
CREATE TABLE calibrations (
  id INTEGER PRIMARY KEY,
  sha256 TEXT NOT NULL UNIQUE,
  path TEXT NOT NULL,
  model_id INTEGER NOT NULL REFERENCES models(id),
  params_json TEXT NOT NULL DEFAULT '{}',
  added TEXT NOT NULL);
CREATE TABLE sweeps (
  id INTEGER PRIMARY KEY,
  created TEXT NOT NULL,
  label TEXT NOT NULL DEFAULT '',
  params_json TEXT NOT NULL,
  model_id INTEGER NOT NULL REFERENCES models(id),
  text_id INTEGER REFERENCES texts(id));
INSERT INTO calibrations (sha256, path, model_id, params_json, added)
  SELECT r.calib_sha256,
         (SELECT r2.calib_path FROM runs r2 WHERE r2.calib_sha256 = r.calib_sha256 ORDER BY r2.id DESC LIMIT 1),
         (SELECT r3.model_id FROM runs r3 WHERE r3.calib_sha256 = r.calib_sha256 ORDER BY r3.id LIMIT 1),
         '{}', min(r.created)
  FROM runs r WHERE r.calib_sha256 IS NOT NULL AND r.calib_sha256 <> '' GROUP BY r.calib_sha256;
ALTER TABLE runs ADD COLUMN calibration_id INTEGER REFERENCES calibrations(id);
ALTER TABLE runs ADD COLUMN sweep_id INTEGER REFERENCES sweeps(id) ON DELETE SET NULL;
UPDATE runs SET calibration_id = (SELECT c.id FROM calibrations c WHERE c.sha256 = runs.calib_sha256);
ALTER TABLE runs DROP COLUMN calib_path;
ALTER TABLE runs DROP COLUMN calib_sha256;
CREATE INDEX runs_by_sweep ON runs(sweep_id);
)sql";

constexpr const char* migrate_2_to_3 = R"sql(
ALTER TABLE runs ADD COLUMN device_name TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN device_json TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN sim_tok_s REAL;
ALTER TABLE runs ADD COLUMN hit_rate REAL;
CREATE TABLE exports (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  created TEXT NOT NULL,
  path TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  config_json TEXT NOT NULL);
CREATE INDEX exports_by_run ON exports(run_id);
)sql";

// migration_steps[v - 1] takes a file from version v to v + 1.
constexpr const char* migration_steps[] = {migrate_1_to_2, migrate_2_to_3};
static_assert(std::size(migration_steps) == schema_version_current - 1, "one migration step per version");

outcome set_meta(connection& c, const char* key, const std::string& value) {
    result<statement> s = statement::prepare(c, "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)");
    if (!s.ok()) return s.err();
    s->bind(1, std::string_view(key)).bind(2, value);
    return s->run("cannot write the meta table");
}

}  // namespace

const char* schema_ddl(int32_t version) {
    switch (version) {
        case 1: return ddl_v1;
        case 2: return ddl_v2;
        case 3: return ddl_v3;
        default: return nullptr;
    }
}

outcome schema_create(connection& c, int32_t version, const std::string& name) {
    const char* ddl = schema_ddl(version);
    if (!ddl) return error{c.path() + ": no schema version " + std::to_string(version)};
    result<transaction> t = transaction::begin(c);
    if (!t.ok()) return t.err();
    // application_id lives in the header page, so it commits (or not) with the schema.
    if (outcome o = c.exec("PRAGMA application_id = " + std::to_string(static_cast<int32_t>(application_id)),
                           "cannot set the application id");
        !o.ok())
        return o;
    if (outcome o = c.exec(ddl, "cannot create the schema"); !o.ok()) return o;
    for (auto [k, v] : {std::pair<const char*, std::string>{"schema_version", std::to_string(version)},
                        {"name", name},
                        {"created", utc_now_iso8601()},
                        {"tool", "sparselens 0.1.0"}})
        if (outcome o = set_meta(c, k, v); !o.ok()) return o;
    return t->commit();
}

result<int32_t> schema_version_of(const connection& c) {
    result<bool> has_meta = table_exists(c, "meta");
    if (!has_meta.ok()) return has_meta.err();
    if (!*has_meta) return error{c.path() + ": not a SparseLens session (no meta table)"};
    result<std::string> v = query_text(c, "SELECT value FROM meta WHERE key = 'schema_version'", "cannot read the schema version");
    if (!v.ok()) return error{c.path() + ": not a SparseLens session (no schema_version in its meta table)"};
    int32_t n = 0;
    const auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec != std::errc() || p != v->data() + v->size() || n < 1)
        return error{c.path() + ": corrupt session: schema_version '" + *v + "' is not a positive number"};
    return n;
}

outcome schema_migrate(connection& c) {
    for (;;) {
        result<transaction> t = transaction::begin(c);
        if (!t.ok()) return t.err();
        result<int32_t> v = schema_version_of(c);
        if (!v.ok()) return v.err();
        if (*v >= schema_version_current) return t->commit();
        if (outcome o = c.exec(migration_steps[*v - 1], "cannot migrate the session from schema version " +
                                                            std::to_string(*v) + " to " + std::to_string(*v + 1));
            !o.ok())
            return o;
        if (outcome o = set_meta(c, "schema_version", std::to_string(*v + 1)); !o.ok()) return o;
        // A migration must not leave dangling references behind (ALTER TABLE does not check them).
        result<int64_t> dangling = query_i64(c, "SELECT count(*) FROM pragma_foreign_key_check", "cannot check foreign keys");
        if (!dangling.ok()) return dangling.err();
        if (*dangling != 0)
            return error{c.path() + ": cannot migrate the session to schema version " + std::to_string(*v + 1) + ": " +
                         std::to_string(*dangling) + " rows reference missing rows"};
        if (outcome o = t->commit(); !o.ok()) return o;
    }
}

}  // namespace sl::sessions::detail

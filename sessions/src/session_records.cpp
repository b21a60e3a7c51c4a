// Reading and writing the rows of a session: models, texts, calibrations, sweeps, runs, exports.
#include <cmath>
#include <limits>

#include "sparselens/core/fingerprint.h"
#include "sparselens/core/text_format.h"
#include "store_impl.h"

namespace sl::sessions {

using detail::statement;
using detail::transaction;

namespace {

// SQLite stores NaN as NULL; metrics read back as NaN.
double metric(const statement& s, int col) {
    return s.is_null(col) ? std::numeric_limits<double>::quiet_NaN() : s.f64(col);
}

bool is_sha256(const std::string& s) {
    if (s.size() != 64) return false;
    for (char ch : s)
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
    return true;
}

// Inserts with `insert` unless `find` (bound with sha256 as ?1) finds the row; then runs `update` on it.
template <class Bind>
result<int64_t> upsert_by_sha(detail::connection& db, const std::string& sha, const char* find, const char* update,
                              const char* insert, Bind bind, const char* what) {
    result<transaction> t = transaction::begin(db);
    if (!t.ok()) return t.err();
    result<statement> f = statement::prepare(db, find);
    if (!f.ok()) return f.err();
    f->bind(1, sha);
    result<bool> found = f->step(what);
    if (!found.ok()) return found.err();
    int64_t id = 0;
    if (*found) {
        id = f->i64(0);
        if (update) {
            result<statement> u = statement::prepare(db, update);
            if (!u.ok()) return u.err();
            bind(*u);
            u->bind(99, id);
            if (outcome o = u->run(what); !o.ok()) return o.err();
        }
    } else {
        result<statement> ins = statement::prepare(db, insert);
        if (!ins.ok()) return ins.err();
        bind(*ins);
        if (outcome o = ins->run(what); !o.ok()) return o.err();
        id = sqlite3_last_insert_rowid(db.get());
    }
    if (outcome o = t->commit(); !o.ok()) return o.err();
    return id;
}

constexpr const char* run_columns =
    "id, created, label, method, params_json, model_id, text_id, calibration_id, sweep_id, n_ctx, windows, "
    "offset_tokens, ppl, ppl_dense, kld_mean, kld_p99, top1, mlp_density, attn_density, n_scored, per_layer_json, "
    "cpu_tok_s, cpu_tok_s_dense, duration_s, device_name, device_json, sim_tok_s, hit_rate";

run_record read_run(const statement& s) {
    run_record r;
    r.id = s.i64(0);
    r.created = s.text(1);
    r.label = s.text(2);
    r.method = s.text(3);
    r.params_json = s.text(4);
    r.model_id = s.i64(5);
    r.text_id = s.opt_i64(6);
    r.calibration_id = s.opt_i64(7);
    r.sweep_id = s.opt_i64(8);
    r.n_ctx = static_cast<int32_t>(s.i64(9));
    r.windows = static_cast<int32_t>(s.i64(10));
    r.offset = s.i64(11);
    r.ppl = metric(s, 12);
    r.ppl_dense = metric(s, 13);
    r.kld_mean = metric(s, 14);
    r.kld_p99 = metric(s, 15);
    r.top1 = metric(s, 16);
    r.mlp_density = metric(s, 17);
    r.attn_density = metric(s, 18);
    r.n_scored = s.i64(19);
    r.per_layer_json = s.text(20);
    r.cpu_tok_s = metric(s, 21);
    r.cpu_tok_s_dense = metric(s, 22);
    r.duration_s = metric(s, 23);
    r.device_name = s.text(24);
    r.device_json = s.text(25);
    r.sim_tok_s = s.opt_f64(26);
    r.hit_rate = s.opt_f64(27);
    return r;
}

template <class T, class Read>
result<std::vector<T>> read_all(statement& s, Read read, const char* what) {
    std::vector<T> out;
    for (;;) {
        result<bool> row = s.step(what);
        if (!row.ok()) return row.err();
        if (!*row) return out;
        out.push_back(read(s));
    }
}

model_record read_model(const statement& s) {
    model_record m;
    m.id = s.i64(0);
    m.sha256 = s.text(1);
    m.path = s.text(2);
    m.format = s.text(3);
    m.name = s.text(4);
    m.file_bytes = static_cast<uint64_t>(s.i64(5));
    m.dim = static_cast<int32_t>(s.i64(6));
    m.hidden_dim = static_cast<int32_t>(s.i64(7));
    m.n_layers = static_cast<int32_t>(s.i64(8));
    m.n_heads = static_cast<int32_t>(s.i64(9));
    m.n_kv_heads = static_cast<int32_t>(s.i64(10));
    m.vocab_size = static_cast<int32_t>(s.i64(11));
    m.seq_len = static_cast<int32_t>(s.i64(12));
    m.added = s.text(13);
    return m;
}
constexpr const char* model_columns =
    "id, sha256, path, format, name, file_bytes, dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len, added";

calibration_record read_calibration(const statement& s) {
    return {s.i64(0), s.text(1), s.text(2), s.i64(3), s.text(4), s.text(5)};
}

}  // namespace

bool run_sort_parse(const std::string& name, run_sort& out) {
    static const std::pair<const char*, run_sort> names[] = {{"created", run_sort::created}, {"ppl", run_sort::ppl},
                                                             {"kld", run_sort::kld},         {"sim", run_sort::sim},
                                                             {"cpu", run_sort::cpu},         {"density", run_sort::density}};
    for (auto [n, v] : names)
        if (name == n) {
            out = v;
            return true;
        }
    return false;
}

result<int64_t> session_store::add_model(const model_record& m) {
    if (outcome o = this->m->check_writable(); !o.ok()) return o.err();
    if (!is_sha256(m.sha256)) return error{path() + ": model " + m.path + ": sha256 must be 64 lowercase hex digits"};
    auto bind = [&](statement& s) {
        s.bind(1, m.sha256).bind(2, m.path).bind(3, m.format).bind(4, m.name);
        s.bind(5, static_cast<int64_t>(m.file_bytes)).bind(6, int64_t{m.dim}).bind(7, int64_t{m.hidden_dim});
        s.bind(8, int64_t{m.n_layers}).bind(9, int64_t{m.n_heads}).bind(10, int64_t{m.n_kv_heads});
        s.bind(11, int64_t{m.vocab_size}).bind(12, int64_t{m.seq_len}).bind(13, utc_now_iso8601());
    };
    return upsert_by_sha(this->m->db, m.sha256, "SELECT id FROM models WHERE sha256 = ?1",
                         "UPDATE models SET path = ?2, name = ?4 WHERE id = ?99",
                         "INSERT INTO models (sha256, path, format, name, file_bytes, dim, hidden_dim, n_layers, n_heads, "
                         "n_kv_heads, vocab_size, seq_len, added) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)",
                         bind, "cannot record the model");
}

result<int64_t> session_store::add_text(const std::string& name, std::span<const uint8_t> bytes, const std::string& kind) {
    if (outcome o = m->check_writable(); !o.ok()) return o.err();
    const std::string sha = sha256_hex(bytes);
    auto bind = [&](statement& s) {
        s.bind(1, sha).bind(2, name).bind(3, kind).bind(4, static_cast<int64_t>(bytes.size()));
        s.bind_blob(5, bytes.data(), bytes.size()).bind(6, utc_now_iso8601());
    };
    return upsert_by_sha(m->db, sha, "SELECT id FROM texts WHERE sha256 = ?1", nullptr,
                         "INSERT INTO texts (sha256, name, kind, bytes, content, added) VALUES (?1,?2,?3,?4,?5,?6)", bind,
                         "cannot record the text");
}

result<int64_t> session_store::add_calibration(const calibration_record& c) {
    if (outcome o = m->check_writable(); !o.ok()) return o.err();
    if (!is_sha256(c.sha256)) return error{path() + ": calibration " + c.path + ": sha256 must be 64 lowercase hex digits"};
    auto bind = [&](statement& s) {
        s.bind(1, c.sha256).bind(2, c.path).bind(3, c.model_id);
        s.bind(4, c.params_json.empty() ? std::string("{}") : c.params_json).bind(5, utc_now_iso8601());
    };
    return upsert_by_sha(m->db, c.sha256, "SELECT id FROM calibrations WHERE sha256 = ?1",
                         "UPDATE calibrations SET path = ?2 WHERE id = ?99",
                         "INSERT INTO calibrations (sha256, path, model_id, params_json, added) VALUES (?1,?2,?3,?4,?5)",
                         bind, "cannot record the calibration");
}

result<int64_t> session_store::add_sweep(const sweep_record& sw) {
    if (outcome o = m->check_writable(); !o.ok()) return o.err();
    result<statement> s = statement::prepare(
        m->db, "INSERT INTO sweeps (created, label, params_json, model_id, text_id) VALUES (?1,?2,?3,?4,?5)");
    if (!s.ok()) return s.err();
    s->bind(1, sw.created.empty() ? utc_now_iso8601() : sw.created).bind(2, sw.label);
    s->bind(3, sw.params_json.empty() ? std::string("{}") : sw.params_json).bind(4, sw.model_id).bind(5, sw.text_id);
    if (outcome o = s->run("cannot record the sweep"); !o.ok()) return o.err();
    return sqlite3_last_insert_rowid(m->db.get());
}

result<int64_t> session_store::add_run(const run_record& r) {
    if (outcome o = m->check_writable(); !o.ok()) return o.err();
    if (r.method.empty()) return error{path() + ": cannot record a run without a method"};
    result<statement> s = statement::prepare(
        m->db,
        "INSERT INTO runs (created, label, method, params_json, model_id, text_id, calibration_id, sweep_id, n_ctx, "
        "windows, offset_tokens, ppl, ppl_dense, kld_mean, kld_p99, top1, mlp_density, attn_density, n_scored, "
        "per_layer_json, cpu_tok_s, cpu_tok_s_dense, duration_s, device_name, device_json, sim_tok_s, hit_rate) "
        "VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22,?23,?24,?25,?26,?27)");
    if (!s.ok()) return s.err();
    s->bind(1, r.created.empty() ? utc_now_iso8601() : r.created).bind(2, r.label).bind(3, r.method);
    s->bind(4, r.params_json.empty() ? std::string("{}") : r.params_json).bind(5, r.model_id);
    s->bind(6, r.text_id).bind(7, r.calibration_id).bind(8, r.sweep_id);
    s->bind(9, int64_t{r.n_ctx}).bind(10, int64_t{r.windows}).bind(11, r.offset);
    s->bind(12, r.ppl).bind(13, r.ppl_dense).bind(14, r.kld_mean).bind(15, r.kld_p99).bind(16, r.top1);
    s->bind(17, r.mlp_density).bind(18, r.attn_density).bind(19, r.n_scored).bind(20, r.per_layer_json);
    s->bind(21, r.cpu_tok_s).bind(22, r.cpu_tok_s_dense).bind(23, r.duration_s);
    s->bind(24, r.device_name).bind(25, r.device_json).bind(26, r.sim_tok_s).bind(27, r.hit_rate);
    if (outcome o = s->run("cannot record the run"); !o.ok()) return o.err();
    return sqlite3_last_insert_rowid(m->db.get());
}

result<int64_t> session_store::add_export(const export_record& e) {
    if (outcome o = m->check_writable(); !o.ok()) return o.err();
    result<statement> s = statement::prepare(
        m->db, "INSERT INTO exports (run_id, created, path, sha256, config_json) VALUES (?1,?2,?3,?4,?5)");
    if (!s.ok()) return s.err();
    s->bind(1, e.run_id).bind(2, e.created.empty() ? utc_now_iso8601() : e.created).bind(3, e.path);
    s->bind(4, e.sha256).bind(5, e.config_json);
    if (outcome o = s->run("cannot record the export"); !o.ok()) return o.err();
    return sqlite3_last_insert_rowid(m->db.get());
}

result<std::vector<model_record>> session_store::models() const {
    result<statement> s = statement::prepare(m->db, std::string("SELECT ") + model_columns + " FROM models ORDER BY id");
    if (!s.ok()) return s.err();
    return read_all<model_record>(*s, read_model, "cannot read models");
}

result<model_record> session_store::model(int64_t id) const {
    result<statement> s = statement::prepare(m->db, std::string("SELECT ") + model_columns + " FROM models WHERE id = ?1");
    if (!s.ok()) return s.err();
    s->bind(1, id);
    result<std::vector<model_record>> v = read_all<model_record>(*s, read_model, "cannot read models");
    if (!v.ok()) return v.err();
    if (v->empty()) return error{path() + ": no model " + std::to_string(id)};
    return std::move(v->front());
}

result<std::vector<text_record>> session_store::texts() const {
    result<statement> s = statement::prepare(m->db, "SELECT id, sha256, name, kind, bytes, added FROM texts ORDER BY id");
    if (!s.ok()) return s.err();
    return read_all<text_record>(
        *s, [](const statement& q) { return text_record{q.i64(0), q.text(1), q.text(2), q.text(3), uint64_t(q.i64(4)), q.text(5)}; },
        "cannot read texts");
}

result<std::vector<uint8_t>> session_store::text_content(int64_t id) const {
    result<statement> s = statement::prepare(m->db, "SELECT content FROM texts WHERE id = ?1");
    if (!s.ok()) return s.err();
    s->bind(1, id);
    result<bool> row = s->step("cannot read the text");
    if (!row.ok()) return row.err();
    if (!*row) return error{path() + ": no text " + std::to_string(id)};
    const std::string bytes = s->text(0);
    return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

result<std::vector<calibration_record>> session_store::calibrations() const {
    result<statement> s = statement::prepare(
        m->db, "SELECT id, sha256, path, model_id, params_json, added FROM calibrations ORDER BY id");
    if (!s.ok()) return s.err();
    return read_all<calibration_record>(*s, read_calibration, "cannot read calibrations");
}

result<calibration_record> session_store::calibration(int64_t id) const {
    result<statement> s = statement::prepare(
        m->db, "SELECT id, sha256, path, model_id, params_json, added FROM calibrations WHERE id = ?1");
    if (!s.ok()) return s.err();
    s->bind(1, id);
    result<std::vector<calibration_record>> v = read_all<calibration_record>(*s, read_calibration, "cannot read calibrations");
    if (!v.ok()) return v.err();
    if (v->empty()) return error{path() + ": no calibration " + std::to_string(id)};
    return std::move(v->front());
}

result<std::vector<sweep_record>> session_store::sweeps() const {
    result<statement> s = statement::prepare(
        m->db, "SELECT s.id, s.created, s.label, s.params_json, s.model_id, s.text_id, "
               "(SELECT count(*) FROM runs r WHERE r.sweep_id = s.id) FROM sweeps s ORDER BY s.id");
    if (!s.ok()) return s.err();
    return read_all<sweep_record>(
        *s, [](const statement& q) { return sweep_record{q.i64(0), q.text(1), q.text(2), q.text(3), q.i64(4), q.opt_i64(5), q.i64(6)}; },
        "cannot read sweeps");
}

result<std::vector<run_record>> session_store::runs(const run_filter& f) const {
    std::string sql = std::string("SELECT ") + run_columns + " FROM runs WHERE (?1 = '' OR method = ?1)" +
                      " AND (?2 IS NULL OR model_id = ?2) AND (?3 IS NULL OR sweep_id = ?3) ORDER BY ";
    switch (f.sort) {
        case run_sort::created: sql += "created, id"; break;
        case run_sort::ppl: sql += "ppl IS NULL, ppl, id"; break;
        case run_sort::kld: sql += "kld_mean IS NULL, kld_mean, id"; break;
        case run_sort::sim: sql += "sim_tok_s IS NULL, sim_tok_s DESC, id"; break;
        case run_sort::cpu: sql += "cpu_tok_s IS NULL, cpu_tok_s DESC, id"; break;
        case run_sort::density: sql += "mlp_density IS NULL, mlp_density, id"; break;
    }
    sql += " LIMIT ?4";
    result<statement> s = statement::prepare(m->db, sql);
    if (!s.ok()) return s.err();
    s->bind(1, f.method).bind(2, f.model_id).bind(3, f.sweep_id).bind(4, f.limit > 0 ? f.limit : int64_t{-1});
    return read_all<run_record>(*s, read_run, "cannot read runs");
}

result<run_record> session_store::run(int64_t id) const {
    result<statement> s = statement::prepare(m->db, std::string("SELECT ") + run_columns + " FROM runs WHERE id = ?1");
    if (!s.ok()) return s.err();
    s->bind(1, id);
    result<std::vector<run_record>> v = read_all<run_record>(*s, read_run, "cannot read runs");
    if (!v.ok()) return v.err();
    if (v->empty()) return error{path() + ": no run " + std::to_string(id)};
    return std::move(v->front());
}

result<std::vector<export_record>> session_store::exports(std::optional<int64_t> run_id) const {
    result<statement> s = statement::prepare(
        m->db, "SELECT id, run_id, created, path, sha256, config_json FROM exports WHERE ?1 IS NULL OR run_id = ?1 ORDER BY id");
    if (!s.ok()) return s.err();
    s->bind(1, run_id);
    return read_all<export_record>(
        *s, [](const statement& q) { return export_record{q.i64(0), q.i64(1), q.text(2), q.text(3), q.text(4), q.text(5)}; },
        "cannot read exports");
}

outcome session_store::delete_run(int64_t id) {
    if (outcome o = m->check_writable(); !o.ok()) return o;
    result<statement> s = statement::prepare(m->db, "DELETE FROM runs WHERE id = ?1");
    if (!s.ok()) return s.err();
    s->bind(1, id);
    if (outcome o = s->run("cannot delete the run"); !o.ok()) return o;
    if (sqlite3_changes(m->db.get()) == 0) return error{path() + ": no run " + std::to_string(id)};
    return {};
}

result<int64_t> session_store::delete_all_runs() {
    if (outcome o = m->check_writable(); !o.ok()) return o.err();
    result<statement> s = statement::prepare(m->db, "DELETE FROM runs");
    if (!s.ok()) return s.err();
    if (outcome o = s->run("cannot delete the runs"); !o.ok()) return o.err();
    return int64_t{sqlite3_changes(m->db.get())};
}

}  // namespace sl::sessions

// `sparselens session {new,list,show,runs,export,delete}`: session files (*.slsession) from the command line.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "cli_common.h"
#include "cli_session.h"
#include "sparselens/sessions/jobs.h"
#include "sparselens/sessions/run_convert.h"
#include "sparselens/sessions/session_store.h"
#include "sparselens/sim/device.h"

namespace sl::cli {

namespace {

namespace fs = std::filesystem;
namespace ss = sl::sessions;
using nlohmann::json;

struct session_opts {
    std::string file, name, method, sort = "created", out, device, policy = "lfu", note;
    std::vector<std::string> paths;
    std::vector<int64_t> run_ids;
    int64_t id = 0, limit = 0;
    uint32_t bits = 4, context = 1024;
    bool all = false, json = false;
};

void check(const outcome& o) {
    if (!o.ok()) throw cli_error(o.message());
}

json info_json(const ss::session_info& i) {
    return {{"path", i.path},       {"name", i.name},           {"created", i.created},
            {"tool", i.tool},       {"schema_version", i.schema_version},
            {"models", i.models},   {"texts", i.texts},         {"calibrations", i.calibrations},
            {"runs", i.runs},       {"sweeps", i.sweeps},       {"exports", i.exports},
            {"file_bytes", i.file_bytes}, {"modified", i.modified}};
}

json opt_json(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }
json opt_json(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

// Stored JSON texts are embedded as JSON (not as strings); unparsable text (never written by us) stays a string.
json embedded(const std::string& text) {
    if (text.empty()) return nullptr;
    json j = json::parse(text, nullptr, false);
    return j.is_discarded() ? json(text) : j;
}

json run_json(const ss::run_record& r, bool full) {
    json j = {{"id", r.id},
              {"created", r.created},
              {"label", r.label},
              {"method", r.method},
              {"params", embedded(r.params_json)},
              {"model_id", r.model_id},
              {"text_id", opt_json(r.text_id)},
              {"calibration_id", opt_json(r.calibration_id)},
              {"sweep_id", opt_json(r.sweep_id)},
              {"n_ctx", r.n_ctx},
              {"windows", r.windows},
              {"offset", r.offset},
              {"ppl", r.ppl},
              {"ppl_dense", r.ppl_dense},
              {"kld_mean", r.kld_mean},
              {"kld_p99", r.kld_p99},
              {"top1_agreement", r.top1},
              {"mlp_density", r.mlp_density},
              {"attn_density", r.attn_density},
              {"scored_tokens", r.n_scored},
              {"cpu_tokens_per_s", r.cpu_tok_s},
              {"cpu_dense_tokens_per_s", r.cpu_tok_s_dense},
              {"duration_s", r.duration_s},
              {"device_name", r.device_name},
              {"sim_tokens_per_s", opt_json(r.sim_tok_s)},
              {"sim_hit_rate", opt_json(r.hit_rate)}};
    if (full) {
        j["device"] = embedded(r.device_json);
        j["per_layer"] = embedded(r.per_layer_json);
    }
    return j;
}

std::string num(double v, const char* fmt) {
    if (std::isnan(v)) return "-";
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, v);
    return buf;
}

// Read-only unless the file has an older schema: then it is migrated once (as any writable open does),
// since a read-only store cannot serve an older schema.
ss::session_store open_for_reading(const std::string& path) {
    const ss::session_info i = take(ss::session_store::probe(path));
    return take(ss::session_store::open(path, i.schema_version >= ss::schema_version_current));
}

int cmd_new(const session_opts& o) {
    const std::string name = o.name.empty() ? fs::path(o.file).stem().string() : o.name;
    ss::session_store s = take(ss::session_store::create(o.file, name));
    const ss::session_info i = take(s.info());
    if (o.json) {
        print_json(info_json(i));
        return 0;
    }
    std::printf("created %s: session '%s', schema version %d\n", i.path.c_str(), i.name.c_str(), i.schema_version);
    return 0;
}

int cmd_list(const session_opts& o) {
    // Directories are scanned (not recursively) for *.slsession; invalid files found there are listed
    // with their error, while an invalid file named explicitly is an error.
    json arr = json::array();
    for (const std::string& p : o.paths) {
        std::error_code ec;
        if (fs::is_directory(p, ec)) {
            std::vector<std::string> found;
            for (const auto& e : fs::directory_iterator(p, ec))
                if (e.path().extension() == ss::session_extension) found.push_back(e.path().string());
            if (ec) throw cli_error(p + ": cannot list: " + ec.message());
            std::sort(found.begin(), found.end());
            for (const std::string& f : found) {
                result<ss::session_info> i = ss::session_store::probe(f);
                arr.push_back(i.ok() ? info_json(*i) : json{{"path", f}, {"error", i.message()}});
            }
        } else {
            arr.push_back(info_json(take(ss::session_store::probe(p))));
        }
    }
    if (o.json) {
        print_json(arr);
        return 0;
    }
    if (arr.empty()) {
        std::printf("no sessions found\n");
        return 0;
    }
    std::printf("%-24s %6s %6s  %-20s  %s\n", "name", "runs", "schema", "modified", "path");
    for (const json& j : arr) {
        if (j.contains("error")) {
            std::printf("%-24s %6s %6s  %-20s  %s\n", "(invalid)", "-", "-", "-", j["error"].get<std::string>().c_str());
            continue;
        }
        std::printf("%-24s %6lld %6d  %-20s  %s\n", j["name"].get<std::string>().c_str(),
                    static_cast<long long>(j["runs"].get<int64_t>()), j["schema_version"].get<int>(),
                    j["modified"].get<std::string>().c_str(), j["path"].get<std::string>().c_str());
    }
    return 0;
}

int cmd_show(const session_opts& o) {
    ss::session_store s = open_for_reading(o.file);
    const ss::session_info i = take(s.info());
    const auto models = take(s.models());
    const auto texts = take(s.texts());
    const auto cals = take(s.calibrations());
    const auto sweeps = take(s.sweeps());
    const auto exports = take(s.exports());
    if (o.json) {
        json j = info_json(i);
        json jm = json::array(), jt = json::array(), jc = json::array(), js = json::array(), je = json::array();
        for (const auto& m : models)
            jm.push_back({{"id", m.id}, {"sha256", m.sha256}, {"path", m.path}, {"format", m.format}, {"name", m.name},
                          {"file_bytes", m.file_bytes}, {"dim", m.dim}, {"hidden_dim", m.hidden_dim},
                          {"n_layers", m.n_layers}, {"n_heads", m.n_heads}, {"n_kv_heads", m.n_kv_heads},
                          {"vocab_size", m.vocab_size}, {"seq_len", m.seq_len}, {"added", m.added}});
        for (const auto& t : texts)
            jt.push_back({{"id", t.id}, {"sha256", t.sha256}, {"name", t.name}, {"kind", t.kind}, {"bytes", t.bytes}, {"added", t.added}});
        for (const auto& c : cals)
            jc.push_back({{"id", c.id}, {"sha256", c.sha256}, {"path", c.path}, {"model_id", c.model_id},
                          {"params", embedded(c.params_json)}, {"added", c.added}});
        for (const auto& w : sweeps)
            js.push_back({{"id", w.id}, {"created", w.created}, {"label", w.label}, {"params", embedded(w.params_json)},
                          {"model_id", w.model_id}, {"text_id", opt_json(w.text_id)}, {"runs", w.n_runs}});
        for (const auto& e : exports)
            je.push_back({{"id", e.id}, {"run_id", e.run_id}, {"created", e.created}, {"path", e.path}, {"sha256", e.sha256}});
        j["model_list"] = jm;
        j["text_list"] = jt;
        j["calibration_list"] = jc;
        j["sweep_list"] = js;
        j["export_list"] = je;
        print_json(j);
        return 0;
    }
    std::printf("session   %s (%s)\n", i.name.c_str(), i.path.c_str());
    std::printf("created   %s by %s; schema version %d; %lld bytes, modified %s\n", i.created.c_str(), i.tool.c_str(),
                i.schema_version, static_cast<long long>(i.file_bytes), i.modified.c_str());
    std::printf("contents  %lld runs, %lld models, %lld texts, %lld calibrations, %lld sweeps, %lld exports\n",
                static_cast<long long>(i.runs), static_cast<long long>(i.models), static_cast<long long>(i.texts),
                static_cast<long long>(i.calibrations), static_cast<long long>(i.sweeps), static_cast<long long>(i.exports));
    for (const auto& m : models)
        std::printf("model %-3lld %s  %s, %d layers, dim %d, hidden %d, %llu bytes, sha256 %.12s\n",
                    static_cast<long long>(m.id), m.path.c_str(), m.format.c_str(), m.n_layers, m.dim, m.hidden_dim,
                    static_cast<unsigned long long>(m.file_bytes), m.sha256.c_str());
    for (const auto& t : texts)
        std::printf("text  %-3lld %s  %s, %llu bytes, sha256 %.12s\n", static_cast<long long>(t.id), t.name.c_str(),
                    t.kind.c_str(), static_cast<unsigned long long>(t.bytes), t.sha256.c_str());
    for (const auto& c : cals)
        std::printf("calib %-3lld %s  model %lld, sha256 %.12s\n", static_cast<long long>(c.id), c.path.c_str(),
                    static_cast<long long>(c.model_id), c.sha256.c_str());
    for (const auto& w : sweeps)
        std::printf("sweep %-3lld %s  %s, %lld runs\n", static_cast<long long>(w.id), w.created.c_str(), w.label.c_str(),
                    static_cast<long long>(w.n_runs));
    for (const auto& e : exports)
        std::printf("export %-3lld run %lld -> %s (%s)\n", static_cast<long long>(e.id), static_cast<long long>(e.run_id),
                    e.path.c_str(), e.created.c_str());
    return 0;
}

int cmd_runs(const session_opts& o) {
    ss::session_store s = open_for_reading(o.file);
    if (o.id > 0) {
        const ss::run_record r = take(s.run(o.id));
        json j = run_json(r, true);
        json ex = json::array();
        for (const auto& e : take(s.exports(r.id))) ex.push_back({{"id", e.id}, {"path", e.path}, {"created", e.created}});
        j["exports"] = ex;
        if (o.json) print_json(j);
        else std::printf("%s\n", j.dump(2, ' ', false, json::error_handler_t::replace).c_str());
        return 0;
    }
    ss::run_filter f;
    f.method = o.method;
    f.limit = o.limit;
    if (!ss::run_sort_parse(o.sort, f.sort))
        throw cli_error("unknown --sort '" + o.sort + "' (created, ppl, kld, sim, cpu, density)");
    const auto runs = take(s.runs(f));
    if (o.json) {
        json arr = json::array();
        for (const auto& r : runs) arr.push_back(run_json(r, false));
        print_json(arr);
        return 0;
    }
    if (runs.empty()) {
        std::printf("no runs\n");
        return 0;
    }
    // "Δ" is two bytes wide in UTF-8 but one column on screen: pad its field by one.
    std::printf("%4s  %-20s  %-10s %9s %10s %9s %6s %9s %9s %6s  %s\n", "id", "created", "method", "ppl", "Δppl", "KL",
                "MLP", "cpu tok/s", "sim tok/s", "hit", "label");
    for (const auto& r : runs)
        std::printf("%4lld  %-20s  %-10s %9s %9s %9s %6s %9s %9s %6s  %s\n", static_cast<long long>(r.id), r.created.c_str(),
                    r.method.c_str(), num(r.ppl, "%.4f").c_str(), num(r.ppl - r.ppl_dense, "%+.4f").c_str(),
                    num(r.kld_mean, "%.5f").c_str(), num(100 * r.mlp_density, "%.1f%%").c_str(),
                    num(r.cpu_tok_s, "%.1f").c_str(), r.sim_tok_s ? num(*r.sim_tok_s, "%.1f").c_str() : "-",
                    r.hit_rate ? num(100 * *r.hit_rate, "%.1f%%").c_str() : "-", r.label.c_str());
    return 0;
}

int cmd_export(const session_opts& o) {
    ss::session_store s = take(ss::session_store::open(o.file));
    ss::export_params p;
    p.note = o.note;
    if (!o.device.empty()) {
        sim::sim_params sp = sim::sim_default_params();
        sp.device = take(sim::device_find(o.device));
        if (!sim::cache_policy_parse(o.policy, sp.policy))
            throw cli_error("unknown --policy '" + o.policy + "' (none, lru, lfu, belady, window)");
        sp.quant = sim::quant_default(o.bits);
        sp.context_tokens = o.context;
        p.device = ss::sim_setting_of(sp);
    }
    const ss::export_result r = take(ss::export_run(s, o.id, o.out, p));
    if (o.json) {
        print_json({{"export_id", r.export_id},
                    {"run_id", o.id},
                    {"path", r.path},
                    {"sha256", r.sha256},
                    {"calibration_file", r.config.calibration_file},
                    {"device", r.config.has_device() ? json(r.config.device.name) : json(nullptr)}});
        return 0;
    }
    std::printf("wrote %s (run %lld, %s%s%s)\n", r.path.c_str(), static_cast<long long>(o.id), r.config.method.name.c_str(),
                r.config.has_device() ? (", device " + r.config.device.name).c_str() : ", no device",
                r.config.calibration_file.empty() ? "" : (", calibration " + r.config.calibration_file).c_str());
    return 0;
}

int cmd_delete(const session_opts& o) {
    if (o.all == !o.run_ids.empty()) throw cli_error("session delete: give run ids or --all (not both)");
    ss::session_store s = take(ss::session_store::open(o.file));
    int64_t deleted = 0;
    if (o.all) {
        deleted = take(s.delete_all_runs());
    } else {
        // All or nothing: a missing id leaves every run in place.
        check(s.in_transaction([&]() -> outcome {
            for (int64_t id : o.run_ids)
                if (outcome r = s.delete_run(id); !r.ok()) return r;
            return {};
        }));
        deleted = static_cast<int64_t>(o.run_ids.size());
    }
    const ss::session_info i = take(s.info());
    if (o.json) {
        print_json({{"deleted", deleted}, {"runs", i.runs}});
        return 0;
    }
    std::printf("deleted %lld run%s; %lld left\n", static_cast<long long>(deleted), deleted == 1 ? "" : "s",
                static_cast<long long>(i.runs));
    return 0;
}

}  // namespace

int64_t record_eval_in_session(const session_record_opts& so, const loaded_model& lm, const std::string& text_path,
                               const method_opts& mo, const calibration* calib, const eval_result& r,
                               const lfu_residency* cache, float cache_fraction, double duration_s) {
    ss::session_store s = take(ss::open_or_create_session(so.session_path));
    const std::string text = read_text(text_path);
    ss::run_inputs in = session_run_inputs(lm, text_path, text, mo, calib);
    ss::evaluation e;
    e.config = mo.cfg;
    e.eval = r;
    e.seconds = duration_s;
    ss::record_params p;
    p.label = so.label;
    p.n_ctx = mo.n_ctx;
    p.windows = mo.windows;
    if (cache) {
        // DIP-CA's masks depend on the stand-in cache it read: record its size so an export reproduces it.
        ss::sim_setting st;
        st.cache_fraction = cache_fraction;
        p.setting = st;
        e.hit_rate = cache->hit_rate();
    }
    return take(ss::record_evaluation(s, e, in, p));
}

ss::run_inputs session_run_inputs(const loaded_model& lm, const std::string& text_path, const std::string& text,
                                  const method_opts& mo, const calibration* calib) {
    ss::run_inputs in;
    in.m = lm.m.get();
    in.text_name = fs::path(text_path).filename().string();
    in.text = std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size());
    in.offset = mo.offset;
    in.calib = calib;
    if (calib) in.calibration_path = calibration_path(mo, *lm.m);
    return in;
}

void register_session(CLI::App& app, command_fn& run) {
    auto o = std::make_shared<session_opts>();
    CLI::App* c = app.add_subcommand("session", "Session files (*.slsession): runs, models, texts, exports");
    c->require_subcommand(1);

    CLI::App* n = c->add_subcommand("new", "Create a session file");
    n->add_option("file", o->file, "Session file to create (*.slsession)")->required();
    n->add_option("--name", o->name, "Session name (default: the file's stem)");
    n->add_flag("--json", o->json, "Machine-readable output");
    n->callback([o, &run] { run = [o] { return cmd_new(*o); }; });

    CLI::App* l = c->add_subcommand("list", "List sessions in folders or files");
    l->add_option("paths", o->paths, "Folders (scanned for *.slsession) or session files")->required();
    l->add_flag("--json", o->json, "Machine-readable output");
    l->callback([o, &run] { run = [o] { return cmd_list(*o); }; });

    CLI::App* sh = c->add_subcommand("show", "Summary of a session: counts, models, texts, calibrations, sweeps, exports");
    sh->add_option("file", o->file, "Session file")->required();
    sh->add_flag("--json", o->json, "Machine-readable output");
    sh->callback([o, &run] { run = [o] { return cmd_show(*o); }; });

    CLI::App* r = c->add_subcommand("runs", "Runs of a session, or one run in full (--id)");
    r->add_option("file", o->file, "Session file")->required();
    r->add_option("--method", o->method, "Only runs of this method");
    r->add_option("--sort", o->sort, "created (oldest first), ppl, kld, density (lowest first), sim, cpu (fastest first)");
    r->add_option("--limit", o->limit, "At most this many runs (0: all)")->check(CLI::NonNegativeNumber);
    r->add_option("--id", o->id, "Show this run with its device, per-layer values and exports")->check(CLI::PositiveNumber);
    r->add_flag("--json", o->json, "Machine-readable output");
    r->callback([o, &run] { run = [o] { return cmd_runs(*o); }; });

    CLI::App* e = c->add_subcommand("export", "Write the deployment config of a run (and its calibration sidecar)");
    e->add_option("file", o->file, "Session file")->required();
    e->add_option("run", o->id, "Run id")->required()->check(CLI::PositiveNumber);
    e->add_option("-o,--out", o->out, "Config file to write (JSON)")->required();
    e->add_option("--device", o->device, "Device profile (name or .json) instead of the run's own");
    e->add_option("--policy", o->policy, "With --device: cache policy (none, lru, lfu, window)");
    e->add_option("--bits", o->bits, "With --device: weight bits")->check(CLI::Range(1, 32));
    e->add_option("--context", o->context, "With --device: KV cache context tokens");
    e->add_option("--note", o->note, "Free text stored in the config (default: the run's label)");
    e->add_flag("--json", o->json, "Machine-readable output");
    e->callback([o, &run] { run = [o] { return cmd_export(*o); }; });

    CLI::App* d = c->add_subcommand("delete", "Delete runs (and their export records) from a session");
    d->add_option("file", o->file, "Session file")->required();
    d->add_option("runs", o->run_ids, "Run ids")->check(CLI::PositiveNumber);
    d->add_flag("--all", o->all, "Delete every run");
    d->add_flag("--json", o->json, "Machine-readable output");
    d->callback([o, &run] { run = [o] { return cmd_delete(*o); }; });
}

}  // namespace sl::cli

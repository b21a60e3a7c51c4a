// Recording evaluations as runs and exporting runs as deployment configs.
#include "sparselens/sessions/run_convert.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sparselens/core/calibration.h"
#include "sparselens/core/fingerprint.h"
#include "sparselens/core/text_format.h"

namespace sl::sessions {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

json value_json(float f) {
    if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
    if (std::isnan(f)) return "nan";
    return float_shortest(f);
}

// Parses text as a JSON object; errors name origin.
result<json> parse_object(const std::string& text, const std::string& origin) {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) return error{origin + ": not valid JSON"};
    if (!j.is_object()) return error{origin + ": expected a JSON object"};
    return j;
}

// Reads j[key] into out when present; false (with msg) on a wrong type.
template <class T>
bool read_field(const json& j, const char* key, T& out, std::string& msg) {
    auto it = j.find(key);
    if (it == j.end()) return true;
    if constexpr (std::is_same_v<T, std::string>) {
        if (!it->is_string()) return msg = std::string("field '") + key + "' must be a string", false;
        out = it->get<std::string>();
    } else if constexpr (std::is_same_v<T, bool>) {
        if (!it->is_boolean()) return msg = std::string("field '") + key + "' must be true or false", false;
        out = it->get<bool>();
    } else if constexpr (std::is_floating_point_v<T>) {
        if (!it->is_number()) return msg = std::string("field '") + key + "' must be a number", false;
        out = static_cast<T>(it->get<double>());
    } else {
        if (!it->is_number_integer() && !it->is_number_unsigned())
            return msg = std::string("field '") + key + "' must be an integer", false;
        bool in_range = false;
        if constexpr (std::is_unsigned_v<T>) {
            in_range = it->is_number_unsigned() && it->get<uint64_t>() <= std::numeric_limits<T>::max();
            if (in_range) out = static_cast<T>(it->get<uint64_t>());
        } else {
            const bool fits = !it->is_number_unsigned() || it->get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max());
            const int64_t v = fits ? it->get<int64_t>() : 0;
            in_range = fits && v >= int64_t{std::numeric_limits<T>::min()} && v <= int64_t{std::numeric_limits<T>::max()};
            if (in_range) out = static_cast<T>(v);
        }
        if (!in_range) return msg = std::string("field '") + key + "' is out of range", false;
    }
    return true;
}

bool only_keys(const json& j, std::initializer_list<const char*> keys, std::string& msg) {
    for (auto it = j.begin(); it != j.end(); ++it) {
        bool known = false;
        for (const char* k : keys) known = known || it.key() == k;
        if (!known) return msg = "unknown field '" + it.key() + "'", false;
    }
    return true;
}

// A run's device as a deployment config stores it, so the two agree field for field.
json device_to_json(const sim::device_profile& d) { return json::parse(sim::deploy_device_to_json(d)); }

}  // namespace

std::string method_config_to_json(const method_config& c) {
    const json j = {{"name", c.name},
                    {"density", float_shortest(c.density)},
                    {"d_in", float_shortest(c.d_in)},
                    {"d_down", float_shortest(c.d_down)},
                    {"gamma", float_shortest(c.gamma)},
                    {"attn_density", float_shortest(c.attn_density)},
                    {"rank", c.rank},
                    {"pin_fraction", float_shortest(c.pin_fraction)},
                    {"ffsplit_mode", c.ffsplit_mode},
                    {"ffsplit_heavy", float_shortest(c.ffsplit_heavy)}};
    return j.dump();
}

result<method_config> method_config_from_json(const std::string& text, const std::string& origin) {
    result<json> j = parse_object(text, origin);
    if (!j.ok()) return j.err();
    method_config c = method_default_config();
    std::string msg;
    const bool ok = only_keys(*j, {"name", "density", "d_in", "d_down", "gamma", "attn_density", "rank", "pin_fraction",
                                   "ffsplit_mode", "ffsplit_heavy"},
                              msg) &&
                    read_field(*j, "name", c.name, msg) && read_field(*j, "density", c.density, msg) &&
                    read_field(*j, "d_in", c.d_in, msg) && read_field(*j, "d_down", c.d_down, msg) &&
                    read_field(*j, "gamma", c.gamma, msg) && read_field(*j, "attn_density", c.attn_density, msg) &&
                    read_field(*j, "rank", c.rank, msg) && read_field(*j, "pin_fraction", c.pin_fraction, msg) &&
                    read_field(*j, "ffsplit_mode", c.ffsplit_mode, msg) &&
                    read_field(*j, "ffsplit_heavy", c.ffsplit_heavy, msg);
    if (!ok) return error{origin + ": method parameters: " + msg};
    return c;
}

std::string sim_setting_to_json(const sim_setting& s) {
    const json j = {{"device", s.device.name.empty() ? json(nullptr) : device_to_json(s.device)},
                    {"policy", sim::cache_policy_name(s.policy)},
                    {"window_tokens", s.window_tokens},
                    {"bits", s.bits},
                    {"group_size", s.group_size},
                    {"scale_bits", s.scale_bits},
                    {"embedding_bits", s.embedding_bits},
                    {"context_tokens", s.context_tokens},
                    {"layout", s.layout},
                    {"cache_fraction", float_shortest(s.cache_fraction)},
                    {"sim_tokens", s.sim_tokens}};
    return j.dump();
}

result<sim_setting> sim_setting_from_json(const std::string& text, const std::string& origin) {
    result<json> j = parse_object(text, origin);
    if (!j.ok()) return j.err();
    sim_setting s;
    std::string msg, policy = sim::cache_policy_name(s.policy);
    bool ok = only_keys(*j, {"device", "policy", "window_tokens", "bits", "group_size", "scale_bits", "embedding_bits",
                             "context_tokens", "layout", "cache_fraction", "sim_tokens"},
                        msg) &&
              read_field(*j, "policy", policy, msg) && read_field(*j, "window_tokens", s.window_tokens, msg) &&
              read_field(*j, "bits", s.bits, msg);
    if (ok) {
        // Runs recorded before the weight format was stored: the format `bits` stands for.
        const sim::quant_format q = sim::quant_default(s.bits);
        s.group_size = q.group_size;
        s.scale_bits = q.scale_bits;
        s.embedding_bits = q.embedding_bits;
    }
    ok = ok && read_field(*j, "group_size", s.group_size, msg) && read_field(*j, "scale_bits", s.scale_bits, msg) &&
         read_field(*j, "embedding_bits", s.embedding_bits, msg) && read_field(*j, "context_tokens", s.context_tokens, msg) &&
         read_field(*j, "layout", s.layout, msg) && read_field(*j, "cache_fraction", s.cache_fraction, msg) &&
         read_field(*j, "sim_tokens", s.sim_tokens, msg);
    if (ok) {
        if (outcome q = sim::quant_validate({s.bits, s.group_size, s.scale_bits, s.embedding_bits}); !q.ok())
            ok = (msg = q.message(), false);
    }
    if (ok && !j->contains("device")) ok = (msg = "missing field 'device'", false);
    if (ok && !sim::cache_policy_parse(policy, s.policy)) ok = (msg = "unknown cache policy '" + policy + "'", false);
    if (!ok) return error{origin + ": device setting: " + msg};
    if (const json& d = j->at("device"); !d.is_null()) {
        result<sim::device_profile> dev = sim::deploy_device_from_json(d.dump(), origin + ": device setting");
        if (!dev.ok()) return dev.err();
        s.device = std::move(*dev);
    }
    return s;
}

sim_setting sim_setting_of(const sim::sim_params& p, const std::string& layout, uint32_t sim_tokens) {
    sim_setting s;
    s.device = p.device;
    s.policy = p.policy;
    s.window_tokens = p.window_tokens;
    s.bits = p.quant.bits;
    s.group_size = p.quant.group_size;
    s.scale_bits = p.quant.scale_bits;
    s.embedding_bits = p.quant.embedding_bits;
    s.context_tokens = p.context_tokens;
    s.layout = layout;
    s.sim_tokens = sim_tokens;
    return s;
}

sim::sim_params sim_params_of(const sim_setting& s) {
    sim::sim_params p = sim::sim_default_params();
    p.device = s.device;
    p.policy = s.policy;
    p.window_tokens = s.window_tokens;
    p.quant = {s.bits, s.group_size, s.scale_bits, s.embedding_bits};
    p.context_tokens = s.context_tokens;
    return p;
}

std::string per_layer_to_json(const std::vector<layer_density>& measured, const sim::per_layer_table& resolved) {
    json layers = json::array();
    for (const layer_density& d : measured) {
        json l = json::object();
        for (int p = 0; p < proj_count; ++p) l[proj_name(static_cast<proj>(p))] = value_json(d.d[p]);
        layers.push_back(l);
    }
    // An array of [name, values] pairs keeps the method's order (a JSON object would sort the names).
    json res = json::array();
    for (const auto& [name, values] : resolved) {
        json v = json::array();
        for (float f : values) v.push_back(value_json(f));
        res.push_back(json::array({name, v}));
    }
    return json{{"measured", layers}, {"resolved", res}}.dump();
}

result<sim::per_layer_table> per_layer_resolved_from_json(const std::string& text, const std::string& origin) {
    sim::per_layer_table out;
    if (text.empty()) return out;
    result<json> j = parse_object(text, origin);
    if (!j.ok()) return j.err();
    auto it = j->find("resolved");
    if (it == j->end()) return out;
    const error bad{origin + ": per-layer values: 'resolved' must be a list of [name, [numbers]]"};
    if (!it->is_array()) return bad;
    for (const json& e : *it) {
        if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_array()) return bad;
        std::vector<float> values;
        for (const json& v : e[1]) {
            if (v.is_number()) values.push_back(static_cast<float>(v.get<double>()));
            else if (v == "inf") values.push_back(std::numeric_limits<float>::infinity());
            else if (v == "-inf") values.push_back(-std::numeric_limits<float>::infinity());
            else if (v == "nan") values.push_back(std::numeric_limits<float>::quiet_NaN());
            else return bad;
        }
        out.emplace_back(e[0].get<std::string>(), std::move(values));
    }
    return out;
}

model_record model_record_of(const model& m, const std::string& sha256) {
    model_record r;
    r.sha256 = sha256;
    r.path = m.path;
    r.format = m.format;
    r.name = m.name;
    r.file_bytes = m.file_bytes;
    r.dim = m.hp.dim;
    r.hidden_dim = m.hp.hidden_dim;
    r.n_layers = m.hp.n_layers;
    r.n_heads = m.hp.n_heads;
    r.n_kv_heads = m.hp.n_kv_heads;
    r.vocab_size = m.hp.vocab_size;
    r.seq_len = m.hp.seq_len;
    return r;
}

run_record run_record_from_eval(const method_config& cfg, const eval_result& r, const eval_windows& w,
                                const sim::per_layer_table& resolved) {
    run_record run;
    run.method = cfg.name;
    run.params_json = method_config_to_json(cfg);
    run.n_ctx = w.n_ctx;
    run.windows = w.windows;
    run.offset = w.offset;
    run.ppl = r.ppl;
    run.ppl_dense = r.ppl_dense;
    run.kld_mean = r.kld_mean;
    run.kld_p99 = r.kld_p99;
    run.top1 = r.top1_agreement;
    run.mlp_density = r.mlp_density;
    run.attn_density = r.attn_density;
    run.n_scored = r.n_scored;
    run.per_layer_json = per_layer_to_json(r.per_layer, resolved);
    run.cpu_tok_s = r.decode_tokens_per_second;
    run.cpu_tok_s_dense = r.dense_decode_tokens_per_second;
    return run;
}

result<int64_t> record_run(session_store& s, run_record r, const run_provenance& p) {
    if (!p.m) return error{s.path() + ": cannot record a run without its model"};
    // Hash before the transaction: a multi-GB model must not hold the write lock while it is read.
    std::string model_sha = p.model_sha256;
    if (model_sha.empty()) {
        result<std::string> h = sha256_file(p.m->path);
        if (!h.ok()) return h.err();
        model_sha = std::move(*h);
    }
    std::string calib_sha = p.calibration_sha256;
    if (!p.calibration_path.empty() && calib_sha.empty()) {
        result<std::string> h = sha256_file(p.calibration_path);
        if (!h.ok()) return h.err();
        calib_sha = std::move(*h);
    }
    int64_t run_id = 0;
    outcome o = s.in_transaction([&]() -> outcome {
        model_record mr = model_record_of(*p.m, model_sha);
        std::error_code ec;
        if (const fs::path abs = fs::absolute(mr.path, ec); !ec) mr.path = abs.lexically_normal().string();
        result<int64_t> model_id = s.add_model(mr);
        if (!model_id.ok()) return model_id.err();
        r.model_id = *model_id;
        if (!p.text.empty() || !p.text_name.empty()) {
            result<int64_t> text_id = s.add_text(p.text_name, p.text, "eval");
            if (!text_id.ok()) return text_id.err();
            r.text_id = *text_id;
        }
        if (!p.calibration_path.empty()) {
            calibration_record c;
            c.sha256 = calib_sha;
            c.path = fs::absolute(p.calibration_path).lexically_normal().string();
            c.model_id = *model_id;
            result<int64_t> cid = s.add_calibration(c);
            if (!cid.ok()) return cid.err();
            r.calibration_id = *cid;
        }
        result<int64_t> id = s.add_run(r);
        if (!id.ok()) return id.err();
        run_id = *id;
        return {};
    });
    if (!o.ok()) return o.err();
    return run_id;
}

result<sim::deploy_config> deploy_config_of_run(const session_store& s, int64_t run_id,
                                                const std::optional<sim_setting>& device, std::string* calibration_path) {
    result<run_record> r = s.run(run_id);
    if (!r.ok()) return r.err();
    const std::string origin = s.path() + ": run " + std::to_string(run_id);
    result<model_record> m = s.model(r->model_id);
    if (!m.ok()) return m.err();
    result<method_config> mc = method_config_from_json(r->params_json, origin);
    if (!mc.ok()) return mc.err();
    result<sim::per_layer_table> resolved = per_layer_resolved_from_json(r->per_layer_json, origin);
    if (!resolved.ok()) return resolved.err();

    sim::deploy_config c;
    c.tool = "sparselens 0.1.0";
    c.note = r->label;
    c.model.file_name = fs::path(m->path).filename().string();
    c.model.file_bytes = m->file_bytes;
    c.model.sha256 = m->sha256;
    c.model.format = m->format;
    c.model.dim = m->dim;
    c.model.hidden_dim = m->hidden_dim;
    c.model.n_layers = m->n_layers;
    c.model.n_heads = m->n_heads;
    c.model.n_kv_heads = m->n_kv_heads;
    c.model.vocab_size = m->vocab_size;
    c.model.seq_len = m->seq_len;
    c.method = *mc;
    c.per_layer = std::move(*resolved);

    std::optional<sim_setting> dev = device;
    if (!dev && !r->device_json.empty()) {
        result<sim_setting> d = sim_setting_from_json(r->device_json, origin);
        if (!d.ok()) return d.err();
        dev = std::move(*d);
    }
    if (dev) {
        sim::deploy_set_sim(c, sim_params_of(*dev));
        c.layout = dev->layout;
        c.cache_fraction = dev->cache_fraction;
    }

    sim::deploy_expectations& e = c.expected;
    if (r->text_id) {
        result<std::vector<text_record>> texts = s.texts();
        if (!texts.ok()) return texts.err();
        for (const text_record& t : *texts)
            if (t.id == *r->text_id) {
                e.eval_text = t.name;
                e.eval_text_sha256 = t.sha256;
            }
    }
    e.n_ctx = r->n_ctx;
    // Windows actually evaluated (the run stores the requested count, 0 meaning "all").
    const int64_t per_window = r->n_ctx - 1 - r->n_ctx / 2;
    e.windows = per_window > 0 ? static_cast<int32_t>(r->n_scored / per_window) : r->windows;
    e.offset = r->offset;
    e.scored_tokens = r->n_scored;
    e.ppl_dense = r->ppl_dense;
    e.ppl = r->ppl;
    e.kld_mean = r->kld_mean;
    e.kld_p99 = r->kld_p99;
    e.top1_agreement = r->top1;
    e.mlp_density = r->mlp_density;
    e.attn_density = r->attn_density;
    e.cpu_tokens_per_s = r->cpu_tok_s;
    e.cpu_dense_tokens_per_s = r->cpu_tok_s_dense;
    // Simulated numbers belong to the run's own device; with another device they would mislead.
    if (!device && r->sim_tok_s) {
        e.sim_tokens_per_s = *r->sim_tok_s;
        e.sim_hit_rate = r->hit_rate.value_or(0.0);
        e.sim_tokens = dev ? dev->sim_tokens : 0;
    }

    if (calibration_path) calibration_path->clear();
    if (r->calibration_id) {
        result<calibration_record> cal = s.calibration(*r->calibration_id);
        if (!cal.ok()) return cal.err();
        if (calibration_path) *calibration_path = cal->path;
        c.calibration_sha256 = cal->sha256;  // the source file's; deploy_config_write replaces it by the sidecar's
    }
    return c;
}

result<export_result> export_run(session_store& s, int64_t run_id, const std::string& out_path, const export_params& p) {
    std::string calib_path;
    result<sim::deploy_config> c = deploy_config_of_run(s, run_id, p.device, &calib_path);
    if (!c.ok()) return c.err();
    if (!p.note.empty()) c->note = p.note;
    std::optional<calibration> cal;
    if (!calib_path.empty()) {
        result<std::string> sha = sha256_file(calib_path);
        if (!sha.ok())
            return error{s.path() + ": run " + std::to_string(run_id) + " used calibration " + calib_path +
                         ", which cannot be read now: " + sha.message()};
        if (*sha != c->calibration_sha256)
            return error{calib_path + ": changed since run " + std::to_string(run_id) + " was recorded (sha256 " +
                         sha->substr(0, 12) + "… vs " + c->calibration_sha256.substr(0, 12) + "…)"};
        result<calibration> loaded = calibration_load(calib_path);
        if (!loaded.ok()) return loaded.err();
        cal = std::move(*loaded);
    }
    if (outcome o = sim::deploy_config_write(out_path, *c, cal ? &*cal : nullptr); !o.ok()) return o.err();
    result<sim::loaded_deploy_config> back = sim::deploy_config_read(out_path);
    if (!back.ok()) return back.err();
    result<export_record> rec = record_export(s, run_id, out_path);
    if (!rec.ok()) return rec.err();
    export_result out;
    out.config = std::move(back->config);
    out.path = rec->path;
    out.sha256 = rec->sha256;
    out.export_id = rec->id;
    return out;
}

result<export_record> record_export(session_store& s, int64_t run_id, const std::string& config_path) {
    std::ifstream f(config_path, std::ios::binary);
    std::ostringstream text;
    if (!f || !(text << f.rdbuf())) return error{config_path + ": cannot read the exported config"};
    export_record rec;
    rec.run_id = run_id;
    std::error_code ec;
    const fs::path abs = fs::absolute(config_path, ec);
    rec.path = (ec ? fs::path(config_path) : abs).lexically_normal().string();
    rec.config_json = text.str();
    rec.sha256 = sha256_hex(std::string_view(rec.config_json));
    result<int64_t> id = s.add_export(rec);
    if (!id.ok()) return id.err();
    rec.id = *id;
    return rec;
}

}  // namespace sl::sessions

// Writes the fuzz seed corpora that need our own writers: micro llama2.c / GGUF models, a micro vocabulary,
// calibration files, traces, deployment configs and a session database, made from a micro model and, when
// ../shared is present, from the real stories260K fixtures. make_seeds.sh adds the fixture files themselves.
// Usage: sl_fuzz_seed_writer <corpus_dir> <shared_dir> <assets_dir>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include <sqlite3.h>

#include "fuzz_common.h"
#include "sparselens/core/calibration.h"
#include "sparselens/core/gguf.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/model.h"
#include "sparselens/core/tokenizer.h"
#include "sparselens/sessions/run_convert.h"
#include "sparselens/sessions/session_store.h"
#include "sparselens/sim/deploy_config.h"
#include "sparselens/sim/device.h"
#include "sparselens/sim/memory_map.h"
#include "sparselens/sim/shape.h"
#include "sparselens/sim/synthetic.h"
#include "sparselens/sim/trace.h"

namespace fs = std::filesystem;

namespace {

fs::path g_out;

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "sl_fuzz_seed_writer: %s\n", what.c_str());
    std::exit(1);
}

template <class T>
T need(sl::result<T> r, const char* what) {
    if (!r) die(std::string(what) + ": " + r.message());
    return std::move(*r);
}
void need(const sl::outcome& o, const char* what) {
    if (!o) die(std::string(what) + ": " + o.message());
}

fs::path seed(const std::string& target, const std::string& name) {
    fs::create_directories(g_out / target);
    return g_out / target / name;
}

void write_bytes(const fs::path& p, const void* data, size_t n) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
    if (!f) die("cannot write " + p.string());
}
void write_text(const fs::path& p, const std::string& s) { write_bytes(p, s.data(), s.size()); }

// Micro Llama: dim 8, hidden 16, 1 layer, 2 heads (1 KV head), 264 tokens (<unk>, <s>, </s>, 256 bytes,
// 5 pieces), 8 positions. Weights in llama2.c checkpoint order; small, so mutations stay cheap.
constexpr int32_t D = 8, H = 16, L = 1, NH = 2, NKV = 1, V = 264, S = 8, KVD = D / NH * NKV;

std::vector<std::string> micro_pieces() {
    std::vector<std::string> p = {"<unk>", "<s>", "</s>"};
    char buf[8];
    for (int b = 0; b < 256; ++b) {
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        p.emplace_back(buf);
    }
    for (const char* s : {" ", "e", " t", "he", " the"}) p.emplace_back(s);
    return p;
}

struct micro_weights {
    std::vector<float> tok, att, wq, wk, wv, wo, ffn, w1, w2, w3, fin, freq, cls;
};

micro_weights micro_make() {
    std::mt19937 rng(7);
    std::normal_distribution<float> n(0.0f, 0.3f);
    auto fill = [&](size_t count, bool ones = false) {
        std::vector<float> v(count);
        for (float& x : v) x = ones ? 1.0f : n(rng);
        return v;
    };
    return {fill(V * D), fill(L * D, true), fill(L * D * D), fill(L * KVD * D), fill(L * KVD * D), fill(L * D * D),
            fill(L * D, true), fill(L * H * D), fill(L * D * H), fill(L * H * D), fill(D, true),
            fill(S * (D / NH)), fill(V * D)};
}

void write_micro_llama2c(const micro_weights& w, bool shared_cls, const fs::path& p) {
    std::vector<uint8_t> b;
    auto put = [&b](const void* d, size_t n) { b.insert(b.end(), (const uint8_t*)d, (const uint8_t*)d + n); };
    const int32_t header[7] = {D, H, L, NH, NKV, shared_cls ? V : -V, S};
    put(header, sizeof header);
    for (const auto* v : {&w.tok, &w.att, &w.wq, &w.wk, &w.wv, &w.wo, &w.ffn, &w.w1, &w.w2, &w.w3, &w.fin, &w.freq})
        put(v->data(), v->size() * 4);
    if (!shared_cls) put(w.cls.data(), w.cls.size() * 4);
    write_bytes(p, b.data(), b.size());
    need(sl::model_load(p.string()), "micro llama2.c model does not load");
}

void write_micro_gguf(const micro_weights& w, const fs::path& p) {
    sl::gguf_writer g;
    g.set_str("general.architecture", "llama");
    g.set_str("general.name", "fuzz-micro");
    g.set_u32("llama.context_length", S);
    g.set_u32("llama.embedding_length", D);
    g.set_u32("llama.feed_forward_length", H);
    g.set_u32("llama.block_count", L);
    g.set_u32("llama.attention.head_count", NH);
    g.set_u32("llama.attention.head_count_kv", NKV);
    g.set_u32("llama.rope.dimension_count", D / NH);
    g.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    g.set_str("tokenizer.ggml.model", "llama");
    std::vector<std::string> pieces = micro_pieces();
    std::vector<float> scores(pieces.size(), 0.0f);
    std::vector<int32_t> types(pieces.size(), 1);
    types[0] = 2;
    types[1] = types[2] = 3;
    for (int b = 0; b < 256; ++b) types[3 + b] = 6;
    for (size_t i = 259; i < pieces.size(); ++i) {
        scores[i] = -static_cast<float>(i);
        for (size_t at; (at = pieces[i].find(' ')) != std::string::npos;) pieces[i].replace(at, 1, "\xe2\x96\x81");
    }
    g.set("tokenizer.ggml.tokens", sl::gguf_value::string_array(pieces));
    g.set("tokenizer.ggml.scores", sl::gguf_value::array(scores));
    g.set("tokenizer.ggml.token_type", sl::gguf_value::array(types));
    g.set_u32("tokenizer.ggml.bos_token_id", 1);
    g.set_u32("tokenizer.ggml.eos_token_id", 2);
    g.set_u32("tokenizer.ggml.unknown_token_id", 0);
    auto add = [&g](const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v) {
        need(g.add_tensor(name, 0, std::move(shape), v.data()), "gguf tensor");
    };
    add("token_embd.weight", {D, V}, w.tok);
    add("output_norm.weight", {D}, w.fin);
    add("output.weight", {D, V}, w.cls);
    add("blk.0.attn_norm.weight", {D}, w.att);
    add("blk.0.attn_q.weight", {D, D}, w.wq);
    add("blk.0.attn_k.weight", {D, KVD}, w.wk);
    add("blk.0.attn_v.weight", {D, KVD}, w.wv);
    add("blk.0.attn_output.weight", {D, D}, w.wo);
    add("blk.0.ffn_norm.weight", {D}, w.ffn);
    add("blk.0.ffn_gate.weight", {D, H}, w.w1);
    add("blk.0.ffn_down.weight", {H, D}, w.w2);
    add("blk.0.ffn_up.weight", {D, H}, w.w3);
    need(g.write(p.string()), "micro gguf");
    need(sl::model_load(p.string()), "micro GGUF model does not load");
}

std::vector<uint8_t> micro_vocab_file() {
    std::vector<uint8_t> b;
    auto put = [&b](const void* d, size_t n) { b.insert(b.end(), (const uint8_t*)d, (const uint8_t*)d + n); };
    const int32_t max_len = 8;
    put(&max_len, 4);
    const std::vector<std::string> pieces = micro_pieces();
    for (size_t i = 0; i < pieces.size(); ++i) {
        const float score = i < 259 ? 0.0f : -static_cast<float>(i);
        const int32_t len = static_cast<int32_t>(pieces[i].size());
        put(&score, 4);
        put(&len, 4);
        put(pieces[i].data(), pieces[i].size());
    }
    return b;
}

void calibration_seed(const sl::model& m, const std::vector<int32_t>& tokens, int32_t n_ctx, const fs::path& p) {
    sl::calibration_params cp = sl::calibration_default_params();
    cp.n_ctx = n_ctx;
    cp.max_tokens = static_cast<int32_t>(tokens.size());
    cp.n_threads = 1;
    cp.hist_octave_bits = 4;  // the coarsest histograms: small seeds, cheap mutations
    const sl::calibration cal = need(sl::calibrate(m, tokens, cp), "calibrate");
    need(sl::calibration_save(cal, p.string()), "calibration_save");
    // The harness re-seals mutated files; on a valid file that must change nothing, or the fuzzer
    // would stop at the checksum (the format moved under fuzz_common.h).
    std::vector<uint8_t> b = sl::calibration_serialize(cal), resealed = b;
    if (!sl::fuzz::reseal_calibration(resealed) || resealed != b) die("reseal_calibration does not match the format");
}

void trace_seeds(const sl::model& m, const std::string& tag) {
    using namespace sl::sim;
    for (const char* layout : {"dip", "bundle"}) {
        synthetic_params sp;
        sp.n_tokens = 6;
        const trace t = need(trace_synthetic(shape_from_model(m), need(layout_parse(layout), "layout"), sp), "trace");
        need(trace_write(seed("fuzz_trace", tag + "_" + layout + ".sltrace").string(), t), "trace_write");
        std::vector<uint8_t> b = trace_encode(t), resealed = b;
        if (!sl::fuzz::reseal_trace(resealed) || resealed != b) die("reseal_trace does not match the format");
    }
}

// Configs as `sparselens tune --export` writes them: the model's identity, a method, a device.
void config_seeds(const std::string& tag, const std::string& model_path, const sl::model& m,
                  const std::string& assets) {
    using namespace sl::sim;
    deploy_config c;
    c.created = "2026-01-01T00:00:00Z";
    c.tool = "sparselens 0.1.0";
    c.model = need(deploy_model_identity(model_path, m), "identity");
    c.calibration_file = "model.calib";
    c.calibration_sha256 = std::string(64, 'c');
    int i = 0;
    for (const std::string& dev : device_list(assets)) {
        c.device = need(device_find(dev, assets), "device");
        c.method.name = i % 2 ? "dip-ca" : "cats";
        c.method.density = 0.5f;
        c.policy = i % 2 ? cache_policy::window : cache_policy::lfu;
        c.per_layer = {{"threshold", std::vector<float>(static_cast<size_t>(m.hp.n_layers), 0.25f)}};
        const std::string json = deploy_config_to_json(c);
        need(deploy_config_from_json(json, "seed"), "seed config does not read back");
        write_text(seed("fuzz_deploy_config", tag + "_config_" + dev + ".json"), json);
        write_text(seed("fuzz_deploy_config", "device_" + dev + ".json"), deploy_device_to_json(c.device));
        ++i;
    }
    c.device = device_profile{};  // "no device"
    write_text(seed("fuzz_deploy_config", tag + "_config_nodevice.json"), deploy_config_to_json(c));
}

void session_seed(const std::string& model_path, const sl::model& m, const std::string& assets) {
    using namespace sl::sessions;
    const fs::path p = seed("fuzz_session", "session.slsession");
    fs::remove(p);
    session_store s = need(session_store::create(p.string(), "fuzz seed"), "session create");
    const sl::sim::deploy_model id = need(sl::sim::deploy_model_identity(model_path, m), "identity");
    const int64_t model_id = need(s.add_model(model_record_of(m, id.sha256)), "add_model");
    const std::string text = "Once upon a time there was a little cat.";
    const int64_t text_id = need(s.add_text("text.txt", {(const uint8_t*)text.data(), text.size()}), "add_text");
    calibration_record cr;
    cr.sha256 = std::string(64, 'c');
    cr.path = "model.calib";
    cr.model_id = model_id;
    cr.params_json = R"({"n_ctx":8,"tokens":64,"text":"text.txt"})";
    const int64_t cal_id = need(s.add_calibration(cr), "add_calibration");
    sweep_record sw;
    sw.label = "sweep";
    sw.params_json = R"({"methods":["cats"],"densities":[0.5]})";
    sw.model_id = model_id;
    const int64_t sweep_id = need(s.add_sweep(sw), "add_sweep");
    sl::method_config mc;
    mc.name = "cats";
    mc.density = 0.5f;
    run_record r;
    r.label = "cats 0.5";
    r.method = "cats";
    r.params_json = method_config_to_json(mc);
    r.model_id = model_id;
    r.text_id = text_id;
    r.calibration_id = cal_id;
    r.sweep_id = sweep_id;
    r.n_ctx = 8;
    r.windows = 2;
    r.ppl = 3.5;
    r.ppl_dense = 3.0;
    r.per_layer_json = R"({"threshold":[0.25]})";
    sl::sim::sim_params sp;
    sp.device = need(sl::sim::device_find("apple-a18", assets), "device");
    r.device_name = sp.device.name;
    r.device_json = sim_setting_to_json(sim_setting_of(sp, "bundle", 6));
    r.sim_tok_s = 12.5;
    r.hit_rate = 0.5;
    const int64_t run_id = need(s.add_run(r), "add_run");
    export_record e;
    e.run_id = run_id;
    e.path = "cats.json";
    e.sha256 = std::string(64, 'e');
    e.config_json = "{}";
    need(s.add_export(e), "add_export");
}

// The same session with 512-byte pages (SQLite's smallest) and rollback journal: a few KiB instead of
// 15 pages of 4 KiB, so each mutated input is cheap to write and open.
void compact_session_seed() {
    const fs::path from = seed("fuzz_session", "session.slsession");
    const fs::path to = seed("fuzz_session", "session_small.slsession");
    fs::copy_file(from, to, fs::copy_options::overwrite_existing);
    sqlite3* db = nullptr;
    if (sqlite3_open(to.string().c_str(), &db) != SQLITE_OK) die("sqlite open " + to.string());
    char* err = nullptr;
    if (sqlite3_exec(db, "PRAGMA journal_mode=DELETE; PRAGMA page_size=512; VACUUM;", nullptr, nullptr, &err) != SQLITE_OK)
        die(std::string("compact session: ") + (err ? err : "?"));
    sqlite3_close(db);
    need(sl::sessions::session_store::open(to.string(), true), "compacted session does not open");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) die("usage: sl_fuzz_seed_writer <corpus_dir> <shared_dir> <assets_dir>");
    g_out = argv[1];
    const fs::path shared = argv[2];
    const std::string assets = argv[3];

    const micro_weights w = micro_make();
    write_micro_llama2c(w, true, seed("fuzz_llama2c", "micro_shared.bin"));
    write_micro_llama2c(w, false, seed("fuzz_llama2c", "micro_unshared.bin"));
    write_micro_gguf(w, seed("fuzz_gguf", "micro.gguf"));
    const std::vector<uint8_t> vocab = micro_vocab_file();
    write_bytes(seed("fuzz_tokenizer", "micro_vocab.bin"), vocab.data(), vocab.size());

    const std::string micro_path = seed("fuzz_llama2c", "micro_shared.bin").string();
    const sl::model micro = need(sl::model_load(micro_path), "micro model");
    std::vector<int32_t> toks(64);
    std::mt19937 rng(11);
    for (int32_t& t : toks) t = 3 + static_cast<int32_t>(rng() % (V - 3));
    calibration_seed(micro, toks, S, seed("fuzz_calibration", "micro.slcal"));
    trace_seeds(micro, "micro");
    config_seeds("micro", micro_path, micro, assets);
    session_seed(micro_path, micro, assets);
    compact_session_seed();

    // The real fixtures, when present: a calibration, traces and configs of stories260K.
    const fs::path model_path = shared / "models" / "stories260K_f32.bin";
    const fs::path tok_path = shared / "models" / "tok512.bin";
    const fs::path text_path = shared / "text" / "tinystories_sample.txt";
    if (fs::exists(model_path) && fs::exists(tok_path) && fs::exists(text_path)) {
        const sl::model m = need(sl::model_load(model_path.string()), "stories260K");
        const sl::tokenizer tok = need(sl::tokenizer::from_llama2c_file(tok_path.string()), "tok512");
        std::ifstream f(text_path, std::ios::binary);
        const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        std::vector<int32_t> ids = tok.encode(text, false, false);
        ids.resize(std::min<size_t>(ids.size(), 256));
        calibration_seed(m, ids, 64, seed("fuzz_calibration", "stories260K.slcal"));
        trace_seeds(m, "stories260K");
        config_seeds("stories260K", model_path.string(), m, assets);
    }
    return 0;
}

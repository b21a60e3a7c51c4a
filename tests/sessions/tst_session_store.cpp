// Session rows: round trip of every run field, dedupe by hash, filters and sorting, deletes and cascades,
// transactions, and the conversions between eval results / method configs / devices and runs.
#include <cmath>

#include "session_test_util.h"
#include "sparselens/sessions/run_convert.h"

using namespace sl;
using namespace sl::sessions;
using sl::test::raw_db;
using sl::test::temp_dir;

namespace {

std::span<const uint8_t> bytes_of(const std::string& s) {
    return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

model_record a_model(char fill) {
    model_record m;
    m.sha256 = sl::test::hex64(fill);
    m.path = "/models/" + std::string(1, fill) + ".gguf";
    m.format = "gguf";
    m.name = "m";
    m.file_bytes = 123456789012ull;
    m.dim = 288;
    m.hidden_dim = 768;
    m.n_layers = 6;
    m.n_heads = 6;
    m.n_kv_heads = 3;
    m.vocab_size = 32000;
    m.seq_len = 256;
    return m;
}

}  // namespace

TEST(session_store, run_round_trip_keeps_every_field) {
    temp_dir d;
    auto s = session_store::create(d.file("rt.slsession"), "rt");
    ASSERT_TRUE(s.ok()) << s.message();
    auto mid = s->add_model(a_model('a'));
    ASSERT_TRUE(mid.ok()) << mid.message();
    auto tid = s->add_text("wiki.txt", bytes_of("some text"));
    ASSERT_TRUE(tid.ok());
    calibration_record c;
    c.sha256 = sl::test::hex64('c');
    c.path = "/c/a.calib";
    c.model_id = *mid;
    c.params_json = "{\"n_ctx\":128}";
    auto cid = s->add_calibration(c);
    ASSERT_TRUE(cid.ok()) << cid.message();
    sweep_record sw;
    sw.label = "grid";
    sw.params_json = "{\"methods\":[\"dip\"]}";
    sw.model_id = *mid;
    sw.text_id = *tid;
    auto sid = s->add_sweep(sw);
    ASSERT_TRUE(sid.ok()) << sid.message();

    run_record r;
    r.created = "2025-03-04T05:06:07Z";
    r.label = "best \"quoted\" ünïcode";
    r.method = "dip-ca";
    r.params_json = "{\"name\":\"dip-ca\",\"gamma\":0.2}";
    r.model_id = *mid;
    r.text_id = *tid;
    r.calibration_id = *cid;
    r.sweep_id = *sid;
    r.n_ctx = 256;
    r.windows = 7;
    r.offset = 1 << 20;
    r.ppl = 3.141592653589793;
    r.ppl_dense = 2.718281828459045;
    r.kld_mean = 1e-9;
    r.kld_p99 = 0.5;
    r.top1 = 0.875;
    r.mlp_density = 0.4999999;
    r.attn_density = 0.75;
    r.n_scored = 12345678901;
    r.per_layer_json = "{\"measured\":[]}";
    r.cpu_tok_s = 1234.5;
    r.cpu_tok_s_dense = 999.25;
    r.duration_s = 12.75;
    r.device_name = "apple-a18";
    r.device_json = "{\"device\":null}";
    r.sim_tok_s = 17.5;
    r.hit_rate = 0.9375;
    auto rid = s->add_run(r);
    ASSERT_TRUE(rid.ok()) << rid.message();

    // Read back through a second, read-only store: what is on disk, not a cache.
    auto ro = session_store::open(s->path(), true);
    ASSERT_TRUE(ro.ok()) << ro.message();
    auto back = ro->run(*rid);
    ASSERT_TRUE(back.ok()) << back.message();
    EXPECT_EQ(back->id, *rid);
    EXPECT_EQ(back->created, r.created);
    EXPECT_EQ(back->label, r.label);
    EXPECT_EQ(back->method, r.method);
    EXPECT_EQ(back->params_json, r.params_json);
    EXPECT_EQ(back->model_id, r.model_id);
    EXPECT_EQ(back->text_id, r.text_id);
    EXPECT_EQ(back->calibration_id, r.calibration_id);
    EXPECT_EQ(back->sweep_id, r.sweep_id);
    EXPECT_EQ(back->n_ctx, r.n_ctx);
    EXPECT_EQ(back->windows, r.windows);
    EXPECT_EQ(back->offset, r.offset);
    EXPECT_EQ(back->ppl, r.ppl);  // bit-exact: REAL is a double
    EXPECT_EQ(back->ppl_dense, r.ppl_dense);
    EXPECT_EQ(back->kld_mean, r.kld_mean);
    EXPECT_EQ(back->kld_p99, r.kld_p99);
    EXPECT_EQ(back->top1, r.top1);
    EXPECT_EQ(back->mlp_density, r.mlp_density);
    EXPECT_EQ(back->attn_density, r.attn_density);
    EXPECT_EQ(back->n_scored, r.n_scored);
    EXPECT_EQ(back->per_layer_json, r.per_layer_json);
    EXPECT_EQ(back->cpu_tok_s, r.cpu_tok_s);
    EXPECT_EQ(back->cpu_tok_s_dense, r.cpu_tok_s_dense);
    EXPECT_EQ(back->duration_s, r.duration_s);
    EXPECT_EQ(back->device_name, r.device_name);
    EXPECT_EQ(back->device_json, r.device_json);
    EXPECT_EQ(back->sim_tok_s, r.sim_tok_s);
    EXPECT_EQ(back->hit_rate, r.hit_rate);

    auto m = ro->model(*mid);
    ASSERT_TRUE(m.ok());
    const model_record want = a_model('a');
    EXPECT_EQ(m->sha256, want.sha256);
    EXPECT_EQ(m->file_bytes, want.file_bytes);
    EXPECT_EQ(m->n_kv_heads, want.n_kv_heads);
    EXPECT_EQ(m->vocab_size, want.vocab_size);
    EXPECT_EQ(m->seq_len, want.seq_len);
    EXPECT_FALSE(m->added.empty());
    auto cal = ro->calibration(*cid);
    ASSERT_TRUE(cal.ok());
    EXPECT_EQ(cal->params_json, c.params_json);
    auto sweeps = ro->sweeps();
    ASSERT_TRUE(sweeps.ok());
    ASSERT_EQ(sweeps->size(), 1u);
    EXPECT_EQ((*sweeps)[0].n_runs, 1);
    EXPECT_EQ((*sweeps)[0].text_id, *tid);

    // NaN metrics (a diverged method) read back as NaN, unset simulated values as nullopt.
    run_record nan_run;
    nan_run.method = "teal";
    nan_run.model_id = *mid;
    nan_run.ppl = std::nan("");
    auto nid = s->add_run(nan_run);
    ASSERT_TRUE(nid.ok());
    auto nb = s->run(*nid);
    ASSERT_TRUE(nb.ok());
    EXPECT_TRUE(std::isnan(nb->ppl));
    EXPECT_FALSE(nb->sim_tok_s.has_value());
    EXPECT_FALSE(nb->text_id.has_value());
    EXPECT_FALSE(nb->created.empty());
}

TEST(session_store, models_texts_and_calibrations_are_deduplicated_by_hash) {
    temp_dir d;
    auto s = session_store::create(d.file("dedupe.slsession"), "dd");
    ASSERT_TRUE(s.ok());
    model_record m = a_model('b');
    auto a = s->add_model(m);
    m.path = "/elsewhere/b.gguf";  // the same file, moved
    auto b = s->add_model(m);
    auto other = s->add_model(a_model('f'));
    ASSERT_TRUE(a.ok() && b.ok() && other.ok());
    EXPECT_EQ(*a, *b);
    EXPECT_NE(*a, *other);
    EXPECT_EQ(s->models()->size(), 2u);
    EXPECT_EQ(s->model(*a)->path, "/elsewhere/b.gguf");  // where it was seen last

    auto t1 = s->add_text("one.txt", bytes_of("same bytes"));
    auto t2 = s->add_text("two.txt", bytes_of("same bytes"));
    auto t3 = s->add_text("three.txt", bytes_of("other bytes"));
    ASSERT_TRUE(t1.ok() && t2.ok() && t3.ok());
    EXPECT_EQ(*t1, *t2);
    EXPECT_NE(*t1, *t3);
    auto texts = s->texts();
    ASSERT_EQ(texts->size(), 2u);
    EXPECT_EQ((*texts)[0].sha256, sha256_hex(std::string_view("same bytes")));
    EXPECT_EQ((*texts)[0].bytes, 10u);
    auto content = s->text_content(*t3);
    ASSERT_TRUE(content.ok());
    EXPECT_EQ(std::string(content->begin(), content->end()), "other bytes");

    calibration_record c;
    c.sha256 = sl::test::hex64('9');
    c.path = "/a.calib";
    c.model_id = *a;
    auto c1 = s->add_calibration(c);
    c.path = "/b.calib";
    auto c2 = s->add_calibration(c);
    ASSERT_TRUE(c1.ok() && c2.ok());
    EXPECT_EQ(*c1, *c2);
    EXPECT_EQ(s->calibrations()->size(), 1u);

    model_record bad = a_model('c');
    bad.sha256 = "ABC";
    auto e = s->add_model(bad);
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.message().find("sha256"), std::string::npos);
}

TEST(session_store, filter_sort_and_delete) {
    temp_dir d;
    auto s = session_store::create(d.file("fs.slsession"), "fs");
    ASSERT_TRUE(s.ok());
    auto mid = s->add_model(a_model('1'));
    ASSERT_TRUE(mid.ok());
    struct row { const char* method; double ppl; double cpu; std::optional<double> sim; };
    const row rows[] = {{"dip", 5.0, 100, 10.0}, {"cats", 4.0, 300, std::nullopt}, {"dip", 3.0, 200, 30.0}, {"teal", 6.0, 50, 20.0}};
    std::vector<int64_t> ids;
    for (const row& x : rows) {
        run_record r;
        r.method = x.method;
        r.model_id = *mid;
        r.ppl = x.ppl;
        r.cpu_tok_s = x.cpu;
        r.sim_tok_s = x.sim;
        ids.push_back(s->add_run(r).value());
    }
    auto ids_of = [](const std::vector<run_record>& v) {
        std::vector<int64_t> out;
        for (const auto& r : v) out.push_back(r.id);
        return out;
    };
    run_filter f;
    EXPECT_EQ(ids_of(s->runs(f).value()), ids);
    f.sort = run_sort::ppl;
    EXPECT_EQ(ids_of(s->runs(f).value()), (std::vector<int64_t>{ids[2], ids[1], ids[0], ids[3]}));
    f.sort = run_sort::cpu;
    EXPECT_EQ(ids_of(s->runs(f).value()), (std::vector<int64_t>{ids[1], ids[2], ids[0], ids[3]}));
    f.sort = run_sort::sim;  // fastest first, unsimulated last
    EXPECT_EQ(ids_of(s->runs(f).value()), (std::vector<int64_t>{ids[2], ids[3], ids[0], ids[1]}));
    f.method = "dip";
    EXPECT_EQ(ids_of(s->runs(f).value()), (std::vector<int64_t>{ids[2], ids[0]}));
    f.limit = 1;
    EXPECT_EQ(ids_of(s->runs(f).value()), (std::vector<int64_t>{ids[2]}));
    run_sort rs;
    EXPECT_TRUE(run_sort_parse("kld", rs));
    EXPECT_EQ(rs, run_sort::kld);
    EXPECT_FALSE(run_sort_parse("fastest", rs));

    // Deleting a run takes its export records with it; a missing id is an error.
    export_record e;
    e.run_id = ids[0];
    e.path = "/out.json";
    e.sha256 = sl::test::hex64('0');
    e.config_json = "{}";
    ASSERT_TRUE(s->add_export(e).ok());
    EXPECT_EQ(s->exports(ids[0])->size(), 1u);
    ASSERT_TRUE(s->delete_run(ids[0]).ok());
    EXPECT_EQ(s->exports()->size(), 0u);
    auto again = s->delete_run(ids[0]);
    ASSERT_FALSE(again.ok());
    EXPECT_NE(again.message().find("no run " + std::to_string(ids[0])), std::string::npos);
    EXPECT_EQ(s->info()->runs, 3);
    auto n = s->delete_all_runs();
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, 3);
    EXPECT_EQ(s->info()->runs, 0);
    EXPECT_EQ(s->info()->models, 1);  // models stay: they are not owned by a run
}

TEST(session_store, in_transaction_is_all_or_nothing) {
    temp_dir d;
    auto s = session_store::create(d.file("tx.slsession"), "tx");
    ASSERT_TRUE(s.ok());
    auto o = s->in_transaction([&]() -> outcome {
        auto m = s->add_model(a_model('2'));
        if (!m.ok()) return m.err();
        if (!s->add_text("t", bytes_of("abc")).ok()) return error{"text failed"};
        run_record r;
        r.method = "dip";
        r.model_id = *m + 100;  // dangling: the insert fails
        auto id = s->add_run(r);
        if (!id.ok()) return id.err();
        return {};
    });
    ASSERT_FALSE(o.ok());
    auto info = s->info();
    EXPECT_EQ(info->models, 0);
    EXPECT_EQ(info->texts, 0);
    EXPECT_EQ(info->runs, 0);
    // The store still works after the rollback.
    EXPECT_TRUE(s->add_model(a_model('2')).ok());
    EXPECT_TRUE(s->set_name("renamed").ok());
    EXPECT_EQ(s->info()->name, "renamed");
}

TEST(session_store, two_stores_on_one_file_see_each_others_commits) {
    temp_dir d;
    const std::string p = d.file("two.slsession");
    auto a = session_store::create(p, "two");
    ASSERT_TRUE(a.ok());
    auto b = session_store::open(p);
    ASSERT_TRUE(b.ok()) << b.message();
    auto reader = session_store::open(p, true);
    ASSERT_TRUE(reader.ok()) << reader.message();
    auto mid = a->add_model(a_model('3'));
    ASSERT_TRUE(mid.ok());
    run_record r;
    r.method = "dip";
    r.model_id = *mid;
    ASSERT_TRUE(b->add_run(r).ok());
    ASSERT_TRUE(a->add_run(r).ok());
    EXPECT_EQ(reader->info()->runs, 2);
}

TEST(session_convert, method_config_json_round_trip_and_errors) {
    method_config c = method_default_config();
    c.name = "ffsplit";
    c.density = 0.6f;
    c.d_in = 0.3f;
    c.d_down = 0.7f;
    c.gamma = 0.25f;
    c.attn_density = 0.9f;
    c.rank = 17;
    c.pin_fraction = 0.05f;
    c.ffsplit_mode = "q4";
    c.ffsplit_heavy = 0.15f;
    const std::string text = method_config_to_json(c);
    EXPECT_NE(text.find("\"density\":0.6"), std::string::npos) << text;  // shortest decimal form
    auto back = method_config_from_json(text, "x");
    ASSERT_TRUE(back.ok()) << back.message();
    EXPECT_EQ(*back, c);
    // Missing keys keep defaults; unknown keys and wrong types are refused.
    auto partial = method_config_from_json("{\"name\":\"dip\"}", "x");
    ASSERT_TRUE(partial.ok());
    EXPECT_EQ(partial->gamma, method_default_config().gamma);
    for (const char* bad : {"{\"name\":\"dip\",\"speed\":1}", "{\"density\":\"high\"}", "[1]", "{", "{\"rank\":1e20}"}) {
        auto r = method_config_from_json(bad, "origin");
        ASSERT_FALSE(r.ok()) << bad;
        EXPECT_EQ(r.message().rfind("origin: ", 0), 0u) << r.message();
    }
}

TEST(session_convert, sim_setting_and_per_layer_json_round_trip) {
    sim_setting st;
    st.device.name = "phone";
    st.device.display_name = "A phone";
    st.device.aliases = {"p"};
    st.device.dram_bytes = 4000000000ull;
    st.device.dram_bandwidth = 60e9;
    st.device.flash_bandwidth = 1e9;
    st.device.flash_page_bytes = 16384;
    st.device.flash_read_latency_s = 1e-5;
    st.device.flash_iops = 1e5;
    st.device.overlap_io_compute = false;
    st.policy = sim::cache_policy::lru;
    st.bits = 8;
    st.group_size = 64;
    st.scale_bits = 32;
    st.embedding_bits = 6;
    st.window_tokens = 9;
    st.context_tokens = 2048;
    st.layout = "dip";
    st.cache_fraction = 0.3f;
    st.sim_tokens = 256;
    auto back = sim_setting_from_json(sim_setting_to_json(st), "x");
    ASSERT_TRUE(back.ok()) << back.message();
    EXPECT_EQ(back->device, st.device);
    EXPECT_EQ(back->policy, st.policy);
    EXPECT_EQ(back->bits, st.bits);
    EXPECT_EQ(back->group_size, 64u);
    EXPECT_EQ(back->scale_bits, 32u);
    EXPECT_EQ(back->embedding_bits, 6u);
    EXPECT_EQ(back->window_tokens, 9u);
    // To simulator parameters and back.
    const sim::sim_params sp = sim_params_of(st);
    EXPECT_EQ(sp.quant.group_size, 64u);
    EXPECT_EQ(sp.window_tokens, 9u);
    const sim_setting again = sim_setting_of(sp, st.layout, st.sim_tokens);
    EXPECT_EQ(sim_setting_to_json(again), sim_setting_to_json({st.device, st.policy, 9, 8, 64, 32, 6, 2048, "dip", 0.5f, 256}));
    // Runs recorded before the weight format was stored: the format of their bits.
    auto old16 = sim_setting_from_json("{\"device\":null,\"policy\":\"lfu\",\"bits\":16}", "x");
    ASSERT_TRUE(old16.ok()) << old16.message();
    EXPECT_EQ(old16->group_size, sim::quant_default(16).group_size);
    EXPECT_EQ(old16->window_tokens, 5u);
    EXPECT_FALSE(sim_setting_from_json("{\"device\":null,\"bits\":4,\"group_size\":2000000}", "x").ok());
    EXPECT_EQ(back->context_tokens, st.context_tokens);
    EXPECT_EQ(back->layout, st.layout);
    EXPECT_EQ(back->cache_fraction, st.cache_fraction);
    EXPECT_EQ(back->sim_tokens, st.sim_tokens);
    // No device (DIP-CA's stand-in cache only).
    sim_setting none;
    none.cache_fraction = 0.7f;
    auto nb = sim_setting_from_json(sim_setting_to_json(none), "x");
    ASSERT_TRUE(nb.ok()) << nb.message();
    EXPECT_TRUE(nb->device.name.empty());
    EXPECT_EQ(nb->cache_fraction, 0.7f);
    EXPECT_FALSE(sim_setting_from_json("{\"device\":null,\"policy\":\"mru\"}", "x").ok());
    EXPECT_FALSE(sim_setting_from_json("{\"device\":{\"name\":\"d\",\"dram_bandwidth\":-1}}", "x").ok());

    layer_density ld;
    ld.d[4] = 0.25f;
    const sim::per_layer_table resolved = {{"threshold", {0.1f, std::numeric_limits<float>::infinity(), 1e-30f}},
                                           {"keep", {0.5f, 0.5f, 0.5f}}};
    const std::string j = per_layer_to_json({ld, ld}, resolved);
    auto r = per_layer_resolved_from_json(j, "x");
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(*r, resolved);  // bit for bit, in the method's order
    EXPECT_TRUE(per_layer_resolved_from_json("", "x")->empty());
    EXPECT_FALSE(per_layer_resolved_from_json("{\"resolved\":[[\"a\",[\"big\"]]]}", "x").ok());
}

TEST(session_convert, eval_result_to_run_and_run_to_deploy_config) {
    temp_dir d;
    auto s = session_store::create(d.file("cv.slsession"), "cv");
    ASSERT_TRUE(s.ok());
    method_config cfg = method_default_config();
    cfg.name = "dip";
    cfg.density = 0.5f;
    eval_result er;
    er.ppl = 4.25;
    er.ppl_dense = 3.5;
    er.kld_mean = 0.125;
    er.kld_p99 = 1.5;
    er.top1_agreement = 0.75;
    er.mlp_density = 0.5;
    er.attn_density = 1.0;
    er.per_layer.resize(3);
    er.decode_tokens_per_second = 400;
    er.dense_decode_tokens_per_second = 500;
    er.n_scored = 63 * 5;  // 5 windows of 128
    const sim::per_layer_table resolved = {{"d_in", {0.5f, 0.5f, 0.5f}}};
    run_record r = run_record_from_eval(cfg, er, {128, 16, 32}, resolved);
    EXPECT_EQ(r.method, "dip");
    EXPECT_EQ(method_config_from_json(r.params_json, "x").value(), cfg);
    EXPECT_EQ(r.top1, 0.75);
    EXPECT_EQ(r.cpu_tok_s_dense, 500);
    EXPECT_EQ(r.offset, 32);

    sl::model m;  // shapes only: record_run hashes nothing when the sha256 is given
    m.path = "/m/x.bin";
    m.format = "llama2c-f32";
    m.hp.dim = 64;
    m.hp.hidden_dim = 172;
    m.hp.n_layers = 3;
    m.hp.n_heads = 8;
    m.hp.n_kv_heads = 4;
    m.hp.vocab_size = 512;
    m.hp.seq_len = 512;
    m.file_bytes = 1000;
    run_provenance p;
    p.m = &m;
    p.model_sha256 = sl::test::hex64('7');
    p.text_name = "eval.txt";
    const std::string text = "the eval text";
    p.text = bytes_of(text);
    auto rid = record_run(*s, r, p);
    ASSERT_TRUE(rid.ok()) << rid.message();

    std::string calib;
    auto c = deploy_config_of_run(*s, *rid, std::nullopt, &calib);
    ASSERT_TRUE(c.ok()) << c.message();
    EXPECT_TRUE(calib.empty());
    EXPECT_EQ(c->model.sha256, p.model_sha256);
    EXPECT_EQ(c->model.file_name, "x.bin");
    EXPECT_EQ(c->model.hidden_dim, 172);
    EXPECT_EQ(c->method, cfg);
    EXPECT_EQ(c->per_layer, resolved);
    EXPECT_FALSE(c->has_device());
    EXPECT_EQ(c->expected.eval_text, "eval.txt");
    EXPECT_EQ(c->expected.eval_text_sha256, sha256_hex(std::string_view(text)));
    EXPECT_EQ(c->expected.windows, 5);  // evaluated, not requested
    EXPECT_EQ(c->expected.offset, 32);
    EXPECT_EQ(c->expected.ppl, 4.25);

    // Export writes a config that reads back, and records it.
    const std::string out = d.file("cfg.json");
    auto ex = export_run(*s, *rid, out, {});
    ASSERT_TRUE(ex.ok()) << ex.message();
    auto rd = sim::deploy_config_read(out);
    ASSERT_TRUE(rd.ok()) << rd.message();
    EXPECT_EQ(rd->config.method, cfg);
    EXPECT_EQ(ex->sha256, sl::test::file_sha(out));
    auto exports = s->exports(*rid);
    ASSERT_TRUE(exports.ok());
    ASSERT_EQ(exports->size(), 1u);
    const auto file = sl::test::read_bytes(out);
    EXPECT_EQ((*exports)[0].config_json, std::string(file.begin(), file.end()));

    // With a device given at export time.
    export_params ep;
    ep.device = sim_setting{};
    auto dev = sim::device_find("apple-a18");
    ASSERT_TRUE(dev.ok()) << dev.message();
    ep.device->device = *dev;
    auto ex2 = export_run(*s, *rid, d.file("cfg2.json"), ep);
    ASSERT_TRUE(ex2.ok()) << ex2.message();
    EXPECT_EQ(ex2->config.device.name, dev->name);

    EXPECT_FALSE(export_run(*s, *rid + 1, d.file("none.json"), {}).ok());
}

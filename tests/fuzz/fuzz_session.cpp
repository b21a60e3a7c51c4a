// libFuzzer target: session databases (SQLite files opened by sessions/): probe, read-only open, and
// every listing and record read the GUI and CLI perform on an opened session.
#include "fuzz_common.h"
#include "sparselens/sessions/run_convert.h"
#include "sparselens/sessions/session_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using sl::sessions::session_store;
    const std::string path = sl::fuzz::scratch_file(data, size, ".slsession");
    // A previous input's journal must not leak into this one.
    std::remove((path + "-wal").c_str());
    std::remove((path + "-shm").c_str());
    std::remove((path + "-journal").c_str());
    (void)session_store::probe(path);
    auto s = session_store::open(path, /*read_only=*/true);
    if (!s) return 0;
    (void)s->info();
    if (auto models = s->models())
        for (const auto& m : *models) (void)s->model(m.id);
    if (auto texts = s->texts())
        for (const auto& t : *texts) (void)s->text_content(t.id);
    if (auto cals = s->calibrations())
        for (const auto& c : *cals) (void)s->calibration(c.id);
    (void)s->sweeps();
    if (auto runs = s->runs())
        for (const auto& r : *runs) {
            (void)s->run(r.id);
            // The JSON columns a run is restored from (GUI "restore", `session export`).
            (void)sl::sessions::method_config_from_json(r.params_json, "run params");
            if (!r.device_json.empty()) (void)sl::sessions::sim_setting_from_json(r.device_json, "run device");
            if (!r.per_layer_json.empty())
                (void)sl::sessions::per_layer_resolved_from_json(r.per_layer_json, "run per_layer");
        }
    (void)s->exports();
    return 0;
}

// libFuzzer target: session databases (SQLite files opened by sessions/): probe, read-only open, and
// every listing and record read the GUI and CLI perform on an opened session. SQLite runs on the
// harness's own heap (sqlite_heap.h), so an input that leaves a statement or connection open is a crash.
#include <cstdio>

#include "fuzz_common.h"
#include "sqlite_heap.h"
#include "sparselens/sessions/run_convert.h"
#include "sparselens/sessions/session_store.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    sl::fuzz::sqlite_heap::install();
    return 0;
}

namespace {

void read_everything(const uint8_t* data, size_t size) {
    using sl::sessions::session_store;
    const std::string path = sl::fuzz::scratch_file(data, size, ".slsession");
    // A previous input's journal must not leak into this one.
    std::remove((path + "-wal").c_str());
    std::remove((path + "-shm").c_str());
    std::remove((path + "-journal").c_str());
    auto s = session_store::open(path, /*read_only=*/true);
    // probe() is the same validation plus the info() read below; it differs from open() only on files
    // open() refuses (an older schema), so it runs then and not twice per input.
    if (!s) {
        (void)session_store::probe(path);
        return;
    }
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
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const int64_t before = sl::fuzz::sqlite_heap::live_blocks();
    read_everything(data, size);
    const int64_t after = sl::fuzz::sqlite_heap::live_blocks();
    if (after != before) {
        std::fprintf(stderr, "fuzz_session: SQLite holds %lld blocks more after the input than before\n",
                     static_cast<long long>(after - before));
        std::abort();
    }
    return 0;
}

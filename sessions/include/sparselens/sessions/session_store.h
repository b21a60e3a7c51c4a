// A SparseLens session: one SQLite file (*.slsession) holding models, texts, calibrations, runs, sweeps
// and exports (format and durability rules: docs/sessions.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sparselens/core/result.h"

namespace sl::sessions {

// Written to the SQLite header (PRAGMA application_id) so foreign SQLite files are refused unread.
constexpr uint32_t application_id = 0x534C5353;  // "SLSS"
// The schema this build writes; older files are migrated step by step when opened writable.
constexpr int32_t schema_version_current = 3;
constexpr const char* session_extension = ".slsession";

// A model file, identified by the SHA-256 of its bytes (the path is where it was last seen).
struct model_record {
    int64_t id = 0;
    std::string sha256;
    std::string path;
    std::string format;  // model::format ("gguf", "llama2c-f32", ...)
    std::string name;
    uint64_t file_bytes = 0;
    int32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0, seq_len = 0;
    std::string added;  // UTC ISO 8601, set by the store
};

// A prompt or evaluation text, identified by the SHA-256 of its bytes; the bytes are stored too, so a
// session reproduces its runs without the original file.
struct text_record {
    int64_t id = 0;
    std::string sha256;
    std::string name;  // file name or label
    std::string kind;  // "eval" or "prompt"
    uint64_t bytes = 0;
    std::string added;
};

// A calibration file used by runs (identified by SHA-256; the file itself stays outside the session).
struct calibration_record {
    int64_t id = 0;
    std::string sha256;
    std::string path;
    int64_t model_id = 0;
    std::string params_json;  // {"n_ctx":..,"tokens":..,"text":..} or "{}"
    std::string added;
};

struct sweep_record {
    int64_t id = 0;
    std::string created;  // set by add_sweep when empty
    std::string label;
    std::string params_json;  // methods, densities, device... as given by the caller
    int64_t model_id = 0;
    std::optional<int64_t> text_id;
    int64_t n_runs = 0;  // read only: runs that name this sweep
};

// One evaluated (and possibly simulated) configuration. Everything a deployment config needs is here
// or in the rows it references (model, text, calibration).
struct run_record {
    int64_t id = 0;
    std::string created;  // UTC ISO 8601; set by add_run when empty
    std::string label;
    std::string method;
    std::string params_json = "{}";  // the full method_config (method_config_to_json)
    int64_t model_id = 0;
    std::optional<int64_t> text_id;
    std::optional<int64_t> calibration_id;
    std::optional<int64_t> sweep_id;
    // Evaluation windows.
    int32_t n_ctx = 0, windows = 0;
    int64_t offset = 0;
    // Accuracy and density (vs dense on the same windows).
    double ppl = 0, ppl_dense = 0, kld_mean = 0, kld_p99 = 0, top1 = 0;
    double mlp_density = 1, attn_density = 1;
    int64_t n_scored = 0;
    std::string per_layer_json;  // per-layer densities (eval_to_json's "layers"); may be empty
    // Measured on this machine.
    double cpu_tok_s = 0, cpu_tok_s_dense = 0;
    double duration_s = 0;
    // Simulated device (empty / nullopt when the run was not simulated).
    std::string device_name;
    std::string device_json;  // sim_setting_to_json: device profile, policy, bits, context, layout
    std::optional<double> sim_tok_s;
    std::optional<double> hit_rate;
};

struct export_record {
    int64_t id = 0;
    int64_t run_id = 0;
    std::string created;
    std::string path;
    std::string sha256;       // of the written config file
    std::string config_json;  // the config text as written
};

enum class run_sort : uint8_t { created, ppl, kld, sim, cpu, density };
// "created", "ppl", "kld", "sim", "cpu", "density"; false when unknown.
bool run_sort_parse(const std::string& name, run_sort& out);

struct run_filter {
    std::string method;               // empty: all
    std::optional<int64_t> model_id;
    std::optional<int64_t> sweep_id;
    run_sort sort = run_sort::created;  // ppl/kld/density ascending; sim/cpu descending (best first); created oldest first
    int64_t limit = 0;                  // 0: all
};

struct session_info {
    std::string path;
    std::string name;
    std::string created;
    std::string tool;  // which SparseLens created it
    int32_t schema_version = 0;
    int64_t models = 0, texts = 0, calibrations = 0, runs = 0, sweeps = 0, exports = 0;
    int64_t file_bytes = 0;
    std::string modified;  // file modification time, UTC ISO 8601
};

// Threads: a store is one SQLite connection without a mutex; use one store object per thread (the
// GUI keeps its own on the engine thread). Several stores (threads or processes) may open the same file:
// SQLite serialises writers (WAL, BEGIN IMMEDIATE, busy_timeout 5 s) and readers never block.
// Every failure is a one-line message naming the file.
class session_store {
public:
    // Creates a new session; fails when `path` exists. The file appears complete or not at all
    // (built beside it under a temporary name, then linked into place).
    static result<session_store> create(const std::string& path, const std::string& name);
    // Opens an existing session. The file is validated read-only first (SQLite header, application_id,
    // integrity, meta table, schema version) and never modified when it is not a valid session; a
    // writable open then migrates an older schema step by step. `read_only` refuses an older schema
    // (it would need migrating) and every write.
    static result<session_store> open(const std::string& path, bool read_only = false);
    // Validates and summarises a session without migrating or writing it (any schema version this
    // build knows): what `session list` shows.
    static result<session_info> probe(const std::string& path);

    session_store(session_store&&) noexcept;
    session_store& operator=(session_store&&) noexcept;
    ~session_store();

    const std::string& path() const;
    bool read_only() const;
    result<session_info> info() const;
    outcome set_name(const std::string& name);

    // Adds or finds by sha256 (the stored path/name is updated to the latest); returns the id.
    result<int64_t> add_model(const model_record& m);
    result<int64_t> add_text(const std::string& name, std::span<const uint8_t> bytes, const std::string& kind = "eval");
    result<int64_t> add_calibration(const calibration_record& c);
    result<int64_t> add_sweep(const sweep_record& s);
    result<int64_t> add_run(const run_record& r);  // ids of referenced rows must exist
    result<int64_t> add_export(const export_record& e);

    // Runs `body` in one transaction: its writes are all committed or none (nested calls join it).
    outcome in_transaction(const std::function<outcome()>& body);

    result<std::vector<model_record>> models() const;
    result<model_record> model(int64_t id) const;
    result<std::vector<text_record>> texts() const;
    result<std::vector<uint8_t>> text_content(int64_t id) const;
    result<std::vector<calibration_record>> calibrations() const;
    result<calibration_record> calibration(int64_t id) const;
    result<std::vector<sweep_record>> sweeps() const;
    result<std::vector<run_record>> runs(const run_filter& f = {}) const;
    result<run_record> run(int64_t id) const;
    result<std::vector<export_record>> exports(std::optional<int64_t> run_id = std::nullopt) const;

    // Deletes a run and its export records; an error when there is no such run.
    outcome delete_run(int64_t id);
    // Deletes every run (and export record); returns how many runs were deleted.
    result<int64_t> delete_all_runs();

private:
    struct impl;
    explicit session_store(std::unique_ptr<impl> p);
    std::unique_ptr<impl> m;
};

// Test and tool support: creates a session with the schema of an earlier `version` (1..current), as
// that version of SparseLens wrote it, so migrations can be exercised on real old files.
outcome create_session_at_version(const std::string& path, const std::string& name, int32_t version);

}  // namespace sl::sessions

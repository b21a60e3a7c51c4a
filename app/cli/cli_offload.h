// Shared pieces of the offload commands (`pack`, `run --offload`, `probe-device`).
#pragma once

#include <string>

#include "cli_common.h"
#include "sparselens/core/result.h"
#include "sparselens/sim/deploy_config.h"

namespace sl::cli {

// While alive, Ctrl-C asks the current long job to stop (through offload_progress) instead of killing it.
class offload_interrupt {
public:
    offload_interrupt();
    ~offload_interrupt();
    static bool requested();

private:
    void (*m_previous)(int);
};

// "\r<label>: 42.0%" on stderr when it is a terminal; returns false once Ctrl-C was pressed.
progress_fn offload_progress(const std::string& label, bool quiet);

// The MLP layout a config's method loads ("dip", "bundle", ...).
std::string config_layout(const sim::deploy_config& c);

void register_pack(CLI::App& app, command_fn& run);          // cmd_pack.cpp
void register_probe_device(CLI::App& app, command_fn& run);  // cmd_probe_device.cpp

struct run_opts_offload {
    std::string pack_path;   // empty: MODEL.<layout>.slpack
    std::string dram;        // budget; empty: the config device's dram_bytes
    std::string device;      // profile for the prediction; empty: the config's
    std::string io = "auto";
    bool verify = true;
    bool dense_baseline = false;
    bool probe = false;  // probe the pack read-only just before each pass (its flash figures)
    double budget_mlp_share = -1;  // from --dram +P%: resident part + this share of the pack's MLP bytes
    bool prefetch = true;          // --no-prefetch turns GRIFFIN's next-layer reads off (for A/B runs)
};

// --offload, --pack, --dram, --device, --io, --no-verify, --dense-baseline (run and eval); the check
// refuses the others without --offload.
void add_offload_options(CLI::App* c, bool& offload, run_opts_offload& oo);
void check_offload_options(bool offload, run_opts_offload& oo);

struct generation_request;
// cli_offload_run.cpp: `run --offload`.
int run_offloaded(const std::string& model_path, const std::string& config_path, const std::string& tokenizer_path,
                  const generation_request& q, int32_t threads, bool allow_other_weights, bool json,
                  const run_opts_offload& oo);
// `eval --config C --offload`: the same run from the opening of the evaluation text, as a table of measured
// and simulated tokens/s, bytes/token, hit rate and I/O-wait share.
int eval_offloaded(const std::string& model_path, const std::string& config_path, const std::string& tokenizer_path,
                   const std::string& text_path, int32_t steps, int32_t threads, bool allow_other_weights, bool json,
                   const run_opts_offload& oo);

}  // namespace sl::cli

// `sparselens`: the headless command-line front end; every GUI number is computable from here.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "cli_common.h"
#include "cli_offload.h"
#include "sparselens/kernels/openmp_policy.h"

int main(int argc, char** argv) {
    sl::kernels::prefer_passive_openmp(argv);
    CLI::App app{"SparseLens: activation-sparsity workbench for on-device LLM inference (headless CLI)"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "sparselens 0.1.0");
    sl::cli::command_fn run;
    sl::cli::register_info(app, run);
    sl::cli::register_generate(app, run);
    sl::cli::register_logits(app, run);
    sl::cli::register_ppl(app, run);
    sl::cli::register_bench(app, run);
    sl::cli::register_make_synthetic(app, run);
    sl::cli::register_eval(app, run);
    sl::cli::register_sweep(app, run);
    sl::cli::register_sim(app, run);
    sl::cli::register_trace(app, run);
    sl::cli::register_calibrate(app, run);
    sl::cli::register_tune(app, run);
    sl::cli::register_run(app, run);
    sl::cli::register_config(app, run);
    sl::cli::register_session(app, run);
    sl::cli::register_pack(app, run);
    sl::cli::register_probe_device(app, run);
    sl::cli::register_vocab(app, run);

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "sparselens: error: %s (see --help)\n", e.what());
        return 2;
    }
    try {
        return run ? run() : 2;
    } catch (const sl::cli::cli_error& e) {
        std::fprintf(stderr, "sparselens: error: %s\n", e.what());
        return 2;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "sparselens: error: out of memory\n");
        return 2;
    }
}

// `sparselens pack MODEL --config C [-o FILE]`: the MLP weights in the unit layout the config's method
// loads, aligned for O_DIRECT, for `run --offload`.
#include <unistd.h>

#include <csignal>
#include <cstdio>

#include "cli_config.h"
#include "cli_offload.h"
#include "sparselens/sim/offload_pack.h"

namespace sl::cli {

namespace {

volatile std::sig_atomic_t g_offload_interrupted = 0;
extern "C" void on_offload_sigint(int) { g_offload_interrupted = 1; }

struct pack_opts {
    std::string model_path, config_path, out, layout;
    bool allow_other_weights = false;
    bool json = false;
};

int run_pack(const pack_opts& o) {
    loaded_model lm = load_model(o.model_path, "", false);
    std::string layout_text = o.layout;
    if (!o.config_path.empty()) {
        if (!o.layout.empty()) throw cli_error("--layout: the config names the layout; give one or the other");
        const sim::loaded_deploy_config lc =
            load_config_for_model(o.config_path, o.model_path, *lm.m, o.allow_other_weights);
        layout_text = config_layout(lc.config);
    }
    if (layout_text.empty()) throw cli_error("pack: give --config C (or --layout dip|bundle|...)");
    const sim::mlp_layout layout = take(sim::layout_parse(layout_text));
    const std::string out = o.out.empty() ? offload::pack_default_path(o.model_path, layout) : o.out;
    offload_interrupt guard;
    if (outcome w = offload::pack_write(*lm.m, o.model_path, layout, out, offload_progress("pack", o.json)); !w)
        throw cli_error(w.message());
    const offload::pack_info p = take(offload::pack_open(out, *lm.m, ""));
    if (o.json) {
        nlohmann::json groups = nlohmann::json::array();
        for (size_t gi = 0; gi < p.groups.size(); ++gi) {
            nlohmann::json per_layer = nlohmann::json::array();
            for (int32_t l = 0; l < p.n_layers; ++l) per_layer.push_back(p.region(l, gi).unit_bytes);
            groups.push_back({{"kind", sim::unit_kind_name(p.groups[gi].kind)}, {"units_per_layer", p.groups[gi].units},
                              {"unit_bytes", p.groups[gi].max_unit_bytes}, {"unit_bytes_per_layer", per_layer}});
        }
        print_json({{"pack", out}, {"layout", p.layout}, {"model_sha256", p.model_sha256}, {"mlp_bytes", p.mlp_bytes()},
                    {"file_bytes", p.file_bytes}, {"groups", groups}});
        return 0;
    }
    std::printf("%s: layout %s, %d layers, %llu MLP bytes (%llu on disk)\n", out.c_str(), p.layout.c_str(), p.n_layers,
                static_cast<unsigned long long>(p.mlp_bytes()), static_cast<unsigned long long>(p.file_bytes));
    for (size_t gi = 0; gi < p.groups.size(); ++gi) {
        uint64_t lo = p.groups[gi].max_unit_bytes;
        for (int32_t l = 0; l < p.n_layers; ++l) lo = std::min(lo, p.region(l, gi).unit_bytes);
        std::printf("  %s: %u units per layer, %llu bytes each%s\n", sim::unit_kind_name(p.groups[gi].kind),
                    p.groups[gi].units, static_cast<unsigned long long>(p.groups[gi].max_unit_bytes),
                    lo == p.groups[gi].max_unit_bytes ? "" : (" (" + std::to_string(lo) + " in some layers)").c_str());
    }
    return 0;
}

}  // namespace

offload_interrupt::offload_interrupt() : m_previous(std::signal(SIGINT, on_offload_sigint)) { g_offload_interrupted = 0; }
offload_interrupt::~offload_interrupt() { std::signal(SIGINT, m_previous == SIG_ERR ? SIG_DFL : m_previous); }
bool offload_interrupt::requested() { return g_offload_interrupted != 0; }

progress_fn offload_progress(const std::string& label, bool quiet) {
    const bool show = !quiet && isatty(STDERR_FILENO);
    return [label, show](float f) {
        if (show) std::fprintf(stderr, "\r%s: %5.1f%%%s", label.c_str(), 100.0 * f, f >= 1.0f ? "\n" : "");
        return !offload_interrupt::requested();
    };
}

std::string config_layout(const sim::deploy_config& c) {
    return c.layout.empty() ? sim::deploy_default_layout(c.method.name) : c.layout;
}

void register_pack(CLI::App& app, command_fn& run) {
    auto o = std::make_shared<pack_opts>();
    CLI::App* c = app.add_subcommand("pack", "Write a model's MLP weights in the unit layout a config loads (for run --offload)");
    c->add_option("model", o->model_path, "Model file")->required();
    c->add_option("--config", o->config_path, "Deployment config: its method decides the unit layout");
    c->add_option("--layout", o->layout, "Unit layout without a config (dip, bundle, or unit kinds)");
    c->add_option("-o,--out", o->out, "Pack file (default: MODEL.dip.slpack, MODEL.bundle.slpack, ...)");
    c->add_flag("--allow-other-weights", o->allow_other_weights, "Accept a model file other than the config's (same shape)");
    c->add_flag("--json", o->json, "Machine-readable output");
    c->callback([o, &run] { run = [o] { return run_pack(*o); }; });
}

}  // namespace sl::cli

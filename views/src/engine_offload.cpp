// Engine job "Verify on this machine": a saved run's deployment config run offloaded on this machine (the
// same sl::offload::offload_pass as `sparselens eval --config C --offload`) with this machine's probed
// profile, writing the MLP pack first when it is missing or stale.
#include <filesystem>

#include "engine.h"
#include "sparselens/sessions/run_convert.h"
#include "sparselens/sim/offload_pass.h"

namespace sl::views::detail {

namespace {

namespace fs = std::filesystem;

// Where the pack of `model_path` for `layout` is looked for and written: next to the model when a pack is
// there (what `sparselens pack` writes), else in the user's cache ($XDG_CACHE_HOME or ~/.cache/sparselens/packs;
// the model's folder may be read-only).
std::string pack_location(const std::string& model_path, const sim::mlp_layout& layout) {
    const std::string beside = offload::pack_default_path(model_path, layout);
    if (fs::exists(beside)) return beside;
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    fs::path dir = xdg && *xdg ? fs::path(xdg) : home && *home ? fs::path(home) / ".cache" : fs::path();
    if (dir.empty()) return beside;
    dir /= "sparselens/packs";
    return (dir / fs::path(beside).filename()).string();
}

}  // namespace

result<std::shared_ptr<offload_verify_result>> engine::verify_offload(const offload_verify_request& req,
                                                                      const std::shared_ptr<const eval_text>& text,
                                                                      const job_hooks& hooks) {
    if (auto ok = require_model(); !ok) return ok.err();
    if (auto ok = require_session(); !ok) return ok.err();
    if (!text) return error{"no evaluation text"};
    const std::string devices = sim::user_devices_dir();
    const std::string profile_path = devices.empty() ? std::string() : devices + "/this-machine.json";
    if (profile_path.empty() || !fs::exists(profile_path))
        return error{"no measured profile of this machine: run `sparselens probe-device --save` first (it writes " +
                     (profile_path.empty() ? std::string("~/.config/sparselens/devices/this-machine.json") : profile_path) +
                     ")"};
    auto device = sim::device_load(profile_path);
    if (!device) return device.err();

    std::string calib_path;
    auto cfg = sessions::deploy_config_of_run(*m_store, req.run_id, std::nullopt, &calib_path);
    if (!cfg) return cfg.err();
    std::optional<calibration> run_calib;
    if (!calib_path.empty()) {
        auto c = calibration_load(calib_path);
        if (!c) return c.err();
        run_calib = std::move(c).value();
    }
    const calibration* calib = run_calib ? &*run_calib : m_calib ? &*m_calib : nullptr;
    const std::string origin = "run " + std::to_string(req.run_id);
    auto drt = sim::deploy_instantiate(*cfg, *m_model, calib, origin);
    if (!drt) return drt.err();
    auto identity = model_identity(hooks);
    if (!identity) return identity.err();

    auto layout = sim::layout_parse(cfg->layout.empty() ? sim::deploy_default_layout(cfg->method.name) : cfg->layout);
    if (!layout) return layout.err();
    const std::string pack_path = pack_location(m_model->path, *layout);
    auto out = std::make_shared<offload_verify_result>();
    if (auto p = offload::pack_open(pack_path, *m_model, (*identity)->sha256); !p) {
        // Missing, stale (an older format) or made from another file: write it (cancellable).
        std::error_code ec;
        fs::create_directories(fs::path(pack_path).parent_path(), ec);
        if (auto w = offload::pack_write(*m_model, m_model->path, *layout, pack_path,
                                         [&](float f) { return hooks.progress("Writing the MLP pack", f); });
            !w)
            return w.err();
        out->pack_written = true;
    }

    offload::pass_request q;
    q.m = m_model.get();
    q.model_sha256 = (*identity)->sha256;
    q.config = &*cfg;
    q.calib = calib;
    q.method = drt->method.get();
    q.pack_path = pack_path;
    q.budget = req.dram_bytes ? req.dram_bytes : cfg->device.dram_bytes;
    q.budget_mlp_share = req.mlp_share;
    if (q.budget == 0 && q.budget_mlp_share < 0)
        return error{"the run has no simulated device: give a DRAM budget for the offloaded run"};
    q.device = *device;
    q.probe_pack = true;  // the profile's flash figures are from whenever it was probed; the pack's are from now
    // Greedy from the opening words of the evaluation text, as `eval --offload` does.
    std::string prompt = text->bytes.substr(0, 32);
    if (const size_t sp = prompt.find_last_of(" \n"); sp != std::string::npos && sp > 0) prompt.resize(sp);
    q.prompt = m_tok->encode(prompt, true, false);
    q.steps = req.steps;
    q.sampling.temperature = 0;
    q.bos_id = m_tok->bos_id();
    q.progress = [&](float f) { return hooks.progress("Verifying on this machine", f); };
    auto r = offload::offload_pass(q);
    if (!r) return r.err();

    out->run_id = req.run_id;
    out->method = r->label;
    out->profile = device->display_name.empty() ? device->name : device->display_name;
    out->pack = pack_path;
    out->io_backend = r->io_backend;
    out->budget = r->budget;
    out->resident = r->resident.total();
    out->cache_capacity = r->cache_capacity;
    out->pinned_units = r->pinned_units;
    out->n_decoded = r->n_decoded;
    out->tokens_per_s = r->tokens_per_s;
    out->sim_tokens_per_s = r->sim_tokens_per_s_run_compute;
    out->sim_dram_bound_tokens_per_s = r->sim_tokens_per_s;
    out->bytes_per_token = r->bytes_per_token;
    out->sim_bytes_per_token = r->sim_bytes_per_token;
    out->hit_rate = r->hit_rate;
    out->sim_hit_rate = r->sim_hit_rate;
    out->io_wait_share = r->io_wait_share;
    out->sim_io_wait_share = r->sim_io_wait_share;
    out->read_bytes_per_s = r->read_bytes_per_s;
    out->sim_flash_bytes_per_s = r->device.flash_bandwidth;
    out->flash_probed = r->probed;
    out->text = m_tok->decode_all(r->tokens);
    return out;
}

}  // namespace sl::views::detail

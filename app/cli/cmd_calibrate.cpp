// `sparselens calibrate MODEL TEXT`: activation statistics for the sparsity methods, saved as MODEL.calib.
#include <cstdio>
#include <filesystem>
#include <unistd.h>

#include "cli_common.h"
#include "sparselens/core/calibration.h"

namespace sl::cli {

namespace {

struct calibrate_opts {
    std::string model_path, text_path, tokenizer_path, out_path;
    int32_t n_ctx = 128;
    int32_t max_tokens = 16384;
    int32_t threads = 0;
    bool json = false;
};

// Reads the text, or only as much of it as max_tokens can use: a token never spans more than
// max_token_length bytes, so this prefix (cut at a line end) still yields at least max_tokens
// tokens, and encoding a multi-MB corpus for a 16K-token calibration is avoided.
std::string read_text_prefix(const std::string& path, int32_t max_tokens, int32_t max_token_length) {
    std::string text = read_text(path);
    if (max_tokens > 0) {
        const size_t want = (static_cast<size_t>(max_tokens) + 2) * static_cast<size_t>(std::max(max_token_length, 1));
        if (text.size() > want) {
            const size_t nl = text.find('\n', want);
            if (nl != std::string::npos) text.resize(nl + 1);
        }
    }
    return text;
}

// The distinct distributions, labelled by the projections that read them.
constexpr std::array<std::pair<site, const char*>, 7> summary_sites = {{{site::q_in, "qkv_in"},
                                                                                       {site::o_in, "o_in"},
                                                                                       {site::gate_in, "gate_up_in"},
                                                                                       {site::down_in, "down_in"},
                                                                                       {site::gate_act, "gate_act"},
                                                                                       {site::up_act, "up_act"},
                                                                                       {site::chess_score, "chess_score"}}};
constexpr float summary_density = 0.5f;
constexpr float summary_hh_fraction = 0.1f;

void print_summary(const calibration& cal, const calibrate_opts& o, const std::string& out, size_t text_tokens) {
    const int fk = calibration_flock_headline;
    if (o.json) {
        nlohmann::json layers = nlohmann::json::array();
        for (int32_t l = 0; l < static_cast<int32_t>(cal.layers.size()); ++l) {
            nlohmann::json thr = nlohmann::json::object();
            for (const auto& [s, label] : summary_sites) thr[label] = cal.threshold_for_density(l, s, summary_density);
            const layer_calibration& c = cal.layers[static_cast<size_t>(l)];
            layers.push_back({{"layer", l},
                              {"threshold_at_density_0.5", thr},
                              {"heavy_hitter_top10_share", cal.heavy_hitter_share(l, summary_hh_fraction)},
                              {"flock_jaccard_within_k50", c.flock_within[static_cast<size_t>(fk)]},
                              {"flock_jaccard_between_k50", c.flock_between[static_cast<size_t>(fk)]}});
        }
        print_json({{"model", o.model_path}, {"text", o.text_path}, {"out", out}, {"text_tokens_encoded", text_tokens},
                    {"n_tokens", cal.n_tokens}, {"n_windows", cal.n_windows}, {"n_ctx", cal.n_ctx},
                    {"text_hash", cal.text_hash}, {"seconds", cal.seconds},
                    {"tokens_per_second", cal.seconds > 0 ? static_cast<double>(cal.n_tokens) / cal.seconds : 0.0},
                    {"layers", layers}});
        return;
    }
    std::printf("calibrated %s on %lld tokens (%d windows of %d) in %.2f s -> %s\n", o.model_path.c_str(),
                static_cast<long long>(cal.n_tokens), cal.n_windows, cal.n_ctx, cal.seconds, out.c_str());
    std::printf("|x| threshold keeping 50%% of entries, heavy-hitter norm share of the top 10%% neurons, "
                "flocking Jaccard at k = 50%% (within a window / between windows):\n");
    std::printf("%5s", "layer");
    for (const auto& [s, label] : summary_sites) std::printf(" %11s", label);
    std::printf(" %8s %8s %8s\n", "hh_top10", "flock", "between");
    for (int32_t l = 0; l < static_cast<int32_t>(cal.layers.size()); ++l) {
        std::printf("%5d", l);
        for (const auto& [s, label] : summary_sites) std::printf(" %11.4g", cal.threshold_for_density(l, s, summary_density));
        const layer_calibration& c = cal.layers[static_cast<size_t>(l)];
        std::printf(" %8.3f %8.3f %8.3f\n", cal.heavy_hitter_share(l, summary_hh_fraction),
                    c.flock_within[static_cast<size_t>(fk)], c.flock_between[static_cast<size_t>(fk)]);
    }
}

int run_calibrate(const calibrate_opts& o) {
    loaded_model lm = load_model(o.model_path, o.tokenizer_path, true);
    const std::string text = read_text_prefix(o.text_path, o.max_tokens, lm.tok->max_token_length());
    const std::vector<int32_t> tokens = encode_prompt(lm, text);
    const std::string out = o.out_path.empty() ? o.model_path + ".calib" : o.out_path;

    calibration_params cp = calibration_default_params();
    cp.n_ctx = o.n_ctx;
    cp.max_tokens = o.max_tokens;
    cp.n_threads = o.threads;
    if (lm.tok->bos_id() >= 0) cp.bos_id = lm.tok->bos_id();
    const bool show_progress = !o.json && isatty(STDERR_FILENO);
    if (show_progress)
        cp.progress = [](float f) {
            std::fprintf(stderr, "\rcalibrate: %5.1f%%", 100.0 * f);
            return true;
        };
    const calibration cal = take(calibrate(*lm.m, tokens, cp));
    if (show_progress) std::fprintf(stderr, "\n");
    if (outcome saved = calibration_save(cal, out); !saved) throw cli_error(saved.message());
    print_summary(cal, o, out, tokens.size());
    return 0;
}

}  // namespace

void register_calibrate(CLI::App& app, command_fn& run) {
    auto o = std::make_shared<calibrate_opts>();
    CLI::App* c = app.add_subcommand("calibrate", "Record activation statistics for the sparsity methods (MODEL.calib)");
    c->add_option("model", o->model_path, "Model file")->required();
    c->add_option("text", o->text_path, "UTF-8 calibration text")->required();
    c->add_option("-z,--tokenizer", o->tokenizer_path, "llama2.c tokenizer.bin (default: embedded or beside the model)");
    c->add_option("-o,--out", o->out_path, "Output file (default: MODEL.calib)");
    c->add_option("-c,--ctx", o->n_ctx, "Window length in tokens (each window starts with BOS)")->check(CLI::Range(4, 1 << 20));
    c->add_option("--max-tokens", o->max_tokens, "Use at most this many text tokens (0: all)")->check(CLI::NonNegativeNumber);
    c->add_option("--threads", o->threads, "Worker threads (0: all cores)")->check(CLI::NonNegativeNumber);
    c->add_flag("--json", o->json, "Machine-readable summary");
    c->callback([o, &run] { run = [o] { return run_calibrate(*o); }; });
}

}  // namespace sl::cli

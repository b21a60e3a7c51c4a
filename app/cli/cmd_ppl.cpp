// `sparselens ppl MODEL TEXT`: windowed perplexity with standard error and throughput.
#include <cstdio>
#include <unistd.h>

#include "cli_common.h"
#include "sparselens/core/context.h"
#include "sparselens/core/perplexity.h"

namespace sl::cli {

namespace {

struct ppl_opts {
    std::string model_path, text_path, tokenizer_path;
    int32_t n_ctx = 128;
    int32_t chunks = 0;
    int32_t threads = 0;
    bool json = false;
};

int run_ppl(const ppl_opts& o) {
    loaded_model lm = load_model(o.model_path, o.tokenizer_path, true);
    const std::string text = read_text(o.text_path);
    const std::vector<int32_t> tokens = encode_prompt(lm, text);
    context_params cp = context_default_params();
    cp.n_threads = o.threads;
    cp.n_ctx = o.n_ctx;
    cp.n_batch = o.n_ctx;
    context ctx = take(context::create(*lm.m, cp));

    perplexity_params pp = perplexity_default_params();
    pp.n_ctx = o.n_ctx;
    pp.max_chunks = o.chunks;
    pp.bos_id = lm.tok->bos_id();
    const bool show_progress = !o.json && isatty(STDERR_FILENO);
    if (show_progress)
        pp.progress = [](float f) {
            std::fprintf(stderr, "\rperplexity: %5.1f%%", 100.0 * f);
            return true;
        };
    const perplexity_result r = take(perplexity_evaluate(ctx, tokens, pp));
    if (show_progress) std::fprintf(stderr, "\n");

    if (o.json) {
        print_json({{"model", o.model_path}, {"text", o.text_path}, {"n_ctx", o.n_ctx}, {"text_tokens", tokens.size()},
                    {"chunks", r.n_chunks}, {"scored_tokens", r.n_scored}, {"ppl", r.ppl},
                    {"ppl_stderr", r.ppl_stderr}, {"mean_nll", r.mean_nll}, {"seconds", r.seconds},
                    {"tokens_per_second", r.tokens_per_second}});
    } else {
        std::printf("perplexity %.4f +/- %.4f over %lld scored tokens (%d windows of %d; text %zu tokens)\n", r.ppl,
                    r.ppl_stderr, static_cast<long long>(r.n_scored), r.n_chunks, o.n_ctx, tokens.size());
        std::printf("throughput %.1f tokens/s (%.2f s)\n", r.tokens_per_second, r.seconds);
    }
    return 0;
}

}  // namespace

void register_ppl(CLI::App& app, command_fn& run) {
    auto o = std::make_shared<ppl_opts>();
    CLI::App* c = app.add_subcommand("ppl", "Perplexity of a text file (llama.cpp methodology: score 2nd half of windows)");
    c->add_option("model", o->model_path, "Model file")->required();
    c->add_option("text", o->text_path, "UTF-8 text file")->required();
    c->add_option("-z,--tokenizer", o->tokenizer_path, "llama2.c tokenizer.bin (default: embedded or beside the model)");
    c->add_option("-c,--ctx", o->n_ctx, "Window length in tokens")->check(CLI::Range(4, 1 << 20));
    c->add_option("--chunks", o->chunks, "Evaluate at most this many windows (0: all)")->check(CLI::NonNegativeNumber);
    c->add_option("--threads", o->threads, "Worker threads (0: all cores)")->check(CLI::NonNegativeNumber);
    c->add_flag("--json", o->json, "Machine-readable output");
    c->callback([o, &run] { run = [o] { return run_ppl(*o); }; });
}

}  // namespace sl::cli

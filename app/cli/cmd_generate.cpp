// `sparselens generate` and `sparselens logits`: llama2.c `run` semantics on any supported model.
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "cli_generate.h"
#include "sparselens/core/utf8_stream.h"

namespace sl::cli {

generation_output run_generation(const loaded_model& lm, context& ctx, const generation_request& q,
                                 const std::function<void(const generate_step&)>& on_step) {
    generate_params gp = generate_default_params();
    gp.steps = q.steps;
    gp.sampling.temperature = q.temperature;
    gp.sampling.top_p = q.top_p;
    gp.sampling.seed = q.seed;
    gp.prompt_logits = q.prompt_logits;
    gp.bos_id = lm.tok->bos_id();
    gp.stop_ids = generation_stop_ids(*lm.tok, q.chat);
    const std::vector<int32_t> prompt = encode_prompt(lm, q.prompt, q.chat, q.system);

    generation_output out;
    utf8_stream utf8;  // a character split across tokens is printed once it is complete
    const auto emit = [&](const std::string& text) {
        out.text += text;
        if (q.stream && !text.empty()) {
            std::fwrite(text.data(), 1, text.size(), stdout);
            std::fflush(stdout);
        }
    };
    auto step = [&](const generate_step& s) {
        const std::string_view piece = lm.tok->decode(s.input, s.next);
        if (lm.tok->shown_in_text(s.next, piece)) emit(utf8.push(piece));
        if (on_step) on_step(s);
        return true;
    };
    out.r = take(generate(ctx, prompt, gp, step));
    emit(utf8.flush());
    out.stop = stop_reason_text(out.r, *lm.tok, std::min(gp.steps, ctx.n_ctx()));
    out.decode_tokens_per_second = out.r.decode_seconds > 0 ? out.r.n_decoded / out.r.decode_seconds : 0.0;
    return out;
}

void add_prompt_options(CLI::App* c, generation_request& q, int32_t& threads) {
    c->add_option("-i,--prompt", q.prompt, "Prompt text (empty: start from BOS)");
    c->add_option("-n,--steps", q.steps, "Positions in total, counting BOS and the prompt")->check(CLI::Range(1, 1 << 20));
    c->add_option("--threads", threads, "Worker threads (0: all cores)")->check(CLI::NonNegativeNumber);
    c->add_flag("--chat", q.chat, "Wrap the prompt in the model's chat format (from tokenizer.chat_template)");
    c->add_option("--system", q.system, "System message for --chat");
}

void add_sampling_options(CLI::App* c, generation_request& q) {
    c->add_option("-t,--temp", q.temperature, "Temperature (0: greedy)")->check(CLI::NonNegativeNumber);
    c->add_option("-p,--top-p", q.top_p, "Top-p (nucleus) sampling in (0, 1]; 1 disables it")->check(CLI::Range(0.0, 1.0));
    c->add_option("-s,--seed", q.seed, "Random seed (0: fixed default)");
}

namespace {

struct generate_opts {
    std::string model_path, tokenizer_path, out_path;
    generation_request gen;
    int32_t threads = 0;
    bool json = false;
};

void add_common(CLI::App* c, generate_opts& o) {
    c->add_option("model", o.model_path, "Model file (GGUF, llama2.c .bin)")->required();
    c->add_option("-z,--tokenizer", o.tokenizer_path, "llama2.c tokenizer.bin (default: embedded or beside the model)");
    add_prompt_options(c, o.gen, o.threads);
    c->add_flag("--json", o.json, "Machine-readable output");
}

int run_generate(const generate_opts& o, bool write_logits) {
    loaded_model lm = load_model(o.model_path, o.tokenizer_path, true);
    context_params cp = context_default_params();
    cp.n_threads = o.threads;
    context ctx = take(context::create(*lm.m, cp));
    ctx.prepare();  // before the prompt's timing starts
    generation_request q = o.gen;
    if (write_logits) q.temperature = 0.0f;
    q.prompt_logits = write_logits;
    q.stream = !o.json && !write_logits;

    std::ofstream logits_file;
    if (write_logits) {
        logits_file.open(o.out_path, std::ios::binary | std::ios::trunc);
        if (!logits_file) throw cli_error(o.out_path + ": cannot open for writing");
    }
    const size_t vocab = static_cast<size_t>(ctx.vocab_size());
    int32_t rows = 0;
    std::function<void(const generate_step&)> on_step;
    if (write_logits)
        on_step = [&](const generate_step& s) {
            logits_file.write(reinterpret_cast<const char*>(s.logits), static_cast<std::streamsize>(vocab * sizeof(float)));
            ++rows;
        };
    const generation_output g = run_generation(lm, ctx, q, on_step);
    if (write_logits && !logits_file.flush()) throw cli_error(o.out_path + ": write failed");
    const generate_result& r = g.r;
    const std::string& text = g.text;
    const double decode_tps = g.decode_tokens_per_second;
    if (o.json) {
        nlohmann::json j{{"text", text},
                         {"tokens", r.tokens},
                         {"n_prompt", r.n_prompt},
                         {"prefill_seconds", r.prefill_seconds},
                         {"decode_seconds", r.decode_seconds},
                         {"decode_tokens_per_second", decode_tps},
                         {"stopped", g.stop}};
        if (write_logits) {
            j["logits_file"] = o.out_path;
            j["rows"] = rows;
            j["vocab"] = vocab;
        }
        print_json(j);
    } else if (write_logits) {
        std::printf("%s\nwrote %d x %zu float32 logits to %s\n", text.c_str(), rows, vocab, o.out_path.c_str());
    } else {
        std::printf("\n");
        std::fflush(stdout);  // the text's last line before the stderr summary
        std::fprintf(stderr, "achieved tok/s: %.1f (decode, %d tokens)\nstopped: %s\n", decode_tps, r.n_decoded, g.stop.c_str());
    }
    return 0;
}

}  // namespace

void register_generate(CLI::App& app, command_fn& run) {
    auto o = std::make_shared<generate_opts>();
    CLI::App* c = app.add_subcommand("generate", "Generate text (llama2.c run semantics: prompt, then continuation)");
    add_common(c, *o);
    add_sampling_options(c, o->gen);
    c->callback([o, &run] { run = [o] { return run_generate(*o, false); }; });
}

void register_logits(CLI::App& app, command_fn& run) {
    auto o = std::make_shared<generate_opts>();
    CLI::App* c = app.add_subcommand("logits", "Greedy run writing float32 logits of every position (N x vocab, no header)");
    add_common(c, *o);
    c->add_option("-o,--out", o->out_path, "Output file")->required();
    c->callback([o, &run] { run = [o] { return run_generate(*o, true); }; });
}

}  // namespace sl::cli

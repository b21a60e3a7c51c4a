// `sparselens make-synthetic`: a random-weight GGUF at a real model's shape, for speed work.
#include <cstdio>
#include <unistd.h>

#include "cli_common.h"
#include "sparselens/core/synthetic.h"

namespace sl::cli {

namespace {

struct synthetic_opts {
    std::string shape;  // default: llama-1b, or small with --arch
    std::string arch = "llama";
    std::string type = "f32";
    std::string out;
    int32_t vocab = 0;
    uint64_t seed = 42;
    bool json = false;
};

dtype parse_type(const std::string& s) {
    for (dtype t : {dtype::f32, dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_0}) {
        std::string name(dtype_name(t));
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (name == s) return t;
    }
    throw cli_error("make-synthetic: unknown type '" + s + "' (f32, f16, bf16, q8_0, q4_0)");
}

int run_synthetic(const synthetic_opts& o) {
    synthetic_params sp = synthetic_default_params();
    const std::string shape = !o.shape.empty() ? o.shape : o.arch == "llama" ? "llama-1b" : "small";
    const std::string stem = o.arch == "llama" ? shape : o.arch + "-" + shape;
    sp.path = o.out.empty() ? stem + "-" + o.type + ".gguf" : o.out;
    sp.shape = shape;
    sp.arch = o.arch;
    sp.type = parse_type(o.type);
    sp.vocab = o.vocab;
    sp.seed = o.seed;
    const bool show_progress = !o.json && isatty(STDERR_FILENO);
    if (show_progress)
        sp.progress = [](float f) {
            std::fprintf(stderr, "\rwriting: %5.1f%%", 100.0 * f);
            return true;
        };
    const synthetic_summary s = take(synthetic_write(sp));
    if (show_progress) std::fprintf(stderr, "\n");
    if (o.json) {
        print_json({{"path", s.path}, {"shape", shape}, {"arch", o.arch}, {"type", o.type}, {"n_tensors", s.n_tensors},
                    {"file_bytes", s.file_bytes}, {"dim", s.hp.dim}, {"hidden_dim", s.hp.hidden_dim},
                    {"n_layers", s.hp.n_layers}, {"vocab_size", s.hp.vocab_size}});
    } else {
        std::printf("wrote %s: %s shape, %s weights, %d tensors, %.2f MiB\n", s.path.c_str(), stem.c_str(),
                    o.type.c_str(), s.n_tensors, static_cast<double>(s.file_bytes) / (1 << 20));
    }
    return 0;
}

}  // namespace

void register_make_synthetic(CLI::App& app, command_fn& run) {
    auto o = std::make_shared<synthetic_opts>();
    CLI::App* c = app.add_subcommand("make-synthetic", "Write a random-weight GGUF of a real model's shape (for speed work)");
    std::string shapes;
    for (const std::string& s : synthetic_shape_names()) shapes += (shapes.empty() ? "" : ", ") + s;
    c->add_option("--shape", o->shape, "Shape: " + shapes)->check(CLI::IsMember(synthetic_shape_names()));
    c->add_option("--arch", o->arch, "Architecture: " + synthetic_arch_names_text() + " (default llama; others default to --shape small)")
        ->check(CLI::IsMember(synthetic_arch_names()));
    c->add_option("--type", o->type, "Weight type: f32, f16, bf16, q8_0, q4_0");
    c->add_option("-o,--out", o->out, "Output file (default: SHAPE-TYPE.gguf)");
    c->add_option("--vocab", o->vocab, "Vocabulary size override (0: the shape's default)")->check(CLI::NonNegativeNumber);
    c->add_option("--seed", o->seed, "Random seed");
    c->add_flag("--json", o->json, "Machine-readable output");
    c->callback([o, &run] { run = [o] { return run_synthetic(*o); }; });
}

}  // namespace sl::cli

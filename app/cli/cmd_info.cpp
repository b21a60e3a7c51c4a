// `sparselens info MODEL`: architecture, shapes, tensor types and bytes per component.
#include <cstdio>
#include <map>

#include "cli_common.h"
#include "sparselens/core/model_stats.h"

namespace sl::cli {

namespace {

struct info_opts {
    std::string model_path;
    bool json = false;
    bool tensors = false;
};

int run_info(const info_opts& o) {
    const model m = take(model_load(o.model_path));
    const model_hparams& hp = m.hp;
    const model_bytes b = model_count_bytes(m);
    const std::vector<type_share> mix = model_type_mix(m);
    std::map<std::string, int> type_counts;
    for (const type_share& s : mix) type_counts[std::string(dtype_name(s.type))] = s.tensors;

    if (o.json) {
        nlohmann::json j;
        j["path"] = m.path;
        j["format"] = m.format;
        j["architecture"] = m.arch.name;
        j["architecture_features"] = arch_summary(m.arch);
        j["name"] = m.name;
        j["file_bytes"] = m.file_bytes;
        j["hparams"] = {{"dim", hp.dim}, {"hidden_dim", hp.hidden_dim}, {"n_layers", hp.n_layers},
                        {"n_heads", hp.n_heads}, {"n_kv_heads", hp.n_kv_heads}, {"head_dim", hp.head_dim()},
                        {"vocab_size", hp.vocab_size}, {"seq_len", hp.seq_len}, {"rope_dim", hp.rope_dim},
                        {"rope_theta", hp.rope_theta}, {"norm_eps", hp.norm_eps}};
        j["tied_output"] = m.tied_output;
        j["params"] = model_count_params(m);
        j["bytes"] = {{"attention", b.attention}, {"mlp", b.mlp}, {"embeddings", b.embeddings},
                      {"norms", b.norms}, {"total", b.total()}};
        j["tensor_types"] = type_counts;
        nlohmann::json jm = nlohmann::json::array();
        for (const type_share& s : mix)
            jm.push_back({{"type", dtype_name(s.type)}, {"tensors", s.tensors}, {"elements", s.elements},
                          {"bytes", s.bytes}, {"bits_per_weight", s.bits_per_weight()}});
        j["type_mix"] = jm;
        j["embedded_vocab"] = m.vocab.tokens.size();
        j["tokenizer"] = {{"kind", tokenizer_kind_name(m.vocab)}, {"model", m.vocab.model}, {"pre", m.vocab.pre},
                          {"tokens", m.vocab.tokens.size()}, {"chat_format", chat_format_kind(m.vocab)}};
        j["context_length"] = hp.seq_len;
        nlohmann::json ts = nlohmann::json::array();
        for (const tensor_record& t : m.tensors)
            ts.push_back({{"name", t.name}, {"type", dtype_name(t.type)}, {"shape", t.shape}, {"bytes", t.bytes}});
        j["tensors"] = ts;
        print_json(j);
        return 0;
    }

    auto mib = [](uint64_t x) { return static_cast<double>(x) / (1024.0 * 1024.0); };
    auto pct = [&](uint64_t x) { return b.total() ? 100.0 * static_cast<double>(x) / static_cast<double>(b.total()) : 0.0; };
    std::printf("model      %s\nformat     %s%s%s\n", m.path.c_str(), m.format.c_str(), m.name.empty() ? "" : ", name ",
                m.name.c_str());
    std::printf("arch       %s\n", arch_summary(m.arch).c_str());
    std::printf("shape      dim %d, hidden %d, layers %d, heads %d (kv %d, head dim %d), vocab %d, context %d\n", hp.dim,
                hp.hidden_dim, hp.n_layers, hp.n_heads, hp.n_kv_heads, hp.head_dim(), hp.vocab_size, hp.seq_len);
    std::printf("rope       theta %g over %d dims; rmsnorm eps %g; classifier %s\n", hp.rope_theta, hp.rope_dim,
                hp.norm_eps, m.tied_output ? "tied to embedding" : "separate");
    std::printf("params     %.3f M\n", static_cast<double>(model_count_params(m)) / 1e6);
    uint64_t stored = 0;
    for (const type_share& s : mix) stored += s.bytes;
    for (size_t i = 0; i < mix.size(); ++i) {
        const type_share& s = mix[i];
        std::printf("%-11s%-5s %4d tensors %10.2f MiB (%5.1f%%) %6.2f bits/weight\n", i ? "" : "types",
                    std::string(dtype_name(s.type)).c_str(), s.tensors, mib(s.bytes),
                    stored ? 100.0 * static_cast<double>(s.bytes) / static_cast<double>(stored) : 0.0, s.bits_per_weight());
    }
    std::printf("bytes      attention %.2f MiB (%.1f%%), MLP %.2f MiB (%.1f%%), embeddings %.2f MiB (%.1f%%), norms %.3f MiB\n",
                mib(b.attention), pct(b.attention), mib(b.mlp), pct(b.mlp), mib(b.embeddings), pct(b.embeddings),
                mib(b.norms));
    std::printf("           total %.2f MiB of weights; file %.2f MiB\n", mib(b.total()), mib(m.file_bytes));
    std::printf("tokenizer  %s; chat format %s\n", tokenizer_kind_name(m.vocab).c_str(), chat_format_kind(m.vocab).c_str());
    if (o.tensors) {
        for (const tensor_record& t : m.tensors) {
            std::string shape;
            for (size_t i = 0; i < t.shape.size(); ++i) shape += (i ? " x " : "") + std::to_string(t.shape[i]);
            std::printf("  %-28s %-5s [%s] %llu bytes\n", t.name.c_str(), std::string(dtype_name(t.type)).c_str(),
                        shape.c_str(), static_cast<unsigned long long>(t.bytes));
        }
    }
    return 0;
}

}  // namespace

void register_info(CLI::App& app, command_fn& run) {
    auto o = std::make_shared<info_opts>();
    CLI::App* c = app.add_subcommand("info", "Architecture, shapes, tensor types and bytes per component");
    c->add_option("model", o->model_path, "Model file (GGUF, llama2.c .bin)")->required();
    c->add_flag("--tensors", o->tensors, "List every tensor");
    c->add_flag("--json", o->json, "Machine-readable output");
    c->callback([o, &run] { run = [o] { return run_info(*o); }; });
}

}  // namespace sl::cli

// model_load(): detects the file format by its magic and dispatches to the GGUF or llama2.c loader.
#include <cstring>

#include "weight_storage.h"

namespace sl {

std::string validate_hparams(const model_hparams& hp) {
    struct field { const char* name; int64_t v, hi; };
    const field fields[] = {
        {"dim", hp.dim, k_max_dim},           {"hidden_dim", hp.hidden_dim, k_max_hidden},
        {"n_layers", hp.n_layers, k_max_layers}, {"n_heads", hp.n_heads, k_max_heads},
        {"n_kv_heads", hp.n_kv_heads, k_max_heads}, {"vocab_size", hp.vocab_size, k_max_vocab},
        {"seq_len", hp.seq_len, k_max_seq_len},
    };
    for (const field& f : fields)
        if (f.v < 1 || f.v > f.hi)
            return std::string(f.name) + " = " + std::to_string(f.v) + " is out of range [1, " + std::to_string(f.hi) + "]";
    if (hp.head_width == 0 && hp.dim % hp.n_heads != 0)
        return "dim " + std::to_string(hp.dim) + " is not a multiple of n_heads " + std::to_string(hp.n_heads);
    if (hp.n_heads % hp.n_kv_heads != 0)
        return "n_heads " + std::to_string(hp.n_heads) + " is not a multiple of n_kv_heads " + std::to_string(hp.n_kv_heads);
    if (hp.head_dim() < 2 || hp.head_dim() > k_max_head_dim)
        return "head dimension " + std::to_string(hp.head_dim()) + " is out of range [2, " + std::to_string(k_max_head_dim) + "]";
    if (int64_t{hp.q_dim()} > k_max_dim)
        return "n_heads * head dimension = " + std::to_string(hp.q_dim()) + " exceeds " + std::to_string(k_max_dim);
    if (hp.head_dim() % 2 != 0) return "head dimension " + std::to_string(hp.head_dim()) + " is odd (RoPE needs pairs)";
    return {};
}

model_load_params model_default_load_params() { return model_load_params{}; }

result<model> model_load(const std::string& path, const model_load_params& params) {
    load_progress progress{&params.progress, path};
    if (!progress.report(0.0f)) return progress.cancelled();
    // The huge-page copy of the weights (when it happens) is most of a load's time: the first 70%.
    bool copied = false;
    const progress_fn copy_progress = [&](float f) {
        copied = true;
        return progress.report(0.7f * f);
    };
    auto file = mapped_file::open(path, params.use_mmap, /*weights=*/true, &copy_progress);
    if (!file) return file.err();
    const mapped_file& f = *file.value();
    if (copied) {
        progress.base = 0.7f;
        progress.scale = 0.3f;
    }

    result<model> m = error{};
    if (f.size >= 4 && std::memcmp(f.data, "GGUF", 4) == 0)
        m = load_gguf_model(file.value(), progress);
    else if (f.size >= 4 && load_le<uint32_t>(f.data) == 0x616b3432u)
        m = load_llama2c_q80_model(file.value(), progress);
    else
        m = load_llama2c_model(file.value(), progress);
    if (!m) return m;
    if (!progress.report(1.0f)) return progress.cancelled();
    return m;
}

}  // namespace sl

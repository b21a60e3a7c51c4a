// Model-shape profiles (assets/models/*.json) and shapes of loaded models.
#include "sparselens/sim/shape.h"

#include <algorithm>
#include <filesystem>

#include "json_fields.h"
#include "sparselens/sim/device.h"

namespace sl::sim {

namespace fs = std::filesystem;

namespace {
constexpr int64_t max_dim = 1 << 20;  // far above any real model, small enough that products fit in 64 bits
}

outcome shape_validate(const model_shape& s, const std::string& origin) {
    auto bad = [&](const std::string& what) { return error{origin + ": " + what}; };
    auto in_range = [](int64_t x, int64_t hi) { return x > 0 && x <= hi; };
    if (!in_range(s.dim, max_dim)) return bad("field 'dim' must be in [1, 1048576]");
    if (!in_range(s.hidden_dim, max_dim)) return bad("field 'hidden_dim' must be in [1, 1048576]");
    if (!in_range(s.n_layers, 4096)) return bad("field 'n_layers' must be in [1, 4096]");
    if (!in_range(s.n_heads, 65536)) return bad("field 'n_heads' must be in [1, 65536]");
    if (!in_range(s.n_kv_heads, 65536)) return bad("field 'n_kv_heads' must be in [1, 65536]");
    if (!in_range(s.vocab_size, 1 << 24)) return bad("field 'vocab_size' must be in [1, 16777216]");
    if (s.head_width < 0 || s.head_width > 1024) return bad("field 'head_dim' must be in [1, 1024]");
    if (s.head_width == 0 && s.dim % s.n_heads != 0) return bad("field 'dim' is not a multiple of 'n_heads'");
    if (s.n_kv_heads > s.n_heads || s.n_heads % s.n_kv_heads != 0)
        return bad("field 'n_heads' is not a multiple of 'n_kv_heads'");
    if (s.max_context < 0) return bad("field 'max_context' must not be negative");
    return {};
}

result<model_shape> shape_load(const std::string& path) {
    nlohmann::json j;
    if (auto o = detail::read_json_file(path, j); !o) return o.err();
    model_shape s;
    try {
        detail::json_fields f(j, path);
        f.expect_schema("sparselens.model_shape", 1);
        f.reject_unknown({"schema", "version", "name", "display_name", "description", "notes", "dim", "hidden_dim",
                          "n_layers", "n_heads", "n_kv_heads", "head_dim", "vocab_size", "tied_embeddings", "max_context"});
        s.name = f.string("name", true);
        if (s.name.empty()) f.fail("field 'name' must not be empty");
        s.dim = static_cast<int32_t>(f.integer("dim", 1, max_dim, true));
        s.hidden_dim = static_cast<int32_t>(f.integer("hidden_dim", 1, max_dim, true));
        s.n_layers = static_cast<int32_t>(f.integer("n_layers", 1, 4096, true));
        s.n_heads = static_cast<int32_t>(f.integer("n_heads", 1, 65536, true));
        s.n_kv_heads = static_cast<int32_t>(f.integer("n_kv_heads", 1, 65536, true));
        s.head_width = static_cast<int32_t>(f.integer("head_dim", 1, 1024, false, 0));
        s.vocab_size = static_cast<int32_t>(f.integer("vocab_size", 1, 1 << 24, true));
        s.tied_embeddings = f.boolean("tied_embeddings", false, false);
        s.max_context = static_cast<int32_t>(f.integer("max_context", 0, 1 << 24, false, 0));
    } catch (const detail::field_error& e) {
        return error{e.what()};
    }
    if (auto o = shape_validate(s, path); !o) return o.err();
    return s;
}

std::vector<std::string> shape_list(const std::string& assets) {
    std::vector<std::string> out;
    std::error_code ec;
    const fs::path dir = fs::path(assets_dir(assets)) / "models";
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->path().extension() == ".json") out.push_back(it->path().stem().string());
    std::sort(out.begin(), out.end());
    return out;
}

result<model_shape> shape_find(const std::string& name_or_path, const std::string& assets) {
    std::error_code ec;
    if (name_or_path.find('/') != std::string::npos || fs::path(name_or_path).extension() == ".json")
        return shape_load(name_or_path);
    const fs::path dir = fs::path(assets_dir(assets)) / "models";
    const fs::path direct = dir / (name_or_path + ".json");
    if (fs::is_regular_file(direct, ec)) return shape_load(direct.string());
    std::string known;
    for (const std::string& n : shape_list(assets)) known += (known.empty() ? "" : ", ") + n;
    return error{"model shape '" + name_or_path + "' not found in " + dir.string() +
                 (known.empty() ? " (no profiles there; set SPARSELENS_ASSETS_DIR)" : " (available: " + known + ")")};
}

model_shape shape_from_hparams(const model_hparams& hp, bool tied_embeddings, const std::string& name) {
    model_shape s;
    s.name = name;
    s.dim = hp.dim;
    s.hidden_dim = hp.hidden_dim;
    s.n_layers = hp.n_layers;
    s.n_heads = hp.n_heads;
    s.n_kv_heads = hp.n_kv_heads;
    s.vocab_size = hp.vocab_size;
    s.tied_embeddings = tied_embeddings;
    s.max_context = hp.seq_len;
    s.head_width = hp.head_width;
    return s;
}

model_shape shape_from_model(const model& m) {
    std::string name = m.name;
    if (name.empty()) name = fs::path(m.path).stem().string();
    return shape_from_hparams(m.hp, m.tied_output, name);
}

}  // namespace sl::sim

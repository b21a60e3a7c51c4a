// GGUF tokenizer metadata reader shared by model loading and vocab-only files (sparselens tokenize).
#include "vocab_gguf.h"

#include <limits>

#include "mapped_file.h"

namespace sl {

namespace {

struct vocab_reader {
    const gguf_file& g;
    embedded_vocab& v;

    error fail(const std::string& what) const { return file_error(g.path(), what); }

    outcome string_key(const char* key, std::string& out) const {
        const gguf_value* x = g.find(key);
        if (!x) return {};
        if (!x->to_string()) return fail(std::string("key '") + key + "' is not a string");
        out = *x->to_string();
        return {};
    }

    outcome bool_key(const char* key, int32_t& out) const {
        const gguf_value* x = g.find(key);
        if (!x) return {};
        const auto i = x->to_int();
        if (x->type != gguf_type::boolean || !i) return fail(std::string("key '") + key + "' is not a bool");
        out = *i != 0;
        return {};
    }

    outcome id_key(const char* key, int32_t& out, uint64_t n) const {
        const gguf_value* x = g.find(key);
        if (!x) return {};
        const auto i = x->to_int();
        if (!i) return fail(std::string("key '") + key + "' is not an integer");
        // -1 (or UINT32_MAX from unsigned writers) is how converters say "none".
        if (*i == -1 || *i == std::numeric_limits<uint32_t>::max()) {
            out = -1;
            return {};
        }
        if (*i < 0 || static_cast<uint64_t>(*i) >= n)
            return fail(std::string("key '") + key + "' = " + std::to_string(*i) + " is out of range [0, " +
                        std::to_string(n - 1) + "]");
        out = static_cast<int32_t>(*i);
        return {};
    }
};

}  // namespace

outcome read_gguf_vocab(const gguf_file& g, int64_t vocab_size, embedded_vocab& v) {
    const vocab_reader r{g, v};
    if (auto o = r.string_key("tokenizer.ggml.model", v.model); !o) return o;
    // Other vocabularies are not ours to tokenize, but the weights stay usable (bench, synthetic
    // prompts): the model is kept and the vocabulary left empty; commands that need text say why.
    if (!v.model.empty() && v.model != "llama" && v.model != "gpt2") return {};
    const gguf_value* tokens = g.find("tokenizer.ggml.tokens");
    if (!tokens) return {};
    if (!tokens->is_array() || tokens->elem_type != gguf_type::string)
        return r.fail("key 'tokenizer.ggml.tokens' is not an array of strings");
    const uint64_t n = tokens->count;
    if (n == 0) return r.fail("tokenizer.ggml.tokens is empty");
    if (n > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
        return r.fail("tokenizer.ggml.tokens has too many tokens");
    if (vocab_size >= 0 && n != static_cast<uint64_t>(vocab_size))
        return r.fail("tokenizer.ggml.tokens has " + std::to_string(n) + " tokens but token_embd.weight has " +
                      std::to_string(vocab_size) + " rows");
    v.tokens = tokens->strs;
    if (const gguf_value* sc = g.find("tokenizer.ggml.scores")) {
        if (!sc->is_array() || sc->count != n || !sc->float_at(0))
            return r.fail("tokenizer.ggml.scores must be a numeric array of " + std::to_string(n) + " elements");
        v.scores.resize(n);
        for (uint64_t i = 0; i < n; ++i) v.scores[i] = static_cast<float>(*sc->float_at(i));
    } else if (v.model == "gpt2") {
        v.scores.assign(n, 0.0f);  // BPE ranks come from the merges, scores are unused
    }
    if (const gguf_value* ty = g.find("tokenizer.ggml.token_type")) {
        if (!ty->is_array() || ty->count != n || !ty->int_at(0))
            return r.fail("tokenizer.ggml.token_type must be an integer array of " + std::to_string(n) + " elements");
        v.types.resize(n);
        for (uint64_t i = 0; i < n; ++i) {
            const int64_t t = *ty->int_at(i);
            if (t < std::numeric_limits<int32_t>::min() || t > std::numeric_limits<int32_t>::max())
                return r.fail("tokenizer.ggml.token_type[" + std::to_string(i) + "] = " + std::to_string(t) +
                              " is out of range");
            v.types[i] = static_cast<int32_t>(t);
        }
    }
    if (const gguf_value* mg = g.find("tokenizer.ggml.merges")) {
        if (!mg->is_array() || (mg->count > 0 && mg->elem_type != gguf_type::string))
            return r.fail("key 'tokenizer.ggml.merges' is not an array of strings");
        v.merges = mg->strs;
    }
    if (v.model == "gpt2" && v.merges.empty()) return r.fail("a 'gpt2' vocabulary needs tokenizer.ggml.merges");
    if (v.model == "gpt2") v.bos_id = v.eos_id = v.unk_id = -1;  // no SentencePiece defaults for BPE
    if (auto o = r.id_key("tokenizer.ggml.bos_token_id", v.bos_id, n); !o) return o;
    if (auto o = r.id_key("tokenizer.ggml.eos_token_id", v.eos_id, n); !o) return o;
    if (auto o = r.id_key("tokenizer.ggml.unknown_token_id", v.unk_id, n); !o) return o;
    if (auto o = r.id_key("tokenizer.ggml.eot_token_id", v.eot_id, n); !o) return o;
    if (auto o = r.string_key("tokenizer.ggml.pre", v.pre); !o) return o;
    if (auto o = r.bool_key("tokenizer.ggml.add_bos_token", v.add_bos); !o) return o;
    if (auto o = r.bool_key("tokenizer.ggml.add_eos_token", v.add_eos); !o) return o;
    if (auto o = r.bool_key("tokenizer.ggml.add_space_prefix", v.add_space_prefix); !o) return o;
    if (auto o = r.string_key("tokenizer.chat_template", v.chat_template); !o) return o;
    return {};
}

}  // namespace sl

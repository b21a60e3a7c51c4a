// Vocabulary import: tokenizer.json / tokenizer_config.json and llama2.c tokenizers to GGUF tokenizer metadata,
// following llama.cpp's convert_hf_to_gguf.py (token types, special ids, merges), and vocab-only GGUF files.
#include "sparselens/core/vocab_import.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <unordered_map>

#include "sparselens/core/gguf.h"

namespace sl {

namespace {

using nlohmann::json;

constexpr std::string_view k_space_marker = "\xE2\x96\x81";  // U+2581
constexpr int32_t k_type_normal = 1, k_type_unknown = 2, k_type_control = 3, k_type_user = 4, k_type_unused = 5,
                  k_type_byte = 6;

result<json> read_json(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return error{path + ": cannot open"};
    const std::string text{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) return error{path + ": not valid JSON"};
    if (!j.is_object()) return error{path + ": expected a JSON object at the top level"};
    return j;
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
    for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) s.replace(pos, from.size(), to);
    return s;
}

// convert_hf_to_gguf.py's does_token_look_special(): added tokens some models forget to mark special.
bool looks_special(const std::string& t) {
    const auto starts = [&](std::string_view p) { return t.rfind(p, 0) == 0; };
    const auto ends = [&](std::string_view s) { return t.size() >= s.size() && t.compare(t.size() - s.size(), s.size(), s) == 0; };
    return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || (starts("<|") && ends("|>")) ||
           (starts("<\xEF\xBD\x9C") && ends("\xEF\xBD\x9C>")) || (starts("<unused") && ends(">"));
}

bool is_byte_piece(const std::string& p) {
    return p.size() == 6 && p.rfind("<0x", 0) == 0 && p[5] == '>' && std::isxdigit(static_cast<unsigned char>(p[3])) &&
           std::isxdigit(static_cast<unsigned char>(p[4]));
}

// A special token named in tokenizer_config.json: a string or {"content": ...}; null means none.
std::string special_name(const json& cfg, const char* key) {
    if (!cfg.contains(key)) return {};
    const json& v = cfg[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    return {};
}

}  // namespace

result<embedded_vocab> vocab_from_tokenizer_json(const vocab_import_params& p) {
    auto tj = read_json(p.tokenizer_json);
    if (!tj) return tj.err();
    const json& j = tj.value();
    const std::string& src = p.tokenizer_json;
    json cfg = json::object();
    if (!p.config_json.empty()) {
        auto c = read_json(p.config_json);
        if (!c) return c.err();
        cfg = std::move(c).value();
    }
    if (!j.contains("model") || !j["model"].is_object()) return error{src + ": no \"model\" object"};
    const json& m = j["model"];
    if (!m.contains("type") || m["type"] != "BPE") return error{src + ": only BPE tokenizer models can be imported"};
    if (!m.contains("vocab") || !m["vocab"].is_object()) return error{src + ": model.vocab is not an object"};
    if (!m.contains("merges") || !m["merges"].is_array()) return error{src + ": model.merges is not an array"};
    const bool spm = m.contains("byte_fallback") && m["byte_fallback"] == true;

    // Ids -> spellings, from the vocabulary and the added tokens.
    std::map<int64_t, std::string> by_id;
    const auto add_id = [&](const json& id, const std::string& text, const char* where) -> outcome {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (int64_t{1} << 24))
            return error{src + ": " + where + " '" + text + "' has an invalid id"};
        by_id[id.get<int64_t>()] = text;
        return {};
    };
    for (const auto& [text, id] : m["vocab"].items())
        if (auto o = add_id(id, text, "token"); !o) return o.err();
    std::unordered_map<int64_t, bool> added_special;  // id -> "special" flag
    if (j.contains("added_tokens")) {
        if (!j["added_tokens"].is_array()) return error{src + ": added_tokens is not an array"};
        for (const json& a : j["added_tokens"]) {
            if (!a.is_object() || !a.contains("id") || !a.contains("content") || !a["content"].is_string())
                return error{src + ": malformed entry in added_tokens"};
            const std::string text = a["content"].get<std::string>();
            if (auto o = add_id(a["id"], text, "added token"); !o) return o.err();
            added_special[a["id"].get<int64_t>()] = a.contains("special") && a["special"] == true;
        }
    }
    if (by_id.empty()) return error{src + ": the vocabulary is empty"};
    const int64_t n = by_id.rbegin()->first + 1;

    embedded_vocab v;
    v.model = spm ? "llama" : "gpt2";
    v.pre = spm ? "default" : p.pre;
    v.tokens.resize(static_cast<size_t>(n));
    v.types.assign(static_cast<size_t>(n), k_type_unused);
    std::string unk = m.contains("unk_token") && m["unk_token"].is_string() ? m["unk_token"].get<std::string>() : "";
    for (int64_t i = 0; i < n; ++i) {
        const auto it = by_id.find(i);
        std::string& t = v.tokens[static_cast<size_t>(i)];
        int32_t& ty = v.types[static_cast<size_t>(i)];
        if (it == by_id.end()) {
            t = "[PAD" + std::to_string(i) + "]";
            continue;
        }
        t = it->second;
        if (const auto a = added_special.find(i); a != added_special.end()) {
            if (a->second || looks_special(t)) {
                ty = k_type_control;
            } else {
                ty = k_type_user;
                t = replace_all(t, k_space_marker, " ");  // the converter pre-normalises user-defined spaces
            }
        } else {
            ty = k_type_normal;
        }
        if (spm && is_byte_piece(t)) ty = k_type_byte;
        if (spm && !unk.empty() && t == unk) ty = k_type_unknown;
    }

    // Merges: "a b" strings, or [a, b] pairs in newer files.
    std::vector<std::string> merges;
    merges.reserve(m["merges"].size());
    for (const json& mg : m["merges"]) {
        if (mg.is_string())
            merges.push_back(mg.get<std::string>());
        else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string())
            merges.push_back(mg[0].get<std::string>() + " " + mg[1].get<std::string>());
        else
            return error{src + ": malformed entry in model.merges"};
    }
    if (spm) {
        // SentencePiece merges by piece score: the earlier a merge produces a piece, the higher its
        // score. Pieces no merge produces rank after every merge (never preferred, still reachable).
        const float unmerged_base = -static_cast<float>(merges.size());
        v.scores.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) v.scores[static_cast<size_t>(i)] = unmerged_base - static_cast<float>(i);
        std::unordered_map<std::string, int64_t> id_of;
        for (int64_t i = 0; i < n; ++i) id_of.emplace(v.tokens[static_cast<size_t>(i)], i);
        for (size_t r = 0; r < merges.size(); ++r) {
            const size_t sp = merges[r].find(' ', 1);
            if (sp == std::string::npos) return error{src + ": model.merges[" + std::to_string(r) + "] is not two pieces"};
            const auto it = id_of.find(merges[r].substr(0, sp) + merges[r].substr(sp + 1));
            if (it == id_of.end()) continue;
            float& s = v.scores[static_cast<size_t>(it->second)];
            s = std::max(s, -static_cast<float>(r));
        }
        v.add_space_prefix = 0;  // as the converter writes Gemma: the normaliser adds no dummy prefix
    } else {
        v.merges = std::move(merges);
        v.scores.assign(static_cast<size_t>(n), 0.0f);
    }

    // Special ids and flags from tokenizer_config.json, as the converter's SpecialVocab reads them.
    std::unordered_map<std::string, int32_t> id_of_text;
    for (int64_t i = n - 1; i >= 0; --i) id_of_text[v.tokens[static_cast<size_t>(i)]] = static_cast<int32_t>(i);
    const auto lookup = [&](const std::string& name) { return name.empty() || !id_of_text.count(name) ? -1 : id_of_text[name]; };
    v.bos_id = lookup(special_name(cfg, "bos_token"));
    v.eos_id = lookup(special_name(cfg, "eos_token"));
    v.unk_id = lookup(unk.empty() ? special_name(cfg, "unk_token") : unk);
    for (const char* k : {"add_bos_token", "add_eos_token"}) {
        if (!cfg.contains(k)) continue;
        if (!cfg[k].is_boolean()) return error{p.config_json + ": " + k + " is not a boolean"};
        (std::string(k) == "add_bos_token" ? v.add_bos : v.add_eos) = cfg[k].get<bool>() ? 1 : 0;
    }
    // Llama-3 says "add BOS" through its post-processor template rather than the config.
    if (v.add_bos < 0 && v.bos_id >= 0 && j.contains("post_processor") &&
        j["post_processor"].dump().find(json(v.tokens[static_cast<size_t>(v.bos_id)]).dump()) != std::string::npos)
        v.add_bos = 1;
    if (cfg.contains("chat_template")) {
        const json& ct = cfg["chat_template"];
        if (ct.is_string()) {
            v.chat_template = ct.get<std::string>();
        } else if (ct.is_array()) {  // named templates: the converter keeps "default"
            for (const json& e : ct)
                if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string())
                    v.chat_template = e["template"].get<std::string>();
        }
    }
    return v;
}

embedded_vocab vocab_from_tokenizer(const tokenizer& t) {
    embedded_vocab v;
    v.model = "llama";
    v.pre = "default";
    const int32_t n = t.vocab_size();
    for (int32_t i = 0; i < n; ++i) {
        v.tokens.push_back(replace_all(t.source_piece(i), " ", k_space_marker));
        v.scores.push_back(t.score(i));
        v.types.push_back(static_cast<int32_t>(t.type(i)));
    }
    v.bos_id = t.bos_id();
    v.eos_id = t.eos_id();
    v.unk_id = t.unk_id();
    v.add_bos = 1;
    v.add_eos = 0;
    return v;
}

result<uint64_t> vocab_write_gguf(const embedded_vocab& v, const std::string& path, const std::string& name) {
    if (v.tokens.empty()) return error{path + ": the vocabulary is empty"};
    gguf_writer w;
    w.set_str("general.architecture", "llama");
    w.set_str("general.name", name);
    // Minimal hyper-parameters: llama.cpp reads them even when it loads only the vocabulary.
    w.set_u32("llama.context_length", 4096);
    w.set_u32("llama.embedding_length", 64);
    w.set_u32("llama.block_count", 1);
    w.set_u32("llama.feed_forward_length", 128);
    w.set_u32("llama.attention.head_count", 1);
    w.set_u32("llama.attention.head_count_kv", 1);
    w.set_u32("llama.rope.dimension_count", 64);
    w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    w.set_u32("llama.vocab_size", static_cast<uint32_t>(v.tokens.size()));
    w.set_str("tokenizer.ggml.model", v.model);
    if (!v.pre.empty()) w.set_str("tokenizer.ggml.pre", v.pre);
    w.set("tokenizer.ggml.tokens", gguf_value::string_array(v.tokens));
    if (v.model != "gpt2") w.set("tokenizer.ggml.scores", gguf_value::array(v.scores));
    w.set("tokenizer.ggml.token_type", gguf_value::array(v.types));
    if (!v.merges.empty()) w.set("tokenizer.ggml.merges", gguf_value::string_array(v.merges));
    const auto id = [&](const char* key, int32_t value) {
        if (value >= 0) w.set_u32(key, static_cast<uint32_t>(value));
    };
    id("tokenizer.ggml.bos_token_id", v.bos_id);
    id("tokenizer.ggml.eos_token_id", v.eos_id);
    id("tokenizer.ggml.unknown_token_id", v.unk_id);
    id("tokenizer.ggml.eot_token_id", v.eot_id);
    if (v.add_bos >= 0) w.set_bool("tokenizer.ggml.add_bos_token", v.add_bos != 0);
    if (v.add_eos >= 0) w.set_bool("tokenizer.ggml.add_eos_token", v.add_eos != 0);
    if (v.add_space_prefix >= 0) w.set_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix != 0);
    if (!v.chat_template.empty()) w.set_str("tokenizer.chat_template", v.chat_template);
    return w.write(path);
}

}  // namespace sl

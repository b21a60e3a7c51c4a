// Tokenizer loading (llama2.c tokenizer.bin, GGUF vocabulary), validation, accessors and decoding.
#include "sparselens/core/tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <unordered_set>

#include "sparselens/core/gguf.h"
#include "vocab_gguf.h"

namespace sl {
namespace {

constexpr std::string_view k_space_marker = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space
constexpr uint64_t k_max_file_bytes = 256ull << 20;        // far above any real tokenizer.bin

// Raw bytes for byte tokens, so decode() can hand out views that outlive the call.
constexpr std::array<char, 256> k_byte_chars = [] {
    std::array<char, 256> a{};
    for (int i = 0; i < 256; ++i) a[static_cast<size_t>(i)] = static_cast<char>(i);
    return a;
}();

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

// 0..255 when the piece is spelled "<0xNN>", else -1.
int parse_byte_piece(std::string_view p) {
    if (p.size() != 6 || p.substr(0, 3) != "<0x" || p[5] != '>') return -1;
    const int hi = hex_digit(p[3]), lo = hex_digit(p[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
    std::string out;
    out.reserve(s.size());
    size_t pos = 0;
    while (true) {
        const size_t hit = s.find(from, pos);
        if (hit == std::string_view::npos) break;
        out.append(s.substr(pos, hit - pos)).append(to);
        pos = hit + from.size();
    }
    out.append(s.substr(pos));
    return out;
}

int32_t read_i32(const uint8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

float read_f32(const uint8_t* p) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
}

float sanitize_score(float s) { return std::isnan(s) ? -std::numeric_limits<float>::infinity() : s; }

bool matchable(token_type t) { return t == token_type::normal || t == token_type::user_defined; }

}  // namespace

result<tokenizer> tokenizer::from_llama2c_file(const std::string& path, int32_t vocab_size) {
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) return error{path + ": cannot open tokenizer file"};
    const std::streamoff size = f.tellg();
    if (size < 0) return error{path + ": cannot determine file size"};
    if (static_cast<uint64_t>(size) > k_max_file_bytes)
        return error{path + ": " + std::to_string(size) + " bytes is too large for a tokenizer file"};
    std::vector<uint8_t> bytes(static_cast<size_t>(size));
    f.seekg(0);
    if (!bytes.empty() && !f.read(reinterpret_cast<char*>(bytes.data()), size))
        return error{path + ": read error"};
    return from_llama2c_bytes(bytes, path, vocab_size);
}

result<tokenizer> tokenizer::from_llama2c_file(const std::string& path) { return from_llama2c_file(path, -1); }

result<tokenizer> tokenizer::from_llama2c_bytes(std::span<const uint8_t> bytes, const std::string& name,
                                                int32_t vocab_size) {
    const uint64_t size = bytes.size();
    if (size < 4) return error{name + ": " + std::to_string(size) + " bytes is too short for a tokenizer header"};
    const int32_t header_max_len = read_i32(bytes.data());
    if (header_max_len <= 0)
        return error{name + ": invalid max_token_length " + std::to_string(header_max_len)};
    const bool until_eof = vocab_size < 0;
    if (vocab_size == 0) return error{name + ": vocab_size is 0"};
    // Every record takes at least 8 bytes; checking this first keeps a lying vocab_size from
    // reserving gigabytes.
    if (!until_eof && static_cast<uint64_t>(vocab_size) > (size - 4) / 8)
        return error{name + ": file of " + std::to_string(size) + " bytes cannot hold " + std::to_string(vocab_size) +
                     " tokens"};

    tokenizer t;
    if (!until_eof) {
        t.m_pieces.reserve(static_cast<size_t>(vocab_size));
        t.m_scores.reserve(static_cast<size_t>(vocab_size));
    }
    uint64_t off = 4;
    int32_t longest = 0;
    while (until_eof ? off < size : t.m_pieces.size() < static_cast<size_t>(vocab_size)) {
        const size_t i = t.m_pieces.size();
        const auto where = [i, off] { return "token " + std::to_string(i) + " at offset " + std::to_string(off); };
        if (i >= static_cast<size_t>(std::numeric_limits<int32_t>::max()))
            return error{name + ": too many tokens"};
        if (size - off < 8) {
            if (until_eof) return error{name + ": truncated record for " + where()};
            return error{name + ": file ends at " + where() + " of vocab_size " + std::to_string(vocab_size)};
        }
        const float score = read_f32(bytes.data() + off);
        const int32_t len = read_i32(bytes.data() + off + 4);
        if (len < 0 || len > header_max_len)
            return error{name + ": " + where() + " has length " + std::to_string(len) + " outside [0, " +
                         std::to_string(header_max_len) + "] (max_token_length)"};
        off += 8;
        if (static_cast<uint64_t>(len) > size - off)
            return error{name + ": " + where() + " length " + std::to_string(len) + " runs past the end of the " +
                         std::to_string(size) + "-byte file"};
        t.m_pieces.emplace_back(reinterpret_cast<const char*>(bytes.data() + off), static_cast<size_t>(len));
        t.m_scores.push_back(sanitize_score(score));
        longest = std::max(longest, len);
        off += static_cast<uint64_t>(len);
    }
    if (t.m_pieces.empty()) return error{name + ": no tokens after the header"};

    // llama2.c's fixed layout: 0 <unk>, 1 BOS, 2 EOS; the file has no token types.
    const int32_t n = t.vocab_size();
    t.m_unk = n > 0 ? 0 : -1;
    t.m_bos = n > 1 ? 1 : -1;
    t.m_eos = n > 2 ? 2 : -1;
    t.m_types.assign(static_cast<size_t>(n), token_type::normal);
    for (int32_t i = 0; i < n; ++i)
        if (parse_byte_piece(t.m_pieces[static_cast<size_t>(i)]) >= 0) t.m_types[static_cast<size_t>(i)] = token_type::byte;
    if (t.m_unk >= 0) t.m_types[static_cast<size_t>(t.m_unk)] = token_type::unknown;
    if (t.m_bos >= 0) t.m_types[static_cast<size_t>(t.m_bos)] = token_type::control;
    if (t.m_eos >= 0) t.m_types[static_cast<size_t>(t.m_eos)] = token_type::control;
    t.finish_load();
    t.m_max_token_length = longest;  // the truthful bound; never above the header's
    return t;
}

result<tokenizer> tokenizer::from_embedded_vocab(const embedded_vocab& v, const std::string& source) {
    const size_t n = v.tokens.size();
    if (n == 0) return error{source + ": vocabulary has no tokens"};
    if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
        return error{source + ": vocabulary has too many tokens"};
    if (v.scores.size() != n)
        return error{source + ": vocabulary has " + std::to_string(n) + " tokens but " +
                     std::to_string(v.scores.size()) + " scores"};
    if (!v.types.empty() && v.types.size() != n)
        return error{source + ": vocabulary has " + std::to_string(n) + " tokens but " +
                     std::to_string(v.types.size()) + " token types"};
    // -1 is how GGUF writers say "none"; anything else outside the vocabulary is corruption.
    const auto check_id = [&](int32_t id, const char* what) -> std::string {
        if (id == -1 || (id >= 0 && static_cast<size_t>(id) < n)) return {};
        return source + ": " + what + " " + std::to_string(id) + " outside the vocabulary of " + std::to_string(n) +
               " tokens";
    };
    for (const auto& msg : {check_id(v.bos_id, "bos_token_id"), check_id(v.eos_id, "eos_token_id"),
                            check_id(v.unk_id, "unknown_token_id")})
        if (!msg.empty()) return error{msg};

    tokenizer t;
    t.m_eot = v.eot_id;
    if (t.m_eot < 0) {
        // As llama.cpp: without tokenizer.ggml.eot_token_id, the end-of-turn token is found by its spelling.
        for (const std::string_view name : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                            "<|end_of_text|>", "<EOT>"}) {
            const auto it = std::find(v.tokens.begin(), v.tokens.end(), name);
            if (it != v.tokens.end()) {
                t.m_eot = static_cast<int32_t>(it - v.tokens.begin());
                break;
            }
        }
    }
    t.m_chat_template = v.chat_template;
    if (v.model == "gpt2") {
        if (auto o = t.load_bpe(v, source); !o) return o.err();
        return t;
    }
    t.m_space_marker = true;
    t.m_source_pieces = v.tokens;
    t.m_pieces.reserve(n);
    t.m_types.reserve(n);
    int32_t longest = 0;
    for (size_t i = 0; i < n; ++i) {
        t.m_pieces.push_back(replace_all(v.tokens[i], k_space_marker, " "));
        longest = std::max(longest, static_cast<int32_t>(std::min<size_t>(t.m_pieces.back().size(), INT32_MAX)));
        t.m_scores.push_back(sanitize_score(v.scores[i]));
        token_type ty = token_type::normal;
        if (!v.types.empty()) {
            const int32_t raw = v.types[i];
            ty = raw >= 1 && raw <= 6 ? static_cast<token_type>(raw) : token_type::normal;
        } else if (parse_byte_piece(t.m_pieces.back()) >= 0) {
            ty = token_type::byte;
        }
        t.m_types.push_back(ty);
    }
    t.m_bos = v.bos_id;
    t.m_eos = v.eos_id;
    t.m_unk = v.unk_id;
    if (v.types.empty()) {  // no types in the file: infer the specials as for llama2.c
        if (t.m_unk >= 0) t.m_types[static_cast<size_t>(t.m_unk)] = token_type::unknown;
        if (t.m_bos >= 0) t.m_types[static_cast<size_t>(t.m_bos)] = token_type::control;
        if (t.m_eos >= 0) t.m_types[static_cast<size_t>(t.m_eos)] = token_type::control;
    }
    t.finish_load();
    t.m_max_token_length = longest;
    if (v.add_space_prefix == 0) t.m_dummy_prefix = -1;  // Gemma: no SentencePiece dummy prefix
    if (v.add_bos >= 0) t.m_add_bos = v.add_bos != 0;
    if (v.add_eos >= 0) t.m_add_eos = v.add_eos != 0;
    return t;
}

result<tokenizer> tokenizer::from_gguf_file(const std::string& path) {
    auto g = gguf_file::open(path);
    if (!g) return g.err();
    embedded_vocab v;
    if (auto o = read_gguf_vocab(g.value(), -1, v); !o) return o.err();
    if (v.empty() && !v.model.empty() && v.model != "llama" && v.model != "gpt2")
        return error{path + ": tokenizer.ggml.model '" + v.model +
                     "' is not supported (SentencePiece 'llama' and byte-level BPE 'gpt2' are)"};
    if (v.empty()) return error{path + ": the file has no tokenizer.ggml.tokens vocabulary"};
    return from_embedded_vocab(v, path);
}

bool tokenizer::is_control(int32_t id) const {
    return valid_id(id) && m_control[static_cast<size_t>(id)] != 0;
}

void tokenizer::collect_specials() {
    // llama.cpp's loader makes these spellings control tokens whatever their type in the file says
    // (end-of-turn/generation and fill-in-the-middle markers), so they are matched in prompts only
    // when special tokens are parsed, and hidden from text unless specials are rendered.
    static const std::unordered_set<std::string_view> k_forced_control = {
        "</s>", "<EOT>", "<MID>", "<PAD>", "<PRE>", "<REPO>", "<SUF>", "<end_of_turn>", "<end_of_utterance>", "<eos>",
        "<fim-middle>", "<fim-pad>", "<fim-prefix>", "<fim-repo>", "<fim-suffix>", "<fim_middle>", "<fim_pad>",
        "<fim_prefix>", "<fim_suffix>", "<reponame>", "<turn|>", "<|calls|>", "<|call|>", "<|code_middle|>",
        "<|code_prefix|>", "<|code_suffix|>", "<|end_of_text|>", "<|endoftext|>", "<|end|>", "<|eom_id|>", "<|eot_id|>",
        "<|file_sep|>", "<|fim_middle|>", "<|fim_pad|>", "<|fim_prefix|>", "<|fim_repo|>", "<|fim_suffix|>",
        "<|flush|>", "<|im_end|>", "<|middle|>", "<|prefix|>", "<|repo_name|>", "<|return|>", "<|suffix|>",
        "<|tool_response>", "[EOS]", "[EOT]", "[PAD]", "[e~[", "_<EOT>", "\xE2\x96\x81<MID>", "\xE2\x96\x81<PRE>",
        "\xE2\x96\x81<SUF>", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
        "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
        "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>"};
    m_specials.clear();
    m_control.assign(m_types.size(), 0);
    for (size_t i = 0; i < m_types.size(); ++i) {
        const token_type t = m_types[i];
        const std::string spelled = source_piece(static_cast<int32_t>(i));
        m_control[i] = t == token_type::control || t == token_type::unknown || k_forced_control.contains(spelled);
        const bool special = m_control[i] || t == token_type::user_defined;
        if (special && !spelled.empty()) m_specials.push_back(static_cast<int32_t>(i));
    }
    std::stable_sort(m_specials.begin(), m_specials.end(), [this](int32_t a, int32_t b) {
        return source_piece(a).size() > source_piece(b).size();
    });
}

void tokenizer::finish_load() {
    const size_t n = m_pieces.size();
    m_byte_ids.fill(-1);
    m_byte_value.assign(n, -1);
    m_lookup.clear();
    m_lookup.reserve(n);
    bool any_empty_piece = false;
    for (size_t i = 0; i < n; ++i) {
        const auto id = static_cast<int32_t>(i);
        any_empty_piece |= m_pieces[i].empty();
        if (m_types[i] == token_type::byte) {
            const int b = parse_byte_piece(m_pieces[i]);
            if (b >= 0) {
                m_byte_value[i] = static_cast<int16_t>(b);
                if (m_byte_ids[static_cast<size_t>(b)] < 0) m_byte_ids[static_cast<size_t>(b)] = id;
            }
        } else if (matchable(m_types[i])) {
            m_lookup.emplace(m_pieces[i], id);  // keeps the first id of a duplicated piece
        }
    }
    m_dummy_prefix = find_piece(" ");
    if (m_dummy_prefix < 0) m_dummy_prefix = m_byte_ids[' '];
    collect_specials();

    // A symbol whose piece is neither a proper prefix nor a proper suffix of any piece a merge can
    // produce never merges with a neighbour, so encode() may run BPE separately on the stretches
    // between such symbols (typically newlines, which are byte tokens) with identical results.
    // An empty piece would break that argument ("" + p == p), so it disables the shortcut.
    m_max_merge_length = 0;
    for (const auto& [p, id] : m_lookup)
        if (m_scores[static_cast<size_t>(id)] > tokenizer_min_merge_score)
            m_max_merge_length = std::max(m_max_merge_length, p.size());
    m_barrier.assign(n, 0);
    if (any_empty_piece) return;
    std::unordered_set<std::string_view> prefixes, suffixes;
    for (const auto& [p, id] : m_lookup) {
        if (!(m_scores[static_cast<size_t>(id)] > tokenizer_min_merge_score)) continue;
        const std::string_view s(p);
        for (size_t k = 1; k < s.size(); ++k) {
            prefixes.insert(s.substr(0, k));
            suffixes.insert(s.substr(k));
        }
    }
    for (size_t i = 0; i < n; ++i) {
        const std::string_view s(m_pieces[i]);
        m_barrier[i] = !prefixes.contains(s) && !suffixes.contains(s);
    }
}

std::string_view tokenizer::piece(int32_t id) const {
    return valid_id(id) ? std::string_view(m_pieces[static_cast<size_t>(id)]) : std::string_view();
}

std::string tokenizer::source_piece(int32_t id) const {
    if (!valid_id(id)) return {};
    return m_source_pieces.empty() ? m_pieces[static_cast<size_t>(id)] : m_source_pieces[static_cast<size_t>(id)];
}

float tokenizer::score(int32_t id) const {
    return valid_id(id) ? m_scores[static_cast<size_t>(id)] : -std::numeric_limits<float>::infinity();
}

token_type tokenizer::type(int32_t id) const {
    return valid_id(id) ? m_types[static_cast<size_t>(id)] : token_type::undefined;
}

int32_t tokenizer::find_piece(std::string_view p) const {
    const auto it = m_lookup.find(p);
    return it == m_lookup.end() ? -1 : it->second;
}

int32_t tokenizer::token_byte(int32_t id) const { return valid_id(id) ? m_byte_value[static_cast<size_t>(id)] : -1; }

std::string_view tokenizer::decode(int32_t prev_token, int32_t token) const {
    if (!valid_id(token)) return {};
    if (const int b = m_byte_value[static_cast<size_t>(token)]; b >= 0)
        return {&k_byte_chars[static_cast<size_t>(b)], 1};
    std::string_view p = m_pieces[static_cast<size_t>(token)];
    // SentencePiece's dummy prefix: the first word after BOS carries a space the text never had.
    if (prev_token >= 0 && prev_token == m_bos && m_dummy_prefix >= 0 && !p.empty() && p[0] == ' ') p.remove_prefix(1);
    return p;
}

std::string_view tokenizer::token_text(int32_t token, bool special) const {
    if (!valid_id(token)) return {};
    const auto i = static_cast<size_t>(token);
    if (m_control[i] && !special) return {};
    switch (m_types[i]) {
    case token_type::control:
    case token_type::unknown:
    case token_type::user_defined:
        return spelling(i);
    case token_type::byte:
        if (const int b = m_byte_value[i]; b >= 0) return {&k_byte_chars[static_cast<size_t>(b)], 1};
        return {};
    case token_type::normal:
        return m_control[i] ? spelling(i) : std::string_view(m_pieces[i]);
    default:
        return {};
    }
}

std::string tokenizer::decode_all(std::span<const int32_t> tokens) const {
    std::string out;
    bool first = true;
    for (const int32_t t : tokens) {
        if (!valid_id(t) || (m_control[static_cast<size_t>(t)] && m_types[static_cast<size_t>(t)] != token_type::unknown)) continue;
        std::string_view p = decode(-1, t);
        if (first && m_dummy_prefix >= 0 && !p.empty() && p[0] == ' ') p.remove_prefix(1);
        first = false;
        out.append(p);
    }
    return out;
}

bool tokenizer::shown_in_text(int32_t token, std::string_view piece) const {
    if (m_kind == tokenizer_kind::byte_bpe && is_control(token)) return false;
    const bool char_part = piece.size() == 1 && static_cast<unsigned char>(piece[0]) >= 0x80;
    return char_part || is_printable_piece(piece);
}

bool tokenizer::is_printable_piece(std::string_view p) {
    if (p.empty()) return false;
    if (p.size() == 1) {
        const auto c = static_cast<unsigned char>(p[0]);
        const bool print = c >= 0x20 && c <= 0x7E;  // isprint() in the C locale
        const bool space = c == ' ' || (c >= '\t' && c <= '\r');
        return print || space;
    }
    return true;
}

}  // namespace sl

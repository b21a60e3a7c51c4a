// GPT-2 byte-level BPE (GGUF 'gpt2' vocabularies: Llama-3, Qwen, SmolLM): PCRE2 pre-tokenizers, merge ranks,
// the byte-to-unicode map, with llama.cpp's semantics.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <unordered_map>

#include "sparselens/core/tokenizer.h"

namespace sl {

namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes take
// code points 256.. in byte order, so every byte has a visible character.
struct byte_map {
    std::array<std::string, 256> encode;   // byte -> UTF-8 of its stand-in code point
    std::unordered_map<uint32_t, uint8_t> decode;  // stand-in code point -> byte

    byte_map() {
        uint32_t next = 256;
        for (uint32_t b = 0; b < 256; ++b) {
            const bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
            const uint32_t cp = self ? b : next++;
            encode[b] = cp < 0x80 ? std::string(1, static_cast<char>(cp))
                                  : std::string{static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
            decode.emplace(cp, static_cast<uint8_t>(b));
        }
    }
};

const byte_map& bytes() {
    static const byte_map m;
    return m;
}

// One code point from `s` at `i` the way llama.cpp reads UTF-8: lead byte decides the length, only
// continuation bytes are checked; anything else is one invalid byte, read as U+FFFD.
uint32_t next_code_point(std::string_view s, size_t& i) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const auto cont = [&](size_t k) { return k < s.size() && (b(k) & 0xC0) == 0x80; };
    const unsigned char c = b(i);
    if (c < 0x80) return i += 1, c;
    if ((c & 0xE0) == 0xC0 && cont(i + 1)) {
        const uint32_t cp = ((c & 0x1Fu) << 6) | (b(i + 1) & 0x3Fu);
        return i += 2, cp;
    }
    if ((c & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
        const uint32_t cp = ((c & 0x0Fu) << 12) | ((b(i + 1) & 0x3Fu) << 6) | (b(i + 2) & 0x3Fu);
        return i += 3, cp;
    }
    if ((c & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
        const uint32_t cp = ((c & 0x07u) << 18) | ((b(i + 1) & 0x3Fu) << 12) | ((b(i + 2) & 0x3Fu) << 6) | (b(i + 3) & 0x3Fu);
        return i += 4, cp;
    }
    return i += 1, 0xFFFD;
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

// Text re-encoded code point by code point, as llama.cpp does before splitting (invalid bytes -> U+FFFD).
std::string normalized_utf8(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) append_utf8(out, next_code_point(s, i));
    return out;
}

// The pre-tokenizers llama.cpp knows by these names (tokenizer.ggml.pre), each a list of regexes
// applied in turn: every regex splits the pieces the previous ones left into matches and the gaps.
struct pre_tokenizer_def {
    std::vector<std::string_view> names;
    std::vector<const char*> regexes;
    bool ignore_merges;  // a pre-token that is itself a piece is taken whole (Llama-3)
    bool add_bos;        // default when the file has no tokenizer.ggml.add_bos_token
};

const std::vector<pre_tokenizer_def>& pre_tokenizers() {
    static const std::vector<pre_tokenizer_def> defs = {
        {{"llama-bpe", "llama3", "llama-v3"},
         {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
          "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
         true,
         true},
        {{"qwen2", "deepseek-r1-qwen"},
         {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
          "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
         false,
         false},
        {{"smollm"}, {"\\p{N}", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"}, false, false},
        {{"gpt-2"}, {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"}, false, false},
        {{"default", ""},
         {"[\\p{P}\\$\\+<=>\\^~\\|]+", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
          "\\p{N}+", "[0-9][0-9][0-9]"},
         false,
         false},
    };
    return defs;
}

struct code_deleter {
    void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

}  // namespace

struct tokenizer::bpe_state {
    std::vector<std::unique_ptr<pcre2_code, code_deleter>> regexes;
    std::unordered_map<std::string, int32_t, string_hash, std::equal_to<>> lookup;  // file spelling -> id
    struct merge {
        int32_t rank;
        int32_t merged;
    };
    std::unordered_map<uint64_t, merge> merges;  // (left id, right id) -> rank and result
    bool ignore_merges = false;

    int32_t find(std::string_view s) const {
        const auto it = lookup.find(s);
        return it == lookup.end() ? -1 : it->second;
    }
};

outcome tokenizer::load_bpe(const embedded_vocab& v, const std::string& source) {
    const size_t n = v.tokens.size();
    const pre_tokenizer_def* def = nullptr;
    for (const auto& d : pre_tokenizers())
        if (std::find(d.names.begin(), d.names.end(), v.pre) != d.names.end()) def = &d;
    if (!def)
        return error{source + ": pre-tokenizer '" + v.pre +
                     "' (tokenizer.ggml.pre) is not supported; known: llama-bpe, llama3, qwen2, smollm, gpt-2, default"};

    auto st = std::make_shared<bpe_state>();
    st->ignore_merges = def->ignore_merges;
    for (const char* rx : def->regexes) {
        int code = 0;
        PCRE2_SIZE at = 0;
        pcre2_code* c = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rx), PCRE2_ZERO_TERMINATED,
                                      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &at, nullptr);
        if (!c) return error{source + ": PCRE2 cannot compile the '" + v.pre + "' pre-tokenizer"};
        pcre2_jit_compile(c, PCRE2_JIT_COMPLETE);  // the interpreter is used when JIT is unavailable
        st->regexes.emplace_back(c);
    }

    m_kind = tokenizer_kind::byte_bpe;
    m_pre = v.pre;
    m_source_pieces = v.tokens;
    m_pieces.resize(n);
    m_scores.assign(n, 0.0f);
    m_types.resize(n);
    const auto& bm = bytes();
    int32_t longest = 0;
    for (size_t i = 0; i < n; ++i) {
        const int32_t raw = v.types.empty() ? 1 : v.types[i];
        m_types[i] = raw >= 1 && raw <= 6 ? static_cast<token_type>(raw) : token_type::normal;
        const std::string& s = v.tokens[i];
        if (m_types[i] == token_type::normal) {
            // Normal pieces are spelled in stand-in characters; the bytes they mean are what decoding shows.
            std::string raw_bytes;
            for (size_t k = 0; k < s.size();) {
                const size_t start = k;
                const uint32_t cp = next_code_point(s, k);
                const auto it = bm.decode.find(cp);
                if (it != bm.decode.end())
                    raw_bytes += static_cast<char>(it->second);
                else
                    raw_bytes.append(s, start, k - start);
            }
            m_pieces[i] = std::move(raw_bytes);
        } else {
            m_pieces[i] = s;
        }
        longest = std::max(longest, static_cast<int32_t>(std::min<size_t>(m_pieces[i].size(), INT32_MAX)));
        st->lookup[s] = static_cast<int32_t>(i);  // llama.cpp keeps the last id of a duplicated spelling
    }
    m_max_token_length = longest;
    st->merges.reserve(v.merges.size());
    for (size_t r = 0; r < v.merges.size(); ++r) {
        const std::string& m = v.merges[r];
        const auto where = [&] { return source + ": tokenizer.ggml.merges[" + std::to_string(r) + "] '" + m + "'"; };
        const size_t sp = m.find(' ', 1);
        if (sp == std::string::npos) return error{where() + " is not two pieces separated by a space"};
        const std::string left = m.substr(0, sp), right = m.substr(sp + 1);
        const int32_t a = st->find(left), b = st->find(right), c = st->find(left + right);
        if (a < 0 || b < 0 || c < 0)
            return error{where() + " does not match the vocabulary: '" + (a < 0 ? left : b < 0 ? right : left + right) +
                         "' is not a token"};
        st->merges.emplace(pair_key(a, b), bpe_state::merge{static_cast<int32_t>(r), c});  // first rank wins
    }
    m_bos = v.bos_id;
    m_eos = v.eos_id;
    m_unk = v.unk_id;
    m_add_bos = v.add_bos >= 0 ? v.add_bos != 0 : def->add_bos;
    m_add_eos = v.add_eos > 0;
    if (m_add_bos && m_bos < 0) m_add_bos = false;
    m_byte_value.assign(n, -1);
    m_barrier.assign(n, 0);
    m_bpe = std::move(st);
    collect_specials();
    return {};
}

void tokenizer::encode_bpe(std::string_view raw, std::vector<int32_t>& out) const {
    const bpe_state& st = *m_bpe;
    const std::string text = normalized_utf8(raw);

    // Pre-tokenize: each regex splits every current piece into its matches and the gaps between them;
    // matching runs on the piece alone, so look-arounds never see past it (as in llama.cpp).
    std::vector<std::pair<size_t, size_t>> pieces{{0, text.size()}};
    pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
    for (const auto& rx : st.regexes) {
        std::vector<std::pair<size_t, size_t>> next;
        next.reserve(pieces.size() * 2);
        for (const auto& [off, len] : pieces) {
            const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + off);
            size_t pos = 0;
            while (pos < len) {
                const int rc = pcre2_match(rx.get(), subject, len, pos, 0, md, nullptr);
                if (rc < 0) break;
                const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
                size_t s = ov[0], e = ov[1];
                if (e == s) {  // an empty match: step over one character
                    e = s + 1;
                    while (e < len && (static_cast<unsigned char>(text[off + e]) & 0xC0) == 0x80) ++e;
                    pos = e;
                    continue;
                }
                if (s > pos) next.emplace_back(off + pos, s - pos);
                next.emplace_back(off + s, e - s);
                pos = e;
            }
            if (pos < len) next.emplace_back(off + pos, len - pos);
        }
        pieces.swap(next);
    }
    pcre2_match_data_free(md);

    const auto& bm = bytes();
    std::string word;
    std::vector<int32_t> sym;       // ids of the current symbols (-1: a character not in the vocabulary)
    std::vector<std::string> text_of;  // spelling of symbols without an id (for the byte fallback)
    for (const auto& [off, len] : pieces) {
        word.clear();
        for (size_t k = 0; k < len; ++k) word += bm.encode[static_cast<unsigned char>(text[off + k])];
        if (st.ignore_merges) {
            if (const int32_t id = st.find(word); id >= 0) {
                out.push_back(id);
                continue;
            }
        }
        sym.clear();
        text_of.clear();
        for (size_t k = 0; k < word.size();) {
            size_t l = 1;
            while (k + l < word.size() && (static_cast<unsigned char>(word[k + l]) & 0xC0) == 0x80) ++l;
            const std::string_view ch(word.data() + k, l);
            const int32_t id = st.find(ch);
            sym.push_back(id >= 0 ? id : -1 - static_cast<int32_t>(text_of.size()));
            if (id < 0) text_of.emplace_back(ch);
            k += l;
        }
        // Standard BPE: merge the adjacent pair of lowest rank, leftmost first, until none is left.
        // Words are short, so a rescan per merge is cheaper than llama.cpp's heap bookkeeping.
        while (sym.size() > 1) {
            int32_t best_rank = INT32_MAX, best_merged = -1;
            size_t best_at = 0;
            for (size_t k = 0; k + 1 < sym.size(); ++k) {
                if (sym[k] < 0 || sym[k + 1] < 0) continue;
                const auto it = st.merges.find(pair_key(sym[k], sym[k + 1]));
                if (it != st.merges.end() && it->second.rank < best_rank) {
                    best_rank = it->second.rank;
                    best_merged = it->second.merged;
                    best_at = k;
                }
            }
            if (best_merged < 0) break;
            sym[best_at] = best_merged;
            sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
        }
        for (const int32_t id : sym) {
            if (id >= 0) {
                out.push_back(id);
                continue;
            }
            // llama.cpp's fallback for a symbol that is no token: each of its bytes looked up alone.
            for (const char c : text_of[static_cast<size_t>(-1 - id)])
                if (const int32_t b = st.find(std::string_view(&c, 1)); b >= 0) out.push_back(b);
        }
    }
}

}  // namespace sl

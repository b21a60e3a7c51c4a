// Test-only reference tokenizer: run.c's encode() algorithm re-implemented plainly (quadratic, slow, obvious).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sparselens/core/tokenizer.h"

namespace sl::test {

// run.c's algorithm over the tokenizer's pieces and scores: rescan every adjacent pair after each
// merge, take the strictly highest score above -1e10 (so ties go to the leftmost pair). Only the
// lookup set (normal/user-defined pieces, first id wins) and the "<unk> when a character has no
// complete byte fallback" rule follow sl::tokenizer's documented deviations from run.c.
class naive_tokenizer {
public:
    explicit naive_tokenizer(const sl::tokenizer& t) : m_t(t) {
        for (int32_t id = 0; id < t.vocab_size(); ++id) {
            const auto ty = t.type(id);
            if (ty == sl::token_type::normal || ty == sl::token_type::user_defined)
                m_lookup.emplace(std::string(t.piece(id)), id);
        }
    }
    std::vector<int32_t> encode(std::string_view text, bool bos, bool eos) const;

private:
    int32_t find(const std::string& s) const {
        auto it = m_lookup.find(s);
        return it == m_lookup.end() ? -1 : it->second;
    }
    const sl::tokenizer& m_t;
    std::unordered_map<std::string, int32_t> m_lookup;
};

inline std::vector<int32_t> naive_tokenizer::encode(std::string_view text, bool bos, bool eos) const {
    const sl::tokenizer& t = m_t;
    std::vector<int32_t> tokens;
    if (bos && t.bos_id() >= 0) tokens.push_back(t.bos_id());
    const size_t start = tokens.size();
    if (!text.empty()) {
        int32_t dummy = find(" ");
        if (dummy < 0) dummy = t.byte_token(' ');
        if (dummy >= 0) tokens.push_back(dummy);
    }

    std::string str_buffer;
    for (size_t c = 0; c < text.size(); ++c) {
        if ((static_cast<unsigned char>(text[c]) & 0xC0) != 0x80) str_buffer.clear();
        str_buffer.push_back(text[c]);
        const bool next_is_cont = c + 1 < text.size() && (static_cast<unsigned char>(text[c + 1]) & 0xC0) == 0x80;
        if (next_is_cont && str_buffer.size() < 4) continue;
        if (int32_t id = find(str_buffer); id >= 0) {
            tokens.push_back(id);
        } else {
            bool all = true;
            for (char b : str_buffer) all = all && t.byte_token(static_cast<uint8_t>(b)) >= 0;
            if (all) {
                for (char b : str_buffer) tokens.push_back(t.byte_token(static_cast<uint8_t>(b)));
            } else if (t.unk_id() >= 0) {
                tokens.push_back(t.unk_id());
            }
        }
        str_buffer.clear();
    }

    while (true) {
        float best_score = -1e10f;
        int32_t best_id = -1;
        size_t best_idx = SIZE_MAX;
        for (size_t i = start; i + 1 < tokens.size(); ++i) {
            const std::string merged = std::string(t.piece(tokens[i])) + std::string(t.piece(tokens[i + 1]));
            const int32_t id = find(merged);
            if (id != -1 && t.score(id) > best_score) {
                best_score = t.score(id);
                best_id = id;
                best_idx = i;
            }
        }
        if (best_idx == SIZE_MAX) break;
        tokens[best_idx] = best_id;
        tokens.erase(tokens.begin() + static_cast<std::ptrdiff_t>(best_idx) + 1);
    }
    if (eos && t.eos_id() >= 0) tokens.push_back(t.eos_id());
    return tokens;
}

inline std::vector<int32_t> naive_encode(const sl::tokenizer& t, std::string_view text, bool bos, bool eos) {
    return naive_tokenizer(t).encode(text, bos, eos);
}

// Random text mixing the given fragments with random bytes (invalid UTF-8 included).
inline std::string random_text(std::mt19937& rng, const std::vector<std::string>& fragments, size_t n_parts) {
    std::string s;
    std::uniform_int_distribution<size_t> pick(0, fragments.size() + 3);
    std::uniform_int_distribution<int> byte(0, 255);
    for (size_t i = 0; i < n_parts; ++i) {
        const size_t k = pick(rng);
        if (k < fragments.size()) s += fragments[k];
        else s.push_back(static_cast<char>(byte(rng)));
    }
    return s;
}

}  // namespace sl::test

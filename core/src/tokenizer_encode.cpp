// Tokenizer encoding: run.c's code-point split and greedy BPE merges, done with a heap over a linked list.
#include "sparselens/core/tokenizer.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <climits>

namespace sl {

namespace {

bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

struct symbol {
    int32_t id;
    int32_t prev;  // -1 at the start of the span
    int32_t next;  // -1 at the end of the span
    uint32_t version;  // bumped whenever the symbol changes or dies; stale heap entries are skipped
};

// A mergeable adjacent pair as it was when pushed.
struct candidate {
    float score;
    int32_t left;
    int32_t right;
    int32_t merged_id;
    uint32_t left_version;
    uint32_t right_version;
};

// Max-heap order that reproduces run.c's scan: highest score first, then the leftmost pair.
// Symbols keep their original index and never reorder, so the left index orders pairs by position.
struct candidate_less {
    bool operator()(const candidate& a, const candidate& b) const {
        if (a.score != b.score) return a.score < b.score;
        return a.left > b.left;
    }
};

// One slot of the pair cache; merged_id -1 records "no merge" (left -1 marks an empty slot).
struct pair_slot {
    int32_t left = -1;
    int32_t right = -1;
    int32_t merged_id = -1;
    float score = 0.0f;
};

}  // namespace

struct tokenizer::merge_scratch {
    std::vector<symbol> symbols;
    std::vector<candidate> heap;
    std::string buf;
    // Direct-mapped cache of pair lookups: text repeats the same pairs constantly, and hashing two
    // ints is far cheaper than building and hashing the concatenated string.
    std::vector<pair_slot> pairs;
    uint32_t pair_mask = 0;

    explicit merge_scratch(size_t text_bytes) {
        const size_t slots = std::bit_ceil(std::clamp<size_t>(text_bytes, 64, size_t{1} << 16));
        pairs.resize(slots);
        pair_mask = static_cast<uint32_t>(slots - 1);
    }
};

bool tokenizer::lookup_merge(int32_t left, int32_t right, std::string& buf, int32_t& id, float& score) const {
    const std::string& a = m_pieces[static_cast<size_t>(left)];
    const std::string& b = m_pieces[static_cast<size_t>(right)];
    if (a.size() + b.size() > m_max_merge_length) return false;
    buf.assign(a).append(b);
    const auto it = m_lookup.find(std::string_view(buf));
    if (it == m_lookup.end()) return false;
    const float s = m_scores[static_cast<size_t>(it->second)];
    if (!(s > tokenizer_min_merge_score)) return false;
    id = it->second;
    score = s;
    return true;
}

int32_t* tokenizer::merge_span(int32_t* first, int32_t* last, merge_scratch& sc) const {
    // Symbols are indexed with int32: a stretch of 2^31 symbols needs a text of over 2 GiB with no
    // barrier symbol (such as a newline) in it.
    assert(last - first < INT32_MAX);
    const auto n = static_cast<int32_t>(last - first);
    if (n < 2) return last;
    auto& sym = sc.symbols;
    auto& heap = sc.heap;
    sym.resize(static_cast<size_t>(n));
    heap.clear();
    for (int32_t k = 0; k < n; ++k) sym[static_cast<size_t>(k)] = {first[k], k - 1, k + 1 < n ? k + 1 : -1, 0};

    const auto push_pair = [&](int32_t l, int32_t r) {
        const symbol& a = sym[static_cast<size_t>(l)];
        const symbol& b = sym[static_cast<size_t>(r)];
        uint32_t h = static_cast<uint32_t>(a.id) * 0x9E3779B1u ^ static_cast<uint32_t>(b.id) * 0x85EBCA77u;
        pair_slot& slot = sc.pairs[(h ^ (h >> 15)) & sc.pair_mask];
        if (slot.left != a.id || slot.right != b.id) {
            slot = {a.id, b.id, -1, 0.0f};
            if (!lookup_merge(a.id, b.id, sc.buf, slot.merged_id, slot.score)) slot.merged_id = -1;
        }
        if (slot.merged_id < 0) return;
        heap.push_back({slot.score, l, r, slot.merged_id, a.version, b.version});
        std::push_heap(heap.begin(), heap.end(), candidate_less{});
    };
    for (int32_t k = 0; k + 1 < n; ++k) push_pair(k, k + 1);

    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), candidate_less{});
        const candidate c = heap.back();
        heap.pop_back();
        symbol& a = sym[static_cast<size_t>(c.left)];
        symbol& b = sym[static_cast<size_t>(c.right)];
        // A symbol's version is unchanged only if it has neither merged nor died since the push, and
        // a symbol's `next` changes only when it merges, so equal versions mean the pair still exists.
        if (a.version != c.left_version || b.version != c.right_version) continue;
        a.id = c.merged_id;
        ++a.version;
        ++b.version;
        a.next = b.next;
        if (b.next >= 0) sym[static_cast<size_t>(b.next)].prev = c.left;
        if (a.prev >= 0) push_pair(a.prev, c.left);
        if (a.next >= 0) push_pair(c.left, a.next);
    }

    // Symbol 0 is always the left side of any merge it takes part in, so it never dies.
    int32_t* out = first;
    for (int32_t k = 0; k >= 0; k = sym[static_cast<size_t>(k)].next) *out++ = sym[static_cast<size_t>(k)].id;
    return out;
}

std::vector<int32_t> tokenizer::encode(std::string_view text, bool bos, bool eos) const {
    return encode_fragments(text, bos, eos, false);
}

std::vector<int32_t> tokenizer::tokenize(std::string_view text, bool add_special, bool parse_special) const {
    return encode_fragments(text, add_special && m_add_bos, add_special && m_add_eos, parse_special);
}

std::vector<tokenizer::fragment> tokenizer::partition_special(std::string_view text, bool parse_special) const {
    std::vector<fragment> frags;
    if (!text.empty()) frags.push_back({-1, 0, text.size()});
    // llama.cpp's order: each special token, longest first, splits every text fragment left so far.
    for (const int32_t id : m_specials) {
        if (!parse_special && m_control[static_cast<size_t>(id)]) continue;
        const std::string spelled = source_piece(id);
        std::vector<fragment> next;
        next.reserve(frags.size());
        for (const fragment& f : frags) {
            if (f.token >= 0 || f.length < spelled.size()) {
                next.push_back(f);
                continue;
            }
            const std::string_view body = text.substr(f.offset, f.length);
            size_t pos = 0;
            for (size_t hit; (hit = body.find(spelled, pos)) != std::string_view::npos; pos = hit + spelled.size()) {
                if (hit > pos) next.push_back({-1, f.offset + pos, hit - pos});
                next.push_back({id, f.offset + hit, spelled.size()});
            }
            if (pos < body.size()) next.push_back({-1, f.offset + pos, body.size() - pos});
        }
        frags.swap(next);
    }
    return frags;
}

std::vector<int32_t> tokenizer::encode_fragments(std::string_view text, bool bos, bool eos, bool parse_special) const {
    std::vector<int32_t> out;
    if (m_pieces.empty()) return out;
    out.reserve(text.size() / 2 + 3);
    if (bos && m_bos >= 0) out.push_back(m_bos);
    for (const fragment& f : partition_special(text, parse_special)) {
        if (f.token >= 0)
            out.push_back(f.token);
        else if (m_kind == tokenizer_kind::byte_bpe)
            encode_bpe(text.substr(f.offset, f.length), out);
        else
            encode_spm(text.substr(f.offset, f.length), out);
    }
    if (eos && m_eos >= 0) out.push_back(m_eos);
    return out;
}

void tokenizer::encode_spm(std::string_view text, std::vector<int32_t>& out) const {
    const size_t begin = out.size();
    if (!text.empty() && m_dummy_prefix >= 0) out.push_back(m_dummy_prefix);

    // run.c's split: a group starts at any byte and takes the continuation bytes that follow, up to
    // four bytes in all; stray or surplus continuation bytes therefore start groups of their own.
    const size_t n = text.size();
    for (size_t i = 0; i < n;) {
        size_t len = 1;
        while (len < 4 && i + len < n && is_continuation(text[i + len])) ++len;
        const std::string_view group = text.substr(i, len);
        if (const int32_t id = find_piece(group); id >= 0) {
            out.push_back(id);
        } else {
            const bool all_bytes = std::all_of(group.begin(), group.end(),
                                               [&](char c) { return m_byte_ids[static_cast<unsigned char>(c)] >= 0; });
            if (all_bytes) {
                for (const char c : group) out.push_back(m_byte_ids[static_cast<unsigned char>(c)]);
            } else if (m_unk >= 0) {
                out.push_back(m_unk);  // no byte fallback: one <unk> per character, as SentencePiece does
            }
        }
        i += len;
    }

    // Merge each stretch between barrier symbols on its own (see finish_load): same result as one
    // pass over the whole text, with small heaps.
    merge_scratch scratch(text.size());
    int32_t* const data = out.data();
    const size_t total = out.size();
    size_t write = begin;
    for (size_t k = begin; k < total;) {
        size_t end = k;
        while (end < total && !m_barrier[static_cast<size_t>(data[end])]) ++end;
        if (end > k) {
            int32_t* merged_end = merge_span(data + k, data + end, scratch);
            write = static_cast<size_t>(std::copy(data + k, merged_end, data + write) - data);
        }
        if (end < total) data[write++] = data[end++];  // the barrier itself
        k = end;
    }
    out.resize(write);
}

}  // namespace sl

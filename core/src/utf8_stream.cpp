// Streaming UTF-8 validation and buffering (Unicode table 3-7 well-formed byte sequences).
#include "sparselens/core/utf8_stream.h"

namespace sl {

namespace {

constexpr std::string_view k_replacement = "\xEF\xBF\xBD";

// Length of the sequence a lead byte starts (0: not a lead byte) and the allowed range of its second byte.
struct lead_info {
    int length;
    unsigned char lo, hi;
};

lead_info lead(unsigned char c) {
    if (c < 0x80) return {1, 0, 0};
    if (c >= 0xC2 && c <= 0xDF) return {2, 0x80, 0xBF};
    if (c == 0xE0) return {3, 0xA0, 0xBF};  // no overlong forms
    if (c == 0xED) return {3, 0x80, 0x9F};  // no surrogates
    if (c >= 0xE1 && c <= 0xEF) return {3, 0x80, 0xBF};
    if (c == 0xF0) return {4, 0x90, 0xBF};
    if (c == 0xF4) return {4, 0x80, 0x8F};  // nothing above U+10FFFF
    if (c >= 0xF1 && c <= 0xF3) return {4, 0x80, 0xBF};
    return {0, 0, 0};
}

}  // namespace

std::string utf8_stream::push(std::string_view bytes) {
    m_pending.append(bytes);
    std::string out;
    out.reserve(m_pending.size());
    const auto* s = reinterpret_cast<const unsigned char*>(m_pending.data());
    const size_t n = m_pending.size();
    size_t i = 0;
    while (i < n) {
        const lead_info li = lead(s[i]);
        if (li.length == 0) {
            out += k_replacement;
            ++i;
            continue;
        }
        if (li.length == 1) {
            out += static_cast<char>(s[i++]);
            continue;
        }
        // Check the bytes that are here; the maximal valid prefix of a broken sequence is one U+FFFD.
        size_t k = 1;
        bool broken = false;
        for (; k < static_cast<size_t>(li.length) && i + k < n; ++k) {
            const unsigned char lo = k == 1 ? li.lo : 0x80, hi = k == 1 ? li.hi : 0xBF;
            if (s[i + k] < lo || s[i + k] > hi) {
                broken = true;
                break;
            }
        }
        if (broken) {
            out += k_replacement;
            i += k;
            continue;
        }
        if (k < static_cast<size_t>(li.length)) break;  // incomplete at the end: wait for more bytes
        out.append(m_pending, i, k);
        i += k;
    }
    m_pending.erase(0, i);
    return out;
}

std::string utf8_stream::flush() {
    std::string out = m_pending.empty() ? "" : std::string(k_replacement);
    m_pending.clear();
    return out;
}

}  // namespace sl

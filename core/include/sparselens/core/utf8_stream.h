// Streaming UTF-8 decoding of token pieces: a character split across tokens (byte tokens such as <0xE2>, or
// byte-level BPE pieces that end mid-character) is held back until it is complete, never shown as U+FFFD halves.
#pragma once

#include <string>
#include <string_view>

namespace sl {

class utf8_stream {
public:
    // Appends bytes and returns the text that is now complete: whole, valid UTF-8 characters. A byte
    // that cannot be part of a valid character (stray continuation, overlong or surrogate form, a
    // sequence cut short by a new lead byte) becomes U+FFFD; an incomplete character at the end waits.
    std::string push(std::string_view bytes);
    // What is still held back (an incomplete character), as U+FFFD; the stream is empty afterwards.
    std::string flush();
    bool pending() const { return !m_pending.empty(); }

private:
    std::string m_pending;
};

}  // namespace sl

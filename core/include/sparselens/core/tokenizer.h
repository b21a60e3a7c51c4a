// Tokenizers: SentencePiece-style BPE (llama2.c run.c semantics, GGUF 'llama') and GPT-2 byte-level BPE (GGUF 'gpt2').
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sparselens/core/model.h"
#include "sparselens/core/result.h"

namespace sl {

// SentencePiece token types, numbered as in GGUF tokenizer.ggml.token_type.
enum class token_type : int32_t {
    undefined = 0,
    normal = 1,
    unknown = 2,
    control = 3,
    user_defined = 4,
    unused = 5,
    byte = 6,
};

// Which algorithm a vocabulary uses: GGUF tokenizer.ggml.model "llama" or "gpt2".
enum class tokenizer_kind { sentencepiece, byte_bpe };

// Pairs whose merged piece scores at or below this are never merged (run.c starts its search at -1e10).
inline constexpr float tokenizer_min_merge_score = -1e10f;

// Immutable after loading; encode/decode are const and safe to call from several threads.
//
// Both file flavours are held the same way: pieces use a plain ' ' for spaces (GGUF's U+2581 is
// converted on load and restored by source_piece()), byte tokens are pieces spelled "<0xNN>".
// Only normal/user-defined pieces can be produced from text: control, unknown, unused and byte
// tokens are never matched or merged into (run.c matches every piece, but no real vocabulary can
// reach its special pieces through merges, and this keeps "<0x0A>" in a text from becoming '\n').
class tokenizer {
public:
    tokenizer() = default;

    // llama2.c tokenizer.bin: int32 max_token_length, then vocab_size records of
    // {float32 score, int32 length, length bytes}. Trailing bytes after vocab_size records are ignored,
    // as llama2.c does. Ids 0/1/2 are <unk>/BOS/EOS.
    static result<tokenizer> from_llama2c_file(const std::string& path, int32_t vocab_size);
    // Same, reading records until the end of the file to find vocab_size.
    static result<tokenizer> from_llama2c_file(const std::string& path);
    // In-memory variant; vocab_size < 0 means "read until the end". `name` prefixes error messages.
    static result<tokenizer> from_llama2c_bytes(std::span<const uint8_t> bytes, const std::string& name,
                                                int32_t vocab_size);
    // GGUF tokenizer.ggml.*; `source` (the model path) prefixes error messages. Byte-level BPE needs
    // merges that only name pieces of the vocabulary and a known pre-tokenizer (tokenizer.ggml.pre).
    static result<tokenizer> from_embedded_vocab(const embedded_vocab& vocab, const std::string& source);
    // The vocabulary of a GGUF file alone (weights are not read; a vocab-only file is fine).
    static result<tokenizer> from_gguf_file(const std::string& path);

    // llama.cpp's llama_tokenize(): BOS/EOS as the vocabulary's add_bos/add_eos say when add_special,
    // control tokens spelled in the text become those tokens only when parse_special (user-defined
    // tokens always do), and the text between them goes through the vocabulary's algorithm.
    std::vector<int32_t> tokenize(std::string_view text, bool add_special, bool parse_special) const;

    // run.c encode(): optional BOS, a dummy-prefix " " token for non-empty text, UTF-8 code points
    // (byte fallback for those not in the vocabulary), then greedy highest-score merges (ties: leftmost).
    // Where run.c is undefined or merely lucky, this differs: BOS never takes part in merges; byte
    // tokens are found by their "<0xNN>" spelling, and a character lacking any of them becomes one
    // <unk> (dropped if there is no <unk>); " " missing from the vocabulary falls back to <0x20>.
    // O(n log n): a heap of candidate pairs over a linked list, identical to run.c's rescanning loop.
    // For byte-level BPE vocabularies encode() is tokenize() with explicit BOS/EOS and no special parsing.
    std::vector<int32_t> encode(std::string_view text, bool bos, bool eos) const;

    // run.c decode(): the piece of `token`, without its leading space when prev_token is BOS;
    // byte tokens become their raw byte. Out-of-range ids give an empty view. The view stays valid
    // as long as the tokenizer lives.
    std::string_view decode(int32_t prev_token, int32_t token) const;
    // The text of a token sequence: control tokens (BOS/EOS) are dropped, byte tokens reassemble
    // multi-byte characters, and the dummy-prefix space encode() adds is removed, so that
    // decode_all(encode(x, ...)) == x whenever every byte of x has a piece or a byte token.
    std::string decode_all(std::span<const int32_t> tokens) const;
    // llama.cpp's llama_token_to_piece(): the text one token stands for (bytes for byte tokens, which may
    // be part of a UTF-8 character); control and unknown tokens give their spelling only when `special`.
    std::string_view token_text(int32_t token, bool special) const;
    // run.c safe_printf(): false for empty pieces and for single bytes that are neither printable
    // ASCII nor whitespace (stray bytes of a broken UTF-8 sequence, control characters).
    static bool is_printable_piece(std::string_view piece);
    // Whether a generated token's piece (from decode()) belongs in the shown text, to be fed through a
    // utf8_stream: run.c's rule for single bytes, except that bytes >= 0x80 are parts of characters;
    // control tokens of byte-level BPE vocabularies (<|eot_id|> ...) are not text.
    bool shown_in_text(int32_t token, std::string_view piece) const;

    int32_t vocab_size() const { return static_cast<int32_t>(m_pieces.size()); }
    int32_t bos_id() const { return m_bos; }  // -1 when the vocabulary has none
    int32_t eos_id() const { return m_eos; }
    int32_t eot_id() const { return m_eot; }  // end of turn (chat models), -1 when none
    // True for ids that end generation: EOS or EOT.
    bool is_end_of_generation(int32_t id) const { return id >= 0 && (id == m_eos || id == m_eot); }
    bool adds_bos() const { return m_add_bos; }
    bool adds_eos() const { return m_add_eos; }
    tokenizer_kind kind() const { return m_kind; }
    const std::string& pre_tokenizer() const { return m_pre; }  // BPE pre-tokenizer name, "" for SentencePiece
    const std::string& chat_template() const { return m_chat_template; }
    int32_t unk_id() const { return m_unk; }
    // Longest piece in bytes (for llama2.c files: the actual longest, which the header only bounds).
    int32_t max_token_length() const { return m_max_token_length; }
    bool valid_id(int32_t id) const { return id >= 0 && id < vocab_size(); }
    // Pieces as held internally (spaces as ' '); empty for out-of-range ids.
    std::string_view piece(int32_t id) const;
    // Pieces as spelled in the file they came from (U+2581 for GGUF vocabularies).
    std::string source_piece(int32_t id) const;
    float score(int32_t id) const;  // NaN scores were replaced by -inf on load
    // Control or unknown, or spelled like an end-of-turn/FIM marker (which llama.cpp treats as control).
    bool is_control(int32_t id) const;
    token_type type(int32_t id) const;
    // Id of a piece that text can produce (normal/user-defined), or -1.
    int32_t find_piece(std::string_view piece) const;
    // Byte-fallback token for a byte, or -1 when the vocabulary has none.
    int32_t byte_token(uint8_t byte) const { return m_byte_ids[byte]; }
    // The byte a token stands for, or -1 when it is not a byte token.
    int32_t token_byte(int32_t id) const;
    // The token encode() prepends to non-empty text (" " or the <0x20> byte), or -1 for none.
    int32_t dummy_prefix_id() const { return m_dummy_prefix; }
    // True when the vocabulary came from GGUF and spells spaces as U+2581.
    bool uses_space_marker() const { return m_space_marker; }

private:
    struct string_hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
    };
    using piece_map = std::unordered_map<std::string, int32_t, string_hash, std::equal_to<>>;

    struct merge_scratch;  // reusable buffers of one encode() call
    struct bpe_state;      // byte-level BPE: compiled pre-tokenizer regexes, merge ranks (tokenizer_bpe.cpp)

    // A stretch of the input: raw text, or one special token found in it.
    struct fragment {
        int32_t token;  // -1 for text
        size_t offset;
        size_t length;
    };
    std::vector<fragment> partition_special(std::string_view text, bool parse_special) const;
    std::vector<int32_t> encode_fragments(std::string_view text, bool bos, bool eos, bool parse_special) const;
    // Appends the SentencePiece tokens of one text fragment (dummy prefix included).
    void encode_spm(std::string_view text, std::vector<int32_t>& out) const;
    // Appends the byte-level BPE tokens of one text fragment.
    void encode_bpe(std::string_view text, std::vector<int32_t>& out) const;
    // Sets up byte-level BPE from a GGUF 'gpt2' vocabulary (pieces, lookup, merges, pre-tokenizer).
    outcome load_bpe(const embedded_vocab& v, const std::string& source);
    // Special tokens (control, user-defined, unknown) longest first, as llama.cpp matches them.
    void collect_specials();

    static constexpr std::array<int32_t, 256> no_byte_ids() {
        std::array<int32_t, 256> a{};
        a.fill(-1);
        return a;
    }

    std::string_view spelling(size_t id) const { return m_source_pieces.empty() ? m_pieces[id] : m_source_pieces[id]; }
    // Fills the derived tables (lookup map, byte ids, dummy prefix, merge barriers) from the pieces.
    void finish_load();
    // Merges the initial symbols [first, last) in place; returns the new end.
    int32_t* merge_span(int32_t* first, int32_t* last, merge_scratch& scratch) const;
    // Id and score of the piece concatenating two tokens' pieces, if it may be merged into.
    bool lookup_merge(int32_t left, int32_t right, std::string& buf, int32_t& id, float& score) const;

    std::vector<std::string> m_pieces;
    std::vector<std::string> m_source_pieces;  // GGUF spelling; empty for llama2.c files
    std::vector<float> m_scores;
    std::vector<token_type> m_types;
    std::vector<int16_t> m_byte_value;   // per id: 0..255 for byte tokens, -1 otherwise
    std::vector<uint8_t> m_barrier;      // per id: no mergeable piece starts or ends with this piece
    piece_map m_lookup;                  // normal/user-defined pieces -> first id with that piece
    std::array<int32_t, 256> m_byte_ids = no_byte_ids();
    int32_t m_bos = -1;
    int32_t m_eos = -1;
    int32_t m_unk = -1;
    int32_t m_dummy_prefix = -1;
    int32_t m_eot = -1;
    bool m_add_bos = true;
    bool m_add_eos = false;
    tokenizer_kind m_kind = tokenizer_kind::sentencepiece;
    std::string m_pre;
    std::string m_chat_template;
    std::vector<int32_t> m_specials;
    std::vector<uint8_t> m_control;  // per id: see is_control()
    std::shared_ptr<const bpe_state> m_bpe;
    int32_t m_max_token_length = 0;
    size_t m_max_merge_length = 0;       // longest piece a merge can produce
    bool m_space_marker = false;
};

}  // namespace sl

// Vocabulary import: Hugging Face tokenizer.json (+ tokenizer_config.json) or a llama2.c tokenizer.bin into GGUF
// tokenizer metadata as llama.cpp's converter writes it, and vocab-only GGUF files that llama.cpp can load.
#pragma once

#include <string>

#include "sparselens/core/model.h"
#include "sparselens/core/result.h"
#include "sparselens/core/tokenizer.h"

namespace sl {

struct vocab_import_params {
    std::string tokenizer_json;  // tokenizer.json (required)
    std::string config_json;     // tokenizer_config.json (optional: special tokens, add_bos, chat_template)
    std::string pre = "default";  // tokenizer.ggml.pre for byte-level BPE vocabularies
};

// BPE vocabularies with byte_fallback (Gemma's SentencePiece exported to tokenizer.json) become
// 'llama' vocabularies (pieces with U+2581, <0xNN> byte tokens, scores from the merge ranks, no dummy
// prefix); the others become 'gpt2' byte-level BPE vocabularies with their merges. Added tokens are
// control tokens when special (or spelled like one, as the converter decides), user-defined otherwise.
result<embedded_vocab> vocab_from_tokenizer_json(const vocab_import_params& p);

// A llama2.c tokenizer (e.g. the Llama-2 32k vocabulary) as a 'llama' GGUF vocabulary.
embedded_vocab vocab_from_tokenizer(const tokenizer& t);

// Writes a vocab-only GGUF: general.architecture = llama, minimal hyper-parameters, no tensors, and
// the vocabulary's tokenizer.* keys. Returns the file size.
result<uint64_t> vocab_write_gguf(const embedded_vocab& v, const std::string& path, const std::string& name);

}  // namespace sl

// GGUF tokenizer metadata (tokenizer.ggml.*, tokenizer.chat_template) read into an embedded_vocab.
#pragma once

#include <cstdint>

#include "sparselens/core/gguf.h"
#include "sparselens/core/model.h"
#include "sparselens/core/result.h"

namespace sl {

// Reads the vocabulary keys of `g` into `v`. vocab_size >= 0 requires that many tokens (the model's
// embedding rows); -1 accepts any count (vocab-only files). A file with no tokenizer.ggml.tokens leaves
// `v` empty. Errors name the file and the key.
outcome read_gguf_vocab(const gguf_file& g, int64_t vocab_size, embedded_vocab& v);

}  // namespace sl

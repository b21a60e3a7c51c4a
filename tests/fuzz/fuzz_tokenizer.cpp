// libFuzzer target: llama2.c tokenizer files (tok512.bin / tokenizer.bin style), then encode/decode with
// whatever vocabulary loaded.
#include "fuzz_common.h"
#include "sparselens/core/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto tok = sl::tokenizer::from_llama2c_bytes({data, size}, "fuzz.bin", -1);
    if (!tok) return 0;
    // A fixed count too (the model header's vocab_size), smaller than what the file holds.
    (void)sl::tokenizer::from_llama2c_bytes({data, size}, "fuzz.bin", tok->vocab_size() / 2);
    const std::vector<int32_t> ids = tok->encode(" Once upon a time,\n\xc3\xa9t\xc3\xa9 \xf0\x9f\x99\x82 <s>\x80", true, true);
    for (int32_t id : ids)
        if (!tok->valid_id(id)) __builtin_trap();  // encode only ever produces ids of the vocabulary
    (void)tok->decode_all(ids);
    int32_t prev = tok->bos_id();
    for (int32_t id = 0; id < tok->vocab_size(); ++id) {
        (void)tok->decode(prev, id);
        (void)tok->source_piece(id);
        (void)tok->token_byte(id);
        prev = id;
    }
    return 0;
}

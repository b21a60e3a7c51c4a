// libFuzzer target: GGUF files: the reader (metadata, tensor index, data ranges), then for files that
// parse, the model loader and the embedded tokenizer built from them.
#include "fuzz_common.h"
#include "sparselens/core/gguf.h"
#include "sparselens/core/model.h"
#include "sparselens/core/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto g = sl::gguf_file::open_memory("fuzz.gguf", std::vector<uint8_t>(data, data + size));
    if (!g) return 0;
    volatile uint8_t sink = 0;
    for (const sl::gguf_kv& kv : g->kvs()) {
        (void)kv.value.to_display();
        if (kv.value.is_array() && kv.value.count > 0) {
            (void)kv.value.int_at(kv.value.count - 1);
            (void)kv.value.float_at(kv.value.count - 1);
        }
    }
    // The reader promises every tensor's byte range lies inside the file: touch both ends.
    for (const sl::gguf_tensor_info& t : g->tensors()) {
        const uint8_t* p = g->tensor_data(t);
        if (t.bytes) sink = sink + p[0] + p[t.bytes - 1];
    }
    auto m = sl::model_load(sl::fuzz::scratch_file(data, size, ".gguf"));
    if (m && !m->vocab.tokens.empty()) {
        auto tok = sl::tokenizer::from_embedded_vocab(m->vocab, "fuzz.gguf");
        if (tok) (void)tok->decode_all(tok->encode("Once upon a time, \xc3\xa9t\xc3\xa9 \xf0\x9f\x99\x82", true, true));
    }
    return 0;
}

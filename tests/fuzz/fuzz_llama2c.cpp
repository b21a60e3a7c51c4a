// libFuzzer target: llama2.c model files (legacy v0 checkpoints and the v2 "ak42" Q8_0 export) through
// model_load, the entry point the CLI and GUI use. GGUF inputs are left to fuzz_gguf.
#include "fuzz_common.h"
#include "sparselens/core/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size >= 4 && std::memcmp(data, "GGUF", 4) == 0) return 0;
    auto m = sl::model_load(sl::fuzz::scratch_file(data, size, ".bin"));
    if (!m) return 0;
    // A loaded model's views must lie inside what the loader keeps alive: read the last weight byte.
    volatile uint8_t sink = 0;
    if (m->tok_embd.data && m->tok_embd.bytes() > 0)
        sink = static_cast<const uint8_t*>(m->tok_embd.data)[m->tok_embd.bytes() - 1];
    if (m->output.data && m->output.bytes() > 0)
        sink = sink + static_cast<const uint8_t*>(m->output.data)[m->output.bytes() - 1];
    return 0;
}

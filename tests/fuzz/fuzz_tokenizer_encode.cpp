// libFuzzer target: text -> tokenizer encode/decode with real vocabularies (the shared tok512.bin and
// Llama-2 32k tokenizer.bin when present, plus a built-in byte-fallback vocabulary). The first input byte
// picks the vocabulary, the rest is the text. Checks encode's documented contract: ids are in range and
// decode_all(encode(x)) == x when every byte has a byte token.
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "fuzz_common.h"
#include "sparselens/core/tokenizer.h"

namespace {

void put_i32(std::vector<uint8_t>& b, int32_t v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + 4);
}

// <unk>, <s>, </s>, the 256 byte tokens, then a few merges: a vocabulary that needs no fixtures.
sl::tokenizer builtin_vocab() {
    std::vector<std::string> pieces = {"<unk>", "<s>", "</s>"};
    char buf[8];
    for (int b = 0; b < 256; ++b) {
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        pieces.emplace_back(buf);
    }
    for (const char* p : {" ", "e", "t", "th", " t", " th", "the", " the", "he", "in", " a", "an", "\xc3\xa9"})
        pieces.emplace_back(p);
    std::vector<uint8_t> file;
    put_i32(file, 8);
    for (size_t i = 0; i < pieces.size(); ++i) {
        const float score = i < 259 ? 0.0f : -static_cast<float>(i);
        const auto* s = reinterpret_cast<const uint8_t*>(&score);
        file.insert(file.end(), s, s + 4);
        put_i32(file, static_cast<int32_t>(pieces[i].size()));
        file.insert(file.end(), pieces[i].begin(), pieces[i].end());
    }
    auto t = sl::tokenizer::from_llama2c_bytes(file, "builtin", -1);
    if (!t) std::abort();
    return std::move(*t);
}

std::vector<sl::tokenizer> load_vocabularies() {
    std::vector<sl::tokenizer> v;
    v.push_back(builtin_vocab());
    const char* env = std::getenv("SPARSELENS_SHARED_DIR");
    const std::filesystem::path dir = std::filesystem::path(env ? env : SPARSELENS_SHARED_DIR_DEFAULT) / "models";
    for (const char* name : {"tok512.bin", "tokenizer_llama2_32k.bin"}) {
        auto t = sl::tokenizer::from_llama2c_file((dir / name).string());
        if (t) v.push_back(std::move(*t));
    }
    return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::vector<sl::tokenizer> vocabs = load_vocabularies();
    if (size == 0) return 0;
    const sl::tokenizer& tok = vocabs[data[0] % vocabs.size()];
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    const std::vector<int32_t> ids = tok.encode(text, (data[0] & 0x10) != 0, (data[0] & 0x20) != 0);
    for (int32_t id : ids)
        if (!tok.valid_id(id)) __builtin_trap();
    bool all_bytes = true;
    for (int b = 0; b < 256; ++b) all_bytes = all_bytes && tok.byte_token(static_cast<uint8_t>(b)) >= 0;
    const std::string back = tok.decode_all(ids);
    if (all_bytes && back != text) __builtin_trap();
    return 0;
}

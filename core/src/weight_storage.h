// Private: what keeps a model's weight views alive (the file mapping and any converted copies).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "mapped_file.h"
#include "sparselens/core/model.h"

namespace sl {

struct weight_storage {
    std::shared_ptr<const mapped_file> file;  // views into the file point here

    // A 64-byte aligned buffer owned by the storage; nullptr when the allocation fails.
    uint8_t* alloc(uint64_t bytes) {
        const uint64_t rounded = (bytes + 63) / 64 * 64;
        void* p = rounded ? std::aligned_alloc(64, rounded) : nullptr;
        if (!p) return nullptr;
        m_buffers.emplace_back(static_cast<uint8_t*>(p));
        m_owned_bytes += rounded;
        return static_cast<uint8_t*>(p);
    }
    uint64_t owned_bytes() const { return m_owned_bytes; }
    // Hands back the resident pages of a view into the file mapping (mapped_file::release); true when
    // they went (false for converted copies and unmapped files: the bytes stay resident).
    bool release(const tensor_view& w) const {
        return file && file->release(w.data, static_cast<uint64_t>(w.bytes()));
    }

private:
    struct free_deleter {
        void operator()(uint8_t* p) const { std::free(p); }
    };
    std::vector<std::unique_ptr<uint8_t, free_deleter>> m_buffers;
    uint64_t m_owned_bytes = 0;
};

// Reports load progress and turns a `false` from the user's callback into a cancelled error.
struct load_progress {
    const progress_fn* fn = nullptr;
    std::string path;
    float base = 0.0f, scale = 1.0f;  // report(f) tells the caller base + scale * f

    bool report(float fraction) const { return !fn || !*fn || (*fn)(base + scale * fraction); }
    error cancelled() const { return error{path + ": load cancelled", true}; }
};

// Format-specific loaders behind model_load(); `file` is already open.
result<model> load_gguf_model(std::shared_ptr<const mapped_file> file, const load_progress& progress);
result<model> load_llama2c_model(std::shared_ptr<const mapped_file> file, const load_progress& progress);
result<model> load_llama2c_q80_model(std::shared_ptr<const mapped_file> file, const load_progress& progress);

// Shared sanity limits for hyper-parameters: generous for real Llama models, small enough that no
// product of them can overflow 64-bit size arithmetic.
inline constexpr int64_t k_max_dim = 1 << 16;
inline constexpr int64_t k_max_hidden = 1 << 18;
inline constexpr int64_t k_max_layers = 1024;
inline constexpr int64_t k_max_heads = 1024;
inline constexpr int64_t k_max_head_dim = 1024;
inline constexpr int64_t k_max_vocab = 1 << 22;
inline constexpr int64_t k_max_seq_len = 1 << 24;

// Checks the relations every loader relies on (dim % n_heads, GQA, even head_dim, bounds);
// returns an empty string when valid, else the problem.
std::string validate_hparams(const model_hparams& hp);

}  // namespace sl

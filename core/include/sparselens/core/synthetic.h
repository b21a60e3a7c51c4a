// Synthetic GGUF models with random weights (llama, llama3, qwen2, qwen3, phi3, gemma2, gemma), for benchmarks at
// real-model shapes and for parity tests against llama.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparselens/core/model.h"
#include "sparselens/core/result.h"
#include "sparselens/kernels/types.h"

namespace sl {

struct synthetic_params {
    std::string path;            // output .gguf (written via path + ".partial", then renamed)
    std::string shape = "tiny";  // one of synthetic_shape_names()
    std::string arch = "llama";  // one of synthetic_arch_names(); "llama" writes the same bytes as before
                                 // architectures existed, the others jitter norm weights around 1
    dtype type = dtype::f32;     // weight matrices incl. token_embd; norms are always F32. A matrix whose
                                 // row length is not a multiple of 32 falls back to F32 for q8_0/q4_0.
    int32_t vocab = 0;           // 0: the shape's default vocabulary size
    uint64_t seed = 42;
    progress_fn progress;        // fraction of tensor bytes written; returning false cancels
};

synthetic_params synthetic_default_params();

// Shapes:
//   tiny            dim 64,   hidden 172,   5 layers,  8/4 heads, vocab 512,   ctx 512,  theta 1e4, tied output
//   small           dim 256,  hidden 768,   4 layers,  4/2 heads, vocab 512,   ctx 4096, theta 1e4 (per arch)
//   llama-1b        dim 2048, hidden 8192,  16 layers, 32/8 heads, vocab 32000, ctx 2048, theta 5e5, tied output
//                   (Llama-3.2-1B; its real vocabulary is 128256 -- pass vocab = 128256 for the exact shape.
//                   The 32000 default keeps the file at ~4.2 GB in f32 instead of ~5 GB, and the
//                   embedding/logit cost proportionate for sparsity benchmarks, which target the MLP.)
//   llama-8b-layer  dim 4096, hidden 14336, 1 layer,   32/8 heads, vocab 32000, ctx 8192, theta 5e5, untied
//   llama-8b-4layer the same with 4 layers
//   small-512       dim 512,  hidden 1536,  4 layers,  8/4 heads, vocab 1024,  ctx 512,  theta 1e4, untied
//                   (every row a multiple of 256: llama.cpp quantizes it to K-quants without fallbacks)
//   qwen3-0.6b-mini dim 256,  hidden 768,   4 layers,  4/2 heads of 128 (q = 2 x dim, as Qwen3-0.6B), vocab 512
//   gemma2-2b-mini  dim 768,  hidden 1536,  4 layers,  2/1 heads of 256 (q < dim, as Gemma-2-2B), vocab 512
std::vector<std::string> synthetic_shape_names();

// Architectures: llama (plain), llama3 (rope_freqs.weight from llama3 scaling, untied), qwen2 (q/k/v biases),
// qwen3 (q/k norms), phi3 (fused attn_qkv and gate||up ffn_up, long/short RoPE factors), gemma2 (GeGLU,
// post-norms, soft-caps 10/5, sliding window 16 on even layers, no output.weight), gemma (GeGLU, embedding
// scale, no output.weight).
std::vector<std::string> synthetic_arch_names();
std::string synthetic_arch_names_text();  // comma-separated, for messages

// Hyper-parameters of a named shape (vocab override applied when > 0).
result<model_hparams> synthetic_shape(const std::string& shape, int32_t vocab = 0);

struct synthetic_summary {
    std::string path;
    model_hparams hp;
    bool tied_output = false;
    int32_t n_tensors = 0;
    uint64_t file_bytes = 0;
};

// Writes the model tensor by tensor, generating rows on the fly (memory use is a few MB whatever the
// shape). Weights ~ N(0, 1/in) (fan-in scaled, so activations keep unit scale), norms = 1, and a
// minimal SentencePiece-style vocabulary (<unk>, <s>, </s>, 256 byte tokens, then letter pieces).
// Deterministic: the same params give the same bytes.
result<synthetic_summary> synthetic_write(const synthetic_params& params);

}  // namespace sl

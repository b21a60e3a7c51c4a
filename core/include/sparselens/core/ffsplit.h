// FFSplit: split each MLP into heavy-hitter neurons (kept exact) and the rest (compressed); a model transform.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparselens/core/calibration.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/model.h"
#include "sparselens/core/result.h"
#include "sparselens/kernels/sparse.h"

namespace sl {

// FFSplit changes the weights once, so it comes in two forms over one split (same heavy neurons, same
// ranks, same factors):
//  - the method "ffsplit" in the registry (make_method): it owns an ffsplit_weights, the compact split
//    representation, and the engine executes it (method_traits::split_mlp): heavy rows with the dense
//    kernels, the light part as a low-rank GEMV pair per matrix (svd) or Q4_0 GEMVs (q4). Accuracy,
//    decode speed and the bytes are those of what runs. This is what eval, sweep, tune, configs and
//    the GUI use.
//  - ffsplit_transform(): a model whose MLP tensors hold the reconstructed split weights densely in
//    F32, for analysis and as the tests' reference for the kernel path (its bytes are computed, its
//    speed is that of a dense F32 model):
//
//   auto split = ffsplit_transform(m, cal, params);            // m: the original model
//   auto ctx = context::create(split->m);
//   auto dense = make_method({.name = "dense"}, split->m, nullptr);
//   auto r = eval_method(*ctx, reference_of_m, **dense, nullptr, eval_params);
struct ffsplit_params {
    // "svd": the light part of W_gate, W_up (rows) and W_down (columns) each replaced by its best
    //        rank-r approximation (truncated SVD), the paper's main variant.
    // "q4":  the light neurons' gate rows, up rows and down columns re-encoded as Q4_0 (blocks of 32
    //        along dim; needs dim % 32 == 0), the paper's low-bit variant.
    std::string mode = "svd";
    float heavy_fraction = 0.1f;  // share of neurons per layer kept exact (calibration heavy hitters)
    float density = 0.5f;         // svd: target MLP bytes / dense MLP bytes, which sets the rank
    int32_t rank = -1;            // svd: >= 0 overrides density with this rank for every light matrix
    progress_fn progress;         // fraction of layers done; false cancels
};

ffsplit_params ffsplit_default_params();
// mode = cfg.ffsplit_mode, heavy_fraction = cfg.ffsplit_heavy, density = cfg.density, rank = cfg.rank
// when > 0 (svd), else -1 (the rank follows from density).
ffsplit_params ffsplit_params_from_config(const method_config& cfg);

struct ffsplit_layer_report {
    int32_t n_heavy = 0;
    int32_t rank = 0;             // svd: rank of each light matrix; q4: 0
    uint64_t dense_bytes = 0;     // gate + up + down as stored in the source model
    uint64_t split_bytes = 0;     // heavy exact + compressed light part
    float heavy_share = 0.0f;     // share of the calibration heavy-hitter score the heavy neurons hold
    float rel_error[3] = {};      // ||W - W'||_F / ||W||_F of gate, up, down
};

struct ffsplit_model {
    model m;  // the original network with every layer's w_gate / w_up / w_down replaced (F32, owned)
    std::string mode;
    float heavy_fraction = 0.0f;
    std::vector<std::vector<int32_t>> heavy;  // per layer, sorted ascending
    std::vector<ffsplit_layer_report> layers;
    uint64_t mlp_dense_bytes = 0, mlp_split_bytes = 0;
    uint64_t model_dense_bytes = 0, model_split_bytes = 0;  // every weight tensor (embeddings once if tied)
    bool randomized_svd = false;  // some light matrix exceeded the exact-SVD size (see docs/methods.md)
    double seconds = 0.0;

    double mlp_density() const {
        return mlp_dense_bytes ? static_cast<double>(mlp_split_bytes) / static_cast<double>(mlp_dense_bytes) : 1.0;
    }
};

// Bytes of the split representation of one layer's MLP (what ffsplit_layer_report::split_bytes holds):
//   heavy: n_heavy * dim * (e_gate + e_up + e_down), e_t = bytes per element of type t in the source;
//   svd:   + rank * (n_light + dim) * (e_gate + e_up + e_down)   (factors U_r S_r and V_r^T of each
//          light matrix, at the source element size);
//   q4:    + n_light * dim * 3 * 18 / 32                        (Q4_0 blocks).
uint64_t ffsplit_layer_bytes(const layer_weights& lw, int64_t dim, int64_t n_heavy, int64_t n_light,
                             const std::string& mode, int64_t rank);

// Errors: unknown mode, fractions outside [0, 1], a calibration for another model shape, q4 with dim
// not a multiple of 32, cancellation. Keeps the original model's storage alive (shared).
result<ffsplit_model> ffsplit_transform(const model& m, const calibration& cal, const ffsplit_params& params);

// One layer's split MLP as the engine executes it (core/src/context_split.cpp). Light neuron k is
// light[k]; factors hold the light part only:
//   svd: gate[light] ~ gate_a [n_light, r] * gate_b [r, dim]   (t = gate_b x, then gate_a t), same for up;
//        down[:, light] ~ down_a [dim, r] * down_b [r, n_light] (t = down_b glu_light, then down_a t).
//   q4:  gate_q4, up_q4 [n_light, dim] Q4_0 rows; down_q4 [n_light, dim] Q4_0, input-major (down columns).
// Heavy rows are copied in the source type; heavy down columns are input-major in the source type
// (exact for F32/F16/BF16; Q8_0/Q4_0 sources are re-quantised along dim, like the CHESS layouts).
struct ffsplit_layer_weights {
    std::vector<int32_t> heavy, light;  // sorted, disjoint, together [0, hidden)
    std::vector<int32_t> iota;          // 0 .. max(n_heavy, n_light) - 1: the "all rows" index list
    int64_t rank = 0;                   // svd
    kernels::owned_matrix gate_heavy, up_heavy, down_heavy;
    kernels::owned_matrix gate_a, gate_b, up_a, up_b, down_a, down_b;  // svd
    kernels::owned_matrix gate_q4, up_q4, down_q4;                     // q4
    uint64_t dense_bytes[3] = {};  // gate, up, down as stored in the source model
    uint64_t split_bytes[3] = {};  // the views this struct holds, per matrix (the bytes a token reads)
};

struct ffsplit_weights {
    std::string mode;
    float heavy_fraction = 0.0f;
    std::vector<ffsplit_layer_weights> layers;
    bool randomized_svd = false;
    uint64_t mlp_dense_bytes() const;
    uint64_t mlp_split_bytes() const;
};

// Builds the compact split of every layer (same validation and errors as ffsplit_transform).
result<std::shared_ptr<const ffsplit_weights>> ffsplit_build(const model& m, const calibration& cal,
                                                             const ffsplit_params& params);

}  // namespace sl

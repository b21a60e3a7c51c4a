// The sparsity-method interface: per layer and token, which parts of the weights take part.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace sl {

struct ffsplit_layer_weights;  // ffsplit.h

// A set of active indices over [0, n): either everything or a sorted, duplicate-free list.
struct index_mask {
    bool all = true;
    std::vector<int32_t> idx;

    void set_all() {
        all = true;
        idx.clear();
    }
    void set_none() {
        all = false;
        idx.clear();
    }
    int64_t count(int64_t n) const { return all ? n : static_cast<int64_t>(idx.size()); }
    float density(int64_t n) const { return n > 0 ? static_cast<float>(count(n)) / static_cast<float>(n) : 1.0f; }
    bool contains(int32_t i) const;  // binary search; true for all
};

// The seven projections of a layer.
enum class proj : uint8_t { q = 0, k, v, o, gate, up, down };
inline constexpr int proj_count = 7;
const char* proj_name(proj p);

// Everything a method decided for one layer and one token. The engine executes exactly this.
//   q/k/v/o_in : input channels of the attention projections (TEAL, CHESS w/)
//   gate_in/up_in : input channels of gate/up (DIP, TEAL)
//   neurons_pre : GLU neurons computed at all, decided from the MLP input (GRIFFIN, predictors)
//   neurons_post : neurons whose second matrix (up, or gate for up-first methods) is computed, decided
//                  from the first matrix's output (CATS, CHESS, gate/up pruning)
//   down_in : down-projection input channels (GLU pruning, DIP, TEAL)
// A neuron contributes to the output only if it is in neurons_pre, neurons_post and down_in.
struct layer_masks {
    index_mask q_in, k_in, v_in, o_in;
    index_mask gate_in, up_in;
    index_mask neurons_pre, neurons_post;
    index_mask down_in;

    void reset();
};

// Fraction of each projection's weights a token read, from its masks (1 = dense).
struct layer_density {
    float d[proj_count] = {1, 1, 1, 1, 1, 1, 1};
    float mlp() const;        // weighted mean over gate, up, down (equal sizes)
    float attention(int64_t q_dim, int64_t kv_dim) const;  // weighted by q/k/v/o sizes (model_hparams::q_dim())
};
// o_dim: width of the o projection's input (model_hparams::q_dim()); 0 = dim.
layer_density masks_density(const layer_masks& m, int64_t dim, int64_t hidden, bool up_first, int64_t o_dim = 0);

// What a method reads besides activations. `resident` is the per-layer cache state (1 = unit in DRAM)
// that DIP-CA re-weights by; null when no cache is simulated.
struct token_info {
    int32_t layer = 0;
    int32_t pos = 0;
    bool in_prompt = false;
    const uint8_t* resident_inputs = nullptr;   // [dim]: gate/up input columns cached (DIP-CA)
    const uint8_t* resident_neurons = nullptr;  // [hidden]: down columns / neuron bundles cached
};

// Which hooks a method uses; the engine skips the others and prepares weight layouts accordingly.
struct method_traits {
    bool attn_inputs = false;   // select_attn_inputs (q/k/v)
    bool o_input = false;       // select_o_input
    bool mlp_inputs = false;    // select_mlp_inputs sets gate_in / up_in
    // ... and always sets up_in equal to gate_in (DIP): the engine may then keep gate and up as one
    // input-major matrix [gate | up] (an input channel of both is one contiguous read).
    bool mlp_inputs_shared = false;
    bool neurons_pre = false;   // select_mlp_inputs sets neurons_pre
    bool up_first = false;      // compute up before gate (up pruning)
    bool neurons_post = false;  // select_after_first
    bool down_in = false;       // select_down
    // select_down only reads the GLU (GRIFFIN's prompt statistics) and leaves down_in all: the neurons a
    // token uses are then final once select_mlp_inputs / select_after_first ran.
    bool down_observe_only = false;
    // Fused execution (SparseLLM-style): when neurons_pre is not all, the engine runs gate, up and down
    // of those neurons in one pass over a compact buffer of neuron bundles that it updates
    // differentially (only neurons entering the set are copied; see context::fused_stats). Such a
    // method sets only neurons_pre on those tokens (select_after_first / select_down are not called);
    // when neurons_pre is all, the ordinary path runs, so full density stays bit-identical to dense.
    // A request, not a promise: the engine runs it only where bundles are exact copies of the weights
    // (gate and up of one type, copied as stored beside the down layout's columns; SwiGLU or GeGLU);
    // elsewhere the same neuron sets take the unfused kernels.
    bool fused = false;
    // With `fused`: the active set stays fixed from one prompt to the next (GRIFFIN's experts). Once a
    // layer's bundles are copied, the engine hands back the pages of its row-major gate/up (file-mapped:
    // the next prompt, which reads them densely, faults them back in), so generation keeps the
    // experts' copy and the down layout resident instead of the whole MLP plus the copy. Not while an
    // observer is attached (it reads those rows every token).
    bool fused_fixed = false;
    // Split MLP (FFSplit): the method owns a compact, re-encoded copy of every layer's MLP
    // (split_layer) and the engine runs that instead of the model's gate/up/down; no MLP hook is
    // called and the MLP density reported is the split's bytes over the dense bytes.
    bool split_mlp = false;
};

class sparsity_method {
public:
    virtual ~sparsity_method() = default;
    virtual std::string name() const = 0;
    virtual method_traits traits() const = 0;

    // A new sequence starts at position 0 (GRIFFIN forgets its experts here).
    virtual void begin_sequence() {}
    // The prompt ended at position `n_prompt` - 1 (GRIFFIN fixes its experts here).
    virtual void end_prompt(int32_t n_prompt) {}

    // x: [dim] input of q/k/v (after the attention norm).
    virtual void select_attn_inputs(const token_info& t, std::span<const float> x, layer_masks& m) {}
    // x: [dim] input of o (concatenated head outputs).
    virtual void select_o_input(const token_info& t, std::span<const float> x, layer_masks& m) {}
    // x: [dim] MLP input (after the FFN norm).
    virtual void select_mlp_inputs(const token_info& t, std::span<const float> x, layer_masks& m) {}
    // The neurons_pre select_mlp_inputs will set for `layer` on every generated token from now until the
    // next prompt, when the method knows them ahead (GRIFFIN's experts once fixed); null otherwise. The
    // flash-offload runtime reads the next layer's units while this one computes.
    virtual const index_mask* planned_neurons(int32_t layer) const { return nullptr; }
    // The fraction of projection p's inputs (q/k/v: the attention input; o: its input; gate/up: the MLP
    // input; down: the GLU) the method keeps in `layer`, when its configuration fixes it ahead: 1 where
    // it never prunes them, a calibrated or top-k fraction otherwise; < 0 when unknown (it varies with
    // the tokens). The engine keeps a matrix row-major, without an input-major layout, where this is 1
    // or at least kernels::input_sparse_break_even of the layout (dense on x with the pruned inputs
    // zeroed is then as fast, and the masks' accuracy effect is the same).
    virtual float planned_input_density(int32_t layer, proj p) const { return -1.0f; }
    // first: [hidden] pre-activation of the first matrix (gate, or up when up_first); entries outside
    // neurons_pre are 0.
    virtual void select_after_first(const token_info& t, std::span<const float> first, layer_masks& m) {}
    // glu: [hidden] silu(gate) * up of the neurons computed so far (0 elsewhere).
    virtual void select_down(const token_info& t, std::span<const float> glu, layer_masks& m) {}

    // What the method resolved per layer from its configuration and calibration (thresholds, keep
    // fractions, top-k densities), one named vector of n_layers values each, in a fixed order. A
    // deployment config stores them and checks that a rebuilt method resolves the same values. Empty
    // for methods with nothing resolved per layer (dense) or decided per sequence (GRIFFIN's experts).
    virtual std::vector<std::pair<std::string, std::vector<float>>> per_layer_values() const { return {}; }

    // method_traits::split_mlp: the layer's split MLP (owned by the method, alive while it is).
    virtual const ffsplit_layer_weights* split_layer(int32_t layer) const { return nullptr; }

    // Weight bytes the method's own selection reads per token over all layers (SparseLLM's low-rank
    // predictor: 10.5 MB a llama-1b layer in F32), counted with the model's by `bench`; 0 when selection
    // reads activations only (thresholds, top-k).
    virtual uint64_t selection_bytes_per_token() const { return 0; }
};

// Top-k helpers shared by the methods: indices of the k largest scores, returned sorted ascending.
// Ties are broken toward the lower index; NaN scores rank below every number.
void top_k_indices(std::span<const float> scores, int64_t k, std::vector<int32_t>& out);
// Indices with |v| >= threshold (NaN never passes), sorted.
void threshold_indices(std::span<const float> values, float threshold, std::vector<int32_t>& out);
// Indices with |v[i]| >= t (strict: >), t = tv ? tv[i] : t0 (tv: values.size() entries), NaN never
// passing, sorted (kernels::select_abs).
void abs_threshold_indices(std::span<const float> values, float t0, const float* tv, bool strict,
                           std::vector<int32_t>& out);
// Mask of the top-k scores (set_all when k >= n, so full density takes the dense kernels bit for bit).
void top_k_mask(std::span<const float> scores, int64_t k, index_mask& out);
// Mask of |v| >= threshold (set_all when every entry passes).
void threshold_mask(std::span<const float> values, float threshold, index_mask& out);
// out = a ∩ b (all ∩ x = x).
void intersect_masks(const index_mask& a, const index_mask& b, index_mask& out);
// k for a density over n items: round(density * n) clamped to [0, n].
int64_t density_to_k(float density, int64_t n);

}  // namespace sl

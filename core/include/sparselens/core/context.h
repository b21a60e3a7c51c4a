// Inference context: KV cache, scratch buffers and the Llama forward pass (prefill and decode).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sparselens/core/mlp_source.h"
#include "sparselens/core/model.h"
#include "sparselens/core/observer.h"
#include "sparselens/core/residency.h"
#include "sparselens/core/result.h"
#include "sparselens/core/sparsity.h"
#include "sparselens/kernels/sparse.h"

namespace sl {

class anon_buffer;

struct context_params {
    int32_t n_ctx = 0;      // 0: the model's seq_len
    int32_t n_threads = 0;  // 0: OpenMP default
    int32_t n_batch = 64;   // prefill chunk (tokens per GEMM)
    // Keep the pages of the row-major matrices a method's layouts replace (set_method) and of a fixed
    // fused set's gate/up: for a dense context reading the same model side by side (`bench --method`
    // alternates the two), whose matrices must stay where they were loaded (not come back from the file).
    bool keep_replaced = false;
    // Regroup the Q4_K, Q4_0 and Q8_0 matrices the context reads only whole 8 rows at a time (Q4_Kx8r,
    // Q4_0x8r, Q8_0x8r: the dense kernels' layouts of 8 rows) — faster: where it pays on this CPU
    // (kernels::rows_x8_faster); all: wherever the CPU has the kernel for it (kernels::rows_x8_native; the
    // tests of the regrouped paths); off: they are read as the file's rows. The same bits in every mode;
    // `bench --no-regroup` measures what regrouping buys.
    enum class regroup { off, faster, all };
    regroup regroup_rows = regroup::faster;
};

context_params context_default_params();

// Whether a context of regroup mode r regroups the matrices of type t (context_params::regroup_rows) on this
// CPU; whether a given matrix is regrouped also depends on its shape and on how the context reads it.
bool regroups_rows(context_params::regroup r, dtype t);

// What the fused sparse MLP's differential cache did for a method with method_traits::fused, summed
// over layers and tokens since set_method(). A token's active set is compared with the previous fused
// token of the same layer (the first fill of an empty buffer counts as all entering).
struct fused_mlp_stats {
    int64_t updates = 0;        // cache updates: one per layer per token on the fused path
    int64_t active = 0;         // sum of the active-set sizes
    int64_t entered = 0;        // neurons copied in: active now, not in the buffer before
    int64_t left = 0;           // neurons whose slot was freed (nothing is copied for them)
    uint64_t bytes_copied = 0;  // entered * bundle bytes
    double update_seconds = 0;  // wall time of the updates (bookkeeping and copies)
    uint64_t memory_bytes = 0;  // what the caches' compact buffers hold (the down layout is in layout_bytes())

    // Share of the active neurons that are new since the previous token: the mask change rate.
    double mask_change_rate() const { return active > 0 ? static_cast<double>(entered) / active : 0.0; }
    // Active neurons whose weights were already in the buffer: the copies avoided.
    int64_t copies_avoided() const { return active - entered; }
    double copies_avoided_share() const { return active > 0 ? 1.0 - mask_change_rate() : 0.0; }
};

struct fused_mlp_state;  // private: core/src/fused_mlp_cache.h

// Where the forward pass spends its wall time (context::set_stage_timing). Each stage is the time from
// the previous stage's end to its own, so the stages of a token add up to its forward pass exactly.
enum class stage : uint8_t {
    qkv,        // q/k/v projections (dense, or input-sparse with a method)
    attention,  // biases, norms, RoPE, KV-cache write, attention
    o,          // attention output projection
    mlp_in,     // gate/up projections (dense, input- or output-sparse, FFSplit's heavy + light rows)
    glu,        // SwiGLU/GeGLU and the scatter of computed neurons
    down,       // down projection
    mlp_fused,  // a fused kernel's MLP: a fused method's whole MLP (differential-cache update and kernel),
                // or the rest of the MLP over pair layouts after one whole projection (CATS, CHESS)
    select,     // the method's mask selection (top-k, thresholds, scores)
    fetch,      // offloaded MLP weights read from storage (mlp_weight_source)
    logits,     // final norm, classifier, soft-cap
    other,      // embedding row, norms, residual adds, per-token bookkeeping
};
inline constexpr int stage_count = static_cast<int>(stage::other) + 1;
const char* stage_name(stage s);  // "qkv", "attention", ... (the enumerator names)

struct stage_times {
    double seconds[stage_count] = {};
    int64_t tokens = 0;  // tokens the timed forward passes ran (a prefill chunk of n counts n)

    double total() const {
        double t = 0;
        for (double v : seconds) t += v;
        return t;
    }
    double at(stage s) const { return seconds[static_cast<int>(s)]; }
    stage_times& operator+=(const stage_times& o) {
        for (int i = 0; i < stage_count; ++i) seconds[i] += o.seconds[i];
        tokens += o.tokens;
        return *this;
    }
};

// One kernel call's weight reads while decoding a token with a method attached (context::set_read_log):
// the rows base + idx[k] * row_bytes, or all `rows` rows in order when idx is empty. What a plain read
// of the same memory in the same pattern is timed on (`bench --stages`: the ideal at the access pattern).
struct weight_read {
    stage at = stage::other;
    const void* base = nullptr;
    int64_t row_bytes = 0;
    int64_t rows = 0;
    std::vector<int32_t> idx;

    int64_t bytes() const { return row_bytes * (idx.empty() ? rows : static_cast<int64_t>(idx.size())); }
};

class context {
public:
    // Allocates the KV cache ([n_layers, n_ctx, kv_dim] for K and V) and scratch; fails on absurd sizes.
    static result<context> create(const model& m, const context_params& params = context_default_params());

    // Runs one token at position `pos` (0 <= pos < n_ctx); returns the logits [vocab] (valid until the next call).
    const float* decode(int32_t token, int32_t pos);

    // Runs tokens at positions pos0 .. pos0 + n - 1 in chunks of n_batch. Returns the last token's logits.
    // If all_logits is non-null it receives [n, vocab] logits, one row per token.
    const float* prefill(std::span<const int32_t> tokens, int32_t pos0, float* all_logits = nullptr);

    // Attach (or detach with nullptr) an observer; the context does not own it.
    void set_observer(activation_observer* obs) { m_observer = obs; }

    // Attach a sparsity method (nullptr: dense); the context does not own it. Chooses one layout per
    // matrix for the method's traits (plus any reserved with reserve_layouts): a matrix the method prunes
    // by input is stored input-major (quantized in its own blocks), and that layout REPLACES the
    // row-major original for this context: dense tokens run on it too (so density 1 is bit-identical to
    // dense on the same layout) and the original's file-mapped pages are released, so the weights stay
    // resident once. Gate/up stay row-major when a method also selects neurons (output-sparse rows);
    // when neurons are chosen only after one whole projection (and nothing else needs the other or down
    // on its own), the other projection and down become one pair layout that replaces both; when gate
    // and up always get the same inputs (method_traits::mlp_inputs_shared: DIP), one [gate | up] layout.
    // layout_bytes() reports the layouts' memory. With a method attached every token runs the
    // single-token sparse path, so prefill and decode execute identical masks and arithmetic (prefill is
    // then slower, never different). Layouts are kept when the next method needs the same ones.
    void set_method(sparsity_method* method);
    // Layouts for a set of methods, chosen once: set_method builds the union of these traits and the
    // method's own, so switching among the set (or to the "dense" method) reuses them and every
    // method's dense tokens run the same arithmetic. Call before set_method.
    void reserve_layouts(const method_traits& t) { m_reserved = t; }
    sparsity_method* method() const { return m_method; }
    // Cache state DIP-CA reads and which sees every token's masks (nullptr: none).
    void set_residency(residency_source* r) { m_residency = r; }
    // Seconds spent in the residency source's on_token since the context was made: a device simulator's
    // or stand-in cache's bookkeeping, not the engine's work. No stage timing counts it, and eval takes it
    // out of the decode times it compares with dense's (which ran without one).
    double residency_seconds() const { return m_residency_seconds; }
    // Offloaded MLP weights (nullptr: the model's own); the context does not own it. Call before
    // set_method: the method's MLP input-major copies are then not built (the source provides them).
    // Only the single-token sparse path (a method attached) reads from it; fused methods are not offloaded.
    void set_mlp_source(mlp_weight_source* s) { m_mlp_source = s; }
    // The method's layouts (input-major, pairs); not the regrouped (Q4_Kx8r...) copies, which only regroup a
    // matrix's bytes (an offload runtime counts the attention weights they hold as the model's).
    uint64_t layout_bytes() const;
    // Builds now what the next forward pass would build first: the Q4_Kx8r / Q4_0x8r / Q8_0x8r copies of the
    // Q4_K / Q4_0 / Q8_0 matrices read only whole (every such matrix with whole groups of 8 rows and of 256
    // columns that nothing reads row by row or through a layout of its own, on a CPU with the kernel), after
    // create() or set_method(). A timed run calls it so it does not time the copying. Copies a set no longer
    // wants keep their memory (rows_x8_bytes) and come back into service without copying when a later set
    // wants them (eval's dense and method turns).
    void prepare();
    // The regrouped copies' bytes (matrices read only whole, regrouped for the dense kernels).
    uint64_t rows_x8_bytes() const;
    // Weight bytes this context keeps resident: the model's weight tensors, minus the row-major
    // matrices a layout or a Q4_Kx8r copy replaced whose pages were handed back (and the gate/up pages
    // a fixed fused set handed back until the next prompt, method_traits::fused_fixed), plus the
    // layouts, the Q4_Kx8r copies and a fused method's compact buffers (the issue-12 memory metric;
    // `bench --json` reports it over the model's weights).
    uint64_t resident_weight_bytes() const;
    // Differential-cache statistics of a fused method (all zero otherwise).
    fused_mlp_stats fused_stats() const;

    // Stage timing (off by default): a steady-clock read at each stage boundary of every forward pass
    // while on, summed into stage_timing(). Turning it on or off clears the sums. Costs ~0.1 us per
    // stage boundary, nothing while off.
    void set_stage_timing(bool on);
    const stage_times& stage_timing() const { return m_stages; }
    // Weight-read log (off by default; the context does not own it): while set, the single-token sparse
    // path appends each q/k/v, o, gate/up, down and pair-layout kernel call's rows (fused methods' and
    // FFSplit's MLPs and offloaded weights are not logged). Allocates per call: not for timed tokens.
    void set_read_log(std::vector<weight_read>* log) { m_read_log = log; }

    // Per layer, the densities of the method's masks summed over the tokens run since the last reset
    // (divide by density_tokens(); dense layers report 1): what the method chose, for accuracy at a
    // density. read_density_sum(): the same for the weight bytes the kernels read, which is 1 where a
    // projection kept row-major (planned_input_density above the layout's break-even) ran dense on the
    // masked input.
    const std::vector<layer_density>& density_sum() const { return m_density_sum; }
    const std::vector<layer_density>& read_density_sum() const { return m_read_sum; }
    int64_t density_tokens() const { return m_density_tokens; }
    void reset_density();

    const model& get_model() const { return *m_model; }
    int32_t n_ctx() const { return m_n_ctx; }
    int32_t n_threads() const { return m_threads; }
    int32_t vocab_size() const { return m_model->hp.vocab_size; }
    // Bytes of weights the decode of one token reads (all matrices + one embedding row + norms).
    uint64_t decode_weight_bytes() const;

private:
    void forward_chunk(const int32_t* tokens, int32_t n, int32_t pos0, float* logits_out, bool all_logits);
    void layer_forward(int32_t l, int32_t n, int32_t pos0);
    void layer_forward_sparse(int32_t l, int32_t pos);
    void mlp_sparse(int32_t l, const token_info& ti);
    void mlp_fused(int32_t l, const token_info& ti);
    void mlp_pairs(int32_t l, const token_info& ti, const index_mask& rows);
    void mlp_split(int32_t l, const token_info& ti, layer_density& d);
    void release_view(const tensor_view& w);  // hands back w's pages, counted in m_released_bytes
    // The matrix projection p of layer l's dense gemv/gemm reads: its Q4_Kx8r copy where there is one.
    const tensor_view& dense_view(int32_t l, proj p) const;

    // The per-layer pieces the dense and sparse paths share (context_blocks.cpp); they branch on the
    // model's arch_features, never on its architecture name.
    void build_rope_tables();
    void apply_rope(float* v, int32_t n_heads_v, int32_t n, int32_t pos0) const;
    void finish_qkv(int32_t l, int32_t n, int32_t pos0);  // biases, q/k norms, RoPE on m_q/m_k/m_v
    void attend(int32_t l, int32_t n, int32_t pos0);       // KV cache write, attention into m_att
    void add_residual(const float* post_norm, int32_t n);  // m_x += post_norm(m_proj)
    void glu(float* y, const float* gate, const float* up, int64_t n) const;
    kernels::glu_kind glu_kind() const;  // the model's activation, as the fused kernels take it
    void lap(stage s) {
        if (m_timing) lap_timed(s);
    }
    void lap_timed(stage s);
    void observe(int32_t layer, probe p, int32_t pos0, int32_t n, const float* data, int32_t width) {
        if (m_observer) m_observer->on_activation(layer, p, pos0, n, data, width);
    }

    // Input-major layouts of one layer's projections, built only for the projections a method prunes by input.
    // A method that computes one GLU projection whole and then chooses neurons (CATS, CHESS, gate and
    // up pruning) gets the other projection and down as one pair layout instead (kernels::sparse_pairs),
    // replacing both.
    struct layer_layouts {
        kernels::owned_matrix t[proj_count];
        bool has[proj_count] = {};
        // Gate and up as one input-major matrix [gate | up] (kernels::to_input_major_pair) in place of
        // t[gate] and t[up], for a method set whose gate and up inputs are always the same
        // (method_traits::mlp_inputs_shared): an active input channel is one contiguous read of both.
        kernels::owned_matrix gate_up;
        bool has_gate_up = false;
        kernels::owned_pairs pairs;
        bool has_pairs = false;
    };

    const model* m_model = nullptr;
    activation_observer* m_observer = nullptr;
    std::vector<weight_read>* m_read_log = nullptr;
    sparsity_method* m_method = nullptr;
    method_traits m_traits;
    method_traits m_reserved;  // reserve_layouts
    residency_source* m_residency = nullptr;
    double m_residency_seconds = 0.0;
    mlp_weight_source* m_mlp_source = nullptr;
    bool m_prompt_open = false;
    std::vector<layer_layouts> m_layouts;
    uint64_t m_released_bytes = 0;  // row-major bytes the layouts replaced and gave back (set_method)
    // Q4_K, Q4_0 and Q8_0 matrices read only whole, regrouped 8 rows at a time (kernels::to_rows_x8): the
    // dense gemv's rows ran compute-bound (Q4_K 24 GB/s per thread from L2 against 51 on Q4_Kx8r, Q4_0 20
    // against 30-35 on Q4_0x8r, Q8_0 26 against 45), and every row keeps its bits. Like the input-major
    // layouts they replace the original, whose pages are handed back.
    // All in one arena on huge pages, as the loaded weights are (streamed on 4 KiB pages they decoded slower
    // than the rows they replace).
    struct layer_rows {
        tensor_view x8[proj_count];
        bool slot[proj_count] = {};      // x8[p] holds the copy (in m_rows_x8_arena)
        bool has[proj_count] = {};       // ... and the dense kernels read it
        bool released[proj_count] = {};  // ... and the original's pages were handed back
    };
    std::vector<layer_rows> m_rows_x8;
    bool m_rows_x8_pending = true;  // set_method (or create) changed what prepare() builds
    std::shared_ptr<anon_buffer> m_rows_x8_arena;  // shared_ptr: incomplete type here
    // Per layer, bit p: projection p is read row by row or through a layout (no Q4_Kx8r copy); set_method.
    std::vector<uint8_t> m_rows_read;
    std::vector<uint8_t> m_rows_paged;  // per layer: gate/up pages handed back after a fixed fused copy
    layer_masks m_masks;
    std::vector<layer_density> m_density_sum;
    std::vector<layer_density> m_read_sum;
    // Per projection, this token and layer: a pruned input ran the dense gemv on the masked x (every
    // weight read), as the projection helpers of context_sparse.cpp report; summed into m_read_sum.
    bool m_read_whole[proj_count] = {};
    int64_t m_density_tokens = 0;
    std::vector<float> m_compact;  // output-sparse results before scattering
    std::vector<float> m_pair_scratch;  // kernels::sparse_pairs' scratch, then the compact row values (observers)
    std::shared_ptr<fused_mlp_state> m_fused;  // per-layer caches of a fused method (shared_ptr: incomplete type)
    bool m_timing = false;
    std::chrono::steady_clock::time_point m_lap;  // the last stage boundary while timing
    stage_times m_stages;
    int32_t m_n_ctx = 0;
    int32_t m_threads = 0;
    int32_t m_batch = 0;
    bool m_keep_replaced = false;  // context_params::keep_replaced
    context_params::regroup m_regroup_rows = context_params::regroup::faster;

    std::vector<float> m_k_cache, m_v_cache;  // [n_layers][n_kv_heads][n_ctx][head_dim] (context::attend)
    std::vector<float> m_rope_cos, m_rope_sin;  // [n_ctx][rope_dim / 2]
    // Scratch, sized for n_batch tokens.
    std::vector<float> m_x, m_xb, m_q, m_k, m_v, m_att, m_proj, m_gate, m_up, m_scores;
    std::vector<float> m_gate_up;  // [gate | up] of one token, from layer_layouts::gate_up
    std::vector<float> m_logits;
};

}  // namespace sl

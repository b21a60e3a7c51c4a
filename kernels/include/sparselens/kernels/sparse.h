// Sparse GEMV kernels (CHESS spvmm / vmmisp), neuron bundles and the fused sparse gated MLP.
#pragma once

#include <cstdint>
#include <vector>

#include "sparselens/kernels/attention.h"
#include "sparselens/kernels/types.h"

namespace sl::kernels {

// ---- Layouts (converted once, at load or when the method changes) ----------------------------------

// An owned weight buffer with a view onto it. For input-major (transposed) matrices the view has
// rows = input channels and cols = outputs, so one active input channel is one contiguous row.
// bytes.size() is the memory cost: view.bytes() plus < 64 bytes so that view.data is 64-byte aligned.
// Buffers of 8 MiB and more are advised to use transparent huge pages (sparse rows on 4 KiB pages
// cost a TLB miss each). Move, do not copy: the view points into `bytes`.
struct owned_matrix {
    std::vector<uint8_t> bytes;
    tensor_view view;
};

// Transposes a row-major [out, in] matrix into input-major [in, out] of type `type` (dequantising and
// re-quantising along the output dimension when quantized; `out` must then be a multiple of 32).
// Exact for F32/F16/BF16 targets that can hold the source values (same type, or F32).
owned_matrix to_input_major(const tensor_view& w, dtype type);
// Two matrices of one input length side by side: row i holds a's outputs, then b's, each encoded as
// to_input_major(a, type) / to_input_major(b, type) would (the same bytes per block), so that an input
// channel of both is one contiguous read. a.rows and b.rows must fill whole blocks of `type`
// (dtype_block_elems: 256 outputs for the x8 forms).
owned_matrix to_input_major_pair(const tensor_view& a, const tensor_view& b, dtype type);

// Whether the active ISA has a kernel of its own for the regrouped form of t (Q4_K: Q4_Kx8r on AVX2 and
// AVX-512; Q4_0 and Q8_0: Q4_0x8r and Q8_0x8r where the CPU has AVX-512 VNNI). Elsewhere gemv reads such a
// view by copying each group of 8 rows back first: the same bits, but slower than the rows. False for
// other types.
bool rows_x8_native(dtype t);
// Whether regrouping t pays on this CPU (what the engine regroups by default): rows_x8_native, and for Q4_0
// and Q8_0 only on Intel CPUs (the vendor switch of the row streams, cpu_prefers_row_streams). Q4_0x8r and
// Q8_0x8r were measured on a Xeon (stops 39-40: ahead of the rows or even); on a Zen 5 (stop 42, EPYC, 2
// threads, whole-model decode against `bench --no-regroup`, alternating x3) they decoded 10-17% (Q4_0) and
// 11-24% (Q8_0) slower than the rows, whose kernels read its memory faster. Q4_Kx8r (built and measured
// faster on a Zen 4, stop 36) stays on for every CPU with the kernel.
bool rows_x8_faster(dtype t);
// w (Q4_K, Q4_0 or Q8_0, rows a multiple of 8, cols of 256) as Q4_Kx8r / Q4_0x8r / Q8_0x8r: the same bytes
// regrouped.
// gemv, gemv_multi and gemm on the copy give every row the bits they give it on w.
owned_matrix to_rows_x8(const tensor_view& w);
// The same into dst (w.bytes() bytes; 64-byte aligned for whole-line loads), returning its view.
tensor_view to_rows_x8(const tensor_view& w, uint8_t* dst);

// The type an input-major layout of `w` is written in, wherever one is made (the engine's layouts that
// replace a matrix, the offload pack's columns): the matrix's own type when encodable, else the
// encodable type of no more bytes per element (dtype_replacing_layout_type), F32 when the output
// length does not fill whole blocks of it.
dtype input_major_type(const tensor_view& w);

// A neuron bundle stores, for GLU neuron j, gate row j, up row j and down column j back to back
// (dim elements each; gate and up of `type`, down of `down`): an active neuron costs one contiguous
// read. The same bundle is the unit the flash simulator loads.
struct bundle_view {
    dtype type = dtype::f32;  // of the gate and up rows
    int64_t n_neurons = 0;
    int64_t dim = 0;
    const void* data = nullptr;
    // The down column is an input-major row of this type: by default `type` in its input-major form
    // (Q8_0 / Q4_0 of whole 256-element groups in their x8 form, the same bytes); the engine's cache
    // stores its down layout's own type there (a K-quant file's Q4_0x8 / Q6_0x8 beside Q4_K rows).
    dtype down = dtype_input_major_form(type, dim);

    dtype down_type() const { return down; }
    int64_t part_bytes() const { return dtype_row_bytes(type, dim); }  // one of gate / up
    int64_t down_bytes() const { return dtype_row_bytes(down, dim); }
    int64_t bundle_bytes() const { return 2 * part_bytes() + down_bytes(); }
    const uint8_t* bundle(int64_t j) const { return static_cast<const uint8_t*>(data) + j * bundle_bytes(); }
};

struct owned_bundles {
    std::vector<uint8_t> bytes;  // as owned_matrix: the memory cost, 64-byte aligned view, huge pages
    bundle_view view;
};

// Builds bundles from gate [hidden, dim], up [hidden, dim] and down [dim, hidden] (row-major). Gate and
// up rows are copied (same type) or converted; down columns are to_input_major(down, down_type()) rows.
// Quantized types need dim % 32 == 0.
owned_bundles make_bundles(const tensor_view& gate, const tensor_view& up, const tensor_view& down, dtype type);

// A pair layout for methods that compute one GLU projection whole, choose neurons from it, and need
// only those neurons' other row and down column (CATS, CHESS and gate pruning compute the gate, so the
// pairs hold up rows; up pruning computes up, so they hold gate rows): for neuron j, that row (dim
// elements of row_type: the matrix's own bytes, so its dot with x is the row kernel's) and down column
// j (an input-major row of dim elements of down_type) back to back. A chosen neuron costs one
// contiguous read instead of two scattered ones, and the pairs replace both matrices (memory 1.0x).
struct pair_view {
    dtype row_type = dtype::f32;
    dtype down_type = dtype::f32;  // input_major_type(down): the layout type replacing the down matrix
    int64_t n_neurons = 0;
    int64_t dim = 0;
    const void* data = nullptr;
    bool gate_rows = false;  // the rows are the gate's (up computed first), else the up projection's

    int64_t row_bytes() const { return dtype_row_bytes(row_type, dim); }
    int64_t down_bytes() const { return dtype_row_bytes(down_type, dim); }
    int64_t pair_bytes() const { return row_bytes() + down_bytes(); }
    int64_t bytes() const { return n_neurons * pair_bytes(); }
    const uint8_t* row(int64_t j) const { return static_cast<const uint8_t*>(data) + j * pair_bytes(); }
    const uint8_t* down(int64_t j) const { return row(j) + row_bytes(); }
};

struct owned_pairs {
    std::vector<uint8_t> bytes;  // as owned_matrix: the memory cost, 64-byte aligned view, huge pages
    pair_view view;
};

// Pairs from rows [hidden, dim] (gate or up, copied as they are) and down [dim, hidden] (columns written
// as input-major rows of down_type, as to_input_major(down, down_type) writes them).
owned_pairs make_pairs(const tensor_view& rows, const tensor_view& down, dtype down_type, bool gate_rows);

// ---- Kernels ---------------------------------------------------------------------------------------
// Index lists are sorted ascending, unique and in range; n_idx may be 0. Threads split outputs (or
// the active list, with per-slice partial sums) into independent blocks: no atomics, no locks, no
// allocation per call once grow-only thread_local buffers have their size. n_threads <= 0 means
// OpenMP's default. Calls too small to pay for waking a worker (its fork/join cost is measured once:
// ~1 us with spinning workers, ~50 us under OMP_WAIT_POLICY=passive on a small VM) run on fewer
// threads; results never depend on that choice, only on n_threads as stated below.
// ISA: kernels::active_isa(), like the dense ones.
// Accuracy: f32 accumulation; input-sparse and the fused down part sum channels/neurons in blocks of
// 32, so at 100% density they match the dense gemv to ~1e-13 normalised MSE. Exception: Q8_0/Q4_0
// input-major rows (input-sparse, fused down columns) on AVX2 and AVX-512 VNNI use integer dots with
// rounded coefficients (input_sparse_rounds_activations), at the dense quantized gemv's error level.

// How the sparse kernels split work, so that no result depends on the thread count: input-major rows
// shorter than k_input_sparse_split_row_bytes, and the fused MLP, cut the active list into at most
// k_sparse_slices slices (input-sparse: of whole 32-channel blocks; fused: of neurons), each summed into
// its own partial output; partials are added in slice order. Longer rows give the threads slices of y
// (two per thread over a call), each reading its share of every active row: with the threshold at 8 KiB,
// rows of 8-9 KiB (F32 at 2048 outputs, F16 at 4096, Q8_0x8 at 8192: llama-1b's gate/up on Q8_0) were
// read in random ~2 KiB quarters at 2 threads. Split by channels instead (in-process A/B, 2 threads, 1 GB
// of copies, stop 32), GB/s: F32 2048 x 8192 d = 0.5 23.2 -> 29.3, 22.6 -> 28.4, d = 1 21.5 -> 30.5,
// 25.3 -> 33.7; F16 4096 x 14336 d = 0.5 24.8 -> 28.9, 24.5 -> 29.4, d = 1 22.7 -> 29.5, 25.4 -> 29.1;
// Q8_0x8 8192 x 2048 +1..3% at d = 0.5 (three runs), +4..6% at d = 1. At 15-16 KiB (4 KiB quarters) it
// was a wash (Q8_0x8 at 14336 outputs -4..0%, F16 at 8192 -6..+20%), so those rows stay split by y.
inline constexpr int k_sparse_slices = 4;
inline constexpr int64_t k_input_sparse_split_row_bytes = 12288;

// Active channels per integer chunk of the input-sparse GEMV (the group that shares one int8
// coefficient scale per 32 outputs, see input_sparse_rounds_activations): 32, and 16 on input-major rows
// of at least k_input_sparse_half_chunk_row_bytes, where 16 side-by-side row streams read faster than 32
// (sparse.cpp, input_sparse_chunks). A function of the row length only: the bits never depend on the
// thread count. Chunks start at multiples of this count in the active list.
inline constexpr int64_t k_input_sparse_half_chunk_row_bytes = 2048;
constexpr int64_t input_sparse_chunk_channels(int64_t row_bytes) {
    return row_bytes >= k_input_sparse_half_chunk_row_bytes ? 16 : 32;
}

// Input-sparse GEMV: y[o] = sum_{i in idx} x[i] * wt[i, o], wt input-major ([in, out]). Rows of >= 12 KiB:
// threads own slices of y; shorter rows: the active list is cut into a fixed number of slices of whole
// 32-channel blocks, each summed into a private partial output, added in slice order. Either way the
// result never depends on n_threads (bit for bit). Partials live in a grow-only thread_local buffer of
// the calling thread.
void gemv_input_sparse(const tensor_view& wt, const float* x, const int32_t* idx, int64_t n_idx, float* y,
                       int n_threads);

// Several input-sparse GEMVs of the same x in one parallel region (e.g. gate and up, or q, k and v,
// each with its own active list): y_m = gemv_input_sparse(*wts[m], x, idx[m], n_idx[m]), bit for bit,
// for n_mats <= k_input_sparse_multi_max. One fork/join instead of n_mats: on a VM a passive worker
// takes 10-90 us to wake, a quarter of a llama-1b gate projection at 50% density.
inline constexpr int k_input_sparse_multi_max = 4;
void gemv_input_sparse_multi(const tensor_view* const* wts, const float* x, const int32_t* const* idx,
                             const int64_t* n_idx, float* const* ys, int n_mats, int n_threads);

// The input density from which the dense gemv of a row-major matrix (on x with the pruned inputs
// zeroed) is at least as fast as gemv_input_sparse on its input-major layout of type `layout_type`:
// the layout reads only the active rows but at a lower rate, t_sparse ~ r * d * t_dense. An engine
// that knows a matrix's density ahead (TEAL's calibrated keep fractions) keeps that matrix row-major
// above it: no layout copy, and no slower kernel. Measured on the Zen 4 VM with AVX-512 (2 threads,
// two 2048x2048 matrices per call, medians of 11-15, this session's /tmp harness): r = 1.21-1.40 for
// Q4_0x8 (equal times at d = 0.78), 1.14-1.15 for Q8_0x8, 1.08-1.10 for F16; each value below sits a
// little under 1 / r, so a matrix near the line goes dense (it also keeps its file's exact weights).
float input_sparse_break_even(dtype layout_type);

// True when gemv_input_sparse on the active ISA forms Q8_0/Q4_0 products as integer dots (AVX2, and
// AVX-512 with VNNI; the scalar ISA and AVX-512 without VNNI keep f32 products): per block of 32
// outputs and chunk of active channels (input_sparse_chunk_channels), x[i] * (weight scale) is rounded
// to int8 with one scale,
// so y carries activation-rounding error like the dense quantized gemv's (normalised MSE ~1e-5 on
// random data) instead of f32 rounding only. Deterministic for a given index list, and the same
// bits on AVX2 and AVX-512 VNNI for finite inputs (tst_kernels_sparse holds both to one model).
bool input_sparse_rounds_activations(dtype type);

// Output-sparse GEMV: y[k] = W[idx[k], :] . x for k < n_idx (compact output), W row-major. Every y[k] is
// bit-identical to gemv()'s row idx[k] on the same ISA (Q8_0/Q4_0: x quantized once per call the same
// way); rows are prefetched from the index list instead of 4 KiB past each row's end.
void gemv_output_sparse(const tensor_view& w, const float* x, const int32_t* idx, int64_t n_idx, float* y,
                        int n_threads);

// Floats of caller-owned scratch fused_sparse_mlp needs: the quantized x and, per slice of the active
// list, a partial output and a block temporary (n_threads does not change it).
int64_t fused_mlp_scratch_floats(int64_t dim, int n_threads);

// Fused sparse gated MLP over active neurons: y = sum_{j in idx} down_j * act(gate_j . x) * (up_j . x),
// act SiLU or GELU-tanh (`act`: kernels::glu's, so the values equal the dense path's).
// If `glu_out` is non-null it receives the GLU value of each active neuron (compact, n_idx entries),
// bit-identical to glu(act, gemv(gate), gemv(up)) when the bundles hold the matrices' own rows. idx is
// cut into a fixed number of contiguous slices whose partial outputs are summed in slice order, so y
// never depends on n_threads (bit for bit).
void fused_sparse_mlp(const bundle_view& b, const float* x, const int32_t* idx, int64_t n_idx, float* y, float* scratch,
                      float* glu_out, int n_threads, glu_kind act = glu_kind::silu);

// The rest of a gated MLP whose first projection is known, fused like fused_sparse_mlp over a pair
// layout: y = sum_{j in idx} down_j * act(g_j) * u_j, where the pairs' rows give row_j . x and `pre`
// the first projection's pre-activations (pre = gate, rows = up for CATS and CHESS; pre = up, rows =
// gate for up pruning). glu_out / row_out (optional, compact, n_idx entries) receive each active
// neuron's GLU value and row_j . x; scratch of fused_mlp_scratch_floats(dim). The active list is cut
// into slices of whole 32-neuron blocks as gemv_input_sparse cuts its channels, so when the down columns
// are shorter than k_input_sparse_split_row_bytes y is bit for bit gemv_output_sparse(rows) -> glu ->
// gemv_input_sparse(down input-major) on the same list; it never depends on n_threads. Every type and
// ISA runs (an integer chunk for the down columns where the ISA has one, the f32 axpy elsewhere).
void sparse_pairs(const pair_view& p, const float* pre, const float* x, const int32_t* idx, int64_t n_idx, float* y,
                  float* scratch, float* glu_out, float* row_out, int n_threads, glu_kind act = glu_kind::silu);

}  // namespace sl::kernels

// Private interface between the dense drivers (dense.cpp) and the per-ISA kernel files.
#pragma once

#include <xmmintrin.h>

#include <cstdint>

#include "sparselens/kernels/kernels.h"
#include "sparselens/kernels/types.h"

namespace sl::kernels::detail {

// What a row kernel prefetches (the `Prefetch` template argument of the per-ISA row kernels in
// row_dots_avx2.h / row_dots_avx512.h / quant_rows_avx512.h; true/false convert to l1/none).
// l1 (T0): a streaming row's own bytes further ahead, into L1. l2 (T1): into L2 only, for
//  - sparse gathers (the next *listed* row): rows picked at random outrun the L1 miss buffers and the
//    streamers: through L2 a Q4_0 14336x4096 output-sparse gather at 50% random rows took 0.65 ms
//    instead of 0.99 (dense 1.04), at 10% 0.19 instead of 0.26 (2 threads, AVX2 VM; every 2nd row
//    0.76 instead of 1.21);
//  - streaming quantized rows (both ISAs; k_l2_ahead further on): an L1 prefetch of the weights evicts
//    the activation vector the row keeps re-reading. (AVX-512 float rows did this too past 16 KiB of x
//    until stop 43; float_x_fits_l1 below says what they do now.)
//    On a Zen 4, AVX-512 kernels, 2 threads, 1 GB of copies, rows of 14336 columns (Q8_K/Q8_0
//    activations: 18 KiB) ran Q4_K 23 -> 34 GB/s, Q4_0 26 -> 41, Q8_0 35 -> 49, Q6_K 30 -> 34; of 8192
//    columns Q4_K 33 -> 37, Q4_0 37 -> 42, Q8_0 40 -> 47; of 2048-4096 columns quantized rows were as
//    fast or faster (Q8_0 43 -> 51), f32 rows as fast, so floats switch only past 16 KiB of x (bf16 8192
//    columns 22 -> 28 GB/s). Into L2 only 4 KiB ahead was slower than L1 (too few lines in flight; the
//    AVX2 VM measured it ~5% slower too).
//    The AVX2 kernels on the same machine: quant_rows_avx2.cpp.
enum pf_mode : int { pf_none = 0, pf_l1 = 1, pf_l2 = 2 };

namespace {  // internal linkage: each ISA's file keeps the copy compiled with its own flags

// How far ahead in its own row a streaming row kernel prefetches, per pf_mode.
constexpr int64_t k_l1_ahead = 4096, k_l2_ahead = 8192;

// Where a streaming row kernel prefetches for a pf_mode: its own row, that far further on.
template <int Mode = pf_l1>
[[gnu::always_inline]] inline const uint8_t* ahead(const uint8_t* row) {
    return row + (Mode == pf_l2 ? k_l2_ahead : k_l1_ahead);
}

// One line's prefetch for a pf_mode: T0 (l1), T1 (l2). Always inlined, as everything below: GCC models
// __builtin_prefetch as free of side effects, so an out-of-line copy is a const function and its calls
// are deleted as dead code (dse1 dropped every prefetch of the VNNI Q4_K rows that way).
template <int Mode>
[[gnu::always_inline]] inline void prefetch_line(const uint8_t* p) {
    if constexpr (Mode == pf_l2) {
        _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
    } else {
        _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
    }
}

// Prefetches the lines [pf + off, pf + off + Bytes) for a pf_mode, all at once.
template <int Bytes, int Mode = pf_l1>
[[gnu::always_inline]] inline void prefetch_span(const uint8_t* pf, int64_t off) {
#pragma GCC unroll 16
    for (int l = 0; l < Bytes; l += 64) prefetch_line<Mode>(pf + off + l);
}

// Part `part` (0 <= part < Parts) of prefetch_span<Bytes, Mode>(pf, 0): its lines cut into Parts nearly
// equal runs, so a step of several inner iterations issues one run per iteration instead of all its lines
// at once. The regrouped rows (Q4_0x8r, Q8_0x8r, Q4_Kx8r) issued each 1-2 KiB step's 18-34 prefetches
// in one burst; on a Zen 5 (EPYC, 2 threads, 1 GB of Q4_0x8r copies, one process alternating) that read
// 45-49 GB/s against 52-63 (5 of 6 rounds) spread over the step's 8 blocks, and the plain Q4_0 rows, which
// prefetch once per 18-byte block, read 49-55 (stop 42, docs/results.md; whole-model decode there was
// still faster on the Q4_0 and Q8_0 rows: kernels::rows_x8_faster).
template <int Bytes, int Parts, int Mode = pf_l1>
[[gnu::always_inline]] inline void prefetch_part(const uint8_t* pf, int part) {
    constexpr int lines = (Bytes + 63) / 64;
    for (int l = lines * part / Parts; l < lines * (part + 1) / Parts; ++l) prefetch_line<Mode>(pf + 64 * l);
}

}  // namespace

// Activations quantized for the integer dot products of Q8_0/Q4_0 weights: blocks of 32 int8
// with a scale d = amax/127 (rounded to fp16 afterwards by quantize_act_for, as ggml's q8_0, which
// llama.cpp's logits follow ten times closer). s[b] = d[b] * sum(qs of block b) lets Q4_0 kernels use unsigned nibbles
// directly (sum (nib-8)*q = sum nib*q - 8*sum q). qs is contiguous so AVX-512 can load two blocks.
struct q8_act {
    const int8_t* qs = nullptr;  // [n]
    const float* d = nullptr;    // [n / 32]
    const float* s = nullptr;    // [n / 32]
    // The integer sum of each 32 quants, where a kernel asks for it (Q4_K: q4k_lanes.h, set per call).
    const int16_t* sums = nullptr;  // [n / 32]
};

// Computes y[i] = dot(row i, x) for the n_rows rows starting at w (row_bytes apart), each of
// `cols` elements. x is `const float*` for F32/F16/BF16 and `const q8_act*` for Q8_0/Q4_0.
// Contract every implementation keeps: the arithmetic of a row never depends on which other rows
// are in the same call, so results are identical for any row partition (threads, gemm tiles).
using rows_fn = void (*)(const uint8_t* w, int64_t row_bytes, int64_t n_rows, int64_t cols, const void* x,
                         float* y);
using dequant_fn = void (*)(const void* src, float* dst, int64_t n);
// Quantizes n floats (multiple of 32) into q8_act arrays qs[n], d[n/32], s[n/32]; see below.
using quantize_act_fn = void (*)(const float* x, int64_t n, int8_t* qs, float* d, float* s);
// Sum of n floats (n multiple of 64, p 64-byte aligned), used by the bandwidth probe; [0] relies
// on the hardware prefetcher, [1] also prefetches 4 KiB ahead like the streaming gemv kernels.
using stream_sum_fn = float (*)(const float* p, int64_t n);
// The sum of the 8-byte words of `lines` 64-byte lines of each of n rows (any alignment), read side by
// side a line of each row per step while the same line of each of the n_next rows `next` goes to L2:
// read_listed_rows' mode 3 (the chunk kernels' walk) with the ISA's widest loads.
using group_sum_fn = uint64_t (*)(const uint8_t* const* rows, int n, int64_t lines, const uint8_t* const* next,
                                  int n_next);

struct kernel_table {
    // Streaming kernels for gemv: one row at a time, so the weights are read as a single
    // sequential stream (interleaving 4 row streams measured 1.3-3x slower on the Zen 4 VM); on Intel
    // CPUs the float rows and Q4_0x8r read several streams side by side (cpu_prefers_row_streams).
    rows_fn rows[n_dtypes] = {};  // indexed by dtype
    // Same per-row arithmetic (bit-identical results) but several rows share each x load; for
    // gemm, whose weight tile is already in cache and which is compute-bound.
    rows_fn rows_cached[n_dtypes] = {};
    dequant_fn dequant[n_dtypes] = {};  // indexed by dtype; bit-identical across ISAs
    quantize_act_fn quantize_act = nullptr;  // bit-identical across ISAs for finite x
    // Q8_K activations (act_kind::q8_k) where an ISA has them; null: the scalar quantizer in convert.cpp.
    // Bit-identical to it for finite x.
    quantize_act_fn quantize_act_q8k = nullptr;
    stream_sum_fn stream_sum[2] = {};
    group_sum_fn group_sum = nullptr;
    // rows_x8_to_rows of Q4_Kx8r where an ISA has a faster one (AVX-512); null: that one. The same bytes.
    void (*x8_to_rows)(const uint8_t* group, int64_t cols, uint8_t* rows, int64_t rb) = nullptr;
};

// Whether the streaming float rows (F32, F16, BF16 gemv) read 8 rows side by side rather than one or 4:
// on Intel CPUs, where 8 concurrent weight streams read faster than one prefetched stream. Xeon VM
// (AVX-512, 2 threads, 1 GB of copies on huge pages, 2048 x 8192 and 8192 x 2048, four alternating
// rounds in one process): F16 one row + prefetch 17.4-23.4 GB/s, 4 rows 18.9-25.8, 8 rows 22.4-30.4; F32
// 22.9-23.7 against 25.7-28.4; BF16 22.3-26.7 against 29.4-33.2 (Eigen's 8-row gemv also beat our single
// stream there, by 1.2x). On the Zen 4 VM these kernels were tuned on, 4 rows of 2048 columns ran 15-25%
// slower than one, so other CPUs keep that choice.
bool cpu_prefers_row_streams();
// Elsewhere, whether a streaming float row kernel's activations (cols f32) stay in L1 beside the weight
// stream, so one row at a time streams best: up to two thirds of this CPU's L1 data cache (sysconf; 32
// KiB if unknown). A longer x is re-read from L2 for every row, so 4 rows share each x load, each
// prefetched 4 KiB ahead into L1. Until stop 43 the line was a fixed 16 KiB (half the Zen 4's L1) and
// the 4-row passes (F16) did not prefetch, while AVX-512 F32/BF16 kept one row prefetched into L2. On
// a Zen 5 (48 KiB L1; 2 threads, in one process, medians of 11 alternating rounds, GB/s): F16 2048 x
// 5632 4 rows 31.8 / 31.5 -> one row 42.2 / 42.1; 2048 x 8192 37.7 / 41.0 -> 46.3 / 52.9; 4096 x
// 14336 45.3 / 42.7 -> 4 rows prefetched 53.9 / 48.7; BF16 2048 x 5632 one row into L2 34.4 -> into L1
// 37.9, 4096 x 14336 32.1 -> 4 rows 45.0; F32 alike within noise (49.0 -> 49.5, 59.4 -> 58.0).
bool float_x_fits_l1(int64_t cols);
// Whether the input-sparse Q4_0x8 rows run through the AVX2 chunk rather than the AVX-512 VNNI one (the
// same bits; sparse_avx512.cpp): on AMD family 1Ah (Zen 5) and later. On a Zen 5 VM, in one process
// alternating the two, 2 threads, 50% random channels, 21 rounds each, AVX2 over VNNI per round
// (medians): 2048-output rows (1152 bytes: llama-1b's down) 1.085 / 1.131 / 1.125, 1.159 at 30%; 1024
// outputs 1.149; 4096 outputs 1.025; 8192 outputs (gate or up) 1.080 / 1.151 / 1.037 / 1.091 / 0.964;
// 16384 (DIP's gate|up) 1.121 / 1.085 / 1.094 / 1.110 / 0.927 / 0.993. In the engine (`bench --stages`,
// l1b Q4_0, 50%, builds alternating x3 / x6) the stages' excess over their at-pattern ideal fell:
// DIP's down median 1.03 -> 0.55 ms per token, gate|up 1.06 -> 0.88, TEAL's gate/up
// 1.56 -> 0.95. On the Zen 4 of stop 26 the VNNI chunks gained DIP and TEAL 2-8 points of their ideal
// in 10 of 12 pairs against these, so other CPUs keep them. Q8_0x8 and Q6_0x8 at 2048 outputs measured
// 1.011 and 0.915 here: VNNI.
bool cpu_prefers_avx2_q4_0x8_chunk();
// Whether the int8 input-sparse chunks (sparse_vnni_avx512.cpp, sparse_int8_avx2.cpp) prefetch each row in
// row as they read it (row_ahead, sparse_internal.h) and only the next chunk's row heads into L2, rather
// than the next chunk's whole rows into L2: on Intel CPUs. On the Xeon of stops 47-48 one core read a
// chunk's rows at ~10 GB/s whether its arithmetic ran from L2 at 25 GB/s or (skipped) at 38: the lines came
// on demand, not ahead, where a plain read of the same rows side by side took 16 (`bench kernels` read
// GB/s). The whole-row prefetch could not be tuned to run ahead of that (paced twice or four times as fast,
// or two or three chunks ahead: 2-12% slower); in row 256-384 bytes ahead read 8-33% faster (VNNI chunks;
// docs/results.md, stop 48). On the Zen 4 of stop 26 the paced whole rows had been worth 15 points of
// DIP's ideal over the alternatives tried there, so AMD keeps them (unmeasured there with row_ahead).
bool cpu_prefers_in_row_chunk_prefetch();
// Groups of the regrouped Q4_0x8r / Q4_Kx8r rows read side by side there (q40_r8_avx512.h).
inline constexpr int k_rows_x8_streams = 4;

// Tables filled by the per-ISA translation units (AVX tables only ever used after a CPUID check).
const kernel_table& scalar_table();
const kernel_table& avx2_table();
const kernel_table& avx512_table();
const kernel_table& active_table();

// Fills the entries of the types decoded through quant_unpack.h (all block types but Q8_0/Q4_0,
// which keep their own kernels) and of Q4_Kx8r with the AVX2 kernels; used by the AVX2 and AVX-512 tables.
void add_unpacked_rows_avx2(kernel_table& k);
// Then replaces Q4_K and Q6_K with AVX-512 kernels (quant_rows_avx512.cpp), bit-identical to the AVX2 ones.
void add_kquant_rows_avx512(kernel_table& k);
// Where the CPU has AVX-512 VNNI and VBMI, replaces the Q8_0/Q4_0 rows with builds using them
// (dense_vnni_avx512.cpp), bit-identical to the AVX-512BW rows.
void add_vnni_rows_avx512(kernel_table& k);

// Scalar activation quantizer. Per block of 32: amax = max|x|, q = nearbyint(x * (127 / amax))
// (ties to even), d = amax / 127, s = d * sum(q). The SIMD versions compute exactly this.
void quantize_act_q8(const float* x, int64_t n, int8_t* qs, float* d, float* s);

// Quantizes activations for weights of type t (quantized) the way ggml's CPU backend does for that
// type (act_kind in quant_unpack.h), through kt.quantize_act where that is the first step. n is a
// multiple of dtype_block_elems(t). Bit-identical across ISAs.
void quantize_act_for(dtype t, const kernel_table& kt, const float* x, int64_t n, int8_t* qs, float* d, float* s);

// One group of 8 rows of `base` (Q4_K or Q4_0; row r at rows + r * rb, `cols` elements) as the Q4_Kx8r
// / Q4_0x8r group at `group` (types.h), and back (layout.cpp).
void rows_to_rows_x8(dtype base, const uint8_t* rows, int64_t rb, int64_t cols, uint8_t* group);
void rows_x8_to_rows(dtype base, const uint8_t* group, int64_t cols, uint8_t* rows, int64_t rb);
// A group of 8 rows of view type t (Q4_Kx8r / Q4_0x8r / Q8_0x8r) back as rows of its base type:
// kt.x8_to_rows for Q4_Kx8r where the ISA has it, rows_x8_to_rows otherwise. The same bytes.
void rows_x8_back(const kernel_table& kt, dtype t, const uint8_t* group, int64_t cols, uint8_t* rows, int64_t rb);

// gemm of a block-quantized w (n >= 2 tokens, cols > 0) as a blocked int8 GEMM on nt threads (gemm.cpp).
void gemm_int8(const tensor_view& w, const float* x, int64_t n, float* y, int nt);
// gemm of an F16/BF16 w (n >= 2, cols > 0) as a blocked f32 GEMM on nt threads (gemm.cpp).
void gemm_float(const tensor_view& w, const float* x, int64_t n, float* y, int nt);

}  // namespace sl::kernels::detail

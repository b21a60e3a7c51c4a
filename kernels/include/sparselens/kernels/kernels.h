// Dense GEMV/GEMM, (de)quantization and CPU dispatch. OpenMP lives here and nowhere above.
#pragma once

#include <cstdint>

#include "sparselens/kernels/types.h"

namespace sl::kernels {

enum class isa : uint8_t { scalar = 0, avx2 = 1, avx512 = 2 };

// Best instruction set this CPU supports (AVX-512 needs F/BW/VL; AVX2 path needs AVX2+FMA+F16C).
isa detected_isa();
// ISA the kernels dispatch to now (detected unless overridden; env SPARSELENS_ISA=scalar|avx2|avx512).
isa active_isa();
// Override for tests/benchmarks; clamps to what the CPU supports. Returns the ISA actually selected.
isa set_active_isa(isa wanted);
const char* isa_name(isa i);
// AMX-INT8 tiles for the int8 GEMM of prefill (Intel Sapphire Rapids and later). Available: the CPU has
// them, with AVX-512 VNNI, and the OS granted their state to this process. Enabled: gemm uses them now
// (available, switched on, the default, and the avx512 ISA active). Same bits as without; the switch is
// for tests and A/B benchmarks (`sparselens bench --no-amx`). set_amx_enabled returns the state in force.
bool amx_available();
bool amx_enabled();
bool set_amx_enabled(bool on);
// Which of the AVX-512 VNNI table's two input-sparse chunks for Q4_0x8 rows runs (the same bits): the AVX2
// one (switch on; the default on CPUs that read memory faster through it, AMD Zen 5 and later:
// dense_internal.h, cpu_prefers_avx2_q4_0x8_chunk) or the VNNI one. For tests (both kernels reachable on
// any such CPU) and A/B runs. avx2_q4_0x8_chunk() reads the switch; set_avx2_q4_0x8_chunk sets it and
// returns whether it chooses anything under the active ISA (its table has both chunks).
bool avx2_q4_0x8_chunk();
bool set_avx2_q4_0x8_chunk(bool on);
// The input-sparse chunk Q4_0x8 rows take under the active ISA and that switch: "avx512-vnni", "avx2"
// (the AVX2 table, AVX-512 CPUs without VNNI/VBMI, or the switch on) or "scalar". For `bench` reports:
// the chunks give the same bits, not the same speed.
const char* q4_0x8_chunk_name();

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);  // round to nearest even

// n must be a multiple of dtype_block_elems(t).
void dequantize_row(dtype t, const void* src, float* dst, int64_t n);
// Reference encoders with ggml's rounding (Q8_0: d = amax/127; Q4_0: d = max/-8 by signed max).
// Only for types with dtype_info(t).encodable (F32, F16, BF16, Q8_0, Q4_0 and the layout-only Q8_0x8,
// Q4_0x8, Q6_0x8 of types.h); copies of other types are written as dtype_layout_type(t).
void quantize_row(dtype t, const float* src, void* dst, int64_t n);
// Rewrites n elements of Q8_0 / Q4_0 (from) as their x8 form, or of an x8 form back as Q8_0 / Q4_0:
// a byte permutation, lossless both ways (n a multiple of 256; src and dst must not overlap).
void regroup_x8(dtype from, const void* src, void* dst, int64_t n);

// y[r] = sum_c W[r, c] * x[c] for every row r. n_threads <= 0 means OpenMP's default.
// F32/F16/BF16 use f32 FMAs on the exact weights. Block types (Q8_0, Q4_0, K-quants, IQ4) first quantize x per block of 32
// (d = max|x|/127, f32 scale) and use integer dot products, like ggml; this adds ~3e-5 relative
// squared error for Gaussian-like x. Results do not depend on n_threads (bit-identical).
void gemv(const tensor_view& w, const float* x, float* y, int n_threads);

// ys[i] = ws[i] x for i < n_mats (q/k/v, gate/up: several matrices reading the same x), in one parallel
// region, x quantized once per thread for all matrices that take the same activations. Each ys[i] is
// bit-identical to gemv(ws[i], x, ys[i], ...); in decode this saves the threads' wake-ups between them.
void gemv_multi(const tensor_view* ws, float* const* ys, int n_mats, const float* x, int n_threads);
// The same with each matrix's own x (xs[i], cols floats; q/k/v with inputs pruned differently): a thread
// quantizes an x again only when the next matrix it runs reads another one. ys[i] is bit-identical to
// gemv(ws[i], xs[i], ys[i], ...).
void gemv_multi(const tensor_view* ws, float* const* ys, int n_mats, const float* const* xs, int n_threads);

// Y[t, r] = sum_c W[r, c] * X[t, c] for t < n (prefill); X is [n, cols], Y is [n, rows], row-major.
// F32: each Y row is bit-identical to gemv() of that token on the same ISA. For n >= 2, F16/BF16 run
// a blocked f32 GEMM (8 rows widened once, 32 tokens per register tile, one FMA chain per output in
// column order) and block types a blocked int8 GEMM (weights decoded once per 16-row panel, every
// token run past it, over the same quantized activations as gemv, exact integer block dots combined
// in a fixed f32 order): both bit-identical across ISAs and thread counts, within f32 rounding of
// gemv but not equal to it, so prefill and decode of one token may differ in the last bits.
void gemm(const tensor_view& w, const float* x, int64_t n, float* y, int n_threads);

int default_threads();

}  // namespace sl::kernels

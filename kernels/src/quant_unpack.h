// Decoders of every block-quantized weight type into one common form, the traits the generic kernels run on.
#pragma once

#include <cstdint>

#include "sparselens/kernels/types.h"

namespace sl::kernels::detail {

// One block decoded: element i is x[i] = a[i / 16] * q[i] + b[i / 16] with q a small signed integer.
// Every ggml type fits this form (scales per 16 or 32 elements; 32-granular types repeat each value),
// so one dequantizer and one integer-dot kernel per ISA serve all types. a and b are formed with the
// same float operations as ggml's dequantizers, so a * q + b (or a * q without a minimum) is
// bit-identical to ggml's dequantization.
using unpack_fn = void (*)(const uint8_t* blk, int8_t* q, float* a, float* b);

// How activations are quantized for the integer dot with a type: the partner ggml's CPU backend uses,
// so results follow llama.cpp's rounding, not just its arithmetic. All are stored as q8_act blocks of 32.
enum class act_kind : uint8_t {
    q8_f32,  // per 32: d = amax/127 in f32 (unused since Q8_0/Q4_0 follow ggml's fp16 d too)
    q8_0,    // per 32: as q8_f32, then d rounded to fp16 and s = d * sum (ggml block_q8_0)
    q8_1,    // per 32: as q8_0, and s = d*sum also rounded to fp16 (ggml block_q8_1)
    q8_k,    // per 256: d = max/127 by the signed max, q clamped to 127 (ggml block_q8_K); d repeated per 32
};

struct quant_traits {
    unpack_fn unpack = nullptr;
    act_kind act = act_kind::q8_f32;
    bool has_min = false;  // b is non-zero (x = a*q + b); otherwise b is all zeros and x = a*q
    bool min16 = false;    // b changes every 16 elements (Q2_K); otherwise it is constant per 32
};

// Traits of a block-quantized type (dtype_is_quantized(t)).
const quant_traits& quant_info(dtype t);

// The int8 activations, in blocks of 32 (see q8_act in dense_internal.h), dotted with one decoded
// block: returns sum_i x_i * (a q_i + b) with x_i = d[i / 32] * qs[i]. Scalar reference arithmetic:
// one exact integer sum per 16 elements, then scaled in f32.
float unpacked_dot(int64_t n, const int8_t* q, const float* a, const float* b, bool has_min, const int8_t* xq,
                   const float* xd);

}  // namespace sl::kernels::detail

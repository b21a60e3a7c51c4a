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

struct quant_traits {
    unpack_fn unpack = nullptr;
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

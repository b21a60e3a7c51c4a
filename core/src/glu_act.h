// Private: the GLU activations as scalar functions, for the methods' scores and the calibration's
// statistics (the engine's vector kernels are kernels::swiglu / kernels::geglu).
#pragma once

#include <cmath>

#include "sparselens/core/model.h"
#include "sparselens/kernels/attention.h"

namespace sl {

// act(g) in double: silu(g) = g / (1 + e^-g), or GELU's tanh approximation as ggml and Gemma use it.
inline double glu_act(glu_activation a, double g) {
    if (a == glu_activation::gelu_tanh) {
        constexpr double k = 0.79788456080286535588;  // sqrt(2 / pi)
        return 0.5 * g * (1.0 + std::tanh(k * g * (1.0 + 0.044715 * g * g)));
    }
    return g / (1.0 + std::exp(-g));
}

// |act(g)| in float, the score CATS, CHESS and gate pruning rank neurons by, for n values (out may be g):
// through the engine's own vector kernels (kernels::swiglu / kernels::geglu with up = 1; these scores
// were a serial 1.3% of a CATS decode with libm's expf per element), so a score is the activation the
// forward computes.
inline void glu_act_abs(glu_activation a, const float* g, float* out, int64_t n) {
    if (a == glu_activation::gelu_tanh)
        kernels::geglu(out, g, nullptr, n);
    else
        kernels::swiglu(out, g, nullptr, n);
    for (int64_t i = 0; i < n; ++i) out[i] = std::fabs(out[i]);
}

}  // namespace sl

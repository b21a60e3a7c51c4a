// Private: the GLU activations as scalar functions, for the methods' scores and the calibration's
// statistics (the engine's vector kernels are kernels::swiglu / kernels::geglu).
#pragma once

#include <cmath>

#include "sparselens/core/model.h"

namespace sl {

// act(g) in double: silu(g) = g / (1 + e^-g), or GELU's tanh approximation as ggml and Gemma use it.
inline double glu_act(glu_activation a, double g) {
    if (a == glu_activation::gelu_tanh) {
        constexpr double k = 0.79788456080286535588;  // sqrt(2 / pi)
        return 0.5 * g * (1.0 + std::tanh(k * g * (1.0 + 0.044715 * g * g)));
    }
    return g / (1.0 + std::exp(-g));
}

// |act(g)| in float, the score CATS, CHESS and gate pruning rank neurons by.
inline float glu_act_abs(glu_activation a, float g) {
    if (a == glu_activation::gelu_tanh) return static_cast<float>(std::fabs(glu_act(a, g)));
    return std::fabs(g / (1.0f + std::exp(-g)));
}

}  // namespace sl

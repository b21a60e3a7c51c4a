// Activation observer: what the forward pass reports per layer and token (zero cost when detached).
#pragma once

#include <cstdint>
#include <string_view>

#include "sparselens/core/sparsity.h"

namespace sl {

// Where in a layer an activation was taken. Widths: dim for attn_in/attn_out/mlp_in, hidden_dim for the
// MLP internals.
enum class probe : uint8_t {
    attn_in = 0,   // input of the q/k/v projections (after the attention RMSNorm)
    attn_out = 1,  // input of the o projection (concatenated head outputs)
    mlp_in = 2,    // input of gate/up (after the FFN RMSNorm)
    gate_pre = 3,  // W_gate x, before SiLU
    up_pre = 4,    // W_up x
    glu = 5,       // silu(gate) * up: the input of the down projection
};
inline constexpr int probe_count = 6;

constexpr std::string_view probe_name(probe p) {
    switch (p) {
        case probe::attn_in: return "attn_in";
        case probe::attn_out: return "attn_out";
        case probe::mlp_in: return "mlp_in";
        case probe::gate_pre: return "gate_pre";
        case probe::up_pre: return "up_pre";
        case probe::glu: return "glu";
    }
    return "?";
}

// Receives activations on the engine thread, synchronously, in layer order. `data` is [n_tokens, width]
// row-major for tokens at positions pos0 .. pos0 + n_tokens - 1 and is only valid during the call.
class activation_observer {
public:
    virtual ~activation_observer() = default;
    virtual void on_activation(int32_t layer, probe where, int32_t pos0, int32_t n_tokens, const float* data,
                               int32_t width) = 0;
    // With a sparsity method attached: the masks the kernels executed for one token, and their density.
    virtual void on_masks(int32_t layer, int32_t pos, const layer_masks& masks, const layer_density& density) {}
};

}  // namespace sl

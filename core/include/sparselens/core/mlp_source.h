// Where the sparse MLP path takes its weights from when they are not all in RAM (the flash-offload
// runtime): the engine asks for the units its masks need, then computes on the views it gets back with
// the same kernels, so the output is the one the in-RAM run of the same masks produces.
#pragma once

#include <cstdint>
#include <string>

#include "sparselens/core/sparsity.h"
#include "sparselens/kernels/types.h"

namespace sl {

// One layer's MLP matrices as the kernels read them: row-major [out, in] (`rows`) and input-major
// copies (`cols`, as context::set_method builds them). A view whose data is null was not provided;
// only the rows/columns the masks name are valid.
struct mlp_views {
    tensor_view rows[3];  // gate, up, down
    tensor_view cols[3];
};

class mlp_weight_source {
public:
    enum class stage : uint8_t {
        inputs,  // select_mlp_inputs ran: gate_in, up_in, neurons_pre are final
        down,    // the down projection's inputs (neurons_pre ∩ neurons_post ∩ down_in) are final
    };
    virtual ~mlp_weight_source() = default;
    // Makes the weights `masks` need at `st` valid in `out`; false on a failure (then last_error()).
    virtual bool fetch(int32_t layer, stage st, const layer_masks& masks, mlp_views& out) = 0;
    virtual const std::string& last_error() const = 0;
};

}  // namespace sl

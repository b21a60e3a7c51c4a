// Engine-thread observer of one run: per-token activations and kept masks for the Activations view,
// per-token densities for the Prompt view, and per-neuron GLU statistics for the Neurons view.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sparselens/core/model.h"
#include "sparselens/core/observer.h"
#include "sparselens/views/snapshots.h"

namespace sl::views::detail {

// Default memory budget for recorded activations: every (layer, probe) when it fits, else only the
// selected one (re-run on demand for another selection).
inline constexpr uint64_t activation_budget_bytes = uint64_t{256} << 20;

class activation_recorder final : public activation_observer {
public:
    // `max_tokens`: positions the run can reach. Records every (layer, probe) when that fits in
    // `budget_bytes`, else only (layer, where), capped to the tokens that fit.
    activation_recorder(const model_hparams& hp, int32_t max_tokens, int32_t layer, probe where,
                        uint64_t budget_bytes = activation_budget_bytes);

    void on_activation(int32_t layer, probe where, int32_t pos0, int32_t n_tokens, const float* data,
                       int32_t width) override;
    void on_masks(int32_t layer, int32_t pos, const layer_masks& masks, const layer_density& density) override;

    // Positions < n_prompt feed the prompt-side GRIFFIN statistic, the rest the generation side.
    void set_prompt_length(int32_t n_prompt) { m_n_prompt = n_prompt; }
    int32_t prompt_length() const { return m_n_prompt; }
    // Forward passes seen so far (highest position + 1).
    int32_t tokens() const { return m_tokens; }

    bool records_all() const { return m_all; }
    bool has(int32_t layer, probe where) const;
    // The recorded slice of the first n_tokens positions, or nullptr when (layer, where) was not recorded.
    std::shared_ptr<activation_snapshot> snapshot(int32_t layer, probe where, int32_t n_tokens,
                                                  generation_id gen) const;

    // Mean over layers of the MLP / attention density the masks gave position `pos` (1 without masks).
    float mlp_density(int32_t pos) const;
    float attn_density(int32_t pos) const;

    // Per layer, per neuron: sum of glu^2 over every position, and the GRIFFIN statistic
    // sum_t (glu_tj / ||glu_t||)^2 over prompt and generated positions.
    struct glu_stats {
        std::vector<double> sumsq, griffin_prompt, griffin_gen;
        int64_t n = 0;
    };
    const std::vector<glu_stats>& neuron_stats() const { return m_glu; }

private:
    static int slot(int32_t layer, probe where) { return layer * probe_count + static_cast<int>(where); }
    int32_t width_of(probe where) const;
    // Mask category of a probe: 0 attn_in, 1 attn_out, 2 mlp_in, 3 neurons.
    static int mask_kind(probe where);

    model_hparams m_hp;
    int32_t m_max_tokens = 0;  // rows each recorded slot can hold
    bool m_all = false;
    int32_t m_layer = 0;
    probe m_where = probe::glu;
    int32_t m_n_prompt = 0;
    int32_t m_tokens = 0;
    std::vector<std::vector<float>> m_values;               // [slot] rows of width_of(probe)
    std::vector<std::vector<uint8_t>> m_kept;               // [layer * 4 + kind] rows; empty: no masks seen
    std::vector<float> m_mlp_density_sum, m_attn_density_sum;  // per position, summed over layers
    std::vector<int32_t> m_density_layers;                  // layers that reported per position
    std::vector<glu_stats> m_glu;
};

}  // namespace sl::views::detail

// The online device simulator seen by the engine, recording one Cache-panel frame per token and
// summing the simulator's figures across resets (eval_method resets it at every window).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sparselens/core/model.h"
#include "sparselens/core/residency.h"
#include "sparselens/sim/residency.h"
#include "sparselens/views/snapshots.h"

namespace sl::views::detail {

// Frames kept per run at most (bytes of slot states); later tokens are still simulated, not drawn.
inline constexpr uint64_t cache_frames_budget_bytes = uint64_t{64} << 20;

class cache_recorder final : public residency_source {
public:
    // `frames`: keep per-token frames (generation) or only the totals (evaluation). `built`, the method
    // the run uses, sizes FFSplit's exact and compressed units from its split.
    static result<std::unique_ptr<cache_recorder>> create(const model& m, const std::string& method,
                                                          const sim::sim_params& p, bool frames,
                                                          const sparsity_method* built = nullptr);
    // The simulator's unit layout for a method (a session run records it with the device setting).
    static result<std::string> layout_of(const std::string& method, const sparsity_method* built = nullptr,
                                         int32_t n_layers = 0);

    const uint8_t* resident_inputs(int32_t layer) const override { return m_inner->resident_inputs(layer); }
    const uint8_t* resident_neurons(int32_t layer) const override { return m_inner->resident_neurons(layer); }
    void on_token(int32_t layer, int32_t pos, const layer_masks& masks) override;
    void reset() override;

    // The simulator's last failure (empty when none).
    const std::string& last_error() const { return m_inner->last_error(); }
    // Totals over every simulated token since creation (resets included).
    double tokens_per_s() const;
    double hit_rate() const;
    uint64_t tokens() const { return m_done_tokens + m_inner->sim().n_tokens(); }
    // The simulated unit layout as layout_of() named it (layout_parse reads it back).
    const std::string& layout() const { return m_layout_text; }
    // Copy of the frames so far.
    std::shared_ptr<cache_snapshot_series> series(generation_id gen) const;
    const sim::run_report report() const { return m_inner->sim().report(); }

private:
    cache_recorder() = default;
    void harvest();  // adds the inner simulator's figures to the totals
    void record_frame(int32_t pos);

    std::unique_ptr<sim::sim_residency> m_inner;
    sim::memory_map m_map;
    std::string m_layout_text;
    uint32_t m_page = 0;
    int32_t m_n_layers = 0;
    bool m_frames = false;
    uint64_t m_frame_bytes = 0;
    std::vector<std::vector<uint32_t>> m_active;   // per stream, this token's units
    std::vector<std::vector<uint8_t>> m_prev;      // per stream, residency before this token
    cache_snapshot_series m_series;
    bool m_truncated = false;
    uint64_t m_done_tokens = 0, m_done_hits = 0, m_done_misses = 0;
    double m_done_latency = 0;
};

}  // namespace sl::views::detail

// Helpers shared by the calibration sources (not part of the public API).
#pragma once

#include <algorithm>
#include <numeric>
#include <vector>

#include "sparselens/core/calibration.h"

namespace sl {

// ||W_down[:, j]||_2 for every neuron j, dequantizing row by row.
std::vector<float> calibration_down_column_norms(const tensor_view& w_down);

// Path, format, shape and weights hash of a loaded model.
calibration_fingerprint calibration_fingerprint_of(const model& m);

// |silu(W_gate x)| queries answered from the signed gate pre-activation histograms (see hist_slot).
double gate_act_density(const layer_calibration& c, float t, glu_activation a);
float gate_act_threshold(const layer_calibration& c, float density, glu_activation a);

// Neuron indices ordered by decreasing score, ties towards the lower index.
template <class T>
void rank_desc(const std::vector<T>& score, std::vector<int32_t>& order) {
    order.resize(score.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)];
    });
}

}  // namespace sl

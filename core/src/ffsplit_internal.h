// Private: what FFSplit's dense transform and its compact, executed form share (one split, two forms).
#pragma once

#include <cstdint>
#include <vector>

#include "low_rank.h"
#include "sparselens/core/ffsplit.h"

namespace sl {

// One layer's split: which neurons stay exact, the rank of the light part and its byte report.
struct ffsplit_layer_plan {
    std::vector<int32_t> heavy, light;  // sorted ascending
    int64_t rank = 0;                   // svd; 0 for q4
    ffsplit_layer_report rep;           // n_heavy, rank, dense_bytes, heavy_share (bytes: caller)
};

// Mode, fractions, calibration fit and q4's dim % 32.
outcome ffsplit_validate(const model& m, const calibration& cal, const ffsplit_params& params);
ffsplit_layer_plan ffsplit_plan_layer(const model& m, const calibration& cal, const ffsplit_params& params, size_t l);

// Rank-r factors of the rows `rows` of w: w[rows] ~= a [n_rows, r] * b [r, cols].
low_rank_factors rows_low_rank(const matrix_rm& w, const std::vector<int32_t>& rows, int64_t r);

// Round trip through Q4_0 (blocks of 32 along n): what a light row becomes when stored in 4 bits.
void q4_round_trip(float* v, int64_t n, std::vector<uint8_t>& blocks);

}  // namespace sl

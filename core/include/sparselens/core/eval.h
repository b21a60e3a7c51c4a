// Accuracy and speed of a sparsity method against the dense model on the same windows of text.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sparselens/core/context.h"
#include "sparselens/core/residency.h"
#include "sparselens/core/result.h"
#include "sparselens/core/sparsity.h"

namespace sl {

// out = log_softmax(logits) over n entries, accumulated in double (the scoring every evaluation uses).
void log_softmax(const float* logits, int32_t n, float* out);
// KL(p || q) = sum exp(log_p) (log_p - log_q) over n entries of two log-distributions, clamped at 0.
double kl_divergence(const float* log_p, const float* log_q, int32_t n);

struct eval_params {
    int32_t n_ctx = 128;       // window length; each window starts with BOS
    int32_t max_windows = 16;  // 0: every full window of the text
    int32_t bos_id = 1;
    progress_fn progress;      // fraction of windows done; false cancels
};

eval_params eval_default_params();

// Log-probabilities of the dense model at the scored positions of each window, computed once and
// shared by every method evaluated on the same text.
struct dense_reference {
    int32_t n_ctx = 0;
    int32_t n_windows = 0;
    int32_t vocab = 0;
    std::vector<int32_t> tokens;     // the windows' tokens, BOS-prefixed, n_windows * n_ctx
    std::vector<float> logprobs;     // [n_windows, n_ctx / 2 - 1 ... ] see scored_positions()
    double ppl = 0.0;
    double decode_tokens_per_second = 0.0;
    std::vector<double> window_seconds;  // decode time of each window (for per-window speed ratios)
    stage_times stages;                  // where the decoded tokens' time went (context::set_stage_timing)
    int32_t first_scored() const { return n_ctx / 2; }
    int32_t scored_per_window() const { return n_ctx - 1 - first_scored(); }
};

struct eval_result {
    double ppl = 0.0;
    double ppl_dense = 0.0;
    double kld_mean = 0.0;        // mean KL(dense || method) over scored tokens
    double kld_p99 = 0.0;
    double top1_agreement = 0.0;  // share of scored tokens whose argmax equals the dense argmax
    double mlp_density = 1.0;     // mean over layers and tokens of the weights read (gate+up+down)
    double attn_density = 1.0;
    std::vector<layer_density> per_layer;  // mean per layer
    double decode_tokens_per_second = 0.0;  // measured, this machine, method path
    double dense_decode_tokens_per_second = 0.0;
    // Decode speed vs dense per window (dense time / method time on the same tokens): the median and
    // the quartiles, so a noisy CPU shows its spread. The dense method is not re-timed: its speed is the
    // reference's single measurement and its ratio exactly 1.
    double speed_ratio_median = 0.0, speed_ratio_p25 = 0.0, speed_ratio_p75 = 0.0;
    int64_t n_scored = 0;
    // Decode time by stage of the forward pass, summed over the decoded (scored) tokens: the method's
    // and the dense reference's (the dense method's are the reference's, as its speed is).
    stage_times stages, dense_stages;
    // Weight bytes per token each stage read (stage_weight_bytes): the method's at the read densities it
    // reported over every token it saw, and dense's (every weight). With the stage times they give each
    // stage's ideal (stage_ideal_ms).
    double stage_bytes[stage_count] = {}, dense_stage_bytes[stage_count] = {};
};

// Runs the dense model (through the per-token path, so full-density methods compare bit for bit).
// The first half of each window is the prompt (prefill), the second half is decoded token by token.
result<dense_reference> eval_dense_reference(context& ctx, std::span<const int32_t> tokens, const eval_params& params);

// Evaluates `method` on the windows of `ref`. `residency` (may be null) is reset per window and fed the
// masks, for cache-aware methods.
result<eval_result> eval_method(context& ctx, const dense_reference& ref, sparsity_method& method,
                                residency_source* residency, const eval_params& params);

}  // namespace sl

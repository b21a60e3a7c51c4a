// Calibration: activation statistics of a model over a text, shared by every sparsity method, and their file.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sparselens/core/model.h"
#include "sparselens/core/result.h"

namespace sl {

// Where a magnitude distribution is taken. Several sites name the same tensor (TEAL thresholds each
// projection separately, so the methods ask per projection; the data is stored once and aliased):
//   q_in = k_in = v_in   input of the q/k/v projections (probe attn_in)
//   o_in                 input of the o projection (probe attn_out)
//   gate_in = up_in      input of gate/up (probe mlp_in)
//   down_in = glu_abs    input of down: |silu(gate) * up| (probe glu)
//   gate_act             |silu(W_gate x)|: what CATS thresholds
//   up_act               |W_up x|
//   chess_score          E[|a_up_i|] * |silu(W_gate x)_i| over all channels i: what CHESS thresholds (eq. 7-9).
//                        Each channel has a caustic at E_i * 0.2785 (see hist_slot); the spread of E_i
//                        smooths their mixture (0.04% density error on stories260K), but a model whose
//                        E|a_up| were nearly equal across channels would see up to ~1% near that score.
enum class site : uint8_t {
    q_in = 0, k_in, v_in, o_in, gate_in, up_in, down_in, gate_act, up_act, glu_abs, chess_score
};
inline constexpr int site_count = 11;
std::string_view site_name(site s);
// Parses a name printed by site_name(); false when unknown.
bool site_from_name(std::string_view name, site& out);

// Distinct stored distributions (the storage behind the aliased sites above), plus the signed gate
// pre-activation W_gate x split by sign (|v| of the positive and of the negative entries).
// Why the latter: |silu(g)| has a caustic at silu's minimum, 0.2785 (g = -1.278): its density is
// infinite there, ~1.5% of all gate entries of stories260K lie within 0.1% of that value, and no bin
// width inverts it to 0.5%. The pre-activation's density is smooth, so gate_act thresholds and
// densities are computed from these two histograms through silu's inverse branches (the gate_act
// histogram is still recorded, for display).
enum class hist_slot : uint8_t {
    attn_in = 0, attn_out, mlp_in, glu, gate_act, up_act, chess_score, gate_pre_pos, gate_pre_neg
};
inline constexpr int hist_slot_count = 9;
hist_slot site_slot(site s);
std::string_view hist_slot_name(hist_slot h);

// Histogram of |v| with log-spaced bins taken straight from the float's bit pattern: the bin of a
// positive finite value is its bits >> (23 - octave_bits), i.e. exponent plus the top octave_bits
// mantissa bits. So every octave has 2^octave_bits bins (default 128: relative width 0.78%), the
// whole float range is covered without knowing it in advance, binning is one shift, and histograms
// merge by adding counts. Exact zeros are counted apart; NaN/inf are counted and ignored.
// Inversion interpolates linearly inside a bin, so its density error is a fraction of one bin's mass:
// for a smooth distribution well under 0.1%. A point mass (many equal values) cannot be split by any
// threshold: the histogram spreads it over its bin, so a threshold inside that bin keeps a share of
// it on paper but, in fact, all or none of it.
class magnitude_histogram {
public:
    magnitude_histogram() = default;
    explicit magnitude_histogram(int32_t octave_bits);

    void add(float v);  // takes |v|
    void add_abs(std::span<const float> v);
    void merge(const magnitude_histogram& other);  // same octave_bits
    // Drops the empty bins at both ends (after accumulation; add() still works afterwards).
    void trim();

    // Fraction of finite entries with |v| >= t, in [0, 1]. t <= 0 gives 1.
    float density_at_threshold(float t) const;
    // The t for which density_at_threshold(t) == density (up to the bin interpolation): density >= 1
    // gives 0 (keep everything, zeros included), density <= 0 gives +inf (keep nothing).
    float threshold_for_density(float density) const;

    uint64_t count() const { return m_total; }  // finite entries, zeros included
    uint64_t zeros() const { return m_zeros; }
    uint64_t nonfinite() const { return m_nonfinite; }
    float max_abs() const { return m_max; }  // largest finite |v| seen (0 when empty)
    int32_t octave_bits() const { return m_octave_bits; }

    // Raw storage, for the file format: counts[i] is the count of bin first_bin + i.
    uint32_t first_bin() const { return m_first; }
    const std::vector<uint64_t>& counts() const { return m_counts; }
    // Rebuilds from stored parts; false when they are inconsistent (bins out of range, totals overflow).
    bool assign(int32_t octave_bits, uint32_t first_bin, std::vector<uint64_t> counts, uint64_t zeros,
                uint64_t nonfinite, float max_abs);

    bool operator==(const magnitude_histogram&) const = default;

private:
    float bin_lower(uint32_t bin) const;
    float bin_upper(uint32_t bin) const;
    void grow_to(uint32_t bin);

    int32_t m_octave_bits = 7;
    uint32_t m_first = 0;            // bin index of m_counts[0]
    std::vector<uint64_t> m_counts;  // positive finite values only
    uint64_t m_total = 0;            // finite entries incl. zeros
    uint64_t m_zeros = 0;
    uint64_t m_nonfinite = 0;
    float m_max = 0.0f;
};

// Densities at which per-neuron top-k membership frequency is recorded, and neuron fractions k at
// which flocking Jaccard similarities are recorded.
inline constexpr std::array<float, 3> calibration_topk_densities = {0.10f, 0.25f, 0.50f};
inline constexpr std::array<float, 3> calibration_flock_fractions = {0.10f, 0.25f, 0.50f};
inline constexpr int calibration_flock_headline = 2;  // index of k = 50% (the summary value)

struct layer_calibration {
    std::array<magnitude_histogram, hist_slot_count> hist;

    // Per GLU neuron j (hidden_dim), averaged over every calibration token:
    std::vector<float> mean_abs_up;        // E|W_up x|_j             (CHESS eq. 6)
    std::vector<float> mean_abs_gate_act;  // E|silu(W_gate x)_j|
    std::vector<float> mean_abs_glu;       // E|glu_j|
    std::vector<float> mean_sq_glu;        // E[glu_j^2]
    std::vector<float> down_col_norm;      // ||W_down[:, j]||_2 (dequantized)
    // FFSplit heavy-hitter score (paper eq. 3). FFSplit writes FFN(X) = sigma(X U) V with U the first
    // layer [d, d_ff] and V the second [d_ff, d]; removing neuron j changes the output by
    // ||sigma(X U_{:,j})||_F * ||V_{j,:}||_F. For a GLU MLP "sigma(X U_{:,j})" is the neuron's GLU
    // output (silu(gate_j) * up_j over the calibration tokens X) and V_{j,:} is column j of our
    // W_down [dim, hidden]. Stored per token (RMS instead of the Frobenius sum, same ranking):
    // heavy_hitter[j] = sqrt(E[glu_j^2]) * ||W_down[:, j]||_2 = ||sigma(X U_j)||_F / sqrt(n_tokens) * ||V_j||.
    std::vector<float> heavy_hitter;
    // topk_freq[i][j]: fraction of tokens in which neuron j is among the top calibration_topk_densities[i]
    // * hidden neurons by |glu| (per-token top-k, ties broken towards lower index).
    std::array<std::vector<float>, calibration_topk_densities.size()> topk_freq;

    // Per input channel i (dim) of gate/up (probe mlp_in) and of q/k/v (probe attn_in):
    std::vector<float> mlp_in_mean_abs, mlp_in_max_abs;
    std::vector<float> attn_in_mean_abs, attn_in_max_abs;

    // Flocking (GRIFFIN section 4.1): each window is split into a "prompt" half and a "generation"
    // half; per half s_j = ||Zbar[:, j]||_2 with Zbar the GLU rows normalised to unit length, and the
    // Jaccard similarity of the two halves' top-k sets by s (k = fraction * hidden), averaged over
    // windows. flock_between is the same between the prompt halves of consecutive windows (different
    // text): flocking is meaningful where within >> between.
    std::array<float, calibration_flock_fractions.size()> flock_within{};
    std::array<float, calibration_flock_fractions.size()> flock_between{};

    bool operator==(const layer_calibration&) const = default;
};

// What the calibration was computed from: checked before a method reuses it.
struct calibration_fingerprint {
    std::string model_path;
    std::string model_format;
    std::string model_name;
    uint64_t file_bytes = 0;
    int32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0;
    uint64_t weights_hash = 0;  // FNV-1a 64 of a sample of every weight tensor's bytes (see calibration_weights_hash)

    bool operator==(const calibration_fingerprint&) const = default;
};

struct calibration_params {
    int32_t n_ctx = 128;         // window length; each window starts with BOS (perplexity-style)
    int32_t max_tokens = 16384;  // use at most this many text tokens (full windows only); <= 0: all
    int32_t n_threads = 0;       // forward-pass threads (0: default)
    int32_t bos_id = 1;
    int32_t hist_octave_bits = 7;  // 2^bits histogram bins per octave (4..10)
    // The CHESS score needs E|a_up| of the whole text before any score can be binned. When the
    // gate activations of all tokens fit in this many bytes they are kept from the first pass;
    // otherwise the text is run a second time. 0 forces the second pass.
    int64_t chess_buffer_bytes = int64_t{256} << 20;
    progress_fn progress;  // fraction done; return false to cancel (-> result::cancelled())
};

calibration_params calibration_default_params();

struct calibration {
    calibration_fingerprint model;
    // Creation parameters and the text used.
    int32_t n_ctx = 0;
    int32_t bos_id = 1;
    glu_activation act = glu_activation::silu;  // the model's GLU activation: gate_act is |act(gate)|
    int32_t hist_octave_bits = 7;
    int64_t n_tokens = 0;   // tokens run through the model (n_windows * n_ctx)
    int32_t n_windows = 0;
    uint64_t text_hash = 0; // FNV-1a 64 of the little-endian int32 ids of those tokens (before BOS substitution)
    std::string created;    // UTC, ISO 8601
    double seconds = 0.0;   // wall time of calibrate()
    std::vector<layer_calibration> layers;

    const magnitude_histogram& histogram(int32_t layer, site s) const;
    // Fraction of entries with |v| >= t is `density`; see magnitude_histogram (gate_act: see
    // hist_slot). density >= 1 gives 0, density <= 0 gives +inf, more than the non-zero share gives
    // the smallest positive float. Layer must be valid.
    float threshold_for_density(int32_t layer, site s, float density) const;
    float density_at_threshold(int32_t layer, site s, float t) const;
    // CHESS eq. 9: t_i = T / E[|a_up_i|] with T = threshold_for_density(layer, chess_score, density);
    // prune |silu(gate_i)| < t_i. Channels with E|a_up_i| == 0 get +inf.
    std::vector<float> chess_channel_thresholds(int32_t layer, float density) const;
    // Neuron indices by decreasing heavy_hitter score (ties: lower index first); the first
    // round(fraction * hidden) of them.
    std::vector<int32_t> heavy_hitters(int32_t layer, float fraction) const;
    // Share of the total heavy-hitter score held by those neurons, in [0, 1].
    float heavy_hitter_share(int32_t layer, float fraction) const;

    bool operator==(const calibration&) const = default;
};

// Runs `tokens` through the model in windows of params.n_ctx (token 0 of each window replaced by
// BOS) with an observer attached and accumulates the statistics above. Needs at least one full window.
result<calibration> calibrate(const model& m, std::span<const int32_t> tokens,
                              const calibration_params& params = calibration_default_params());

// Empty outcome when `cal` was made for a model of m's shape; otherwise a one-line message naming
// the first mismatch ("calibration is for dim 288, model has 64"). Weights are not compared: a Q8_0
// and an F32 file of the same network share a calibration. Use calibration_weights_hash for that.
outcome calibration_matches(const calibration& cal, const model& m);
uint64_t calibration_weights_hash(const model& m);

// File format (version 1), little-endian:
//   "SLCALIB\0" | u32 version | u32 header_bytes | header JSON (UTF-8) | u64 payload_bytes | payload |
//   u64 FNV-1a 64 of every byte from version up to the end of the payload.
// The JSON holds the fingerprint, parameters, per-layer scalars and an index of the payload's arrays
// (name, element type, offset, count); the payload holds the arrays (f32 / u64). Loading validates the
// checksum, then every offset and count against the payload and the model shape in the header, so
// truncated, bit-flipped or foreign files give a one-line error naming the file.
inline constexpr uint32_t calibration_file_version = 1;
outcome calibration_save(const calibration& cal, const std::string& path);
result<calibration> calibration_load(const std::string& path);
// In-memory variants (`name` prefixes error messages).
std::vector<uint8_t> calibration_serialize(const calibration& cal);
result<calibration> calibration_deserialize(std::span<const uint8_t> bytes, const std::string& name);

// FNV-1a 64 (used for text and weight hashes and the file checksum).
uint64_t fnv1a64(const void* data, size_t n, uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace sl

// Log-binned magnitude histograms (bins from float bit patterns), site naming and FNV-1a hashing.
#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

#include "sparselens/core/calibration.h"

namespace sl {

namespace {

constexpr uint32_t abs_mask = 0x7fffffffu;
constexpr uint32_t inf_bits = 0x7f800000u;

constexpr std::array<std::string_view, site_count> site_names = {
    "q_in", "k_in", "v_in", "o_in", "gate_in", "up_in", "down_in", "gate_act", "up_act", "glu_abs", "chess_score"};
constexpr std::array<std::string_view, hist_slot_count> slot_names = {
    "attn_in", "attn_out", "mlp_in", "glu", "gate_act", "up_act", "chess_score", "gate_pre_pos", "gate_pre_neg"};

// Number of bins covering all positive finite floats for a given resolution.
uint32_t bin_limit(int32_t octave_bits) { return inf_bits >> (23 - octave_bits); }

}  // namespace

std::string_view site_name(site s) {
    const auto i = static_cast<size_t>(s);
    return i < site_names.size() ? site_names[i] : "?";
}

bool site_from_name(std::string_view name, site& out) {
    for (size_t i = 0; i < site_names.size(); ++i)
        if (site_names[i] == name) {
            out = static_cast<site>(i);
            return true;
        }
    return false;
}

hist_slot site_slot(site s) {
    switch (s) {
        case site::q_in:
        case site::k_in:
        case site::v_in: return hist_slot::attn_in;
        case site::o_in: return hist_slot::attn_out;
        case site::gate_in:
        case site::up_in: return hist_slot::mlp_in;
        case site::down_in:
        case site::glu_abs: return hist_slot::glu;
        case site::gate_act: return hist_slot::gate_act;
        case site::up_act: return hist_slot::up_act;
        case site::chess_score: return hist_slot::chess_score;
    }
    assert(false && "bad site");
    return hist_slot::attn_in;
}

std::string_view hist_slot_name(hist_slot h) {
    const auto i = static_cast<size_t>(h);
    return i < slot_names.size() ? slot_names[i] : "?";
}

uint64_t fnv1a64(const void* data, size_t n, uint64_t seed) {
    const auto* p = static_cast<const uint8_t*>(data);
    uint64_t h = seed;
    for (size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

magnitude_histogram::magnitude_histogram(int32_t octave_bits) : m_octave_bits(octave_bits) {
    assert(octave_bits >= 4 && octave_bits <= 10);
}

float magnitude_histogram::bin_lower(uint32_t bin) const {
    return std::bit_cast<float>(bin << (23 - m_octave_bits));
}

float magnitude_histogram::bin_upper(uint32_t bin) const {
    if (bin + 1 >= bin_limit(m_octave_bits)) return std::numeric_limits<float>::max();
    return std::bit_cast<float>((bin + 1) << (23 - m_octave_bits));
}

void magnitude_histogram::grow_to(uint32_t bin) {
    // Grow by at least one octave in the direction needed, so a histogram reallocates a few dozen
    // times at most over the whole float range.
    const uint32_t limit = bin_limit(m_octave_bits);
    const uint32_t margin = 1u << m_octave_bits;
    if (m_counts.empty()) {
        m_first = bin >= margin / 2 ? bin - margin / 2 : 0;
        m_counts.assign(std::min(margin, limit - m_first), 0);
        return;
    }
    const uint32_t end = m_first + static_cast<uint32_t>(m_counts.size());
    if (bin < m_first) {
        const uint32_t new_first = bin >= margin ? bin - margin : 0;
        m_counts.insert(m_counts.begin(), m_first - new_first, 0);
        m_first = new_first;
    } else if (bin >= end) {
        const uint32_t new_end = std::min(limit, std::max(bin + 1, end + margin));
        m_counts.resize(new_end - m_first, 0);
    }
}

void magnitude_histogram::add(float v) { add_abs({&v, 1}); }

void magnitude_histogram::add_abs(std::span<const float> values) {
    const int shift = 23 - m_octave_bits;
    for (float v : values) {
        const uint32_t bits = std::bit_cast<uint32_t>(v) & abs_mask;
        if (bits == 0) {
            ++m_zeros;
            ++m_total;
            continue;
        }
        if (bits >= inf_bits) {
            ++m_nonfinite;
            continue;
        }
        const uint32_t bin = bits >> shift;
        // Unsigned wrap-around makes bins below m_first fail this test as well.
        if (bin - m_first >= m_counts.size()) grow_to(bin);
        ++m_counts[bin - m_first];
        ++m_total;
        const float a = std::bit_cast<float>(bits);
        if (a > m_max) m_max = a;
    }
}

void magnitude_histogram::merge(const magnitude_histogram& o) {
    assert(o.m_octave_bits == m_octave_bits);
    for (size_t i = 0; i < o.m_counts.size(); ++i) {
        if (o.m_counts[i] == 0) continue;
        const uint32_t bin = o.m_first + static_cast<uint32_t>(i);
        if (bin - m_first >= m_counts.size()) grow_to(bin);
        m_counts[bin - m_first] += o.m_counts[i];
    }
    m_total += o.m_total;
    m_zeros += o.m_zeros;
    m_nonfinite += o.m_nonfinite;
    m_max = std::max(m_max, o.m_max);
}

void magnitude_histogram::trim() {
    size_t lo = 0, hi = m_counts.size();
    while (lo < hi && m_counts[lo] == 0) ++lo;
    while (hi > lo && m_counts[hi - 1] == 0) --hi;
    if (lo == hi) {
        m_counts.clear();
        m_first = 0;
        return;
    }
    m_counts.erase(m_counts.begin() + static_cast<std::ptrdiff_t>(hi), m_counts.end());
    m_counts.erase(m_counts.begin(), m_counts.begin() + static_cast<std::ptrdiff_t>(lo));
    m_first += static_cast<uint32_t>(lo);
}

float magnitude_histogram::density_at_threshold(float t) const {
    if (!(t > 0.0f)) return 1.0f;
    if (m_total == 0 || m_counts.empty() || t > m_max) return 0.0f;
    const uint32_t tb = std::bit_cast<uint32_t>(t) >> (23 - m_octave_bits);
    double above = 0.0;
    for (size_t i = m_counts.size(); i-- > 0;) {
        const uint32_t bin = m_first + static_cast<uint32_t>(i);
        if (bin < tb) break;
        if (bin > tb) {
            above += static_cast<double>(m_counts[i]);
            continue;
        }
        // The threshold's own bin: values are taken as spread uniformly over [lo, min(hi, max)].
        const double lo = bin_lower(bin);
        const double hi = std::min<double>(bin_upper(bin), m_max);
        // A bin squeezed to a point by the maximum holds only values >= lo.
        const double frac = hi > lo ? std::clamp((hi - t) / (hi - lo), 0.0, 1.0) : (t <= lo ? 1.0 : 0.0);
        above += frac * static_cast<double>(m_counts[i]);
    }
    return static_cast<float>(above / static_cast<double>(m_total));
}

float magnitude_histogram::threshold_for_density(float density) const {
    if (!(density < 1.0f)) return 0.0f;
    if (!(density > 0.0f)) return std::numeric_limits<float>::infinity();
    if (m_total == 0) return 0.0f;
    const double target = static_cast<double>(density) * static_cast<double>(m_total);
    double above = 0.0;
    for (size_t i = m_counts.size(); i-- > 0;) {
        const double c = static_cast<double>(m_counts[i]);
        if (c == 0.0) continue;
        if (above + c >= target) {
            const uint32_t bin = m_first + static_cast<uint32_t>(i);
            const double lo = bin_lower(bin);
            const double hi = std::min<double>(bin_upper(bin), m_max);
            const double f = (target - above) / c;
            return static_cast<float>(std::max(lo, hi - f * (hi - lo)));
        }
        above += c;
    }
    // More density asked for than there are non-zero entries: keep every non-zero one. Zeros add
    // nothing to a product, so this gives dense results at the lowest cost.
    return std::numeric_limits<float>::denorm_min();
}

bool magnitude_histogram::assign(int32_t octave_bits, uint32_t first_bin, std::vector<uint64_t> counts,
                                 uint64_t zeros, uint64_t nonfinite, float max_abs) {
    if (octave_bits < 4 || octave_bits > 10) return false;
    const uint32_t limit = bin_limit(octave_bits);
    if (first_bin > limit || counts.size() > limit - first_bin) return false;
    uint64_t total = zeros;
    for (uint64_t c : counts)
        if (__builtin_add_overflow(total, c, &total)) return false;
    if (!std::isfinite(max_abs) || max_abs < 0.0f) return false;
    // The maximum must lie in the highest occupied bin (0 when there are no non-zero entries).
    size_t hi = counts.size();
    while (hi > 0 && counts[hi - 1] == 0) --hi;
    if (hi == 0) {
        if (max_abs != 0.0f) return false;
    } else {
        const uint32_t max_bin = std::bit_cast<uint32_t>(max_abs) >> (23 - octave_bits);
        if (max_abs == 0.0f || max_bin != first_bin + hi - 1) return false;
    }
    m_octave_bits = octave_bits;
    m_first = first_bin;
    m_counts = std::move(counts);
    m_total = total;
    m_zeros = zeros;
    m_nonfinite = nonfinite;
    m_max = max_abs;
    return true;
}

}  // namespace sl

// Sampling strategies; mirrors llama2.c run.c so a given seed reproduces its token choices.
#include "sparselens/core/sampler.h"

#include <algorithm>
#include <cmath>

namespace sl {

sampler_params sampler_default_params() { return {}; }

void softmax(std::span<float> x) {
    if (x.empty()) return;
    const float max_val = *std::max_element(x.begin(), x.end());
    float sum = 0.0f;
    for (float& v : x) {
        v = std::exp(v - max_val);
        sum += v;
    }
    for (float& v : x) v /= sum;
}

sampler::sampler(int32_t vocab_size, const sampler_params& params)
    : m_vocab(vocab_size), m_params(params), m_state(params.seed ? params.seed : 0x2545F4914F6CDD1Dull) {
    m_candidates.reserve(static_cast<size_t>(vocab_size));
}

int32_t sampler::argmax(std::span<const float> values) {
    // First maximum wins, as in run.c; NaN entries are never chosen (0 if every entry is NaN).
    int32_t best = -1;
    for (size_t i = 0; i < values.size(); ++i) {
        if (std::isnan(values[i])) continue;
        if (best < 0 || values[i] > values[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
    }
    return best < 0 ? 0 : best;
}

uint32_t sampler::next_u32() {
    m_state ^= m_state >> 12;
    m_state ^= m_state << 25;
    m_state ^= m_state >> 27;
    return static_cast<uint32_t>((m_state * 0x2545F4914F6CDD1Dull) >> 32);
}

float sampler::next_f32() { return static_cast<float>(next_u32() >> 8) / 16777216.0f; }

int32_t sampler::sample_mult(std::span<const float> probs, float coin) const {
    float cdf = 0.0f;
    for (size_t i = 0; i < probs.size(); ++i) {
        cdf += probs[i];
        if (coin < cdf) return static_cast<int32_t>(i);
    }
    return static_cast<int32_t>(probs.size()) - 1;  // rounding: fall back to the last token
}

int32_t sampler::sample_topp(std::span<const float> probs, float coin) {
    // Tokens below (1 - p) / (n - 1) cannot be in the nucleus; dropping them first keeps the sort short.
    const float cutoff = (1.0f - m_params.top_p) / static_cast<float>(probs.size() - 1);
    m_candidates.clear();
    for (size_t i = 0; i < probs.size(); ++i)
        if (probs[i] >= cutoff) m_candidates.emplace_back(probs[i], static_cast<int32_t>(i));
    std::sort(m_candidates.begin(), m_candidates.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });

    float cumulative = 0.0f;
    size_t last = m_candidates.size() - 1;
    for (size_t i = 0; i < m_candidates.size(); ++i) {
        cumulative += m_candidates[i].first;
        if (cumulative > m_params.top_p) {
            last = i;
            break;
        }
    }
    const float r = coin * cumulative;
    float cdf = 0.0f;
    for (size_t i = 0; i <= last; ++i) {
        cdf += m_candidates[i].first;
        if (r < cdf) return m_candidates[i].second;
    }
    return m_candidates[last].second;
}

int32_t sampler::sample(float* logits) {
    std::span<float> l(logits, static_cast<size_t>(m_vocab));
    if (m_params.temperature <= 0.0f) return argmax(l);
    for (float& v : l) v /= m_params.temperature;
    softmax(l);
    const float coin = next_f32();
    if (m_params.top_p <= 0.0f || m_params.top_p >= 1.0f || m_vocab < 2) return sample_mult(l, coin);
    return sample_topp(l, coin);
}

}  // namespace sl

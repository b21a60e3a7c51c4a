// Token sampling with llama2.c run.c semantics: greedy, temperature, top-p (nucleus), seeded xorshift RNG.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sl {

struct sampler_params {
    float temperature = 1.0f;  // 0 = greedy (argmax)
    float top_p = 0.9f;        // in (0, 1): nucleus sampling; otherwise plain multinomial
    uint64_t seed = 0;         // 0 is remapped to a fixed non-zero state (xorshift cannot start at 0)
};

sampler_params sampler_default_params();

class sampler {
public:
    explicit sampler(int32_t vocab_size, const sampler_params& params = sampler_default_params());

    // Picks the next token; may scale `logits` in place (temperature, softmax) like run.c does.
    int32_t sample(float* logits);

    static int32_t argmax(std::span<const float> values);

private:
    uint32_t next_u32();
    float next_f32();
    int32_t sample_mult(std::span<const float> probs, float coin) const;
    int32_t sample_topp(std::span<const float> probs, float coin);

    int32_t m_vocab;
    sampler_params m_params;
    uint64_t m_state;
    std::vector<std::pair<float, int32_t>> m_candidates;  // scratch for top-p
};

// In-place numerically stable softmax.
void softmax(std::span<float> x);

}  // namespace sl

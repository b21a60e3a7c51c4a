// The forward pass against llama2.c run.c's own outputs (text and logits) and across file formats.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "sparselens/core/context.h"
#include "sparselens/core/generate.h"
#include "sparselens/core/model.h"
#include "sparselens/core/sampler.h"
#include "sparselens/core/tokenizer.h"
#include "test_support.h"

namespace {

constexpr int32_t kVocab = 512;
constexpr int32_t kSteps = 128;

struct reference_logits {
    std::vector<int32_t> inputs;
    std::vector<float> logits;  // [kSteps, kVocab]
};

reference_logits load_reference() {
    const std::vector<uint8_t> raw = sl::test::read_bytes(sl::test::shared_path("reference/logits_bos_f32.bin"));
    const size_t rec = sizeof(int32_t) + kVocab * sizeof(float);
    EXPECT_EQ(raw.size(), rec * kSteps);
    reference_logits r;
    r.logits.resize(static_cast<size_t>(kSteps) * kVocab);
    for (int32_t i = 0; i < kSteps && (i + 1) * rec <= raw.size(); ++i) {
        int32_t tok;
        std::memcpy(&tok, raw.data() + i * rec, sizeof tok);
        r.inputs.push_back(tok);
        std::memcpy(r.logits.data() + static_cast<size_t>(i) * kVocab, raw.data() + i * rec + 4, kVocab * sizeof(float));
    }
    return r;
}

sl::model load(const std::string& rel) {
    auto m = sl::model_load(sl::test::shared_path(rel));
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.message());
    return std::move(m).value();
}

// Greedy run from BOS through the generation loop; returns the tokens fed and every position's logits.
std::vector<float> greedy_logits(const sl::model& m, std::vector<int32_t>* inputs, int n_threads = 0) {
    sl::context_params cp;
    cp.n_threads = n_threads;
    auto ctx = sl::context::create(m, cp);
    EXPECT_TRUE(ctx.ok());
    sl::generate_params gp;
    gp.steps = kSteps;
    gp.sampling.temperature = 0.0f;
    gp.prompt_logits = true;
    std::vector<float> all;
    const std::vector<int32_t> prompt{1};
    auto r = sl::generate(*ctx, prompt, gp, [&](const sl::generate_step& s) {
        if (inputs) inputs->push_back(s.input);
        all.insert(all.end(), s.logits, s.logits + kVocab);
        return true;
    });
    EXPECT_TRUE(r.ok());
    return all;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    double m = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
    return m;
}

// Mean over positions of KL(p_ref || p_test) of the softmax distributions.
double mean_kl(const std::vector<float>& ref, const std::vector<float>& test) {
    const size_t n = ref.size() / kVocab;
    double total = 0;
    for (size_t t = 0; t < n; ++t) {
        std::vector<double> p(kVocab), q(kVocab);
        double mp = -1e300, mq = -1e300, sp = 0, sq = 0;
        for (int i = 0; i < kVocab; ++i) {
            mp = std::max(mp, double(ref[t * kVocab + i]));
            mq = std::max(mq, double(test[t * kVocab + i]));
        }
        for (int i = 0; i < kVocab; ++i) {
            sp += p[i] = std::exp(ref[t * kVocab + i] - mp);
            sq += q[i] = std::exp(test[t * kVocab + i] - mq);
        }
        double kl = 0;
        for (int i = 0; i < kVocab; ++i) {
            const double pi = p[i] / sp, qi = q[i] / sq;
            if (pi > 0) kl += pi * (std::log(pi) - std::log(qi));
        }
        total += kl;
    }
    return total / static_cast<double>(n);
}

TEST(ForwardReference, LogitsMatchLlama2c) {
    const reference_logits ref = load_reference();
    const sl::model m = load("models/stories260K_f32.bin");
    std::vector<int32_t> inputs;
    const std::vector<float> logits = greedy_logits(m, &inputs);
    EXPECT_EQ(inputs, ref.inputs) << "greedy path diverged from run.c";
    const double err = max_abs_diff(logits, ref.logits);
    std::printf("max |logit - run.c| over %d positions: %.3g\n", kSteps, err);
    EXPECT_LE(err, 1e-4);
}

TEST(ForwardReference, GreedyTextMatchesLlama2cByteForByte) {
    const sl::model m = load("models/stories260K_f32.bin");
    auto tok = sl::tokenizer::from_llama2c_file(sl::test::shared_path("models/tok512.bin"), m.hp.vocab_size);
    ASSERT_TRUE(tok.ok()) << tok.message();
    auto ctx = sl::context::create(m);
    ASSERT_TRUE(ctx.ok());
    sl::generate_params gp;
    gp.steps = kSteps;
    gp.sampling.temperature = 0.0f;
    std::string text;
    const std::vector<int32_t> prompt{1};
    auto r = sl::generate(*ctx, prompt, gp, [&](const sl::generate_step& s) {
        const std::string_view piece = tok->decode(s.input, s.next);
        if (sl::tokenizer::is_printable_piece(piece)) text += piece;
        return true;
    });
    ASSERT_TRUE(r.ok());
    text += "\n";  // run.c ends its output with a newline
    const std::vector<uint8_t> want = sl::test::read_bytes(sl::test::shared_path("reference/greedy_bos_f32_128.txt"));
    EXPECT_EQ(text, std::string(want.begin(), want.end()));
}

TEST(ForwardReference, GgufF32EqualsLlama2cFile) {
    const sl::model bin = load("models/stories260K_f32.bin");
    const sl::model gguf = load("models/gguf/stories260K-F32.gguf");
    const std::vector<float> a = greedy_logits(bin, nullptr);
    const std::vector<float> b = greedy_logits(gguf, nullptr);
    EXPECT_LE(max_abs_diff(a, b), 1e-6);
}

TEST(ForwardReference, QuantizedFormatsStayClose) {
    const reference_logits ref = load_reference();
    // Bounds are loose ceilings (4-bit on a 260K-parameter model is far from lossless), not tuned targets:
    // each is about 10x the error the format's dequantisation noise is expected to cause.
    const struct {
        const char* file;
        double max_kl;
    } cases[] = {{"models/gguf/stories260K-F16.gguf", 1e-4},
                 {"models/gguf/stories260K-Q8_0.gguf", 2e-3},
                 {"models/stories260K_q80.bin", 2e-3},
                 {"models/gguf/stories260K-Q4_0.gguf", 0.3}};
    for (const auto& c : cases) {
        const sl::model m = load(c.file);
        // Teacher-forced on run.c's token path so every format is scored at the same positions.
        auto ctx = sl::context::create(m);
        ASSERT_TRUE(ctx.ok());
        std::vector<float> logits(static_cast<size_t>(kSteps) * kVocab);
        ctx->prefill(ref.inputs, 0, logits.data());
        const double kl = mean_kl(ref.logits, logits);
        std::printf("%-36s mean KL to F32 reference %.3g\n", c.file, kl);
        EXPECT_LE(kl, c.max_kl) << c.file;
        EXPECT_GT(kl, 0.0) << c.file << ": quantized weights cannot be bit-exact";
    }
}

TEST(ForwardReference, PrefillEqualsDecodeAndThreadCountInvariant) {
    const reference_logits ref = load_reference();
    const sl::model m = load("models/stories260K_f32.bin");
    for (int threads : {1, 2}) {
        sl::context_params cp;
        cp.n_threads = threads;
        cp.n_batch = 48;  // chunk boundaries inside the sequence
        auto ctx = sl::context::create(m, cp);
        ASSERT_TRUE(ctx.ok());
        std::vector<float> batched(static_cast<size_t>(kSteps) * kVocab);
        ctx->prefill(ref.inputs, 0, batched.data());
        auto ctx2 = sl::context::create(m, cp);
        ASSERT_TRUE(ctx2.ok());
        std::vector<float> stepped;
        for (int32_t p = 0; p < kSteps; ++p) {
            const float* l = ctx2->decode(ref.inputs[static_cast<size_t>(p)], p);
            stepped.insert(stepped.end(), l, l + kVocab);
        }
        EXPECT_LE(max_abs_diff(batched, stepped), 2e-5) << threads << " threads";
        EXPECT_LE(max_abs_diff(stepped, ref.logits), 1e-4) << threads << " threads";
    }
}

}  // namespace

SL_TEST_MAIN_NEEDS_SHARED()

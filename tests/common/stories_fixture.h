// The real stories260K model and its tokenizer, loaded once per test executable (needs ../shared).
#pragma once

#include <string>

#include "sparselens/core/calibration.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/model.h"
#include "sparselens/core/tokenizer.h"
#include "test_support.h"

namespace sl::test {

struct stories_model {
    sl::model m;
    sl::tokenizer tok;
};

inline const stories_model& stories260k() {
    static const stories_model s = [] {
        stories_model r;
        auto m = sl::model_load(shared_path("models/stories260K_f32.bin"));
        EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.message());
        r.m = std::move(m).value();
        auto tok = sl::tokenizer::from_llama2c_file(shared_path("models/tok512.bin"), r.m.hp.vocab_size);
        EXPECT_TRUE(tok.ok()) << (tok.ok() ? "" : tok.message());
        r.tok = std::move(tok).value();
        return r;
    }();
    return s;
}

// A shared text file's bytes as a string.
inline std::string shared_text(const std::string& rel) {
    const auto raw = read_bytes(shared_path(rel));
    return {raw.begin(), raw.end()};
}

// A one-thread calibration of stories260K on `tokens` (windows of n_ctx, at most max_tokens).
inline sl::calibration stories_calibration(const std::vector<int32_t>& tokens, int32_t n_ctx, int32_t max_tokens) {
    sl::calibration_params cp = sl::calibration_default_params();
    cp.n_ctx = n_ctx;
    cp.max_tokens = max_tokens;
    cp.n_threads = 1;
    auto cal = sl::calibrate(stories260k().m, tokens, cp);
    EXPECT_TRUE(cal.ok()) << (cal.ok() ? "" : cal.message());
    return cal.ok() ? std::move(cal).value() : sl::calibration{};
}

// FFSplit's configuration: compression mode, share kept exact, density (svd rank 0) and rank.
inline sl::method_config ffsplit_config(const std::string& mode, float heavy, float density, int32_t rank) {
    sl::method_config c = sl::method_default_config();
    c.name = "ffsplit";
    c.ffsplit_mode = mode;
    c.ffsplit_heavy = heavy;
    c.density = density;
    c.rank = rank;
    return c;
}

}  // namespace sl::test

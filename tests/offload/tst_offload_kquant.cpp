// Offload on a K-quant file (label peer: llama.cpp's quantizer makes it): a random-weight llama quantized to
// Q4_K_M with llama.cpp's own recipe stores W_down as Q4_K in some layers and Q6_K in others, so the pack's
// down columns are Q4_0 in some layers and Q8_0 in others (kernels::input_major_type, as the engine's
// in-RAM layouts). The offloaded run must still be bit-identical to the in-RAM run, and the simulator,
// given the pack's per-layer unit sizes, must count the same bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "offload_harness.h"
#include "peer_parity.h"
#include "sparselens/core/fingerprint.h"
#include "sparselens/core/model_stats.h"
#include "sparselens/core/synthetic.h"
#include "sparselens/kernels/sparse.h"

namespace {

using namespace sl;
using namespace sl::test::offload_harness;

const fixture& kq() {
    static const fixture f = [] {
        fixture x;
        x.tag = "kq";
        synthetic_params p = synthetic_default_params();
        p.arch = "llama";
        p.shape = "small";  // dim 256, hidden 768: whole K-quant super-blocks, 4 layers
        p.type = dtype::f32;
        p.path = scratch("kq-f32.gguf");
        const auto w = synthetic_write(p);
        EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.message());
        x.model_path = scratch("kq-q4_k_m.gguf");
        EXPECT_TRUE(sl::test::peer_quantize(p.path, x.model_path, "Q4_K_M", false));
        std::filesystem::remove(p.path);
        x.m = model_load(x.model_path).value();
        x.sha = sha256_file(x.model_path).value();
        uint64_t s = 99;
        x.tokens = {1};
        while (x.tokens.size() < 32) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            x.tokens.push_back(3 + static_cast<int32_t>((s >> 33) % 500));
        }
        return x;
    }();
    return f;
}

TEST(OffloadKQuant, PackCarriesPerLayerUnitTypes) {
    const fixture& f = kq();
    ASSERT_EQ(f.m.layers.size(), 4u);
    // llama.cpp's Q4_K_M recipe: W_down Q6_K where it wants more bits (layers 2 and 3 of 4), else Q4_K.
    EXPECT_EQ(f.m.layers[0].w_down.type, dtype::q4_k);
    EXPECT_EQ(f.m.layers[3].w_down.type, dtype::q6_k);
    const std::string pack = pack_for(f, "dip");
    auto p = pack_open(pack, f.m, f.sha);
    ASSERT_TRUE(p.ok()) << p.message();
    ASSERT_EQ(p->groups.size(), 2u);  // input_column_pair, down_column
    const pack_region &down0 = p->region(0, 1), &down3 = p->region(3, 1);
    // Columns of 256 outputs: whole groups, so Q4_K's in the x8 form of Q4_0 and Q6_K's in the 6-bit
    // Q6_0x8 (no more bytes than Q6_K; Q8_0 before stop 21).
    EXPECT_EQ(down0.segments[0].type, dtype::q4_0x8);
    EXPECT_EQ(down3.segments[0].type, dtype::q6_0x8);
    EXPECT_EQ(down0.unit_bytes, 256u / 32 * 18);
    EXPECT_EQ(down3.unit_bytes, 208u);
    EXPECT_EQ(p->groups[1].max_unit_bytes, down3.unit_bytes);
    EXPECT_EQ(p->region(0, 0).segments[0].type, dtype::q4_0x8);  // W_up / W_gate columns: Q4_K -> Q4_0 (x8)
    EXPECT_TRUE(pack_verify(*p).ok());
}

// Forwards every hook of `inner` with method_traits::fused cleared: the same neuron sets on the unfused
// kernels (output-sparse gate/up rows, input-sparse down columns).
struct unfused : sparsity_method {
    sparsity_method& inner;
    explicit unfused(sparsity_method& m) : inner(m) {}
    std::string name() const override { return inner.name(); }
    method_traits traits() const override {
        method_traits t = inner.traits();
        t.fused = false;
        return t;
    }
    void begin_sequence() override { inner.begin_sequence(); }
    void end_prompt(int32_t n) override { inner.end_prompt(n); }
    void select_attn_inputs(const token_info& t, std::span<const float> x, layer_masks& m) override {
        inner.select_attn_inputs(t, x, m);
    }
    void select_o_input(const token_info& t, std::span<const float> x, layer_masks& m) override {
        inner.select_o_input(t, x, m);
    }
    void select_mlp_inputs(const token_info& t, std::span<const float> x, layer_masks& m) override {
        inner.select_mlp_inputs(t, x, m);
    }
    const index_mask* planned_neurons(int32_t layer) const override { return inner.planned_neurons(layer); }
    void select_after_first(const token_info& t, std::span<const float> first, layer_masks& m) override {
        inner.select_after_first(t, first, m);
    }
    void select_down(const token_info& t, std::span<const float> glu, layer_masks& m) override {
        inner.select_down(t, glu, m);
    }
};

// The fused MLP's bundles are copies of the weights on a K-quant file too: Q4_K gate/up rows as they are,
// beside down columns in the down layout's own type (Q4_0x8 / Q6_0x8), so the fused methods run fused
// here, with the MLP really sparse and each bundle exactly two rows plus one column; with the same masks
// (GRIFFIN's) they give the unfused kernels' logits up to summation order.
TEST(OffloadKQuant, FusedMethodsRunFusedOnKQuantFiles) {
    const fixture& f = kq();
    const int32_t n_prompt = 12, n_gen = 6;
    const size_t vocab = static_cast<size_t>(f.m.hp.vocab_size);
    for (const char* name : {"griffin", "sparsellm"}) {
        SCOPED_TRACE(name);
        auto as_is = method(f, name), inner = method(f, name);
        ASSERT_TRUE(as_is->traits().fused);
        unfused forced(*inner);
        context a = context::create(f.m).value(), b = context::create(f.m).value();
        a.set_method(as_is.get());
        b.set_method(&forced);
        EXPECT_EQ(a.layout_bytes(), b.layout_bytes());
        double worst = 0.0, scale = 0.0;
        auto compare = [&](const float* x, const float* y) {
            for (size_t i = 0; i < vocab; ++i) {
                worst = std::max(worst, static_cast<double>(std::fabs(x[i] - y[i])));
                scale = std::max(scale, static_cast<double>(std::fabs(y[i])));
            }
        };
        const std::span<const int32_t> prompt(f.tokens.data(), static_cast<size_t>(n_prompt));
        const float* pa = a.prefill(prompt, 0);
        std::vector<float> got(pa, pa + vocab);
        compare(got.data(), b.prefill(prompt, 0));
        a.reset_density();
        for (int32_t pos = n_prompt; pos < n_prompt + n_gen; ++pos) {
            const int32_t tok = f.tokens[static_cast<size_t>(pos)];
            const float* ga = a.decode(tok, pos);
            got.assign(ga, ga + vocab);
            compare(got.data(), b.decode(tok, pos));
        }
        // GRIFFIN's masks are fixed by the dense prompt, so both paths run the same neurons and only the
        // summation order differs; SparseLLM's predictor re-ranks every token from an x that already
        // differs in its last bits, so neurons at its cut may flip (tst_methods_expert compares its
        // fused path with replayed masks).
        if (std::string(name) == "griffin") {
            EXPECT_LE(worst, 1e-5 * scale) << "fused vs unfused logits";
        }
        const fused_mlp_stats st = a.fused_stats();
        EXPECT_GT(st.updates, 0) << "the fused cache ran";
        EXPECT_GT(st.memory_bytes, 0u);
        EXPECT_EQ(b.fused_stats().updates, 0);
        const layer_weights& lw = f.m.layers[0];
        ASSERT_EQ(lw.w_gate.type, dtype::q4_k) << "a K-quant file";
        // Every layer's bundles: its gate and up rows as stored plus one down column of its layout.
        uint64_t min_bundle = UINT64_MAX, max_bundle = 0;
        for (const layer_weights& l : f.m.layers) {
            const uint64_t bb = static_cast<uint64_t>(l.w_gate.row_bytes() + l.w_up.row_bytes() +
                                                      dtype_row_bytes(kernels::input_major_type(l.w_down), f.m.hp.dim));
            min_bundle = std::min(min_bundle, bb);
            max_bundle = std::max(max_bundle, bb);
        }
        EXPECT_GE(st.bytes_copied, static_cast<uint64_t>(st.entered) * min_bundle);
        EXPECT_LE(st.bytes_copied, static_cast<uint64_t>(st.entered) * max_bundle);
        double mlp = 0.0;
        for (const layer_density& d : a.density_sum()) mlp += d.mlp();
        mlp /= static_cast<double>(a.density_sum().size()) * static_cast<double>(a.density_tokens());
        EXPECT_NEAR(mlp, 0.5, 0.01) << "generation ran the method's neuron sets";
    }
}

// The engine on the same Q4_K_M file (not offloaded): a dense context regroups its Q4_K matrices 8 rows at
// a time (Q4_Kx8r) where the CPU has the kernel for it, a method context those it reads only whole. The
// logits equal a run on the row-major Q4_K rows (context_params::regroup_rows off) bit for bit, dense
// and with GLU pruning at density 1 after a dense token (its copies of gate/up go out of service, the rest
// are reused), and the copies replace the originals: the resident weights stay within the file's and the
// idle copies. Gate and up pruning (from their first token) choose neurons after their first projection,
// which they read whole: that one is regrouped too (the other's rows sit in the pairs).
TEST(OffloadKQuant, DenseRowsX8KeepBitsAndMemory) {
    const fixture& f = kq();
    if (!kernels::rows_x8_native(dtype::q4_k)) GTEST_SKIP() << "no AVX-512 VNNI: the engine makes no Q4_Kx8r copies";
    struct run_out {
        std::vector<float> logits;
        double resident;
        uint64_t x8_bytes;
    };
    auto run = [&](bool regroup, const std::string& method_name) {
        context_params cp = context_default_params();
        cp.n_ctx = 64;
        cp.regroup_rows = regroup ? sl::context_params::regroup::all : sl::context_params::regroup::off;
        context ctx = context::create(f.m, cp).value();
        std::unique_ptr<sparsity_method> meth;
        if (method_name != "none") {
            // GLU pruning after a dense token reuses the dense copies; gate and up pruning start with their
            // own set, so the copies made are theirs alone.
            if (method_name == "glu") ctx.decode(f.tokens[0], 0);
            method_config mc;
            mc.name = method_name;
            meth = make_method(mc, f.m, nullptr).value();
            ctx.set_method(meth.get());
        }
        std::vector<float> out;
        const std::span<const int32_t> prompt(f.tokens.data(), 8);
        const float* lg = method_name != "none" ? ctx.decode(prompt[0], 0) : ctx.prefill(prompt, 0);
        for (int32_t pos = method_name != "none" ? 1 : 8; pos < 16; ++pos) {
            out.insert(out.end(), lg, lg + ctx.vocab_size());
            lg = ctx.decode(f.tokens[static_cast<size_t>(pos)], pos);
        }
        out.insert(out.end(), lg, lg + ctx.vocab_size());
        return run_out{out, static_cast<double>(ctx.resident_weight_bytes()), ctx.rows_x8_bytes()};
    };
    const double weights = static_cast<double>(model_count_bytes(f.m).total());
    for (const std::string name : {"none", "glu", "gate", "up"}) {
        const run_out rows = run(false, name), x8 = run(true, name);
        EXPECT_EQ(rows.x8_bytes, 0u) << name;
        EXPECT_GT(x8.x8_bytes, 0u) << name;
        if (name == "gate" || name == "up") {
            uint64_t first = 0;  // the first projection's Q4_K matrices
            for (const layer_weights& lw : f.m.layers) {
                const tensor_view& w = name == "gate" ? lw.w_gate : lw.w_up;
                if (w.type == dtype::q4_k) first += static_cast<uint64_t>(w.bytes());
            }
            EXPECT_GT(first, 0u) << name;
            EXPECT_GE(x8.x8_bytes, first) << name << ": its first projection is regrouped";
        }
        ASSERT_EQ(rows.logits.size(), x8.logits.size());
        EXPECT_EQ(0, std::memcmp(rows.logits.data(), x8.logits.data(), rows.logits.size() * 4)) << name;
        EXPECT_LE(x8.resident, 1.001 * weights + static_cast<double>(x8.x8_bytes)) << name;
        if (name == "none") {
            EXPECT_LE(x8.resident, 1.001 * weights);
        }
        EXPECT_LE(rows.resident, 1.001 * weights) << name;
    }
}

TEST(OffloadKQuant, DipIsBitIdenticalToInRam) { expect_identical_to_in_ram(kq(), "dip", "dip", "auto", 3); }
TEST(OffloadKQuant, DipCaIsBitIdenticalToInRam) { expect_identical_to_in_ram(kq(), "dip-ca", "dip", "auto"); }
TEST(OffloadKQuant, GluDownColumnsAreBitIdentical) { expect_identical_to_in_ram(kq(), "glu", "down_column", "pread"); }

}  // namespace

SL_TEST_MAIN_NEEDS_PEER(false)

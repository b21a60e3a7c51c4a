// Sparse kernels (input-sparse, output-sparse, fused MLP) and layouts for every dtype x ISA against an
// independent double-precision reference computed from the same stored weights.
//
// Stated bounds (normalised MSE, sum (y - ref)^2 / sum ref^2):
//   every kernel and dtype vs the reference of what it multiplies   <= 1e-10
//     (Q8_0/Q4_0 output-sparse and fused gate/up quantize x per block of 32 like the dense kernels;
//      that reference uses the same quantized x; input-sparse and the fused down part use f32 x)
//   quantized output-sparse vs exact f32 x, >= 16 active rows       <= 1e-4  (activation quantization)
//   quantized fused vs exact f32 x, >= 16 active neurons            <= 3e-4  (it enters gate and up)
// Output-sparse errors are normalised by sum_k sum_c (w_kc x_c)^2, the expected ref^2 for random
// signs: with one or two active rows a plain nMSE would measure the cancellation in that one dot.
// Sparse at 100% vs the dense kernels:
//   output-sparse == gemv bit for bit (same row kernel), every dtype
//   fused GLU values == swiglu(gemv(gate), gemv(up)) bit for bit, every dtype
//   input-sparse and fused outputs vs gemv: <= 1e-12 (F32/F16/BF16; the summation order differs:
//     channels/neurons are summed in blocks of 32, the SIMD dense kernels sum 32-64 strided lanes).
//     The scalar dense kernel keeps only 4 running sums and is itself ~1.5e-12 off the exact result
//     at 14336 terms, so against it the bound is 1e-11. Quantized types are not compared with gemv:
//     there the weights are re-quantized along the other dimension.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "quant_reference.h"
#include "sparselens/kernels/attention.h"
#include "sparselens/kernels/kernels.h"
#include "sparselens/kernels/sparse.h"

namespace {

using sl::dtype;
namespace k = sl::kernels;
using namespace sl::kernel_test;
using sl::kernel_test::nmse;  // overloaded below for float vectors

constexpr double k_bound = 1e-10;
constexpr double k_dense_bound = 1e-12;
constexpr double k_dense_scalar_bound = 1e-11;
constexpr double k_act_quant_bound = 1e-4;
constexpr double k_fused_act_quant_bound = 3e-4;

// Index lists: sorted, unique. Clustered lists are runs of 1-48 consecutive channels.
struct density {
    const char* name;
    double frac;  // < 0: exactly one active
};
const density k_densities[] = {{"0", 0.0},    {"1 active", -1.0}, {"1%", 0.01},
                               {"10%", 0.10}, {"50%", 0.50},      {"100%", 1.0}};

std::vector<int32_t> make_idx(int64_t n, const density& d, bool clustered, uint64_t seed) {
    reseed(seed);
    const int64_t count = d.frac < 0 ? 1 : std::min<int64_t>(n, std::llround(d.frac * static_cast<double>(n)));
    std::vector<uint8_t> on(static_cast<size_t>(n), 0);
    int64_t have = 0;
    while (have < count) {
        const int64_t start = static_cast<int64_t>(next_u64() % static_cast<uint64_t>(n));
        const int64_t len = clustered ? 1 + static_cast<int64_t>(next_u64() % 48) : 1;
        for (int64_t i = start; i < std::min(n, start + len) && have < count; ++i)
            if (!on[static_cast<size_t>(i)]) {
                on[static_cast<size_t>(i)] = 1;
                ++have;
            }
    }
    std::vector<int32_t> idx;
    for (int64_t i = 0; i < n; ++i)
        if (on[static_cast<size_t>(i)]) idx.push_back(static_cast<int32_t>(i));
    return idx;
}

double sq_err(const float* y, const std::vector<double>& ref) {
    double num = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) num += (y[i] - ref[i]) * (y[i] - ref[i]);
    return num;
}

double nmse(const std::vector<float>& y, const std::vector<float>& ref) {
    return nmse(y.data(), std::vector<double>(ref.begin(), ref.end()));
}

struct shape {
    int64_t rows, cols;  // of the row-major weight matrix the kernel is derived from
};

// Brief shapes; the two Llama shapes as reduced slices that keep each long dimension whole.
const shape k_in_shapes[] = {{64, 172}, {172, 64},  {96, 14336}, {4096, 256}, {64, 17920}, {5120, 160},
                             {33, 50},  {288, 100}, {800, 70},   {7, 5},      {1, 3}};
const shape k_out_shapes[] = {{64, 172}, {172, 64},  {64, 14336}, {512, 4096}, {64, 17920}, {256, 5120},
                              {9, 17},   {100, 416}, {40, 800},   {5, 7},      {33, 96}};
// Fused: rows = dim, cols = hidden (neurons).
const shape k_fused_shapes[] = {{64, 172}, {4096, 96}, {64, 14336}, {5120, 64}, {96, 17920},
                                {100, 50}, {288, 40},  {172, 64},   {7, 3}};

class sparse_by_type : public ::testing::TestWithParam<dtype> {};

// ---- Input-sparse ----------------------------------------------------------------------------------
TEST_P(sparse_by_type, input_sparse_matches_double_reference) {
    const dtype t = GetParam();
    isa_guard guard;
    for (const shape& s : k_in_shapes) {
        if (is_quant(t) && s.rows % 32 != 0) continue;  // quantized along the outputs
        std::vector<dtype> forms{t};                     // Q8_0 / Q4_0 of whole 256-output groups: the x8 form too
        if (sl::dtype_input_major_form(t, s.rows) != t) forms.push_back(sl::dtype_input_major_form(t, s.rows));
        if (t == dtype::q8_0 && s.rows % 256 == 0) forms.push_back(dtype::q6_0x8);  // Q6_K matrices' layout type
      for (const dtype lt : forms) {
        const int64_t out = s.rows, in = s.cols;
        const matrix w = make_matrix(dtype::f32, out, in, 11 + out * 3 + in);
        const k::owned_matrix wt = k::to_input_major(w.view, lt);
        ASSERT_EQ(wt.view.rows, in);
        ASSERT_EQ(wt.view.cols, out);
        const std::vector<double> wd = decode(wt.view);  // [in, out]: what the kernel reads
        const std::vector<float> x = make_x(in, 5 + in);
        for (const density& d : k_densities) {
            for (bool clustered : {false, true}) {
                const std::vector<int32_t> idx = make_idx(in, d, clustered, 100 + out + in);
                std::vector<double> ref(static_cast<size_t>(out), 0.0);
                for (int32_t i : idx)
                    for (int64_t o = 0; o < out; ++o)
                        ref[static_cast<size_t>(o)] += x[i] * wd[static_cast<size_t>(i * out + o)];
                for (k::isa i : isas()) {
                    SCOPED_TRACE(::testing::Message()
                                 << sl::dtype_name(lt) << " " << k::isa_name(i) << " " << out << "x" << in << " density "
                                 << d.name << (clustered ? " clustered" : " random"));
                    ASSERT_EQ(k::set_active_isa(i), i);
                    std::vector<float> y1(static_cast<size_t>(out), -7.0f), y3 = y1;
                    k::gemv_input_sparse(wt.view, x.data(), idx.data(), static_cast<int64_t>(idx.size()), y1.data(), 1);
                    k::gemv_input_sparse(wt.view, x.data(), idx.data(), static_cast<int64_t>(idx.size()), y3.data(), 3);
                    if (idx.empty()) {
                        for (float v : y1) ASSERT_EQ(v, 0.0f);
                        for (float v : y3) ASSERT_EQ(v, 0.0f);
                    } else {
                        // The integer chunks round x * scale to int8 per (16 or 32 channels, 32 outputs).
                        const double bound = k::input_sparse_rounds_activations(lt) ? k_act_quant_bound : k_bound;
                        EXPECT_LE(nmse(y1.data(), ref), bound);
                        EXPECT_LE(nmse(y3.data(), ref), bound);
                        // Output split: identical bits; channel split: only the partials' final adds differ.
                        EXPECT_LE(nmse(y3, y1), k_dense_bound);
                    }
                }
            }
        }
      }
    }
}

// The integer input-sparse kernels' coefficient rounding costs no more accuracy than the dense quantized
// gemv's own activation rounding (Q8_0 blocks of x): each against the exact product with its weights.
TEST(sparse, input_sparse_rounding_matches_dense_activation_rounding) {
    isa_guard guard;
    for (dtype t : {dtype::q8_0, dtype::q4_0}) {
        for (const shape& s : {shape{4096, 512}, shape{256, 14336}}) {
            const matrix src = make_matrix(dtype::f32, s.rows, s.cols, 21 + s.rows);
            const matrix w = make_matrix(t, s.rows, s.cols, 21 + s.rows);  // same values, row-major in t
            const k::owned_matrix wt = k::to_input_major(src.view, t);
            const std::vector<double> wd = decode(w.view), wtd = decode(wt.view);
            const std::vector<float> x = make_x(s.cols, 4);
            std::vector<double> ref_w(static_cast<size_t>(s.rows), 0.0), ref_wt = ref_w;
            for (int64_t o = 0; o < s.rows; ++o)
                for (int64_t i = 0; i < s.cols; ++i) {
                    ref_w[static_cast<size_t>(o)] += x[i] * wd[static_cast<size_t>(o * s.cols + i)];
                    ref_wt[static_cast<size_t>(o)] += x[i] * wtd[static_cast<size_t>(i * s.rows + o)];
                }
            std::vector<int32_t> all(static_cast<size_t>(s.cols));
            for (int32_t i = 0; i < static_cast<int32_t>(s.cols); ++i) all[static_cast<size_t>(i)] = i;
            for (k::isa i : isas()) {
                k::set_active_isa(i);
                if (!k::input_sparse_rounds_activations(t)) continue;
                std::vector<float> dense(static_cast<size_t>(s.rows)), sparse(dense.size());
                k::gemv(w.view, x.data(), dense.data(), 2);
                k::gemv_input_sparse(wt.view, x.data(), all.data(), s.cols, sparse.data(), 2);
                const double e_dense = nmse(dense.data(), ref_w), e_sparse = nmse(sparse.data(), ref_wt);
                std::printf("[ info ] %s %lldx%lld: input-sparse rounding nmse %.3g, dense gemv %.3g\n",
                            std::string(sl::dtype_name(t)).c_str(), static_cast<long long>(s.rows),
                            static_cast<long long>(s.cols), e_sparse, e_dense);
                EXPECT_GT(e_sparse, 0.0);  // it does round
                EXPECT_LE(e_sparse, 2.0 * e_dense) << sl::dtype_name(t) << " " << s.rows << "x" << s.cols;
            }
        }
    }
}

// ---- Integer input-sparse chunks: the exact arithmetic ---------------------------------------------
// What input_sparse_rounds_activations promises, written out per output (sparse_vnni_avx512.cpp and
// sparse_int8_avx2.cpp must both compute exactly this): the active list is cut into chunks of `chunk`
// consecutive entries (input_sparse_chunk_channels of the row length, in the fused MLP too); per chunk
// and block b of 32 outputs, c_i = fp16(d_ib) * x_i in f32, mx = max |c_i|, k_i = nearbyint(c_i * (127 /
// mx)) (0 when mx = 0), S = mx / 127, and y_o = S * float(sum_i k_i q_io) for the first chunk,
// fma(S, float(sum_i k_i q_io), y_o) after it.
// (Q8_0 / Q4_0 and their x8 forms: place_of_block says where each block's scale and quants are.)
int stored_int(dtype t, const uint8_t* row, int64_t o) {
    const uint8_t* q = row + place_of_block(t, o / 32).quants;
    const int j = static_cast<int>(o % 32);
    if (t == dtype::q6_0x8) {
        const int hi = (row[o / 256 * 208 + 144 + o % 256 / 32 * 8 + j % 8] >> (2 * (j / 8))) & 3;
        return ((j < 16 ? (q[j] & 15) : (q[j - 16] >> 4)) | hi << 4) - 32;
    }
    if (t == dtype::q8_0 || t == dtype::q8_0x8) return static_cast<int8_t>(q[j]);
    return (j < 16 ? (q[j] & 15) : (q[j - 16] >> 4)) - 8;
}

float block_scale(dtype t, const uint8_t* row, int64_t b) {
    uint16_t h;
    std::memcpy(&h, row + place_of_block(t, b).scale, 2);
    return static_cast<float>(half_value(h));  // exact
}

std::vector<float> integer_chunks_model(dtype t, const std::vector<const uint8_t*>& rows, const std::vector<float>& s,
                                        int64_t out, size_t chunk) {
    std::vector<float> y(static_cast<size_t>(out), 0.0f);
    for (size_t c0 = 0; c0 < rows.size(); c0 += chunk) {
        const size_t n = std::min(chunk, rows.size() - c0);
        for (int64_t b = 0; b < out / 32; ++b) {
            float c[32];
            float mx = 0.0f;
            for (size_t i = 0; i < n; ++i) {
                c[i] = block_scale(t, rows[c0 + i], b) * s[c0 + i];
                mx = std::max(mx, std::fabs(c[i]));
            }
            const float inv = mx > 0.0f ? 127.0f / mx : 0.0f;
            const float scale = mx / 127.0f;
            int32_t kq[32];
            for (size_t i = 0; i < n; ++i) kq[i] = static_cast<int32_t>(std::nearbyint(c[i] * inv));
            for (int64_t o = b * 32; o < b * 32 + 32; ++o) {
                int32_t sum = 0;
                for (size_t i = 0; i < n; ++i) sum += kq[i] * stored_int(t, rows[c0 + i], o);
                const float f = static_cast<float>(sum);
                float& yo = y[static_cast<size_t>(o)];
                yo = c0 == 0 ? scale * f : std::fma(scale, f, yo);
            }
        }
    }
    return y;
}

// The kernels' documented split (sparse.h): `slices` contiguous ranges of the active list (boundaries
// as the kernel cuts them, in units of `unit` entries), each a chunk sum of its own, added in order.
std::vector<float> sliced_chunks_model(dtype t, const std::vector<const uint8_t*>& rows, const std::vector<float>& s,
                                       int64_t out, int64_t unit, size_t chunk) {
    const auto n = static_cast<int64_t>(rows.size());
    const int64_t units = (n + unit - 1) / unit;
    const int64_t slices = std::min<int64_t>(k::k_sparse_slices, units);
    if (slices <= 1) return integer_chunks_model(t, rows, s, out, chunk);
    std::vector<float> y;
    for (int64_t sl = 0; sl < slices; ++sl) {
        const int64_t per = units / slices, extra = units % slices;
        const int64_t u0 = sl * per + std::min(sl, extra), u1 = u0 + per + (sl < extra ? 1 : 0);
        const int64_t b = u0 * unit, e = std::min(n, u1 * unit);
        const std::vector<float> p = integer_chunks_model(t, {rows.begin() + b, rows.begin() + e},
                                                          {s.begin() + b, s.begin() + e}, out, chunk);
        if (sl == 0) {
            y = p;
        } else {
            for (size_t o = 0; o < y.size(); ++o) y[o] += p[o];
        }
    }
    return y;
}

// An input-major [in, out] matrix of raw random blocks: every byte value (Q8_0 -128 included, all
// nibbles), fp16 scales of mixed magnitudes, every 7th block's scale zero.
matrix raw_input_major(dtype t, int64_t in, int64_t out, uint64_t seed) {
    matrix m = matrix::zeroed(t, in, out, seed);
    for (uint8_t& v : m.bytes) v = static_cast<uint8_t>(next_u64());
    const int64_t nblocks = in * out / 32;  // rows are whole groups: blocks are numbered across them
    for (int64_t b = 0; b < nblocks; ++b) {
        const float d = b % 7 == 3 ? 0.0f : uniform() * std::ldexp(1.0f, -static_cast<int>(next_u64() % 12));
        const uint16_t h = k::fp32_to_fp16(d);
        std::memcpy(m.bytes.data() + place_of_block(t, b).scale, &h, 2);
    }
    return m;
}

bool same_bits(const std::vector<float>& a, const float* b) {
    return std::memcmp(a.data(), b, a.size() * sizeof(float)) == 0;
}

TEST(sparse, input_sparse_integer_chunks_are_exact) {
    isa_guard guard;
    if (k::detected_isa() >= k::isa::avx2) {  // AVX2 has the integer chunks too, not only AVX-512 VNNI
        k::set_active_isa(k::isa::avx2);
        EXPECT_TRUE(k::input_sparse_rounds_activations(dtype::q8_0));
        EXPECT_TRUE(k::input_sparse_rounds_activations(dtype::q4_0));
        EXPECT_TRUE(k::input_sparse_rounds_activations(dtype::q8_0x8));
        EXPECT_TRUE(k::input_sparse_rounds_activations(dtype::q4_0x8));
        EXPECT_TRUE(k::input_sparse_rounds_activations(dtype::q6_0x8));
    }
    int checked = 0;
    for (dtype t : {dtype::q8_0, dtype::q4_0, dtype::q8_0x8, dtype::q4_0x8, dtype::q6_0x8}) {
        const bool x8 = sl::dtype_block_elems(t) == 256;
        // Outputs: one block, a partial 8-block step, 8-block steps plus a tail, a long and a short llama
        // row, llama-1b's 5632 (x8: panels of 11 groups, so 16-block coefficient steps and an 8-block one)
        // (the x8 forms: whole groups of 256 only).
        for (const shape& s : {shape{32, 45}, shape{96, 33}, shape{320, 70}, shape{2048, 100}, shape{14336, 40},
                               shape{256, 65}, shape{5632, 37}}) {
            const int64_t out = s.rows, in = s.cols;
            if (x8 && out % 256 != 0) continue;
            const matrix wt = raw_input_major(t, in, out, 7 + out + in);
            std::vector<float> x = make_x(in, 3 + in);
            for (int64_t i = 0; i < in; i += 9) x[static_cast<size_t>(i)] *= 1000.0f;  // one channel dominates a chunk
            for (const density& d : k_densities) {
                const std::vector<int32_t> idx = make_idx(in, d, false, 50 + in);
                std::vector<const uint8_t*> rows;
                std::vector<float> xs;
                for (int32_t i : idx) {
                    rows.push_back(wt.view.row(i));
                    xs.push_back(x[static_cast<size_t>(i)]);
                }
                const bool sliced = wt.view.row_bytes() < k::k_input_sparse_split_row_bytes;
                const auto chunk = static_cast<size_t>(k::input_sparse_chunk_channels(wt.view.row_bytes()));
                const std::vector<float> model = sliced ? sliced_chunks_model(t, rows, xs, out, 32, chunk)
                                                        : integer_chunks_model(t, rows, xs, out, chunk);
                for (const isa_run& run : isa_runs()) {
                    run.apply();
                    if (!k::input_sparse_rounds_activations(t)) continue;
                    SCOPED_TRACE(::testing::Message() << sl::dtype_name(t) << " " << run.name() << " " << out << "x"
                                                      << in << " density " << d.name);
                    std::vector<float> y(static_cast<size_t>(out), -7.0f);
                    k::gemv_input_sparse(wt.view, x.data(), idx.data(), static_cast<int64_t>(idx.size()), y.data(), 1);
                    if (idx.empty()) continue;
                    ASSERT_TRUE(same_bits(model, y.data()));
                    ++checked;
                }
            }
        }
        // Ties: with d = 1 and the largest |x| = 127, c * 127 / mx = x exactly, so half-integers round to even.
        const int64_t out = x8 ? 256 : 64, in = 40;
        matrix wt = raw_input_major(t, in, out, 99);
        const uint16_t one = k::fp32_to_fp16(1.0f);
        for (int64_t b = 0; b < in * out / 32; ++b) std::memcpy(wt.bytes.data() + place_of_block(t, b).scale, &one, 2);
        std::vector<float> x(static_cast<size_t>(in));
        for (int64_t i = 0; i < in; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 9) - 4.5f;
        x[5] = 127.0f;
        x[37] = -127.0f;  // the second chunk's maximum
        std::vector<int32_t> idx(static_cast<size_t>(in));
        std::vector<const uint8_t*> rows;
        for (int32_t i = 0; i < in; ++i) {
            idx[static_cast<size_t>(i)] = i;
            rows.push_back(wt.view.row(i));
        }
        const auto chunk = static_cast<size_t>(k::input_sparse_chunk_channels(wt.view.row_bytes()));
        const std::vector<float> model = sliced_chunks_model(t, rows, x, out, 32, chunk);
        for (const isa_run& run : isa_runs()) {
            run.apply();
            if (!k::input_sparse_rounds_activations(t)) continue;
            std::vector<float> y(static_cast<size_t>(out));
            k::gemv_input_sparse(wt.view, x.data(), idx.data(), in, y.data(), 1);
            EXPECT_TRUE(same_bits(model, y.data())) << sl::dtype_name(t) << " " << run.name() << " ties";
            ++checked;
        }
    }
    if (k::detected_isa() >= k::isa::avx2) {
        EXPECT_GT(checked, 0);
    }
}

// The fused MLP's down columns go through the same chunks, with the GLU values as coefficients.
TEST(sparse, fused_down_columns_are_exact_integer_chunks) {
    isa_guard guard;
    int checked = 0;
    for (dtype t : {dtype::q8_0, dtype::q4_0}) {
        for (const shape& s : {shape{64, 160}, shape{2048, 96}, shape{320, 64}}) {
            const int64_t dim = s.rows, hidden = s.cols;
            if (hidden % 32) continue;
            const matrix gate = make_matrix(t, hidden, dim, 5 + dim), up = make_matrix(t, hidden, dim, 6 + dim);
            const matrix down = make_matrix(t, dim, hidden, 7 + dim);
            const k::owned_bundles b = k::make_bundles(gate.view, up.view, down.view, t);
            const dtype dt = b.view.down_type();  // dim 2048: the x8 form
            EXPECT_EQ(dt, dim % 256 == 0 ? sl::dtype_x8_form(t) : t);
            // Q8_0 at dim 2048: 2176-byte columns, chunks of 16 neurons (input_sparse_chunk_channels).
            const auto down_chunk = static_cast<size_t>(k::input_sparse_chunk_channels(sl::dtype_row_bytes(dt, dim)));
            const std::vector<float> x = make_x(dim, 8 + dim, 2.0f / std::sqrt(static_cast<float>(dim)));
            for (const density& d : k_densities) {
                const std::vector<int32_t> idx = make_idx(hidden, d, true, 60 + hidden);
                if (idx.empty()) continue;
                for (const isa_run& run : isa_runs()) {
                    run.apply();
                    if (!k::input_sparse_rounds_activations(dt)) continue;
                    SCOPED_TRACE(::testing::Message() << sl::dtype_name(dt) << " " << run.name() << " dim " << dim
                                                      << " density " << d.name);
                    std::vector<float> scratch(static_cast<size_t>(k::fused_mlp_scratch_floats(dim, 1)));
                    std::vector<float> y(static_cast<size_t>(dim)), glu(idx.size());
                    k::fused_sparse_mlp(b.view, x.data(), idx.data(), static_cast<int64_t>(idx.size()), y.data(),
                                        scratch.data(), glu.data(), 1);
                    std::vector<const uint8_t*> cols;
                    for (int32_t j : idx) cols.push_back(b.view.bundle(j) + 2 * b.view.part_bytes());
                    ASSERT_TRUE(same_bits(sliced_chunks_model(dt, cols, glu, dim, 1, down_chunk), y.data()));
                    ++checked;
                }
            }
        }
    }
    if (k::detected_isa() >= k::isa::avx2) {
        EXPECT_GT(checked, 0);
    }
}

// Quantized types are left out: their input-major copies are re-quantized along the outputs, so the
// weights differ from the row-major ones (the reference test above covers them).
TEST(sparse, input_sparse_at_full_density_equals_dense) {
    isa_guard guard;
    for (dtype t : {dtype::f32, dtype::f16, dtype::bf16}) {
        for (const shape& s : {shape{96, 14336}, shape{4096, 256}, shape{172, 64}, shape{33, 50}}) {
            const matrix w = make_matrix(t, s.rows, s.cols, 3 + s.rows);
            const k::owned_matrix wt = k::to_input_major(w.view, t);
            const std::vector<float> x = make_x(s.cols, 9);
            std::vector<int32_t> all(static_cast<size_t>(s.cols));
            for (int32_t i = 0; i < static_cast<int32_t>(s.cols); ++i) all[static_cast<size_t>(i)] = i;
            for (k::isa i : isas()) {
                SCOPED_TRACE(::testing::Message()
                             << sl::dtype_name(t) << " " << k::isa_name(i) << " " << s.rows << "x" << s.cols);
                k::set_active_isa(i);
                std::vector<float> dense(static_cast<size_t>(s.rows)), sparse(static_cast<size_t>(s.rows));
                k::gemv(w.view, x.data(), dense.data(), 2);
                k::gemv_input_sparse(wt.view, x.data(), all.data(), s.cols, sparse.data(), 2);
                const double e = nmse(sparse, dense);
                EXPECT_LE(e, i == k::isa::scalar ? k_dense_scalar_bound : k_dense_bound);
                if (s.cols == 14336 && i == isas().back())
                    std::printf("[ info ] %s input-sparse@100%% vs dense gemv (%s), %lldx%lld: nmse %.3g\n",
                                std::string(sl::dtype_name(t)).c_str(), k::isa_name(i), static_cast<long long>(s.rows),
                                static_cast<long long>(s.cols), e);
            }
        }
    }
}

// ---- Output-sparse ---------------------------------------------------------------------------------
TEST_P(sparse_by_type, output_sparse_matches_reference_and_dense) {
    const dtype t = GetParam();
    isa_guard guard;
    for (const shape& s : k_out_shapes) {
        if (s.cols % sl::dtype_block_elems(t) != 0) continue;
        const matrix w = make_matrix(t, s.rows, s.cols, 21 + s.rows * 5 + s.cols);
        const std::vector<double> wd = decode(w.view);
        const std::vector<float> x = make_x(s.cols, 7 + s.cols);
        const std::vector<double> x_used =
            is_quant(t) ? quantized_x_for(t, x) : std::vector<double>(x.begin(), x.end());
        std::vector<std::vector<float>> dense;  // gemv per ISA, for the bit-identity check
        for (k::isa i : isas()) {
            k::set_active_isa(i);
            dense.emplace_back(static_cast<size_t>(s.rows));
            k::gemv(w.view, x.data(), dense.back().data(), 2);
        }
        for (const density& d : k_densities) {
            for (bool clustered : {false, true}) {
                const std::vector<int32_t> idx = make_idx(s.rows, d, clustered, 300 + s.rows);
                const auto n = static_cast<int64_t>(idx.size());
                std::vector<double> ref(idx.size()), ref_exact(idx.size());
                double terms = 0.0;  // sum of squared products: the error normaliser (see top)
                for (size_t kk = 0; kk < idx.size(); ++kk) {
                    const double* row = wd.data() + idx[kk] * s.cols;
                    for (int64_t c = 0; c < s.cols; ++c) {
                        ref[kk] += row[c] * x_used[static_cast<size_t>(c)];
                        ref_exact[kk] += row[c] * x[static_cast<size_t>(c)];
                        terms += (row[c] * x[static_cast<size_t>(c)]) * (row[c] * x[static_cast<size_t>(c)]);
                    }
                }
                for (size_t ii = 0; ii < isas().size(); ++ii) {
                    const k::isa i = isas()[ii];
                    SCOPED_TRACE(::testing::Message()
                                 << sl::dtype_name(t) << " " << k::isa_name(i) << " " << s.rows << "x" << s.cols
                                 << " density " << d.name << (clustered ? " clustered" : " random"));
                    k::set_active_isa(i);
                    std::vector<float> y(idx.size() + 1, -7.0f), y3 = y;
                    k::gemv_output_sparse(w.view, x.data(), idx.data(), n, y.data(), 1);
                    k::gemv_output_sparse(w.view, x.data(), idx.data(), n, y3.data(), 3);
                    EXPECT_EQ(y.back(), -7.0f) << "wrote past n_idx outputs";
                    EXPECT_EQ(0, std::memcmp(y.data(), y3.data(), y.size() * 4));
                    if (n > 0 && terms > 0.0) {
                        EXPECT_LE(sq_err(y.data(), ref) / terms, k_bound);
                        if (is_quant(t) && n >= 16) {  // fewer rows: one chi-square sample, not a rate
                            EXPECT_LE(sq_err(y.data(), ref_exact) / terms, k_act_quant_bound);
                        }
                    }
                    // Same arithmetic as gemv: every computed row equals the dense result exactly.
                    for (int64_t kk = 0; kk < n; ++kk) ASSERT_EQ(y[kk], dense[ii][idx[kk]]) << "row " << idx[kk];
                }
            }
        }
    }
}

// ---- Fused sparse MLP ------------------------------------------------------------------------------
TEST_P(sparse_by_type, fused_mlp_matches_reference_and_dense) {
    const dtype t = GetParam();
    isa_guard guard;
    for (const shape& s : k_fused_shapes) {
        const int64_t dim = s.rows, hidden = s.cols;
        // Quantized sources need whole blocks along both rows (gate/up: dim, down: hidden).
        if (is_quant(t) && (dim % 32 != 0 || hidden % 32 != 0)) continue;
        const uint64_t seed = 41 + dim * 7 + hidden;
        const matrix gate = make_matrix(t, hidden, dim, seed), up = make_matrix(t, hidden, dim, seed + 1);
        const matrix down = make_matrix(t, dim, hidden, seed + 2);
        const k::owned_bundles b = k::make_bundles(gate.view, up.view, down.view, t);
        ASSERT_EQ(b.view.n_neurons, hidden);
        ASSERT_EQ(b.view.dim, dim);
        // Reference weights: decoded from the bundles themselves (gate/up rows are copies here).
        std::vector<double> gd(static_cast<size_t>(hidden * dim)), ud = gd, dd = gd;
        for (int64_t j = 0; j < hidden; ++j)
            for (int64_t c = 0; c < dim; ++c) {
                const uint8_t* bj = b.view.bundle(j);
                gd[static_cast<size_t>(j * dim + c)] = element(t, bj, c);
                ud[static_cast<size_t>(j * dim + c)] = element(t, bj + b.view.part_bytes(), c);
                dd[static_cast<size_t>(j * dim + c)] = element(b.view.down_type(), bj + 2 * b.view.part_bytes(), c);
            }
        const std::vector<float> x = make_x(dim, 3 + dim, 2.0f / std::sqrt(static_cast<float>(dim)));
        const std::vector<double> xe(x.begin(), x.end());
        const std::vector<double> xq = is_quant(t) ? quantized_x_for(t, x) : xe;
        auto reference = [&](const std::vector<int32_t>& idx, const std::vector<double>& xv) {
            std::vector<double> y(static_cast<size_t>(dim), 0.0);
            for (int32_t j : idx) {
                double g = 0, u = 0;
                for (int64_t c = 0; c < dim; ++c) {
                    g += gd[static_cast<size_t>(j * dim + c)] * xv[static_cast<size_t>(c)];
                    u += ud[static_cast<size_t>(j * dim + c)] * xv[static_cast<size_t>(c)];
                }
                const double a = g / (1.0 + std::exp(-g)) * u;
                for (int64_t o = 0; o < dim; ++o) y[static_cast<size_t>(o)] += a * dd[static_cast<size_t>(j * dim + o)];
            }
            return y;
        };
        for (const density& d : k_densities) {
            for (bool clustered : {false, true}) {
                const std::vector<int32_t> idx = make_idx(hidden, d, clustered, 500 + hidden);
                const auto n = static_cast<int64_t>(idx.size());
                const std::vector<double> ref = reference(idx, xq);
                const std::vector<double> ref_exact = is_quant(t) ? reference(idx, xe) : ref;
                for (k::isa i : isas()) {
                    SCOPED_TRACE(::testing::Message()
                                 << sl::dtype_name(t) << " " << k::isa_name(i) << " dim " << dim << " hidden " << hidden
                                 << " density " << d.name << (clustered ? " clustered" : " random"));
                    k::set_active_isa(i);
                    for (int nt : {1, 3}) {
                        std::vector<float> scratch(static_cast<size_t>(k::fused_mlp_scratch_floats(dim, nt)));
                        std::vector<float> y(static_cast<size_t>(dim), -7.0f), glu(idx.size() + 1, -7.0f);
                        k::fused_sparse_mlp(b.view, x.data(), idx.data(), n, y.data(), scratch.data(), glu.data(), nt);
                        EXPECT_EQ(glu.back(), -7.0f) << "wrote past n_idx GLU values";
                        if (n == 0) {
                            for (float v : y) ASSERT_EQ(v, 0.0f);
                            continue;
                        }
                        // The VNNI down columns round a * scale to int8 per (32 neurons, 32 outputs), as the
                        // dense down gemv rounds the GLU vector to Q8_0 blocks (heavy-tailed: 1.1e-4 seen).
                        const double bound =
                            k::input_sparse_rounds_activations(b.view.down_type()) ? k_fused_act_quant_bound : k_bound;
                        EXPECT_LE(nmse(y.data(), ref), bound) << nt << " threads";
                        if (is_quant(t) && n >= 16) {
                            EXPECT_LE(nmse(y.data(), ref_exact), k_fused_act_quant_bound);
                        }
                        if (d.frac == 0.10) {  // glu_out is optional and does not change y
                            std::vector<float> y2(static_cast<size_t>(dim));
                            k::fused_sparse_mlp(b.view, x.data(), idx.data(), n, y2.data(), scratch.data(), nullptr,
                                                nt);
                            EXPECT_EQ(0, std::memcmp(y.data(), y2.data(), y.size() * 4));
                        }
                        if (n != hidden || nt != 3) continue;
                        // 100%: GLU values bit-identical to the dense path, y within summation-order rounding.
                        std::vector<float> g(static_cast<size_t>(hidden)), u = g, a = g, yd(static_cast<size_t>(dim));
                        k::gemv(gate.view, x.data(), g.data(), 2);
                        k::gemv(up.view, x.data(), u.data(), 2);
                        k::swiglu(a.data(), g.data(), u.data(), hidden);
                        EXPECT_EQ(0, std::memcmp(a.data(), glu.data(), a.size() * 4));
                        if (!is_quant(t)) {
                            k::gemv(down.view, a.data(), yd.data(), 2);
                            EXPECT_LE(nmse(y, yd), i == k::isa::scalar ? k_dense_scalar_bound : k_dense_bound);
                        }
                    }
                }
            }
        }
    }
}

// ---- Layouts ---------------------------------------------------------------------------------------
TEST_P(sparse_by_type, layouts_round_trip) {
    const dtype t = GetParam();
    for (const shape& s : {shape{64, 172}, shape{96, 64}, shape{33, 50}, shape{288, 416}}) {
        if (is_quant(t) && (s.rows % 32 || s.cols % 32)) continue;
        SCOPED_TRACE(::testing::Message() << sl::dtype_name(t) << " " << s.rows << "x" << s.cols);
        const matrix w = make_matrix(t, s.rows, s.cols, 77 + s.cols);
        // Float types transpose exactly, so twice gives the same bytes. Quantized go through an f32
        // transpose, whose values must be the decoded weights, and back: re-encoding decoded ggml
        // blocks reproduces them (the extreme element maps to +-127 or -8 again).
        const dtype mid = is_quant(t) ? dtype::f32 : t;
        const k::owned_matrix a = k::to_input_major(w.view, mid);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(a.view.data) % 64, 0u);
        EXPECT_GE(static_cast<int64_t>(a.bytes.size()), a.view.bytes());  // memory reported
        EXPECT_LT(static_cast<int64_t>(a.bytes.size()), a.view.bytes() + 64);
        const std::vector<double> wd = decode(w.view), ad = decode(a.view);
        for (int64_t r = 0; r < s.rows; ++r)
            for (int64_t c = 0; c < s.cols; ++c)
                ASSERT_EQ(ad[static_cast<size_t>(c * s.rows + r)], wd[static_cast<size_t>(r * s.cols + c)]);
        const k::owned_matrix back = k::to_input_major(a.view, t);
        ASSERT_EQ(back.view.bytes(), w.view.bytes());
        EXPECT_EQ(0, std::memcmp(back.view.data, w.view.data, static_cast<size_t>(w.view.bytes())));
    }
}

TEST_P(sparse_by_type, bundles_hold_gate_up_rows_and_down_columns) {
    const dtype t = GetParam();
    const int64_t dim = 96, hidden = 64;  // quantized down rows need whole blocks
    const matrix gate = make_matrix(t, hidden, dim, 1), up = make_matrix(t, hidden, dim, 2);
    const matrix down = make_matrix(t, dim, hidden, 3);
    const k::owned_bundles b = k::make_bundles(gate.view, up.view, down.view, t);
    const k::owned_matrix down_t = k::to_input_major(down.view, b.view.down_type());
    ASSERT_EQ(b.view.bundle_bytes(), 3 * sl::dtype_row_bytes(t, dim));
    EXPECT_GE(static_cast<int64_t>(b.bytes.size()), hidden * b.view.bundle_bytes());
    for (int64_t j = 0; j < hidden; ++j) {
        const uint8_t* bj = b.view.bundle(j);
        const auto part = static_cast<size_t>(b.view.part_bytes());
        ASSERT_EQ(0, std::memcmp(bj, gate.view.row(j), part)) << j;
        ASSERT_EQ(0, std::memcmp(bj + part, up.view.row(j), part)) << j;
        ASSERT_EQ(0, std::memcmp(bj + 2 * part, down_t.view.row(j), part)) << j;
    }
    // Down columns hold the decoded down weights (exactly for float types).
    if (!is_quant(t)) {
        for (int64_t j = 0; j < hidden; ++j)
            for (int64_t o = 0; o < dim; ++o)
                ASSERT_EQ(element(t, b.view.bundle(j) + 2 * b.view.part_bytes(), o), element(t, down.view.row(o), j));
    }
}

INSTANTIATE_TEST_SUITE_P(all_types, sparse_by_type, ::testing::ValuesIn(k_types),
                         [](const auto& p) { return std::string(sl::dtype_name(p.param)); });

// Bundles may change type: F32 sources converted to each storage type hold the converted values.
TEST(sparse, bundles_convert_type) {
    const int64_t dim = 64, hidden = 40;
    const matrix gate = make_matrix(dtype::f32, hidden, dim, 4), up = make_matrix(dtype::f32, hidden, dim, 5);
    const matrix down = make_matrix(dtype::f32, dim, hidden, 6);
    for (dtype t : k_types) {
        const k::owned_bundles b = k::make_bundles(gate.view, up.view, down.view, t);
        std::vector<uint8_t> row(static_cast<size_t>(sl::dtype_row_bytes(t, dim)));
        for (int64_t j = 0; j < hidden; ++j) {
            k::quantize_row(t, reinterpret_cast<const float*>(gate.view.row(j)), row.data(), dim);
            ASSERT_EQ(0, std::memcmp(b.view.bundle(j), row.data(), row.size())) << sl::dtype_name(t);
        }
    }
}

// The GUI runs the engine on cores - 1 threads and the CLI on all cores; an exported config must give
// the numbers the GUI showed. So no sparse kernel's bits may depend on the thread count: short
// input-major rows (split by channels), long ones (split by outputs) and the fused MLP.
TEST(sparse, results_do_not_depend_on_the_thread_count) {
    isa_guard guard;
    for (dtype t : {dtype::f32, dtype::q8_0, dtype::q4_0}) {
        // (rows, cols) of the row-major matrix: 2048 outputs of 8192 inputs (llama-1b down: short
        // input-major rows) and 8192 outputs of 512 inputs (long rows).
        for (const shape& s : {shape{2048, 8192}, shape{8192, 512}}) {
            const matrix w = make_matrix(t, s.rows, s.cols, 11 + s.rows);
            const k::owned_matrix wt = k::to_input_major(w.view, t);
            const std::vector<float> x = make_x(s.cols, 5);
            for (const density& d : {k_densities[3], k_densities[4], k_densities[5]}) {
                const std::vector<int32_t> idx = make_idx(s.cols, d, false, 77);
                for (k::isa i : isas()) {
                    SCOPED_TRACE(::testing::Message() << sl::dtype_name(t) << " " << k::isa_name(i) << " " << s.rows
                                                      << "x" << s.cols << " density " << d.name);
                    k::set_active_isa(i);
                    std::vector<float> one(static_cast<size_t>(s.rows));
                    k::gemv_input_sparse(wt.view, x.data(), idx.data(), static_cast<int64_t>(idx.size()), one.data(), 1);
                    for (int nt : {2, 3, 5}) {
                        std::vector<float> y(static_cast<size_t>(s.rows), -1.0f);
                        k::gemv_input_sparse(wt.view, x.data(), idx.data(), static_cast<int64_t>(idx.size()), y.data(),
                                             nt);
                        EXPECT_EQ(0, std::memcmp(one.data(), y.data(), y.size() * 4)) << nt << " threads";
                    }
                }
            }
        }
        const int64_t dim = 256, hidden = 2048;
        const matrix gate = make_matrix(t, hidden, dim, 5), up = make_matrix(t, hidden, dim, 6);
        const matrix down = make_matrix(t, dim, hidden, 7);
        const k::owned_bundles b = k::make_bundles(gate.view, up.view, down.view, t);
        const std::vector<float> x = make_x(dim, 8, 2.0f / 16.0f);
        const std::vector<int32_t> idx = make_idx(hidden, k_densities[4], true, 9);
        for (k::isa i : isas()) {
            SCOPED_TRACE(::testing::Message() << sl::dtype_name(t) << " " << k::isa_name(i) << " fused");
            k::set_active_isa(i);
            std::vector<float> one(static_cast<size_t>(dim));
            std::vector<float> scratch(static_cast<size_t>(k::fused_mlp_scratch_floats(dim, 1)));
            k::fused_sparse_mlp(b.view, x.data(), idx.data(), static_cast<int64_t>(idx.size()), one.data(),
                                scratch.data(), nullptr, 1);
            for (int nt : {2, 3, 5}) {
                std::vector<float> y(static_cast<size_t>(dim), -1.0f);
                std::vector<float> sc(static_cast<size_t>(k::fused_mlp_scratch_floats(dim, nt)));
                k::fused_sparse_mlp(b.view, x.data(), idx.data(), static_cast<int64_t>(idx.size()), y.data(), sc.data(),
                                    nullptr, nt);
                EXPECT_EQ(0, std::memcmp(one.data(), y.data(), y.size() * 4)) << nt << " threads";
            }
        }
    }
}

// The fused rest of the MLP over a pair layout once one projection is known (CATS/CHESS: the gate, pairs
// of up rows; up pruning: up, pairs of gate rows): the same bits as the separate kernels it replaces
// (gemv_output_sparse on the rows, SwiGLU or GeGLU, gemv_input_sparse on down's input-major layout) on
// every list and ISA, GLU and row values included, at any thread count, while the down columns are
// shorter than k_input_sparse_split_row_bytes (gemv_input_sparse's channel split), in chunks of 16 (Q8_0
// at dim 2048) or 32 channels; K-quant rows beside the layout type that replaces the down matrix, as a
// Q4_K_M file gets them.
TEST(sparse, pairs_equal_the_separate_kernels) {
    isa_guard guard;
    struct types {
        dtype up, down;
    };
    for (const types ty :
         {types{dtype::q8_0, dtype::q8_0}, types{dtype::q4_0, dtype::q4_0}, types{dtype::q4_k, dtype::q4_k},
          types{dtype::q4_k, dtype::q6_k}, types{dtype::f32, dtype::f32}, types{dtype::f16, dtype::f16}}) {
        for (const int64_t dim : {int64_t{64}, int64_t{256}, int64_t{1024}, int64_t{2048}}) {
            const int64_t hidden = dim == 64 ? 172 : 512;
            if (dim % dtype_block_elems(ty.up) != 0 || hidden % dtype_block_elems(ty.down) != 0) continue;
            if (dim == 2048 && ty.up != dtype::q8_0) continue;  // the one whose down columns take 16-channel chunks
            // K-quants as raw random blocks (quantize_row does not encode them).
            const auto make = [](dtype t, int64_t rows, int64_t cols, uint64_t seed) {
                return sl::dtype_info(t).encodable ? make_matrix(t, rows, cols, seed)
                                                   : random_blocks(t, rows, cols, seed);
            };
            const matrix rows_m = make(ty.up, hidden, dim, 31), down = make(ty.down, dim, hidden, 32);
            const sl::dtype down_type = k::input_major_type(down.view);
            const k::owned_matrix down_t = k::to_input_major(down.view, down_type);
            struct variant {
                bool gate_rows;
                k::glu_kind act;
            };
            for (const auto [gate_rows, act] : {variant{false, k::glu_kind::silu}, variant{true, k::glu_kind::silu},
                                                variant{false, k::glu_kind::gelu_tanh}}) {
                const k::owned_pairs pairs = k::make_pairs(rows_m.view, down.view, down_type, gate_rows);
                ASSERT_EQ(pairs.view.bytes(), rows_m.view.bytes() + down_t.view.bytes());
                ASSERT_LE(static_cast<int64_t>(pairs.bytes.size()), pairs.view.bytes() + 64);
                for (int64_t j = 0; j < hidden; j += 97) {  // the matrices' own bytes, side by side
                    ASSERT_EQ(0, std::memcmp(pairs.view.row(j), rows_m.view.row(j),
                                             static_cast<size_t>(pairs.view.row_bytes())));
                    ASSERT_EQ(0, std::memcmp(pairs.view.down(j), down_t.view.row(j),
                                             static_cast<size_t>(pairs.view.down_bytes())));
                }
                const std::vector<float> x = make_x(dim, 33, 2.0f / 16.0f);
                const std::vector<float> pre = make_x(hidden, 34, 4.0f);  // the other projection's
                for (const density& d :
                     {k_densities[0], k_densities[1], k_densities[3], k_densities[4], k_densities[5]}) {
                    for (bool clustered : {false, true}) {
                        const std::vector<int32_t> idx = make_idx(hidden, d, clustered, 35);
                        const auto n = static_cast<int64_t>(idx.size());
                        for (k::isa i : isas()) {
                            k::set_active_isa(i);
                            SCOPED_TRACE(::testing::Message()
                                         << sl::dtype_name(ty.up) << "/" << sl::dtype_name(down_type)
                                         << (gate_rows ? " gate rows" : " up rows")
                                         << (act == k::glu_kind::silu ? " silu" : " gelu") << " dim " << dim << " "
                                         << k::isa_name(i) << " density " << d.name << (clustered ? " clustered" : ""));
                            std::vector<float> r(static_cast<size_t>(n)), p(static_cast<size_t>(n)),
                                a(static_cast<size_t>(n));
                            k::gemv_output_sparse(rows_m.view, x.data(), idx.data(), n, r.data(), 2);
                            for (int64_t j = 0; j < n; ++j)
                                p[static_cast<size_t>(j)] = pre[static_cast<size_t>(idx[static_cast<size_t>(j)])];
                            if (gate_rows)
                                k::glu(act, a.data(), r.data(), p.data(), n);
                            else
                                k::glu(act, a.data(), p.data(), r.data(), n);
                            std::vector<float> full(static_cast<size_t>(hidden), 0.0f), want(static_cast<size_t>(dim));
                            for (int64_t j = 0; j < n; ++j)
                                full[static_cast<size_t>(idx[static_cast<size_t>(j)])] = a[static_cast<size_t>(j)];
                            k::gemv_input_sparse(down_t.view, full.data(), idx.data(), n, want.data(), 2);
                            for (int nt : {1, 2, 3}) {
                                std::vector<float> y(static_cast<size_t>(dim), -1.0f),
                                    glu(static_cast<size_t>(n) + 1, -7.0f);
                                std::vector<float> row_vals = glu;
                                std::vector<float> scratch(static_cast<size_t>(k::fused_mlp_scratch_floats(dim, nt)));
                                k::sparse_pairs(pairs.view, pre.data(), x.data(), idx.data(), n, y.data(),
                                                scratch.data(), glu.data(), row_vals.data(), nt, act);
                                EXPECT_EQ(0, std::memcmp(want.data(), y.data(), y.size() * 4)) << nt << " threads";
                                if (n > 0) {  // memcmp of an empty vector's null data() is undefined
                                    EXPECT_EQ(0, std::memcmp(a.data(), glu.data(), a.size() * 4)) << nt;
                                    EXPECT_EQ(0, std::memcmp(r.data(), row_vals.data(), r.size() * 4)) << nt;
                                }
                                EXPECT_EQ(glu.back(), -7.0f) << "wrote past n_idx GLU values";
                                EXPECT_EQ(row_vals.back(), -7.0f) << "wrote past n_idx row values";
                            }
                        }
                    }
                }
            }
        }
    }
}

// Several matrices of one x in one region (q/k/v, gate/up) give each matrix's own call's bits, with
// their own active lists (empty ones included), short and long rows mixed, at any thread count.
TEST(sparse, input_sparse_multi_equals_separate_calls) {
    isa_guard guard;
    for (dtype t : {dtype::f32, dtype::q8_0, dtype::q4_0}) {
        const int64_t in = 512;
        const shape shapes[4] = {{2048, in}, {256, in}, {8192, in}, {64, in}};  // rows = outputs
        std::vector<matrix> ws;
        std::vector<k::owned_matrix> wts;
        for (int m = 0; m < 4; ++m) ws.push_back(make_matrix(t, shapes[m].rows, in, 21 + m));
        for (int m = 0; m < 4; ++m) wts.push_back(k::to_input_major(ws[static_cast<size_t>(m)].view, t));
        const std::vector<float> x = make_x(in, 4);
        std::vector<std::vector<int32_t>> idx = {make_idx(in, k_densities[4], false, 1),
                                                 make_idx(in, k_densities[3], true, 2),
                                                 make_idx(in, k_densities[5], false, 3), {}};
        for (k::isa i : isas()) {
            k::set_active_isa(i);
            for (int nt : {1, 2, 3}) {
                SCOPED_TRACE(::testing::Message() << sl::dtype_name(t) << " " << k::isa_name(i) << " " << nt << " threads");
                std::vector<std::vector<float>> sep(4), multi(4);
                const sl::tensor_view* views[4];
                const int32_t* ids[4];
                int64_t ns[4];
                float* ys[4];
                for (int m = 0; m < 4; ++m) {
                    const auto out = static_cast<size_t>(shapes[m].rows);
                    sep[static_cast<size_t>(m)].assign(out, -3.0f);
                    multi[static_cast<size_t>(m)].assign(out, -5.0f);
                    const auto& id = idx[static_cast<size_t>(m)];
                    k::gemv_input_sparse(wts[static_cast<size_t>(m)].view, x.data(), id.data(),
                                         static_cast<int64_t>(id.size()), sep[static_cast<size_t>(m)].data(), nt);
                    views[m] = &wts[static_cast<size_t>(m)].view;
                    ids[m] = id.data();
                    ns[m] = static_cast<int64_t>(id.size());
                    ys[m] = multi[static_cast<size_t>(m)].data();
                }
                k::gemv_input_sparse_multi(views, x.data(), ids, ns, ys, 4, nt);
                for (int m = 0; m < 4; ++m)
                    EXPECT_EQ(0, std::memcmp(sep[static_cast<size_t>(m)].data(), multi[static_cast<size_t>(m)].data(),
                                             sep[static_cast<size_t>(m)].size() * 4))
                        << "matrix " << m;
            }
        }
    }
}

TEST(sparse, empty_inputs) {
    const matrix w = make_matrix(dtype::f32, 64, 32, 1);
    const k::owned_matrix wt = k::to_input_major(w.view, dtype::f32);
    std::vector<float> x(64, 1.0f), y(64, 5.0f);
    k::gemv_input_sparse(wt.view, x.data(), nullptr, 0, y.data(), 2);  // no active inputs: y = 0
    for (float v : y) EXPECT_EQ(v, 0.0f);
    std::fill(y.begin(), y.end(), 5.0f);
    k::gemv_output_sparse(w.view, x.data(), nullptr, 0, y.data(), 2);  // no rows: nothing written
    EXPECT_EQ(y[0], 5.0f);
    const k::owned_matrix none = k::to_input_major(sl::tensor_view{dtype::f32, 0, 0, nullptr}, dtype::f32);
    EXPECT_EQ(none.view.rows, 0);
    EXPECT_GE(k::fused_mlp_scratch_floats(4096, 2), 2 * 4096);
}

// The name `bench` reports for the Q4_0x8 input-sparse chunk follows the ISA and the switch: the VNNI
// chunk only where the AVX-512 table has both and the switch is off.
TEST(sparse, q4_0x8_chunk_name_follows_the_switch) {
    const isa_guard guard;
    for (const isa_run& run : isa_runs()) {
        run.apply();
        const bool both = k::set_avx2_q4_0x8_chunk(run.avx2_q4_0x8);
        const std::string want = run.i == k::isa::scalar ? "scalar" : both && !run.avx2_q4_0x8 ? "avx512-vnni" : "avx2";
        EXPECT_EQ(k::q4_0x8_chunk_name(), want) << run.name();
    }
}

}  // namespace

// Helpers shared by the dense and sparse kernel tests: seeded data, the ISAs to try, and an independent
// (not the library's) decoder and activation quantizer for the double-precision references.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "sparselens/kernels/kernels.h"

namespace sl::kernel_test {

inline const dtype k_types[] = {dtype::f32, dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_0};

inline bool is_quant(dtype t) {
    return t == dtype::q8_0 || t == dtype::q4_0;
}

// splitmix64 with a resettable state, so each matrix and vector is reproducible from its seed alone.
inline uint64_t g_state = 1;
inline void reseed(uint64_t s) {
    g_state = s * 0x9e3779b97f4a7c15ULL + 1;
}
inline uint64_t next_u64() {
    uint64_t z = (g_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
inline float uniform() {
    return static_cast<float>(next_u64() >> 40) / 16777216.0f * 2.0f - 1.0f;
}
inline float gaussish() {
    return (uniform() + uniform() + uniform() + uniform()) * 0.8660254f;
}  // unit variance

// Every ISA this CPU runs, scalar first.
inline std::vector<kernels::isa> isas() {
    std::vector<kernels::isa> v{kernels::isa::scalar};
    if (kernels::detected_isa() >= kernels::isa::avx2) v.push_back(kernels::isa::avx2);
    if (kernels::detected_isa() >= kernels::isa::avx512) v.push_back(kernels::isa::avx512);
    return v;
}

// Restores dispatch after a test that switches ISAs.
struct isa_guard {
    kernels::isa saved = kernels::active_isa();
    bool saved_q4_0x8 = kernels::avx2_q4_0x8_chunk();
    ~isa_guard() {
        kernels::set_avx2_q4_0x8_chunk(saved_q4_0x8);
        kernels::set_active_isa(saved);
    }
};

// isas(), with the AVX-512 ISA a second time on the other of its two Q4_0x8 input-sparse chunks where
// its table has both (kernels::set_avx2_q4_0x8_chunk): every chunk kernel is reached on any CPU.
struct isa_run {
    kernels::isa i;
    bool avx2_q4_0x8;
    void apply() const {
        kernels::set_active_isa(i);
        kernels::set_avx2_q4_0x8_chunk(avx2_q4_0x8);
    }
    std::string name() const {
        return std::string(kernels::isa_name(i)) + (i == kernels::isa::avx512 && avx2_q4_0x8 ? "+avx2-q4_0x8" : "");
    }
};
inline std::vector<isa_run> isa_runs() {
    std::vector<isa_run> out;
    for (kernels::isa i : isas()) {
        out.push_back({i, false});
        kernels::set_active_isa(i);
        if (i == kernels::isa::avx512 && kernels::set_avx2_q4_0x8_chunk(true)) out.push_back({i, true});
    }
    return out;
}

inline double half_value(uint16_t h) {
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

// Where block b (of 32 elements) of a Q8_0 / Q4_0 row or of their x8 forms keeps its fp16 scale and its
// quants, written from the format's description in types.h (x8: per 8 blocks, the 8 scales, then the
// 8 blocks' quants).
struct block_place {
    int64_t scale, quants;
};
inline block_place place_of_block(dtype t, int64_t b) {
    if (t == dtype::q6_0x8) return {b / 8 * 208 + 2 * (b % 8), b / 8 * 208 + 16 + 16 * (b % 8)};  // nibbles
    const bool q8 = t == dtype::q8_0 || t == dtype::q8_0x8;
    const int64_t bb = q8 ? 34 : 18;
    if (t == dtype::q8_0 || t == dtype::q4_0) return {b * bb, b * bb + 2};
    const int64_t group = b / 8 * 8 * bb, j = b % 8;
    return {group + 2 * j, group + 16 + j * (bb - 2)};
}

// The value of stored element c of a row of type t.
inline double element(dtype t, const uint8_t* row, int64_t c) {
    uint16_t h;
    switch (t) {
        case dtype::q6_0x8: {  // x = d * (q - 32), q = nibble | high 2 bits << 4 (types.h)
            const block_place p = place_of_block(t, c / 32);
            std::memcpy(&h, row + p.scale, 2);
            const int j = static_cast<int>(c % 32);
            const uint8_t nib = j < 16 ? row[p.quants + j] & 15 : row[p.quants + j - 16] >> 4;
            const uint8_t hi = (row[c / 256 * 208 + 144 + c % 256 / 32 * 8 + j % 8] >> (2 * (j / 8))) & 3;
            return half_value(h) * ((nib | hi << 4) - 32);
        }
        case dtype::q8_0x8:
        case dtype::q4_0x8: {
            const block_place p = place_of_block(t, c / 32);
            std::memcpy(&h, row + p.scale, 2);
            const int j = static_cast<int>(c % 32);
            if (t == dtype::q8_0x8) return half_value(h) * static_cast<int8_t>(row[p.quants + j]);
            const uint8_t q = row[p.quants + j % 16];
            return half_value(h) * ((j < 16 ? (q & 15) : (q >> 4)) - 8);
        }
        case dtype::f32: {
            float f;
            std::memcpy(&f, row + 4 * c, 4);
            return f;
        }
        case dtype::f16:
            std::memcpy(&h, row + 2 * c, 2);
            return half_value(h);
        case dtype::bf16: {
            std::memcpy(&h, row + 2 * c, 2);
            const uint32_t u = static_cast<uint32_t>(h) << 16;
            float f;
            std::memcpy(&f, &u, 4);
            return f;
        }
        case dtype::q8_0: {
            const auto* b = reinterpret_cast<const block_q8_0*>(row) + c / 32;
            return half_value(b->d) * b->qs[c % 32];
        }
        case dtype::q4_0: {
            const auto* b = reinterpret_cast<const block_q4_0*>(row) + c / 32;
            const int j = static_cast<int>(c % 32);
            return half_value(b->d) * ((j < 16 ? (b->qs[j] & 15) : (b->qs[j - 16] >> 4)) - 8);
        }
        default: break;  // other block types: quant_reference.h
    }
    return 0.0;
}

// All stored weights of v decoded, row-major [rows * cols].
inline std::vector<double> decode(const tensor_view& v) {
    std::vector<double> out(static_cast<size_t>(v.rows * v.cols));
    for (int64_t r = 0; r < v.rows; ++r)
        for (int64_t c = 0; c < v.cols; ++c) out[static_cast<size_t>(r * v.cols + c)] = element(v.type, v.row(r), c);
    return out;
}

struct matrix {
    tensor_view view;
    std::vector<uint8_t> bytes;

    // A zeroed row-major [rows, cols] matrix of type t, the random stream reseeded for its contents.
    static matrix zeroed(dtype t, int64_t rows, int64_t cols, uint64_t seed) {
        reseed(seed);
        matrix m;
        m.view = {t, rows, cols, nullptr};
        m.bytes.resize(static_cast<size_t>(m.view.bytes()));
        m.view.data = m.bytes.data();
        return m;
    }
};

// Row-major [rows, cols] of type t from uniform [-1, 1] values; row 2 is all zeros (d = 0 blocks).
inline matrix make_matrix(dtype t, int64_t rows, int64_t cols, uint64_t seed) {
    matrix m = matrix::zeroed(t, rows, cols, seed);
    std::vector<float> src(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
        for (float& v : src) v = r == 2 ? 0.0f : uniform();
        kernels::quantize_row(t, src.data(), m.bytes.data() + r * m.view.row_bytes(), cols);
    }
    return m;
}

// scale * unit-variance values, with an all-zero activation block (scale 0) at [32, 64) when n >= 64.
inline std::vector<float> make_x(int64_t n, uint64_t seed, float scale = 1.0f) {
    reseed(seed);
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = scale * gaussish();
    if (n >= 64)
        for (int j = 32; j < 64; ++j) x[static_cast<size_t>(j)] = 0.0f;
    return x;
}

// The documented activation quantization (blocks of 32, d = amax/127, q = nearbyint(x*127/amax)),
// written independently here: dequantized values of what the Q8_0/Q4_0 kernels multiply with.
inline std::vector<double> quantized_x(const std::vector<float>& x) {
    std::vector<double> out(x.size());
    for (size_t b = 0; b < x.size() / 32; ++b) {
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const float d = amax / 127.0f;
        for (int j = 0; j < 32; ++j) out[b * 32 + j] = static_cast<double>(d) * std::nearbyint(x[b * 32 + j] * id);
    }
    return out;
}

// Normalised MSE: sum (y - ref)^2 / sum ref^2 (the plain squared error when ref is all zeros).
inline double nmse(const float* y, const std::vector<double>& ref) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
        num += (y[i] - ref[i]) * (y[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0.0 ? num / den : num;
}

}  // namespace sl::kernel_test

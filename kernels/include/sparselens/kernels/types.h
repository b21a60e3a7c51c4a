// Weight element types, block layouts and the tensor view every kernel consumes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sl {

// Weight storage types. Block layouts are bit-identical to ggml's so GGUF tensors are used in place.
// Values are stable (persisted in calibration fingerprints): new types are appended.
enum class dtype : uint8_t {
    f32 = 0, f16 = 1, bf16 = 2, q8_0 = 3, q4_0 = 4,
    q4_1 = 5, q5_0 = 6, q5_1 = 7, q2_k = 8, q3_k = 9, q4_k = 10, q5_k = 11, q6_k = 12, iq4_nl = 13, iq4_xs = 14,
    q8_0x8 = 15, q4_0x8 = 16, q6_0x8 = 17,  // input-major layouts only, never in a file
    q4_k_r8 = 18, q4_0_r8 = 19, q8_0_r8 = 20,  // dense rows' layouts only, never in a file
};
inline constexpr int n_dtypes = 21;

inline constexpr int32_t qk8_0 = 32;  // elements per Q8_0 block
inline constexpr int32_t qk4_0 = 32;  // elements per Q4_0 block
inline constexpr int32_t qk_k = 256;  // elements per K-quant / IQ4_XS super-block

// ggml block_q8_0: fp16 scale then 32 signed bytes; x = d * q.
struct block_q8_0 {
    uint16_t d;
    int8_t qs[qk8_0];
};
static_assert(sizeof(block_q8_0) == 34);

// ggml block_q4_0: fp16 scale then 16 bytes of nibbles; element j (j < 16) is the low nibble of
// qs[j], element j + 16 the high nibble; x = d * (nibble - 8).
struct block_q4_0 {
    uint16_t d;
    uint8_t qs[qk4_0 / 2];
};
static_assert(sizeof(block_q4_0) == 18);

// Q8_0x8 / Q4_0x8: eight Q8_0 / Q4_0 blocks (256 elements) regrouped as their eight fp16 scales, then
// the eight blocks' quants in order (Q8_0x8: 16 + 8 x 32 = 272 bytes; Q4_0x8: 16 + 8 x 16 = 144), the
// same bytes as the eight blocks. Input-major rows are stored this way: the integer-dot chunk kernels
// read a row's eight scales with one load instead of gathering them 34 or 18 bytes apart.
inline constexpr int32_t k_x8_blocks = 8;

// Q6_0x8: eight 32-element blocks of 6-bit symmetric quants, x = d * (q - 32) with q = lo | hi << 4 in
// [0, 63]; per group of 256: the 8 fp16 scales (16 bytes), the 8 blocks' low nibbles as Q4_0's (128:
// element j < 16 in the low nibble of byte j, j + 16 in the high one), the 8 blocks' high bits (64: byte
// k of a block holds element k + 8i's in bits 2i..2i+1). 208 bytes per 256 = 6.5 bits per weight, no
// more than Q6_K's 6.5625: Q6_K matrices (a Q4_K_M file's W_down in some layers) are laid out input-major
// in it instead of Q8_0's 8.5 bits (one more rounding, to a 6-bit grid per 32 outputs).

// Q4_Kx8r: Q4_K rows interleaved 8 at a time for the dense gemv (kernels::to_rows_x8). Per group of 8
// rows and super-block, 1152 bytes (8 x 144, the same bytes as the 8 blocks): the 8 d (fp16), the 8 dmin,
// the 8 rows' 4-byte scale words 0, then words 1, then words 2 (each row's 12 scale bytes), then 16 x 64
// bytes of nibbles, piece k holding bytes 8k..8k+7 of each row's 128 in row order. A view of this type
// has the rows and cols of the matrix (rows a multiple of 8); rows r..r+7 (r % 8 == 0) start at
// data + r * row_bytes(), so row ranges of whole groups address like a row-major matrix's. Only the
// dense kernels (gemv, gemv_multi, gemm) read it; a row's result has the bits of the Q4_K row kernels.
// Q4_0x8r: Q4_0 rows interleaved the same way, per group of 8 rows and 256 columns (8 blocks) 1152 bytes:
// the 64 fp16 scales block by block (block k's 8 rows at 16k), then per block k 128 bytes of quants,
// bytes 0-7 of each row's 16 in row order, then bytes 8-15. cols a multiple of 256; the bits of the Q4_0
// row kernels.
// Q8_0x8r: Q8_0 rows likewise, per group of 8 rows and 256 columns 2176 bytes: the 64 fp16 scales block by
// block (block k's 8 rows at 16k), then per block k 256 bytes of quants, piece p (64 bytes) holding bytes
// 8p..8p+7 of each row's 32 in row order. The bits of the Q8_0 row kernels.
inline constexpr int32_t k_rows_x8 = 8;

// The other block layouts (byte offsets as ggml's structs; all fp16 fields little-endian). The
// decoders in kernels/src/quant_unpack.cpp document each one's element formula.
//   Q4_1   d, m, qs[16]                           x = d*nib + m
//   Q5_0   d, qh[4], qs[16]                       x = d*(nib | bit<<4) - 16d
//   Q5_1   d, m, qh[4], qs[16]                    x = d*(nib | bit<<4) + m
//   Q2_K   scales[16], qs[64], d, dmin            x = d*sc*q2 - dmin*m      (16 sub-blocks of 16)
//   Q3_K   hmask[32], qs[64], scales[12], d       x = d*(sc-32)*(q2 - 4*!h) (16 sub-blocks of 16)
//   Q4_K   d, dmin, scales[12], qs[128]           x = d*sc*nib - dmin*m     (8 sub-blocks of 32)
//   Q5_K   d, dmin, scales[12], qh[32], qs[128]   x = d*sc*q5 - dmin*m      (8 sub-blocks of 32)
//   Q6_K   ql[128], qh[64], scales[16] (int8), d  x = d*sc*(q6 - 32)        (16 sub-blocks of 16)
//   IQ4_NL d, qs[16]                              x = d*kvalues[nib]
//   IQ4_XS d, scales_h, scales_l[4], qs[128]      x = d*(ls-32)*kvalues[nib] (8 sub-blocks of 32)

// One row per type: a new type is a row here plus its decoder, never a copy of a kernel.
struct dtype_traits {
    std::string_view name;  // ggml's name (ours for the layout-only forms)
    uint32_t ggml_id;       // GGUF tensor type id (k_no_ggml_id: a layout-only form)
    int32_t block_elems;    // elements per storage block (1 for plain floating-point types)
    int32_t block_bytes;    // bytes per storage block
    bool encodable;         // quantize_row() can write it (else layouts re-encode as Q8_0)
};

inline constexpr uint32_t k_no_ggml_id = 0xffffffffu;

inline constexpr dtype_traits k_dtype_traits[n_dtypes] = {
    {"F32", 0, 1, 4, true},        {"F16", 1, 1, 2, true},        {"BF16", 30, 1, 2, true},
    {"Q8_0", 8, 32, 34, true},     {"Q4_0", 2, 32, 18, true},     {"Q4_1", 3, 32, 20, false},
    {"Q5_0", 6, 32, 22, false},    {"Q5_1", 7, 32, 24, false},    {"Q2_K", 10, 256, 84, false},
    {"Q3_K", 11, 256, 110, false}, {"Q4_K", 12, 256, 144, false}, {"Q5_K", 13, 256, 176, false},
    {"Q6_K", 14, 256, 210, false}, {"IQ4_NL", 20, 32, 18, false}, {"IQ4_XS", 23, 256, 136, false},
    {"Q8_0x8", k_no_ggml_id, 256, 272, true}, {"Q4_0x8", k_no_ggml_id, 256, 144, true},
    {"Q6_0x8", k_no_ggml_id, 256, 208, true},  {"Q4_Kx8r", k_no_ggml_id, 256, 144, false},
    {"Q4_0x8r", k_no_ggml_id, 256, 144, false}, {"Q8_0x8r", k_no_ggml_id, 256, 272, false},
};

constexpr const dtype_traits& dtype_info(dtype t) { return k_dtype_traits[static_cast<int>(t)]; }

// Elements per storage block (1 for plain floating-point types).
constexpr int64_t dtype_block_elems(dtype t) { return dtype_info(t).block_elems; }

// Bytes per storage block.
constexpr int64_t dtype_block_bytes(dtype t) { return dtype_info(t).block_bytes; }

// Block-quantized (integer-dot kernels with int8 activations) rather than plain floating point.
constexpr bool dtype_is_quantized(dtype t) { return dtype_info(t).block_elems > 1; }

// The type transposed / converted copies (input-major matrices, neuron bundles) are written in:
// the type itself when quantize_row() can encode it, otherwise Q8_0 (finer than every such type).
constexpr dtype dtype_layout_type(dtype t) { return dtype_info(t).encodable ? t : dtype::q8_0; }

// The type a layout that REPLACES a matrix (one layout per matrix, see core's context::set_method) is
// written in: the type itself when encodable, else by bytes per element: Q4_0 for types of no more than
// its bytes (Q4_K, Q3_K, Q2_K, IQ4_NL, IQ4_XS), Q6_0x8 for types of at least its bytes that are not
// encodable (Q6_K; only for rows of whole 256-element groups, else Q8_0: kernels::input_major_type),
// Q8_0 for the rest (Q4_1, Q5_*), so the resident weights stay within a few percent of the file's
// instead of growing to Q8_0.
constexpr dtype dtype_replacing_layout_type(dtype t) {
    if (dtype_info(t).encodable) return t;
    const auto per_elem = [](dtype u) { return double(dtype_block_bytes(u)) / double(dtype_block_elems(u)); };
    if (per_elem(t) <= per_elem(dtype::q4_0)) return dtype::q4_0;
    return per_elem(t) >= per_elem(dtype::q6_0x8) ? dtype::q6_0x8 : dtype::q8_0;
}

// A type GGUF files hold (not a layout-only form).
constexpr bool dtype_is_file_type(dtype t) { return dtype_info(t).ggml_id != k_no_ggml_id; }

// The regrouped form of Q8_0 / Q4_0 (the type itself otherwise), and back.
constexpr dtype dtype_x8_form(dtype t) {
    return t == dtype::q8_0 ? dtype::q8_0x8 : t == dtype::q4_0 ? dtype::q4_0x8 : t;
}
constexpr dtype dtype_x8_base(dtype t) {
    return t == dtype::q8_0x8 ? dtype::q8_0 : t == dtype::q4_0x8 ? dtype::q4_0 : t;
}
constexpr bool dtype_is_x8(dtype t) { return dtype_x8_base(t) != t; }

// The dense rows' regrouped form of Q4_K / Q4_0 / Q8_0 (8 rows interleaved: Q4_Kx8r, Q4_0x8r, Q8_0x8r; the
// type itself otherwise), and back.
constexpr dtype dtype_rows_x8_form(dtype t) {
    switch (t) {
        case dtype::q4_k: return dtype::q4_k_r8;
        case dtype::q4_0: return dtype::q4_0_r8;
        case dtype::q8_0: return dtype::q8_0_r8;
        default: return t;
    }
}
constexpr dtype dtype_rows_x8_base(dtype t) {
    switch (t) {
        case dtype::q4_k_r8: return dtype::q4_k;
        case dtype::q4_0_r8: return dtype::q4_0;
        case dtype::q8_0_r8: return dtype::q8_0;
        default: return t;
    }
}
constexpr bool dtype_is_rows_x8(dtype t) { return dtype_rows_x8_base(t) != t; }

// The type neuron bundles beside a down layout of type t are written in: bundles hold gate/up rows,
// which the row kernels dot, so a file type — t's x8 base, Q8_0 for Q6_0x8 (an input-major-only type).
constexpr dtype dtype_bundle_type(dtype down_layout) {
    return down_layout == dtype::q6_0x8 ? dtype::q8_0 : dtype_x8_base(down_layout);
}

// How an input-major row (or a neuron bundle's down part) of n elements of type t is stored: Q8_0 and
// Q4_0 rows of whole 256-element groups in their x8 form, everything else as t. (Q6_0x8 exists only in
// groups; it is not an x8 form of anything.)
constexpr dtype dtype_input_major_form(dtype t, int64_t n) {
    return n % (32 * k_x8_blocks) == 0 ? dtype_x8_form(t) : t;
}

// Bytes of one row of `cols` elements; cols must be a multiple of dtype_block_elems(t).
constexpr int64_t dtype_row_bytes(dtype t, int64_t cols) {
    return cols / dtype_block_elems(t) * dtype_block_bytes(t);
}

constexpr std::string_view dtype_name(dtype t) { return dtype_info(t).name; }

// A read-only 2-D weight matrix, row-major [rows = outputs, cols = inputs] (ggml: ne1 = rows,
// ne0 = cols). Rows are contiguous and `row_bytes` apart.
struct tensor_view {
    dtype type = dtype::f32;
    int64_t rows = 0;
    int64_t cols = 0;
    const void* data = nullptr;

    int64_t row_bytes() const { return dtype_row_bytes(type, cols); }
    int64_t bytes() const { return rows * row_bytes(); }
    const uint8_t* row(int64_t r) const { return static_cast<const uint8_t*>(data) + r * row_bytes(); }
};

}  // namespace sl

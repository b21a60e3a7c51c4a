// Weight layout conversions for the sparse kernels: input-major (transposed) copies and neuron bundles.
#include <algorithm>
#include <cassert>
#include <cstring>
#include <type_traits>
#include <vector>

#include <omp.h>
#include <sys/mman.h>

#include "layout_internal.h"
#include "sparse_internal.h"
#include "sparselens/kernels/sparse.h"

namespace sl::kernels {
namespace {

// Output rows transposed per tile: a multiple of 32 so quantized destination blocks are whole.
constexpr int64_t k_tile_rows = 64;

// Buffers at least this large ask for transparent huge pages: sparse kernels read scattered rows
// or bundles of 1-16 KiB, and with 4 KiB pages nearly every one costs a TLB miss and a page walk
// (measured: random Q4_0 rows ran at half the rate on 4 KiB pages).
constexpr int64_t k_huge_page_min_bytes = int64_t{8} << 20;

// A zeroed buffer of `bytes` whose data pointer is 64-byte aligned inside `owner` (the owned size
// then includes up to 63 bytes of slack); SIMD loads of aligned rows never split cache lines. Large
// buffers are advised to use huge pages before their first touch (Linux; a no-op elsewhere).
uint8_t* aligned_buffer(std::vector<uint8_t>& owner, int64_t bytes) {
    const auto size = static_cast<size_t>(bytes) + 63;
    owner.clear();
    owner.shrink_to_fit();
    owner.reserve(size);  // allocated, not yet touched
#ifdef MADV_HUGEPAGE
    if (bytes >= k_huge_page_min_bytes) {
        constexpr uintptr_t huge = uintptr_t{2} << 20;
        const auto begin = (reinterpret_cast<uintptr_t>(owner.data()) + huge - 1) & ~(huge - 1);
        const auto end = (reinterpret_cast<uintptr_t>(owner.data()) + size) & ~(huge - 1);
        if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // advisory only
    }
#endif
    owner.resize(size, 0);
    const auto addr = reinterpret_cast<uintptr_t>(owner.data());
    return owner.data() + ((64 - addr % 64) % 64);
}

// The encoders with an AVX2 build (layout_avx2.cpp): the types layouts are written in.
bool avx2_encoder(dtype type) {
    return active_isa() >= isa::avx2 && (type == dtype::q8_0 || type == dtype::q4_0 || type == dtype::f16 ||
                                         type == dtype::f32 || type == dtype::q6_0x8);
}

// Columns decoded per step of the AVX2 transposition: 32 rows x 256 f32 = 32 KiB stays in L1, and 256
// is a whole number of blocks of every source type (K-quants included).
constexpr int64_t k_chunk_cols = 256;

// transpose_into on AVX2 when the output length is whole blocks of 32: tiles of 32 rows decoded 256
// columns at a time, each column encoded from registers (8x8 transposes), one block per column.
void transpose_into_avx2(const tensor_view& w, dtype type, uint8_t* dst, int64_t dst_stride) {
    const int64_t out = w.rows, in = w.cols, n_tiles = out / 32;
    const int64_t be = dtype_block_elems(w.type);
    const detail::dequant_fn decode = detail::active_table().dequant[static_cast<int>(w.type)];
#pragma omp parallel if (n_tiles > 1)
    {
        std::vector<float> tile(static_cast<size_t>(32 * k_chunk_cols));
#pragma omp for schedule(static)
        for (int64_t t = 0; t < n_tiles; ++t) {
            int slot = 0;
            const int64_t dst_off = detail::block_offset(type, t, slot);
            for (int64_t c0 = 0; c0 < in; c0 += k_chunk_cols) {
                const int64_t nc = std::min(k_chunk_cols, in - c0);  // a multiple of the source's block
                for (int64_t r = 0; r < 32; ++r)
                    decode(w.row(t * 32 + r) + c0 / be * dtype_block_bytes(w.type), tile.data() + r * k_chunk_cols, nc);
                detail::encode_tile_columns_avx2(tile.data(), k_chunk_cols, nc, type, dst + c0 * dst_stride + dst_off,
                                                 dst_stride, slot);
            }
        }
    }
}

// Rewrites n_rows rows of n elements of `base` (Q8_0 / Q4_0, at dst + r * stride) as its x8 form, in place.
void regroup_rows_to_x8(dtype base, uint8_t* dst, int64_t n_rows, int64_t n, int64_t stride) {
    const int64_t ge = 32 * k_x8_blocks, gb = dtype_block_bytes(dtype_x8_form(base));
#pragma omp parallel for schedule(static) if (n_rows * n > (int64_t{1} << 16))
    for (int64_t r = 0; r < n_rows; ++r) {
        alignas(64) uint8_t tmp[k_x8_blocks * sizeof(block_q8_0)];
        for (int64_t g = 0; g < n / ge; ++g) {
            uint8_t* p = dst + r * stride + g * gb;
            std::memcpy(tmp, p, static_cast<size_t>(gb));
            regroup_x8(base, tmp, p, ge);
        }
    }
}

// Writes column c of w (all w.rows elements, converted to `type`) to dst + c * dst_stride, for every
// column c. Rows are decoded a tile at a time, so the source is read once and sequentially; the
// destination gets one block-aligned run of tile elements per column. x8 forms: written as their base
// type, then regrouped row by row.
void transpose_into(const tensor_view& w, dtype type, uint8_t* dst, int64_t dst_stride) {
    const int64_t out = w.rows, in = w.cols;
    if (out <= 0 || in <= 0) return;
    if (dtype_is_x8(type)) {
        assert(out % (32 * k_x8_blocks) == 0);
        transpose_into(w, dtype_x8_base(type), dst, dst_stride);
        regroup_rows_to_x8(dtype_x8_base(type), dst, in, out, dst_stride);
        return;
    }
    assert(!dtype_is_quantized(type) || out % 32 == 0);
    if (avx2_encoder(type) && out % dtype_block_elems(type) == 0 && out % 32 == 0)
        return transpose_into_avx2(w, type, dst, dst_stride);
    // Tiles of whole destination blocks (Q6_0x8: groups of 256).
    const int64_t tile_rows = std::max<int64_t>(k_tile_rows, dtype_block_elems(type));
    assert(tile_rows % dtype_block_elems(type) == 0);
    const int64_t n_tiles = (out + tile_rows - 1) / tile_rows;
    const detail::dequant_fn decode = detail::active_table().dequant[static_cast<int>(w.type)];
#pragma omp parallel if (n_tiles > 1)
    {
        std::vector<float> rows(static_cast<size_t>(tile_rows * in));
        std::vector<float> col(static_cast<size_t>(tile_rows));
#pragma omp for schedule(static)
        for (int64_t t = 0; t < n_tiles; ++t) {
            const int64_t r0 = t * tile_rows;
            const int64_t nr = std::min(tile_rows, out - r0);
            for (int64_t r = 0; r < nr; ++r) decode(w.row(r0 + r), rows.data() + r * in, in);
            const int64_t dst_off = dtype_row_bytes(type, r0);
            for (int64_t c = 0; c < in; ++c) {
                for (int64_t r = 0; r < nr; ++r) col[static_cast<size_t>(r)] = rows[static_cast<size_t>(r * in + c)];
                quantize_row(type, col.data(), dst + c * dst_stride + dst_off, nr);
            }
        }
    }
}

// Copies (same type) or converts each row of w into dst + r * dst_stride.
void rows_into(const tensor_view& w, dtype type, uint8_t* dst, int64_t dst_stride) {
    if (w.type == type) {
        for (int64_t r = 0; r < w.rows; ++r)
            std::memcpy(dst + r * dst_stride, w.row(r), static_cast<size_t>(w.row_bytes()));
        return;
    }
    const detail::dequant_fn decode = detail::active_table().dequant[static_cast<int>(w.type)];
#pragma omp parallel if (w.rows * w.cols > (int64_t{1} << 16))
    {
        std::vector<float> row(static_cast<size_t>(w.cols));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < w.rows; ++r) {
            decode(w.row(r), row.data(), w.cols);
            if (avx2_encoder(type) && w.cols % dtype_block_elems(type) == 0 && w.cols % 32 == 0)
                detail::encode_row_avx2(type, row.data(), dst + r * dst_stride, w.cols);
            else
                quantize_row(type, row.data(), dst + r * dst_stride, w.cols);
        }
    }
}

}  // namespace

dtype input_major_type(const tensor_view& w) {
    dtype t = dtype_replacing_layout_type(w.type);
    if (t == dtype::q6_0x8 && w.rows % dtype_block_elems(t) != 0) t = dtype::q8_0;  // only whole groups
    return w.rows % dtype_block_elems(t) == 0 ? dtype_input_major_form(t, w.rows) : dtype::f32;
}

owned_matrix to_input_major(const tensor_view& w, dtype type) {
    assert(w.cols % dtype_block_elems(w.type) == 0);
    assert(w.rows % dtype_block_elems(type) == 0 && (!dtype_is_quantized(type) || w.rows % 32 == 0) &&
           "quantized input-major needs whole blocks of outputs");
    owned_matrix m;
    m.view.type = type;
    m.view.rows = w.cols;
    m.view.cols = w.rows;
    uint8_t* dst = aligned_buffer(m.bytes, m.view.bytes());
    m.view.data = dst;
    transpose_into(w, type, dst, m.view.row_bytes());
    return m;
}

owned_matrix to_input_major_pair(const tensor_view& a, const tensor_view& b, dtype type) {
    assert(a.cols == b.cols && a.cols % dtype_block_elems(a.type) == 0 && b.cols % dtype_block_elems(b.type) == 0);
    assert(a.rows % dtype_block_elems(type) == 0 && b.rows % dtype_block_elems(type) == 0 &&
           (!dtype_is_quantized(type) || (a.rows % 32 == 0 && b.rows % 32 == 0)) &&
           "each part fills whole blocks of outputs");
    owned_matrix m;
    m.view.type = type;
    m.view.rows = a.cols;
    m.view.cols = a.rows + b.rows;
    uint8_t* dst = aligned_buffer(m.bytes, m.view.bytes());
    m.view.data = dst;
    transpose_into(a, type, dst, m.view.row_bytes());
    transpose_into(b, type, dst + dtype_row_bytes(type, a.rows), m.view.row_bytes());
    return m;
}

bool rows_x8_native(dtype t) {
    const dtype form = dtype_rows_x8_form(t);
    return form != t && detail::active_table().rows[static_cast<int>(form)] != nullptr;
}

bool rows_x8_faster(dtype t) {
    return rows_x8_native(t) && (t == dtype::q4_k || detail::cpu_prefers_row_streams());
}

tensor_view to_rows_x8(const tensor_view& w, uint8_t* dst) {
    assert(dtype_is_rows_x8(dtype_rows_x8_form(w.type)) && w.rows % k_rows_x8 == 0 &&
           "the regrouped forms hold Q4_K / Q4_0 / Q8_0 rows in groups of 8");
    assert(w.cols % qk_k == 0 && "regrouped rows of whole 256-column groups");
    const int64_t groups = w.rows / k_rows_x8, gb = k_rows_x8 * w.row_bytes();
#pragma omp parallel for schedule(static) if (groups > 64)
    for (int64_t g = 0; g < groups; ++g)
        detail::rows_to_rows_x8(w.type, w.row(g * k_rows_x8), w.row_bytes(), w.cols, dst + g * gb);
    return {dtype_rows_x8_form(w.type), w.rows, w.cols, dst};
}

owned_matrix to_rows_x8(const tensor_view& w) {
    owned_matrix m;
    m.view = to_rows_x8(w, aligned_buffer(m.bytes, w.bytes()));
    return m;
}

owned_bundles make_bundles(const tensor_view& gate, const tensor_view& up, const tensor_view& down, dtype type) {
    assert(gate.rows == up.rows && gate.cols == up.cols && "gate and up must have the same shape");
    assert(down.rows == gate.cols && down.cols == gate.rows && "down must be [dim, hidden]");
    assert((!dtype_is_quantized(type) || gate.cols % 32 == 0) && "quantized bundles need dim % 32 == 0");
    assert(dtype_is_file_type(type) && "bundle rows are dotted by the row kernels: a file type (dtype_bundle_type)");
    owned_bundles b;
    b.view.type = type;
    b.view.n_neurons = gate.rows;
    b.view.dim = gate.cols;
    b.view.down = dtype_input_major_form(type, gate.cols);
    uint8_t* dst = aligned_buffer(b.bytes, b.view.n_neurons * b.view.bundle_bytes());
    b.view.data = dst;
    const int64_t part = b.view.part_bytes(), stride = b.view.bundle_bytes();
    rows_into(gate, type, dst, stride);
    rows_into(up, type, dst + part, stride);
    transpose_into(down, b.view.down_type(), dst + 2 * part, stride);
    return b;
}

owned_pairs make_pairs(const tensor_view& rows, const tensor_view& down, dtype down_type, bool gate_rows) {
    assert(down.rows == rows.cols && down.cols == rows.rows && "down must be [dim, hidden]");
    assert(down.rows % dtype_block_elems(down_type) == 0 && "down columns of whole blocks");
    owned_pairs p;
    p.view.row_type = rows.type;
    p.view.down_type = down_type;
    p.view.n_neurons = rows.rows;
    p.view.dim = rows.cols;
    p.view.gate_rows = gate_rows;
    uint8_t* dst = aligned_buffer(p.bytes, p.view.bytes());
    p.view.data = dst;
    rows_into(rows, rows.type, dst, p.view.pair_bytes());
    transpose_into(down, down_type, dst + p.view.row_bytes(), p.view.pair_bytes());
    return p;
}

namespace detail {

// Where the parts of Q4_K block (row r, super-block b) or of Q4_0 / Q8_0 block (row r, block 8b + k) go in
// a Q4_Kx8r / Q4_0x8r / Q8_0x8r group (types.h): one walk for both directions (rows -> group when the
// rows are the const side), so the two cannot disagree.
template <typename Rows, typename Group>
void move_rows_x8(dtype base, Rows* rows, int64_t rb, int64_t cols, Group* group) {
    const int64_t bytes = dtype_row_bytes(base, qk_k), gbytes = k_rows_x8 * bytes;  // per row and 256 columns
    for (int64_t b = 0; b < cols / qk_k; ++b) {
        Group* o = group + b * gbytes;
        for (int r = 0; r < k_rows_x8; ++r) {
            Rows* p = rows + r * rb + b * bytes;
            const auto move = [&](int64_t at_group, int64_t at_block, size_t n) {
                if constexpr (std::is_const_v<Rows>)
                    std::memcpy(o + at_group, p + at_block, n);
                else
                    std::memcpy(p + at_block, o + at_group, n);
            };
            if (base == dtype::q8_0) {
                for (int k = 0; k < k_x8_blocks; ++k) {
                    const int64_t blk = k * static_cast<int64_t>(sizeof(block_q8_0));
                    move(16 * k + 2 * r, blk, 2);  // d
                    for (int q = 0; q < 4; ++q) move(128 + 256 * k + 64 * q + 8 * r, blk + 2 + 8 * q, 8);  // piece q
                }
                continue;
            }
            if (base == dtype::q4_0) {
                for (int k = 0; k < k_x8_blocks; ++k) {
                    const int64_t blk = k * static_cast<int64_t>(sizeof(block_q4_0));
                    move(16 * k + 2 * r, blk, 2);                 // d
                    move(128 + 128 * k + 8 * r, blk + 2, 8);      // quant bytes 0-7
                    move(128 + 128 * k + 64 + 8 * r, blk + 10, 8);  // 8-15
                }
                continue;
            }
            move(2 * r, 0, 2);                         // d
            move(16 + 2 * r, 2, 2);                    // dmin
            for (int w = 0; w < 3; ++w) move(32 + 32 * w + 4 * r, 4 + 4 * w, 4);  // scale word w
            for (int k = 0; k < 16; ++k) move(128 + 64 * k + 8 * r, 16 + 8 * k, 8);
        }
    }
}

void rows_to_rows_x8(dtype base, const uint8_t* rows, int64_t rb, int64_t cols, uint8_t* group) {
    move_rows_x8(base, rows, rb, cols, group);
}

void rows_x8_to_rows(dtype base, const uint8_t* group, int64_t cols, uint8_t* rows, int64_t rb) {
    move_rows_x8(base, rows, rb, cols, group);
}

void rows_x8_back(const kernel_table& kt, dtype t, const uint8_t* group, int64_t cols, uint8_t* rows, int64_t rb) {
    if (t == dtype::q4_k_r8 && kt.x8_to_rows) {
        kt.x8_to_rows(group, cols, rows, rb);
        return;
    }
    rows_x8_to_rows(dtype_rows_x8_base(t), group, cols, rows, rb);
}

}  // namespace detail
}  // namespace sl::kernels

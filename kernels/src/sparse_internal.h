// Private interface between the sparse drivers (sparse.cpp, layout.cpp) and the per-ISA sparse kernels.
#pragma once

#include <xmmintrin.h>

#include <algorithm>
#include <cstdint>

#include "dense_internal.h"

namespace sl::kernels::detail {

// Most weight rows one axpy call combines. Four rows per pass over the accumulator cut its
// load/store traffic by 4x while keeping few enough streams in flight for the prefetchers.
inline constexpr int k_axpy_rows = 4;

// acc[0, n) = (init ? 0 : acc[0, n)) + sum_{g < n_rows} s[g] * row_g[0, n), where row_g = rows[g] points
// at the first stored element of the segment (a block start for Q8_0/Q4_0, where n is a multiple of
// 32; a group start for the 256-element forms Q8_0x8/Q4_0x8/Q6_0x8, n a multiple of 256). The sum is
// formed left to right with f32 FMAs, so every element's arithmetic is independent
// of n and of the segment's position: any split of the outputs gives identical bits.
// pf (nullable) holds n_rows addresses read next; the kernel prefetches pf[g] + the byte offset it is
// at in rows[g], so the next rows arrive while these are being consumed.
using axpy_fn = void (*)(float* acc, bool init, int n_rows, const uint8_t* const* rows, const float* s, int64_t n,
                         const uint8_t* const* pf);

// y[k] = dot(rows[k], x) for k < n, each row `cols` stored elements; x as for rows_fn (f32, or q8_act for
// Q8_0/Q4_0). Unlike the dense streaming kernels, which prefetch 4 KiB ahead in the same row (right
// for consecutive rows, a wasted read of an unused row for short sparse rows), these prefetch
// pf[k] (if pf and pf[k] are non-null) at the offset they are reading in rows[k]: the caller passes
// the rows it will read next. Otherwise they are the dense rows kernels of the same ISA (gather_dots
// below), so results are bit-identical to gemv (tests hold both to it).
using dots_fn = void (*)(const uint8_t* const* rows, const uint8_t* const* pf, int64_t n, int64_t cols, const void* x,
                         float* y);

// An axpy_fn that calls Op::template run<G, Init, PF>(acc, rows, s, n, pf) with G = n_rows, Init = init and
// PF = (pf != null), so each per-ISA inner loop is branch-free. Op comes from an anonymous namespace of a
// per-ISA file, so every instantiation stays in that file's ISA.
template <typename Op>
void axpy_dispatch(float* acc, bool init, int n_rows, const uint8_t* const* rows, const float* s, int64_t n,
                   const uint8_t* const* pf) {
    auto go = [&]<int G>() {
        if (init) {
            pf ? Op::template run<G, true, true>(acc, rows, s, n, pf)
               : Op::template run<G, true, false>(acc, rows, s, n, pf);
        } else {
            pf ? Op::template run<G, false, true>(acc, rows, s, n, pf)
               : Op::template run<G, false, false>(acc, rows, s, n, pf);
        }
    };
    static_assert(k_axpy_rows == 4);
    switch (n_rows) {
        case 1:
            go.template operator()<1>();
            break;
        case 2:
            go.template operator()<2>();
            break;
        case 3:
            go.template operator()<3>();
            break;
        default:
            go.template operator()<4>();
            break;
    }
}

// A one-row dense row kernel (w, rb, cols, x, y, pf) of some ISA; x is const float* or const q8_act*.
template <typename X>
using row_dot_fn = void (*)(const uint8_t* w, int64_t rb, int64_t cols, const X* x, float* y, const uint8_t* pf);

// A dots_fn that runs each listed row through the dense row kernel of one ISA: Fetch prefetches pf[k]
// while reading row k, Plain (for a null pf[k]) does not. Both come from the anonymous namespace of a
// per-ISA file, so every instantiation stays in that file's ISA.
template <typename X, row_dot_fn<X> Fetch, row_dot_fn<X> Plain>
void gather_dots(const uint8_t* const* rows, const uint8_t* const* pf, int64_t n, int64_t cols, const void* x,
                 float* y) {
    const auto* xt = static_cast<const X*>(x);
    for (int64_t k = 0; k < n; ++k) {
        if (pf && pf[k]) {
            Fetch(rows[k], 0, cols, xt, y + k, pf[k]);
        } else {
            Plain(rows[k], 0, cols, xt, y + k, nullptr);
        }
    }
}

// Most channels one chunk_fn call combines (the input-sparse driver's channel block, k_sum_block).
inline constexpr int k_chunk_rows = 32;

// acc[0, n) = (init ? 0 : acc[0, n)) + sum_{g < n_rows} s[g] * row_g[0, n) for 1 <= n_rows <= k_chunk_rows
// quantized rows (rows as for axpy_fn; n a multiple of 32), with the chunk's products formed as integer
// dots (sparse_vnni_avx512.cpp: coefficients rounded to int8 per (chunk, block of 32 outputs), so the
// result carries activation-quantization error like the dense quantized gemv's). Each output's
// arithmetic depends only on the chunk and its block: any split of the outputs gives identical bits.
// pf (n_pf addresses, may be 0) are the rows read next; they are prefetched at the offset being read.
using chunk_fn = void (*)(float* acc, bool init, int n_rows, const uint8_t* const* rows, const float* s, int64_t n,
                          const uint8_t* const* pf, int n_pf);

// The chunk kernels' prefetch of the next chunk's rows (the first row_bytes of n_pf rows, read while this
// chunk's n_steps output steps compute): into L2, paced evenly over the steps, at most k_prefetch_lines in
// all, row after row (sequential runs for DRAM) with a walking pointer. On Intel the chunks pass only the
// rows' heads and prefetch the rest in row as they read it (row_ahead below); elsewhere whole rows.
// - The AVX-512 VNNI chunks went across the rows until stop 43 (line l of every row before line l + 1 of
//   any, as the next chunk reads them): on stop 29's Zen 4 that was 1-4 points of DIP's and TEAL's ideal
//   ahead, because row after row the last rows' first lines came late. On stop 43's Zen 5 the order
//   reversed: in one process, 2 threads, llama-1b's gate and up as Q4_0x8 (50% of 2048 rows of 3168
//   bytes, 22 layers, medians of 15), row after row read 21.7 -> 24.2 / 19.8 -> 21.6 / 25.3 -> 28.2 GB/s,
//   Q8_0x8 27.3 -> 30.6 / 25.2 -> 30.6; plain reads of 16 such rows side by side agreed (18.8 -> 22.6,
//   18.4 -> 23.1 GB/s).
// - The AVX2 chunks: across rows, DIP on Q8_0 through them lost 0.1-6.7 points in 5 of 5 pairs on the
//   Zen 4; no AVX2-only CPU to measure.
// Per line one prefetch and an add and a compare (+ a pointer load across rows): a (row, line) multiply
// per line cost 7-8% of the whole chunk with the rows in cache (2048x8192 Q4_0, AVX2, stop 20). Runs of
// 4 lines per pointer update were 15% faster from cache but 8-12% slower from memory (stop 43).
// When the fused MLP passed the next 32 whole bundles, 1.4 MiB for Q8_0 at dim 14336 overflowed L2
// (1 MiB here) before they were read (1.4 -> 2.0x d*dense); it now passes their down columns only.
// DIP at 50% on llama-1b Q4_0, Zen 4 (stop 26): all lines within the first half of the steps 63-68% of
// its ideal (against 79-83% paced); T0 50%; no prefetch 40-42%.
namespace {  // internal linkage: each ISA's chunk file keeps its own copy

class paced_prefetch {
public:
    static constexpr int64_t k_prefetch_lines = (256 << 10) / 64;  // a quarter of L2 ahead at most

    paced_prefetch(const uint8_t* const* pf, int n_pf, int64_t row_bytes, int64_t n_steps)
        : m_pf(pf), m_n(n_pf), m_row_lines((row_bytes + 63) / 64 + 1) {
        m_left = std::min<int64_t>(n_pf * m_row_lines, k_prefetch_lines);
        m_per_step = n_steps > 0 ? (m_left + n_steps - 1) / n_steps : 0;
        m_p = n_pf > 0 ? pf[0] : nullptr;
        m_end = m_p ? m_p + m_row_lines * 64 : nullptr;
    }
    // One step's share of the lines.
    void step() {
        const int64_t q = std::min(m_per_step, m_left);
        m_left -= q;
        for (int64_t i = 0; i < q; ++i) {
            _mm_prefetch(reinterpret_cast<const char*>(m_p), _MM_HINT_T1);
            m_p += 64;
            if (m_p == m_end && ++m_i < m_n) {
                m_p = m_pf[m_i];
                m_end = m_p + m_row_lines * 64;
            }
        }
    }

private:
    const uint8_t* const* m_pf;
    int m_n, m_i = 0;
    int64_t m_row_lines, m_left = 0, m_per_step = 0;
    const uint8_t *m_p = nullptr, *m_end = nullptr;
};

// Each row of a chunk k_row_ahead bytes ahead of the block being read, into L1: one prefetch per row and
// line as the rows advance, none past the rows' ends (row_bytes; 0: off). The previous chunk's
// paced_prefetch brought each row's first k_row_ahead bytes into L2, so every line was asked for before it
// is read. Used where cpu_prefers_in_row_chunk_prefetch (dense_internal.h) says so.
class row_ahead {
public:
    static constexpr int64_t k_row_ahead = 384;

    explicit row_ahead(int64_t row_bytes) : m_end(row_bytes) {}
    // The rows now read up to byte `at` (of n rows r): prefetch up to at + k_row_ahead.
    [[gnu::always_inline]] void upto(const uint8_t* const* r, int n, int64_t at) {
        for (const int64_t stop = std::min(at + k_row_ahead, m_end); m_next < stop; m_next += 64)
            for (int i = 0; i < n; ++i) _mm_prefetch(reinterpret_cast<const char*>(r[i] + m_next), _MM_HINT_T0);
    }

private:
    int64_t m_next = k_row_ahead, m_end;
};

// A chunk kernel's two prefetchers for rows of row_bytes over n_steps steps, as this CPU prefers them
// (cpu_prefers_in_row_chunk_prefetch): the next chunk's row heads into L2 and these rows in row, or the
// next chunk's whole rows into L2 and no in-row prefetch.
struct chunk_prefetchers {
    paced_prefetch next;
    row_ahead rows;
};
inline chunk_prefetchers chunk_prefetchers_for(const uint8_t* const* pf, int n_pf, int64_t row_bytes,
                                               int64_t n_steps) {
    if (cpu_prefers_in_row_chunk_prefetch())
        return {paced_prefetch(pf, n_pf, std::min(row_bytes, row_ahead::k_row_ahead), n_steps), row_ahead(row_bytes)};
    return {paced_prefetch(pf, n_pf, row_bytes, n_steps), row_ahead(0)};
}

}  // namespace

struct sparse_table {
    // Indexed by dtype; 1 <= n_rows <= k_axpy_rows. Only for types a layout can be written in
    // (dtype_layout_type, dtype_input_major_form): input-major matrices and bundles of other types are
    // stored as Q8_0 (x8). The x8 forms have an axpy in the scalar table only (the others have chunks).
    axpy_fn axpy[n_dtypes] = {};
    dots_fn dots[n_dtypes] = {};    // indexed by dtype; null (scalar ISA): the dense rows kernel is used
    chunk_fn chunk[n_dtypes] = {};  // indexed by dtype; null: the input-sparse driver sums axpy groups
    // The AVX2 chunk for Q4_0x8 beside a VNNI chunk[q4_0x8] (AVX-512 table; null elsewhere): chunk_of.
    chunk_fn q4_0x8_avx2 = nullptr;
};

// Whether chunk_of takes sparse_table::q4_0x8_avx2 where there is one (kernels::set_avx2_q4_0x8_chunk).
bool avx2_q4_0x8_chunk_on();

// The chunk that sums input-major rows of `type` (null: none; the driver then sums axpy groups).
inline chunk_fn chunk_of(const sparse_table& t, dtype type) {
    if (type == dtype::q4_0x8 && t.q4_0x8_avx2 && avx2_q4_0x8_chunk_on()) return t.q4_0x8_avx2;
    return t.chunk[static_cast<int>(type)];
}

// Gathered-row dots of the types decoded through quant_unpack.h (quant_rows_avx2.cpp), for the
// AVX2 and AVX-512 tables: the same row kernel as their dense rows, so results equal gemv's.
void add_unpacked_dots_avx2(sparse_table& k);
// The AVX-512 Q4_K/Q6_K row kernels as gathers (quant_rows_avx512.cpp), for the AVX-512 table.
void add_kquant_dots_avx512(sparse_table& k);

// The VNNI + VBMI builds of the dense Q8_0/Q4_0/Q4_K/Q6_K rows as gathers (dense_vnni_avx512.cpp), for the
// AVX-512 table; a no-op on CPUs without AVX512-VNNI and AVX512-VBMI. Same bits as the AVX-512BW gathers.
void add_vnni_dots_avx512(sparse_table& k);
// The VNNI input-sparse chunks for Q8_0/Q4_0 and the x8 forms Q8_0x8/Q4_0x8/Q6_0x8
// (sparse_vnni_avx512.cpp), for the AVX-512 table; a no-op on CPUs without AVX512-VNNI and AVX512-VBMI.
void add_vnni_chunks(sparse_table& k);
// The same chunks' arithmetic with AVX2 integer dots (sparse_int8_avx2.cpp), for the AVX2 table:
// bit-identical to the VNNI chunks for finite inputs.
void add_int8_chunks_avx2(sparse_table& k);
// The x8 forms' chunks alone (Q8_0x8, Q4_0x8, Q6_0x8), for the AVX-512 table of CPUs without VNNI or
// VBMI (their bits are the VNNI chunks').
void add_int8_x8_chunks_avx2(sparse_table& k);

const sparse_table& sparse_scalar_table();
const sparse_table& sparse_avx2_table();
const sparse_table& sparse_avx512_table();
// The table for active_isa(), like active_table() for the dense kernels.
const sparse_table& active_sparse_table();

}  // namespace sl::kernels::detail

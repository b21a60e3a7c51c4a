// Dense GEMV/GEMM drivers: activation preparation, OpenMP row partitioning, gemm tiling.
#include <algorithm>
#include <atomic>
#include <cassert>
#include <vector>

#include <omp.h>

#include "dense_internal.h"
#include "quant_unpack.h"

namespace sl::kernels {
namespace {

using detail::q8_act;

// Below this much weight traffic per thread, waking another thread costs more than it saves.
constexpr int64_t min_bytes_per_thread = 64 * 1024;
// gemm keeps a tile of this many f32 bytes hot in L2 while it streams every token past it.
constexpr int64_t gemm_tile_bytes = 192 * 1024;

int pick_threads(int requested, int64_t work_bytes, int64_t row_units) {
    int nt = requested > 0 ? requested : omp_get_max_threads();
    nt = static_cast<int>(std::min<int64_t>(nt, std::max<int64_t>(1, work_bytes / min_bytes_per_thread)));
    return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(nt, row_units)));
}

// gemv's largest chunk: a quarter of a thread's share of the call's bytes, between 128 KiB and 1 MiB
// (gemv_multi's chunks shrink from it toward the call's end). Fixed 128 KiB chunks (chosen when idle
// workers slept between regions) cost 10-20% of llama-1b dense decode on 2 threads against this or fixed
// 0.5-1 MiB (alternating, 2-5 rounds each, every weight type: docs/results.md, stop 23); the quarter
// keeps a few chunks per thread on the small matrices (k, v, o) so the threads still finish together.
int64_t chunk_bytes_for(int64_t call_bytes, int nt) {
    return std::clamp<int64_t>(call_bytes / (4 * static_cast<int64_t>(nt)), 128 * 1024, 1 << 20);
}

// Q4_Kx8r / Q4_0x8r / Q8_0x8r rows on an ISA without a kernel of its own: each group of 8 copied back to rows of
// the base type (in the thread's buffer, L1/L2-resident) and run through those rows, so every row keeps
// their bits.
void rows_x8_by_copy(const detail::kernel_table& kt, dtype t, const uint8_t* w, int64_t rb, int64_t n_rows,
                     int64_t cols, const void* xa, float* y) {
    thread_local std::vector<uint8_t> buf;
    buf.resize(static_cast<size_t>(k_rows_x8 * rb));
    for (int64_t r = 0; r < n_rows; r += k_rows_x8) {
        detail::rows_x8_back(kt, t, w + r * rb, cols, buf.data(), rb);
        kt.rows[static_cast<int>(dtype_rows_x8_base(t))](buf.data(), rb, k_rows_x8, cols, xa, y + r);
    }
}

// Contiguous share of `rows` for thread t of nt, in units of 4 rows: whole row groups for the
// cached (gemm) kernels, and neighbouring threads' y stores rarely share a cache line.
void split_rows(int64_t rows, int nt, int t, int64_t& r0, int64_t& r1) {
    const int64_t units = (rows + 3) / 4;
    const int64_t per = units / nt;
    const int64_t extra = units % nt;
    const int64_t u0 = t * per + std::min<int64_t>(t, extra);
    const int64_t u1 = u0 + per + (t < extra ? 1 : 0);
    r0 = std::min(rows, u0 * 4);
    r1 = std::min(rows, u1 * 4);
}

// Quantized activations for n tokens; grows only, so steady-state calls do not allocate.
struct act_scratch {
    std::vector<int8_t> qs;
    std::vector<float> d, s;
    std::vector<q8_act> views;

    void reserve(int64_t n_tokens, int64_t cols) {
        const auto nb = static_cast<size_t>(n_tokens * (cols / 32));
        if (qs.size() < static_cast<size_t>(n_tokens * cols)) qs.resize(static_cast<size_t>(n_tokens * cols));
        if (d.size() < nb) {
            d.resize(nb);
            s.resize(nb);
        }
        if (views.size() < static_cast<size_t>(n_tokens)) views.resize(static_cast<size_t>(n_tokens));
    }

    // Quantizes token t of x (reserve() first); safe to call for different t concurrently.
    void quantize(const detail::kernel_table& kt, dtype wt, const float* x, int64_t t, int64_t cols) {
        const int64_t nb = cols / 32;
        detail::quantize_act_for(wt, kt, x + t * cols, cols, qs.data() + t * cols, d.data() + t * nb,
                                 s.data() + t * nb);
        views[static_cast<size_t>(t)] = {qs.data() + t * cols, d.data() + t * nb, s.data() + t * nb};
    }
};

act_scratch& thread_act_scratch() {
    thread_local act_scratch s;
    return s;
}

void check_view(const tensor_view& w) {
    assert(w.rows >= 0 && w.cols >= 0);
    assert((!dtype_is_rows_x8(w.type) || w.rows % k_rows_x8 == 0) && "the regrouped forms hold groups of 8 rows");
    assert(w.cols % dtype_block_elems(w.type) == 0 && "cols must be a multiple of the block size");
    assert((w.data != nullptr || w.rows == 0 || w.cols == 0) && "tensor without data");
    (void)w;
}

}  // namespace

void gemv(const tensor_view& w, const float* x, float* y, int n_threads) {
    gemv_multi(&w, &y, 1, x, n_threads);
}

void gemv_multi(const tensor_view* ws, float* const* ys, int n_mats, const float* x, int n_threads) {
    const float* xs_small[8];
    std::vector<const float*> xs_big(n_mats > 8 ? static_cast<size_t>(n_mats) : 0);
    const float** xs = n_mats > 8 ? xs_big.data() : xs_small;
    std::fill(xs, xs + n_mats, x);
    gemv_multi(ws, ys, n_mats, xs, n_threads);
}

void gemv_multi(const tensor_view* ws, float* const* ys, int n_mats, const float* const* xs, int n_threads) {
    int64_t bytes = 0, units = 0;
    for (int i = 0; i < n_mats; ++i) {
        check_view(ws[i]);
        assert(ws[i].cols == ws[0].cols && "gemv_multi: matrices of one width (a quantized x is reused by width)");
        if (ws[i].rows > 0 && ws[i].cols == 0) std::fill(ys[i], ys[i] + ws[i].rows, 0.0f);
        if (ws[i].rows <= 0 || ws[i].cols == 0) continue;
        bytes += ws[i].bytes();
        units += (ws[i].rows + 3) / 4;
    }
    if (units == 0) return;
    const detail::kernel_table& kt = detail::active_table();
    const int nt = pick_threads(n_threads, bytes, units);
    const int64_t cb = chunk_bytes_for(bytes, nt);
    // The rows of all matrices, as one sequence of 8-row units, are taken in order from a shared cursor
    // (a worker still waking up -- a sleeping OpenMP thread takes 10-90 us to start here, a halted vCPU --
    // does not hold up the others, which take its rows meanwhile). Chunks are guided: each takes
    // 1/(2 nt) of the bytes left, between 64 KiB and cb, whole 8-row groups, never across two matrices:
    // the bulk streams in long runs and the threads finish within a small chunk of each other (fixed cb
    // chunks decoded llama-1b Q4_0 0.7-3.4% slower on the Xeon of stop 47, 6 alternating pairs). A row's
    // arithmetic never depends on which thread runs it or on its neighbours, so results do not change.
    // Each thread quantizes x into its own scratch (O(cols), tiny next to its rows): no serial section
    // and no barrier; consecutive matrices of one activation kind reuse it.
    struct span {
        int64_t start = 0;         // first unit of the matrix in the sequence
        int64_t unit_bytes = 0;    // bytes of one of its units
        int64_t bytes_before = 0;  // bytes of the matrices before it
    };
    constexpr int max_small = 8;
    span spans_small[max_small + 1];  // spans[n_mats].start: the units of all matrices
    std::vector<span> spans_big(n_mats > max_small ? static_cast<size_t>(n_mats + 1) : 0);
    span* spans = n_mats > max_small ? spans_big.data() : spans_small;
    constexpr int64_t unit = 8;
    static_assert(unit % k_rows_x8 == 0);
    spans[0] = {};
    for (int i = 0; i < n_mats; ++i) {
        const int64_t n = ws[i].rows > 0 && ws[i].cols > 0 ? (ws[i].rows + unit - 1) / unit : 0;
        spans[i].unit_bytes = unit * ws[i].row_bytes();
        spans[i + 1] = {spans[i].start + n, 0, spans[i].bytes_before + n * spans[i].unit_bytes};
    }
    const int64_t n_units = spans[n_mats].start;
    const int64_t min_chunk = std::min<int64_t>(cb, 64 * 1024);
    std::atomic<int64_t> cursor{0};
    auto run = [&]() {
        int quantized_as = -1;            // act_kind the scratch holds an x in, -1: none yet
        const float* quantized_x = nullptr;  // ... and which x
        int i = 0;
        int64_t g = cursor.load(std::memory_order_relaxed);
        while (g < n_units) {
            while (g >= spans[i + 1].start) ++i;  // the cursor only grows: matrix i only grows
            const span& sp = spans[i];
            const int64_t left = bytes - (sp.bytes_before + (g - sp.start) * sp.unit_bytes);
            const int64_t want = std::clamp<int64_t>(left / (2 * nt), min_chunk, cb);
            const int64_t take = std::max<int64_t>(1, want / sp.unit_bytes);
            const int64_t end = std::min(spans[i + 1].start, g + take);
            if (!cursor.compare_exchange_weak(g, end, std::memory_order_relaxed)) continue;  // g: the cursor now
            const tensor_view& w = ws[i];
            const int64_t r0 = (g - sp.start) * unit;
            const int64_t r1 = std::min(w.rows, (end - sp.start) * unit);
            const void* xa = xs[i];
            if (dtype_is_quantized(w.type)) {
                act_scratch& sc = thread_act_scratch();
                const int kind = static_cast<int>(detail::quant_info(w.type).act);
                if (kind != quantized_as || xs[i] != quantized_x) {
                    sc.reserve(1, w.cols);
                    sc.quantize(kt, w.type, xs[i], 0, w.cols);
                    quantized_as = kind;
                    quantized_x = xs[i];
                }
                xa = sc.views.data();
            }
            if (const detail::rows_fn fn = kt.rows[static_cast<int>(w.type)])
                fn(w.row(r0), w.row_bytes(), r1 - r0, w.cols, xa, ys[i] + r0);
            else  // only Q4_Kx8r / Q4_0x8r / Q8_0x8r have no rows on some ISAs
                rows_x8_by_copy(kt, w.type, w.row(r0), w.row_bytes(), r1 - r0, w.cols, xa, ys[i] + r0);
            g = cursor.load(std::memory_order_relaxed);
        }
    };
    if (nt == 1) {
        run();
        return;
    }
#pragma omp parallel num_threads(nt)
    run();
}

void gemm(const tensor_view& w, const float* x, int64_t n, float* y, int n_threads) {
    check_view(w);
    if (n <= 0 || w.rows <= 0) return;
    if (n == 1) {
        gemv(w, x, y, n_threads);
        return;
    }
    if (w.cols == 0) {
        std::fill(y, y + n * w.rows, 0.0f);
        return;
    }
    const int nt = pick_threads(n_threads, w.bytes() * n, (w.rows + 3) / 4);
    if (dtype_is_quantized(w.type)) {
        detail::gemm_int8(w, x, n, y, nt);
        return;
    }
    if (w.type == dtype::f16 || w.type == dtype::bf16) {
        detail::gemm_float(w, x, n, y, nt);
        return;
    }
    // F32: row dots over tiles kept in L2, each row with gemv's arithmetic (bit-identical to it).
    const detail::rows_fn fn = detail::active_table().rows_cached[static_cast<int>(dtype::f32)];
    const int64_t rb = w.row_bytes();
    const int64_t tile_rows = std::max<int64_t>(4, gemm_tile_bytes / (w.cols * 4) / 4 * 4);

#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t r0, r1;
        split_rows(w.rows, omp_get_num_threads(), omp_get_thread_num(), r0, r1);
        for (int64_t r = r0; r < r1; r += tile_rows) {
            const int64_t nr = std::min(tile_rows, r1 - r);
            for (int64_t t = 0; t < n; ++t) fn(w.row(r), rb, nr, w.cols, x + t * w.cols, y + t * w.rows + r);
        }
    }
}

}  // namespace sl::kernels

// Dense GEMV/GEMM drivers: activation preparation, OpenMP row partitioning, gemm tiling.
#include <algorithm>
#include <cassert>
#include <vector>

#include <omp.h>

#include "dense_internal.h"

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
        detail::quantize_act_for(wt, kt, x + t * cols, cols, qs.data() + t * cols, d.data() + t * nb, s.data() + t * nb);
        views[static_cast<size_t>(t)] = {qs.data() + t * cols, d.data() + t * nb, s.data() + t * nb};
    }
};

act_scratch& thread_act_scratch() {
    thread_local act_scratch s;
    return s;
}

void check_view(const tensor_view& w) {
    assert(w.rows >= 0 && w.cols >= 0);
    assert(w.cols % dtype_block_elems(w.type) == 0 && "cols must be a multiple of the block size");
    assert((w.data != nullptr || w.rows == 0 || w.cols == 0) && "tensor without data");
    (void)w;
}

}  // namespace

void gemv(const tensor_view& w, const float* x, float* y, int n_threads) {
    check_view(w);
    if (w.rows <= 0) return;
    if (w.cols == 0) {
        std::fill(y, y + w.rows, 0.0f);
        return;
    }
    const detail::kernel_table& kt = detail::active_table();
    const detail::rows_fn fn = kt.rows[static_cast<int>(w.type)];
    const bool quantized = dtype_is_quantized(w.type);
    const int64_t rb = w.row_bytes();
    const int nt = pick_threads(n_threads, w.bytes(), (w.rows + 3) / 4);
    // Each thread quantizes x into its own scratch (O(cols), tiny next to its rows): no serial
    // section and no barrier, so a worker that slept in between does not stall the others.
    auto run = [&](int64_t r0, int64_t r1) {
        const void* xa = x;
        if (quantized) {
            act_scratch& sc = thread_act_scratch();
            sc.reserve(1, w.cols);
            sc.quantize(kt, w.type, x, 0, w.cols);
            xa = sc.views.data();
        }
        fn(w.row(r0), rb, r1 - r0, w.cols, xa, y + r0);
    };
    if (nt == 1) {
        run(0, w.rows);
        return;
    }
#pragma omp parallel num_threads(nt)
    {
        int64_t r0, r1;
        split_rows(w.rows, omp_get_num_threads(), omp_get_thread_num(), r0, r1);
        if (r1 > r0) run(r0, r1);
    }
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

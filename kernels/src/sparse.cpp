// Sparse GEMV drivers (CHESS spvmm / vmmisp) and the fused sparse gated MLP: thread partitioning,
// output panels, blocked accumulation; the arithmetic lives in the per-ISA tables.
#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <vector>

#include <omp.h>

#include "sparse_internal.h"
#include "sparselens/kernels/attention.h"
#include "sparselens/kernels/sparse.h"

namespace sl::kernels {
namespace {

using detail::k_axpy_rows;
using detail::q8_act;

// Below this much weight traffic per thread, waking another thread costs more than it saves (with
// spinning workers; sleeping ones raise it, see wake_bytes).
constexpr int64_t min_bytes_per_thread = 64 * 1024;
// Bytes one thread streams per microsecond, to weigh a worker's wake-up against the work it takes
// over (a low estimate of this machine's single-thread sparse rate, 12-14 GB/s).
constexpr int64_t k_bytes_per_us = 10 * 1000;
// Channels (or neurons) summed into a panel-sized temporary before it is added to the output: the
// long sum over active channels is then two short ones, which keeps f32 rounding ~30x below a
// single running sum (an input-sparse GEMV at 100% agrees with the dense kernel to ~1e-13 nMSE).
constexpr int64_t k_sum_block = 32;
// Output panel of the input-sparse kernel: each active row is read in segments of ~4 KiB (the
// hardware prefetchers' page-sized unit) while the panel's partial sums stay in L1. Float rows (the
// f32 axpy path) go in 16 KiB runs of up to k_max_panel outputs: on 8192-output F32 rows at 2
// threads, 4 KiB panels read ~25 GB/s and 16 KiB ~33 (dense 35-45), quantized chunks 2-8 KiB alike.
constexpr int64_t k_panel_bytes = 4096;
constexpr int64_t k_float_panel_bytes = 16384;
constexpr int64_t k_max_panel = 4096;  // elements; bounds the stack temporary (16 KiB)
// Slices of the active list where threads split by channels/neurons (short input-sparse rows, the
// fused MLP): a fixed count, never the thread count, so the bits never depend on how many threads
// were requested or granted. The GUI runs the engine on cores - 1 threads, the CLI on all of them,
// and `eval --config` must reproduce the numbers the GUI showed. Up to 4 threads share the work.
constexpr int k_fixed_slices = k_sparse_slices;
// Output-sparse keeps this much of the following rows in flight (rows ahead = this / row bytes);
// 4-32 KiB measured alike (and 4/8/16 KiB again on a Zen 4 with AVX-512, stop 26). The hint is the row
// kernels' pf_l2 (dense_internal.h): into L2. On the AVX-512 machine of stop 17 T0 beat T1/T2 by
// 15-20%; on the AVX2-only VM T1 was 1.4-1.5x faster, and on stop 26's Zen 4 with AVX-512 T1 lifted the
// fused MLP from 17-20 to 26-30 GB/s (GRIFFIN 58-75% -> 89-97% of its ideal).
constexpr int64_t k_prefetch_bytes = 4096;

int requested_threads(int requested) {
    return requested > 0 ? requested : omp_get_max_threads();
}

// Microseconds to fork and join a second OpenMP thread, measured once (median of 15 empty regions):
// ~1 us while workers spin, ~50 us under OMP_WAIT_POLICY=passive on the 2-vCPU VM this was tuned on
// (a futex wake-up each time), where it exceeded the whole kernel at 10% density.
double fork_join_us() {
    static const double us = [] {
        if (omp_get_max_threads() < 2) return 0.0;
        double t[15];
        int team = 0;
        for (double& v : t) {
            const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(2)
            {
                if (omp_get_thread_num() == 0) team = omp_get_num_threads();
            }
            v = (omp_get_wtime() - t0) * 1e6;
        }
        if (team < 2) return 0.0;
        std::sort(std::begin(t), std::end(t));
        return t[7];
    }();
    return us;
}

// Work (bytes) a thread must have before another one is woken for it: the bytes it streams meanwhile.
int64_t wake_bytes() {
    return std::max<int64_t>(min_bytes_per_thread, static_cast<int64_t>(fork_join_us() * k_bytes_per_us));
}

// Threads to run on: at most the requested count and `units`, and only as many as the work pays for.
// Which results a kernel computes never depends on this (see the slices below), only how fast.
int pick_threads(int requested, int64_t work_bytes, int64_t units) {
    int nt = requested_threads(requested);
    if (nt > 1) nt = static_cast<int>(std::min<int64_t>(nt, std::max<int64_t>(1, work_bytes / wake_bytes())));
    return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(nt, units)));
}

// Contiguous share [b, e) of n items for thread t of nt.
void split(int64_t n, int nt, int t, int64_t& b, int64_t& e) {
    const int64_t per = n / nt, extra = n % nt;
    b = t * per + std::min<int64_t>(t, extra);
    e = b + per + (t < extra ? 1 : 0);
}

// Runs body(t, nt) on nt threads (inline when nt == 1: no fork/join for tiny calls).
template <typename F>
void parallel(int nt, F&& body) {
    if (nt == 1) {
        body(0, 1);
        return;
    }
#pragma omp parallel num_threads(nt)
    body(omp_get_thread_num(), omp_get_num_threads());
}

// The caller's quantized activations for the integer-dot kernels; grows only.
struct act_buffer {
    std::vector<int8_t> qs;
    std::vector<float> d, s;
    q8_act view;

    const q8_act* quantize(dtype wt, const float* x, int64_t n) {
        if (qs.size() < static_cast<size_t>(n)) {
            qs.resize(static_cast<size_t>(n));
            d.resize(static_cast<size_t>(n / 32));
            s.resize(static_cast<size_t>(n / 32));
        }
        detail::quantize_act_for(wt, detail::active_table(), x, n, qs.data(), d.data(), s.data());
        view = {qs.data(), d.data(), s.data()};
        return &view;
    }
};

act_buffer& thread_acts() {
    thread_local act_buffer b;
    return b;
}

}  // namespace

namespace detail {

const sparse_table& active_sparse_table() {
    switch (active_isa()) {
        case isa::avx512:
            return sparse_avx512_table();
        case isa::avx2:
            return sparse_avx2_table();
        case isa::scalar:
            break;
    }
    return sparse_scalar_table();
}

namespace {
std::atomic<bool>& avx2_q4_0x8_switch() {
    static std::atomic<bool> on{cpu_prefers_avx2_q4_0x8_chunk()};
    return on;
}
}  // namespace

bool avx2_q4_0x8_chunk_on() { return avx2_q4_0x8_switch().load(std::memory_order_relaxed); }

}  // namespace detail

bool avx2_q4_0x8_chunk() { return detail::avx2_q4_0x8_chunk_on(); }

bool set_avx2_q4_0x8_chunk(bool on) {
    detail::avx2_q4_0x8_switch().store(on, std::memory_order_relaxed);
    return detail::active_sparse_table().q4_0x8_avx2 != nullptr;
}

const char* q4_0x8_chunk_name() {
    if (active_isa() == isa::scalar) return "scalar";
    // Named after what chunk_of() hands the driver: the VNNI chunk only where the table has both.
    const detail::sparse_table& t = detail::active_sparse_table();
    return t.q4_0x8_avx2 && detail::chunk_of(t, dtype::q4_0x8) != t.q4_0x8_avx2 ? "avx512-vnni" : "avx2";
}

// ---- Input-sparse GEMV -----------------------------------------------------------------------------

namespace {

// Per-thread partial outputs of the channel-split input-sparse GEMV, owned by the calling thread.
std::vector<float>& thread_partials() {
    thread_local std::vector<float> p;
    return p;
}

// The output panel for a range of len outputs: at most max_panel, the range cut into equal panels of
// whole 32-output blocks. A 4096-output thread slice of Q8_0 rows (max panel 3840) was a 3840 panel
// plus a 256 one, whose calls paid a whole chunk's coefficient setup and prefetch for 8 blocks.
int64_t balanced_panel(int64_t len, int64_t max_panel, int64_t unit) {
    const int64_t units = (len + unit - 1) / unit, max_units = std::max<int64_t>(1, max_panel / unit);
    const int64_t n_panels = (units + max_units - 1) / max_units;
    return (units + n_panels - 1) / n_panels * unit;
}

// Outputs of an input-major row that slices and panels keep whole: 32 (a block; whole cache lines of
// f32), 256 for the x8 forms (a group of eight blocks).
int64_t output_unit(dtype t) {
    return std::max<int64_t>(32, dtype_block_elems(t));
}

// Channels per chunk call: input_sparse_chunk_channels (sparse.h), half a channel block on rows of
// 2 KiB or more. A call reads a segment of each of its rows side by side, 64 bytes per row per step, so
// 32 rows are 32 concurrent streams; 16 read faster from DRAM once the segments are ~2 KiB or longer.
// Measured (in-process A/B, gemv_input_sparse_multi on two matrices as gate and up run, 2 threads,
// medians of 11, GB/s, 32 -> 16 rows): Q4_0x8 8192x2048 (4608-byte rows) d = 0.5 22.9 -> 24.0, 17.4 ->
// 21.1, 25.4 -> 26.1, 23.7 -> 26.6 (24 rows: 21.4 -> 22.4 against 32; 8 rows: 24.7 -> 24.1 against 16),
// d = 0.3 24.7 -> 27.4, 15.0 -> 18.7, d = 0.8 23.4 -> 24.1, 24.7 -> 25.0; Q8_0x8 8192x2048 d = 0.5
// 25.8 -> 27.5, 26.7 -> 28.3, 2048x8192 (2176-byte rows) 25.9 -> 27.1, 24.8 -> 24.9. Q4_0x8's 1152-byte
// rows (2048 outputs) went the other way (24.9 -> 24.4, 25.0 -> 23.5, 28.0 -> 26.1) and keep 32.
static_assert(k_sum_block == detail::k_chunk_rows && k_sum_block % input_sparse_chunk_channels(0) == 0 &&
              k_sum_block % input_sparse_chunk_channels(k_input_sparse_half_chunk_row_bytes) == 0);

// input_sparse_range through a chunk kernel: per output panel, each block of k_sum_block channels is
// one or two calls that add their integer-dot sums straight into dst (no temporary), each prefetching
// the next call's rows (after the last, the next panel's first rows).
void input_sparse_chunks(detail::chunk_fn chunk, const tensor_view& wt, const float* x, const int32_t* idx, int64_t k0,
                         int64_t k1, int64_t o0, int64_t o1, float* dst, int64_t panel) {
    // k0 is a multiple of k_sum_block (input_sparse_job::run), so calls start at fixed list positions.
    const int64_t call_rows = input_sparse_chunk_channels(wt.row_bytes());
    for (int64_t p0 = o0; p0 < o1; p0 += panel) {
        const int64_t n = std::min(panel, o1 - p0);
        const int64_t seg = dtype_row_bytes(wt.type, p0);  // p0 is a multiple of 32
        const int64_t next_seg = dtype_row_bytes(wt.type, p0 + panel);
        const bool more_panels = p0 + panel < o1;
        for (int64_t b0 = k0; b0 < k1; b0 += call_rows) {
            const int64_t b1 = std::min(k1, b0 + call_rows);
            float s[k_sum_block];
            const uint8_t* rows[k_sum_block];
            const uint8_t* pf[k_sum_block];
            for (int64_t k = b0; k < b1; ++k) {
                s[k - b0] = x[idx[k]];
                rows[k - b0] = wt.row(idx[k]) + seg;
            }
            int n_pf = 0;
            if (b1 < k1) {
                for (int64_t k = b1; k < std::min(k1, b1 + call_rows); ++k) pf[n_pf++] = wt.row(idx[k]) + seg;
            } else if (more_panels) {
                for (int64_t k = k0; k < std::min(k1, k0 + call_rows); ++k) pf[n_pf++] = wt.row(idx[k]) + next_seg;
            }
            chunk(dst + (p0 - o0), b0 == k0, static_cast<int>(b1 - b0), rows, s, n, pf, n_pf);
        }
    }
}

// dst[o - o0] = sum over active channels k in [k0, k1) of x[idx[k]] * wt[idx[k], o] for o in [o0, o1):
// output panels of ~4 KiB of each row; channels in blocks of k_sum_block summed into a temporary,
// then added to dst; inside a block k_axpy_rows rows per pass, prefetching the next rows.
void input_sparse_range(const tensor_view& wt, const float* x, const int32_t* idx, int64_t k0, int64_t k1, int64_t o0,
                        int64_t o1, float* dst, int64_t max_panel) {
    const int64_t panel = balanced_panel(o1 - o0, max_panel, output_unit(wt.type));
    const detail::sparse_table& st = detail::active_sparse_table();
    if (const detail::chunk_fn chunk = detail::chunk_of(st, wt.type)) {
        input_sparse_chunks(chunk, wt, x, idx, k0, k1, o0, o1, dst, panel);
        return;
    }
    const detail::axpy_fn axpy = st.axpy[static_cast<int>(wt.type)];
    const detail::axpy_fn add_f32 = st.axpy[static_cast<int>(dtype::f32)];
    alignas(64) float tmp[k_max_panel];
    for (int64_t p0 = o0; p0 < o1; p0 += panel) {
        const int64_t n = std::min(panel, o1 - p0);
        const int64_t seg = dtype_row_bytes(wt.type, p0);  // p0 is a multiple of 32
        const int64_t next_seg = dtype_row_bytes(wt.type, p0 + panel);
        const bool more_panels = p0 + panel < o1;
        float* out = dst + (p0 - o0);
        for (int64_t b0 = k0; b0 < k1; b0 += k_sum_block) {
            const int64_t b1 = std::min(k1, b0 + k_sum_block);
            float* acc = b0 == k0 ? out : tmp;
            for (int64_t k = b0; k < b1; k += k_axpy_rows) {
                const int g = static_cast<int>(std::min<int64_t>(k_axpy_rows, b1 - k));
                float s[k_axpy_rows];
                const uint8_t* rows[k_axpy_rows];
                const uint8_t* pf[k_axpy_rows];
                for (int i = 0; i < g; ++i) {
                    s[i] = x[idx[k + i]];
                    rows[i] = wt.row(idx[k + i]) + seg;
                }
                // Prefetch the next group's rows, or after the last group the next panel's first rows.
                const bool next_here = k + g < k1;
                const bool prefetch = next_here || more_panels;
                for (int i = 0; i < g && prefetch; ++i)
                    pf[i] = next_here ? wt.row(idx[std::min(k + g + i, k1 - 1)]) + seg
                                      : wt.row(idx[std::min(k0 + i, k1 - 1)]) + next_seg;
                axpy(acc, k == b0, g, rows, s, n, prefetch ? pf : nullptr);
            }
            if (b0 > k0) {  // out += tmp, as an exact 1.0 * tmp FMA
                const float one = 1.0f;
                const auto* src = reinterpret_cast<const uint8_t*>(tmp);
                add_f32(out, false, 1, &src, &one, n, nullptr);
            }
        }
    }
}

}  // namespace

namespace {

// One matrix of an input-sparse call, cut into work items that any thread may run in any order.
// CHESS's split: items own slices of y (in units of output_unit: whole quantized blocks or x8 groups,
// whole cache lines) and read their slice of every active row; any split gives the same bits. With short rows (a
// Q4_0 row of 2048 outputs is 1152 bytes) the slices get too short to stream: 2 threads measured
// slower than 1. Then the active list is cut into k_fixed_slices slices of whole channel blocks, each
// summed into its own partial output, added in slice order at the end. Which of the two splits runs
// depends on the row length only, so the bits never depend on the thread count or on which thread
// ran an item.
struct input_sparse_job {
    const tensor_view* wt = nullptr;
    const float* x = nullptr;
    const int32_t* idx = nullptr;
    int64_t n_idx = 0;
    float* y = nullptr;
    int64_t panel = 0, unit = 32, units = 0, blocks = 0, stride = 0;
    bool by_channels = false;
    int items = 0;
    float* partials = nullptr;  // (items - 1) * stride floats when by_channels

    // req: the threads asked for; n_jobs: the matrices of the call.
    void plan(int req, int n_jobs) {
        const int64_t out = wt->cols;
        const int64_t panel_bytes = dtype_is_quantized(wt->type) ? k_panel_bytes : k_float_panel_bytes;
        unit = output_unit(wt->type);
        panel = std::clamp<int64_t>(panel_bytes / dtype_row_bytes(wt->type, unit), 1, k_max_panel / unit) * unit;
        units = (out + unit - 1) / unit;
        blocks = (n_idx + k_sum_block - 1) / k_sum_block;
        stride = (out + 15) / 16 * 16;
        by_channels = blocks > 1 && wt->row_bytes() < k_input_sparse_split_row_bytes;
        // Output pieces: two per thread over the whole call, so a thread that starts late (a passive
        // worker takes 10-90 us to wake on a VM) leaves its share to the others, and no more: each piece
        // reads its share of every active row, and longer shares stream better. Gate and up at 2 threads
        // used to get 4 pieces each (in-process A/B against 2 each, 2 threads, 3 runs, GB/s): F32
        // 4096x14336 (16 KiB rows) d = 1 26.7 -> 29.1, 25.8 -> 29.7, 25.0 -> 28.4; F16 8192x2048 d = 0.5
        // 23.2 -> 25.2, 29.8 -> 32.4, 26.5 -> 27.3; Q8_0x8 14336x4096 d = 0.5 +2..10%, d = 1 alike.
        const int64_t pieces = std::max<int64_t>(1, int64_t{2} * req / std::max(1, n_jobs));
        items = by_channels ? static_cast<int>(std::min<int64_t>(k_fixed_slices, blocks))
                            : static_cast<int>(std::min<int64_t>(units, pieces));
    }
    int64_t partial_floats() const { return by_channels ? (items - 1) * stride : 0; }

    void run(int item) const {
        if (by_channels) {
            int64_t c0, c1;
            split(blocks, items, item, c0, c1);  // whole channel blocks
            float* dst = item == 0 ? y : partials + (item - 1) * stride;
            input_sparse_range(*wt, x, idx, c0 * k_sum_block, std::min(n_idx, c1 * k_sum_block), 0, wt->cols, dst,
                               panel);
            return;
        }
        int64_t u0, u1;
        split(units, items, item, u0, u1);
        const int64_t o0 = u0 * unit, o1 = std::min(wt->cols, u1 * unit);
        if (o1 > o0) input_sparse_range(*wt, x, idx, 0, n_idx, o0, o1, y + o0, panel);
    }

    // After the join (a barrier inside the region costs a wake-up, more than these adds).
    void finish() const {
        for (int sl = 1; by_channels && sl < items; ++sl) {
            const float* p = partials + (sl - 1) * stride;
            for (int64_t o = 0; o < wt->cols; ++o) y[o] += p[o];
        }
    }
};

// Runs the jobs' items in one parallel region: threads take items from a shared counter, so the
// master does the work of a worker that is still waking up. The counter only decides who runs an
// item; each item's arithmetic and destination are fixed, so results never depend on it.
void run_input_sparse_jobs(input_sparse_job* jobs, int n_jobs, int n_threads) {
    const int req = requested_threads(n_threads);
    int64_t floats = 0, work = 0;
    int total = 0;
    for (int j = 0; j < n_jobs; ++j) {
        jobs[j].plan(req, n_jobs);
        floats += jobs[j].partial_floats();
        work += jobs[j].n_idx * jobs[j].wt->row_bytes();
        total += jobs[j].items;
    }
    std::vector<float>& partials = thread_partials();
    if (partials.size() < static_cast<size_t>(floats)) partials.resize(static_cast<size_t>(floats));
    float* next_partials = partials.data();
    for (int j = 0; j < n_jobs; ++j) {
        jobs[j].partials = next_partials;
        next_partials += jobs[j].partial_floats();
    }
    const int nt = pick_threads(req, work, total);
    std::atomic<int> next{0};
    parallel(nt, [&](int, int) {
        for (int i; (i = next.fetch_add(1, std::memory_order_relaxed)) < total;) {
            int j = 0;  // item i of the concatenated lists: at most k_input_sparse_multi_max jobs
            for (; i >= jobs[j].items; ++j) i -= jobs[j].items;
            jobs[j].run(i);
        }
    });
    for (int j = 0; j < n_jobs; ++j) jobs[j].finish();
}

}  // namespace

void gemv_input_sparse_multi(const tensor_view* const* wts, const float* x, const int32_t* const* idx,
                             const int64_t* n_idx, float* const* ys, int n_mats, int n_threads) {
    assert(n_mats <= k_input_sparse_multi_max);
    input_sparse_job jobs[k_input_sparse_multi_max];
    int n_jobs = 0;
    for (int m = 0; m < n_mats; ++m) {
        const tensor_view& wt = *wts[m];
        if (wt.cols <= 0) continue;
        assert(wt.cols % dtype_block_elems(wt.type) == 0);
        if (n_idx[m] <= 0) {
            std::fill(ys[m], ys[m] + wt.cols, 0.0f);
            continue;
        }
        input_sparse_job& j = jobs[n_jobs++];
        j.wt = &wt;
        j.x = x;
        j.idx = idx[m];
        j.n_idx = n_idx[m];
        j.y = ys[m];
    }
    if (n_jobs > 0) run_input_sparse_jobs(jobs, n_jobs, n_threads);
}

void gemv_input_sparse(const tensor_view& wt, const float* x, const int32_t* idx, int64_t n_idx, float* y,
                       int n_threads) {
    const tensor_view* w = &wt;
    gemv_input_sparse_multi(&w, x, &idx, &n_idx, &y, 1, n_threads);
}

float input_sparse_break_even(dtype layout_type) {
    switch (dtype_x8_base(layout_type)) {
        case dtype::q8_0:
            return 0.85f;
        case dtype::f32:
        case dtype::f16:
        case dtype::bf16:
            return 0.9f;
        default:  // Q4_0 (r ~ 1.3) and Q6_0x8, whose chunk does more work per weight than Q4_0x8's
            return 0.75f;
    }
}

bool input_sparse_rounds_activations(dtype type) {
    return detail::active_sparse_table().chunk[static_cast<int>(type)] != nullptr;
}

// ---- Output-sparse GEMV ----------------------------------------------------------------------------

void gemv_output_sparse(const tensor_view& w, const float* x, const int32_t* idx, int64_t n_idx, float* y,
                        int n_threads) {
    if (n_idx <= 0) return;
    if (w.cols == 0) {
        std::fill(y, y + n_idx, 0.0f);
        return;
    }
    assert(w.cols % dtype_block_elems(w.type) == 0);
    const detail::kernel_table& kt = detail::active_table();
    const detail::rows_fn fn = kt.rows[static_cast<int>(w.type)];
    const detail::dots_fn dots = detail::active_sparse_table().dots[static_cast<int>(w.type)];
    // Quantized weights: x is quantized once, here, and shared read-only by the workers.
    const void* xa =
        dtype_is_quantized(w.type) ? static_cast<const void*>(thread_acts().quantize(w.type, x, w.cols)) : x;
    const int64_t rb = w.row_bytes();
    const int nt = pick_threads(n_threads, n_idx * rb, n_idx);
    // Short rows prefetch several rows ahead so ~4 KiB is always in flight.
    const int64_t ahead = std::max<int64_t>(1, (k_prefetch_bytes + rb - 1) / rb);
    const auto* base = static_cast<const uint8_t*>(w.data);
    parallel(nt, [&](int t, int team) {
        int64_t k0, k1;
        split(n_idx, team, t, k0, k1);
        if (dots) {
            // Listed rows go through the gather, which prefetches the next listed rows into L2; a run of
            // at least k_stream_rows consecutive rows streams through the dense rows kernel instead
            // (prefetching ahead into L1, as gemv does: through L2 a whole Q8_0 matrix read ~8% slower).
            // Both are the same row kernel, so the bits do not depend on the route.
            constexpr int64_t chunk = 16, k_stream_rows = 16;
            const uint8_t* rows[chunk];
            const uint8_t* pf[chunk];
            for (int64_t k = k0; k < k1;) {
                int64_t e = k + 1;
                while (e < k1 && idx[e] == idx[e - 1] + 1) ++e;
                if (e - k >= k_stream_rows) {
                    fn(base + idx[k] * rb, rb, e - k, w.cols, xa, y + k);
                    k = e;
                    continue;
                }
                const int64_t m = std::min(chunk, k1 - k);
                for (int64_t i = 0; i < m; ++i) {
                    rows[i] = base + idx[k + i] * rb;
                    pf[i] = k + i + ahead < k1 ? base + idx[k + i + ahead] * rb : nullptr;
                }
                dots(rows, pf, m, w.cols, xa, y + k);
                k += m;
            }
            return;
        }
        // Scalar ISA: runs of consecutive rows go to the dense row kernel together; a row's
        // arithmetic never depends on the run, so results equal the dense gemv bit for bit.
        for (int64_t k = k0; k < k1;) {
            int64_t e = k + 1;
            while (e < k1 && idx[e] == idx[e - 1] + 1) ++e;
            fn(w.row(idx[k]), rb, e - k, w.cols, xa, y + k);
            k = e;
        }
    });
}

// ---- Fused sparse gated MLP ------------------------------------------------------------------------

namespace {

int64_t padded(int64_t n) {
    return (n + 15) / 16 * 16;
}  // whole cache lines per thread's buffers

int64_t act_floats(int64_t dim) {
    return padded(dim / 4 + 2 * (dim / 32) + 1);
}

}  // namespace

int64_t fused_mlp_scratch_floats(int64_t dim, int /*n_threads*/) {
    // Quantized activations, then per slice a partial output and a block temporary; +16 for alignment.
    return act_floats(dim) + int64_t{k_fixed_slices} * 2 * padded(dim) + 16;
}

namespace {

// Where the fused kernel finds neuron j's rows, each at base + j * stride: gate and up (row-major rows,
// dotted with x) and down (an input-major column). Without gate rows, `up` points at the one row per
// neuron that is dotted (the up row, or the gate row when row_is_gate) and pre[j] is the other
// projection's pre-activation, computed by the caller (CATS and CHESS compute the whole gate to choose
// the neurons, up pruning the whole up).
struct neuron_rows {
    dtype type = dtype::f32;       // of the gate and up rows
    dtype down_type = dtype::f32;  // of the down columns
    int64_t dim = 0;
    const uint8_t *gate = nullptr, *up = nullptr, *down = nullptr;
    int64_t stride = 0;  // bytes from neuron j's rows to neuron j + 1's
    const float* pre = nullptr;
    bool row_is_gate = false;
    glu_kind act = glu_kind::silu;
    // Slices of whole 32-neuron blocks, as gemv_input_sparse cuts its channels (its bits for the down
    // part), instead of equal shares of the list.
    bool block_slices = false;

    int64_t bytes_per_neuron() const {
        return (gate ? 2 : 1) * dtype_row_bytes(type, dim) + dtype_row_bytes(down_type, dim);
    }
};

void fused_rows(const neuron_rows& r, const float* x, const int32_t* idx, int64_t n_idx, float* y, float* scratch,
                float* glu_out, float* row_out, int n_threads) {
    const int64_t dim = r.dim;
    if (dim <= 0) return;
    if (n_idx <= 0) {
        std::fill(y, y + dim, 0.0f);
        return;
    }
    assert(dim % dtype_block_elems(r.type) == 0);
    const detail::kernel_table& kt = detail::active_table();
    const detail::rows_fn dot = kt.rows[static_cast<int>(r.type)];
    const detail::axpy_fn axpy = detail::active_sparse_table().axpy[static_cast<int>(r.down_type)];
    const detail::dots_fn dots = detail::active_sparse_table().dots[static_cast<int>(r.type)];
    const detail::axpy_fn add_f32 = detail::active_sparse_table().axpy[static_cast<int>(dtype::f32)];
    const detail::chunk_fn chunk = detail::chunk_of(detail::active_sparse_table(), r.down_type);
    const int64_t down_call = input_sparse_chunk_channels(dtype_row_bytes(r.down_type, dim));
    const auto gate_row = [&](int32_t j) { return r.gate + j * r.stride; };
    const auto up_row = [&](int32_t j) { return r.up + j * r.stride; };
    const auto down_row = [&](int32_t j) { return r.down + j * r.stride; };

    float* base = scratch + (16 - reinterpret_cast<uintptr_t>(scratch) / 4 % 16) % 16;
    const void* xa = x;
    q8_act acts;
    if (dtype_is_quantized(r.type)) {
        auto* qs = reinterpret_cast<int8_t*>(base);
        float* d = base + dim / 4;
        float* s = d + dim / 32;
        detail::quantize_act_for(r.type, kt, x, dim, qs, d, s);
        acts = {qs, d, s};
        xa = &acts;
    }
    float* partials = base + act_floats(dim);
    const int64_t stride = 2 * padded(dim);
    // k_fixed_slices slices of the active list, each with its own partial output in the scratch, so
    // the bits never depend on the thread count.
    const int64_t blocks = (n_idx + k_sum_block - 1) / k_sum_block;
    const int n_slices = static_cast<int>(std::min<int64_t>(k_fixed_slices, r.block_slices ? blocks : n_idx));
    const int nt = pick_threads(n_threads, n_idx * r.bytes_per_neuron(), n_slices);

    // How many neurons ahead the gate/up dots prefetch (chunk path): about k_glu_lead_bytes of rows ahead,
    // at most the next block's. The next block (32 neurons) was 0.5-1 MB of gate and up rows at dim 14336,
    // as much as half of L2: `bench kernels --shapes 14336x4096` (dim 14336) Q4_0 / Q8_0 at d = 0.1, 0.5,
    // 1, 2 threads, medians of 3 alternating, GB/s: 19.0 / 21.0 / 21.6 -> 23.1 / 25.4 / 26.5, 19.2 / 20.7 /
    // 20.8 -> 25.6 / 28.2 / 29.8 one neuron ahead; dim 4096 alike or up to 8% faster; dim 2048 (2-4 KiB per
    // neuron) wants a whole block ahead: 1-2 neurons there were up to 11% slower.
    constexpr int64_t k_glu_lead_bytes = 64 * 1024;
    const int64_t neuron_row_bytes = (r.gate ? 2 : 1) * dtype_row_bytes(r.type, dim);
    const int64_t glu_lead =
        std::clamp<int64_t>(k_glu_lead_bytes / std::max<int64_t>(1, neuron_row_bytes), 1, k_sum_block);
    auto run_slice = [&](int sl) {
        int64_t k0, k1;
        if (r.block_slices) {
            split(blocks, n_slices, sl, k0, k1);
            k0 *= k_sum_block;
            k1 = std::min(n_idx, k1 * k_sum_block);
        } else {
            split(n_idx, n_slices, sl, k0, k1);
        }
        float* acc = partials + sl * stride;
        float* tmp = acc + padded(dim);
        if (k1 == k0) std::fill(acc, acc + dim, 0.0f);
        // GLU values of active neurons k .. k + n - 1 (n <= k_sum_block) into a, and to glu_out when asked:
        // their gate and up rows in one gather (rows g0, u0, g1, u1, ...; or a pair's one row beside
        // `pre`), each prefetching the same row of the neuron `lead` places further on, then
        // kernels::glu once over them (the dense path's function, so the values equal it). One gather
        // of 2 rows per neuron paid the gather's per-call setup each time.
        auto glus = [&](int64_t k, int n, float* a, int64_t lead) {
            float gu[2 * k_sum_block], g[k_sum_block], u[k_sum_block];
            const int per = r.gate ? 2 : 1;  // rows per neuron in the gather
            if (dots) {
                const uint8_t* rows[2 * k_sum_block];
                const uint8_t* ahead[2 * k_sum_block];
                for (int i = 0; i < n; ++i) {
                    const int32_t j = idx[k + i];
                    const bool more = k + i + lead < k1;
                    const int32_t jn = more ? idx[k + i + lead] : 0;
                    if (r.gate) {
                        rows[2 * i] = gate_row(j);
                        ahead[2 * i] = more ? gate_row(jn) : nullptr;
                    }
                    rows[per * i + per - 1] = up_row(j);
                    ahead[per * i + per - 1] = more ? up_row(jn) : nullptr;
                }
                dots(rows, ahead, per * n, dim, xa, gu);
            } else {
                for (int i = 0; i < n; ++i) {
                    const int32_t j = idx[k + i];
                    if (r.gate) dot(gate_row(j), 0, 1, dim, xa, gu + 2 * i);
                    dot(up_row(j), 0, 1, dim, xa, gu + per * i + per - 1);
                }
            }
            for (int i = 0; i < n; ++i) {
                const float dotted = gu[per * i + per - 1], pre = r.gate ? 0.0f : r.pre[idx[k + i]];
                g[i] = r.gate ? gu[2 * i] : r.row_is_gate ? dotted : pre;
                u[i] = r.row_is_gate ? pre : dotted;
            }
            glu(r.act, a, g, u, n);
            if (glu_out) std::copy(a, a + n, glu_out + k);
            const float* dotted_vals = r.row_is_gate ? g : u;  // the values the row dots gave
            if (row_out) std::copy(dotted_vals, dotted_vals + n, row_out + k);
        };
        for (int64_t b0 = k0; b0 < k1; b0 += k_sum_block) {
            const int64_t b1 = std::min(k1, b0 + k_sum_block);
            if (chunk) {  // the block's down columns as one integer-dot chunk
                float a[k_sum_block];
                const uint8_t* down[k_sum_block];
                const uint8_t* pf[k_sum_block];
                // The next block is fetched while this one computes, each part by the pass that takes as
                // long as its bytes: the gate/up dots fetch the next block's gate/up rows (each paced
                // along the row it computes), the chunk its down columns. When the chunk fetched the
                // next block's whole bundles, 110 KB (Q4_0, dim 2048) were asked for within the chunk's
                // third of the time, the core stalled on the prefetches it could not issue, and the
                // dots then ran from L2 with memory idle: 2048x8192 Q4_0 at d = 1, 2 threads, 1.08 ->
                // 0.88 ms (26 -> 32 GB/s); 4096x14336 d = 0.5: Q4_0 2.10 -> 1.42 ms, Q8_0 3.33 -> 2.38.
                glus(b0, static_cast<int>(b1 - b0), a, glu_lead);
                for (int64_t k = b0; k < b1; ++k) down[k - b0] = down_row(idx[k]);
                // In calls of gemv_input_sparse's channel count for these columns (its bits), each
                // prefetching its share of the next block's columns.
                for (int64_t c0 = b0; c0 < b1; c0 += down_call) {
                    const int64_t c1 = std::min(b1, c0 + down_call);
                    int n_pf = 0;
                    for (int64_t k = c0 + k_sum_block; k < std::min(k1, c1 + k_sum_block); ++k)
                        pf[n_pf++] = down_row(idx[k]);
                    chunk(acc, c0 == k0, static_cast<int>(c1 - c0), down + (c0 - b0), a + (c0 - b0), dim, pf, n_pf);
                }
                continue;
            }
            float* dst = b0 == k0 ? acc : tmp;
            for (int64_t k = b0; k < b1; k += k_axpy_rows) {
                const int g = static_cast<int>(std::min<int64_t>(k_axpy_rows, b1 - k));
                float a[k_axpy_rows];
                const uint8_t* down[k_axpy_rows];
                const uint8_t* pf[k_axpy_rows];
                glus(k, g, a, 1);
                for (int i = 0; i < g; ++i) down[i] = down_row(idx[k + i]);
                // While the down columns stream, fetch the next group's down columns.
                const bool next = k + g < k1;
                for (int i = 0; i < g && next; ++i) pf[i] = down_row(idx[std::min(k + g + i, k1 - 1)]);
                axpy(dst, k == b0, g, down, a, dim, next ? pf : nullptr);
            }
            if (b0 > k0) {
                const float one = 1.0f;
                const auto* src = reinterpret_cast<const uint8_t*>(tmp);
                add_f32(acc, false, 1, &src, &one, dim, nullptr);
            }
        }
    };
    // Slices from a shared counter: a thread that starts late leaves its slices to the others (each
    // slice's sums and destination are fixed, so the bits do not change).
    std::atomic<int> next{0};
    parallel(nt, [&](int, int) {
        for (int sl; (sl = next.fetch_add(1, std::memory_order_relaxed)) < n_slices;) run_slice(sl);
    });
    // Partials summed in slice order by the caller after the join (a barrier costs a wake-up).
    for (int64_t o = 0; o < dim; ++o) {
        float s = partials[o];
        for (int u = 1; u < n_slices; ++u) s += partials[u * stride + o];
        y[o] = s;
    }
}

}  // namespace

void fused_sparse_mlp(const bundle_view& b, const float* x, const int32_t* idx, int64_t n_idx, float* y, float* scratch,
                      float* glu_out, int n_threads, glu_kind act) {
    neuron_rows r;
    r.act = act;
    r.type = b.type;
    r.down_type = b.down_type();
    r.dim = b.dim;
    const int64_t part = b.part_bytes();
    r.gate = b.bundle(0);
    r.up = r.gate + part;
    r.down = r.gate + 2 * part;
    r.stride = b.bundle_bytes();
    fused_rows(r, x, idx, n_idx, y, scratch, glu_out, nullptr, n_threads);
}

void sparse_pairs(const pair_view& p, const float* pre, const float* x, const int32_t* idx, int64_t n_idx, float* y,
                  float* scratch, float* glu_out, float* row_out, int n_threads, glu_kind act) {
    neuron_rows r;
    r.act = act;
    r.type = p.row_type;
    r.down_type = p.down_type;
    r.dim = p.dim;
    r.up = p.row(0);
    r.down = p.down(0);
    r.stride = p.pair_bytes();
    r.pre = pre;
    r.row_is_gate = p.gate_rows;
    r.block_slices = true;
    fused_rows(r, x, idx, n_idx, y, scratch, glu_out, row_out, n_threads);
}

}  // namespace sl::kernels

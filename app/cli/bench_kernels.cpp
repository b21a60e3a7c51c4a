// Measuring side of `sparselens bench kernels`: builds weight copies, times every kernel, keeps medians.
#include "bench_kernels.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <thread>

#include <sys/mman.h>

#include "sparselens/kernels/attention.h"
#include "sparselens/kernels/kernels.h"
#include "sparselens/kernels/membw.h"
#include "sparselens/kernels/sparse.h"

namespace sl::cli {
namespace {

namespace k = sl::kernels;
using clock_type = std::chrono::steady_clock;

// 2 MiB-aligned bytes, optionally advised to use huge pages before the copy touches them.
struct aligned_bytes {
    struct free_deleter {
        void operator()(uint8_t* p) const { std::free(p); }
    };
    static constexpr size_t huge = size_t{2} << 20;
    std::unique_ptr<uint8_t, free_deleter> p;
    aligned_bytes(int64_t n, bool huge_pages) {
        const size_t size = (static_cast<size_t>(n) + huge - 1) / huge * huge;
        p.reset(static_cast<uint8_t*>(std::aligned_alloc(huge, size)));
        if (!p) throw std::bad_alloc();
        if (huge_pages) madvise(p.get(), size, MADV_HUGEPAGE);
    }
    uint8_t* data() const { return p.get(); }
};

// n copies of `bytes` bytes from src: enough distinct memory that cycling them defeats the caches.
struct copies {
    std::vector<aligned_bytes> bufs;
    copies(const void* src, int64_t bytes, int64_t n, bool huge_pages) {
        for (int64_t i = 0; i < n; ++i) {
            bufs.emplace_back(bytes, huge_pages);
            std::memcpy(bufs.back().data(), src, static_cast<size_t>(bytes));
        }
    }
    int64_t size() const { return static_cast<int64_t>(bufs.size()); }
    const uint8_t* operator[](int64_t i) const { return bufs[static_cast<size_t>(i)].data(); }
};

int64_t copies_for(double ws_bytes, int64_t bytes) {
    return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(ws_bytes / static_cast<double>(bytes))));
}

uint64_t g_rng = 0x2545f4914f6cdd1dULL;
volatile uint64_t g_sink = 0;  // the plain reads' checksums stay observable
uint64_t next_u64() {  // xorshift64*: fast enough to fill a gigabyte
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545f4914f6cdd1dULL;
}
float uniform() {
    return static_cast<float>(next_u64() >> 40) / 16777216.0f * 2.0f - 1.0f;
}

std::vector<float> random_floats(int64_t n, float scale) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = scale * uniform();
    return v;
}

// Byte offsets of the fp16 scales in a block of the types without an encoder that bench kernels times
// (ggml's layouts: Q4_K/Q5_K d and dmin first, Q6_K d last).
std::vector<int> fp16_scale_offsets(dtype t) {
    switch (t) {
        case dtype::q4_k: case dtype::q5_k: return {0, 2};
        case dtype::q6_k: return {208};
        default: return {};
    }
}

// Row-major matrix of type t encoded from f32 values. Types without an encoder (the K-quants) get
// random blocks instead, with small finite scales: kernel speed does not depend on the values.
std::vector<uint8_t> encode(dtype t, const std::vector<float>& src, int64_t rows, int64_t cols) {
    std::vector<uint8_t> out(static_cast<size_t>(rows * dtype_row_bytes(t, cols)));
    const int64_t rb = dtype_row_bytes(t, cols);
    if (!dtype_info(t).encodable) {
        for (uint8_t& b : out) b = static_cast<uint8_t>(next_u64());
        const uint16_t h = k::fp32_to_fp16(0.01f);
        for (size_t off = 0; off < out.size(); off += static_cast<size_t>(dtype_block_bytes(t)))
            for (int f : fp16_scale_offsets(t)) std::memcpy(out.data() + off + f, &h, 2);
        return out;
    }
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) k::quantize_row(t, src.data() + r * cols, out.data() + r * rb, cols);
    return out;
}

// Sorted random subset of [0, n) with round(d * n) elements (at least 1).
std::vector<int32_t> random_idx(int64_t n, double d) {
    const int64_t count = std::clamp<int64_t>(std::llround(d * static_cast<double>(n)), 1, n);
    std::vector<int32_t> all(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) all[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    for (int64_t i = 0; i < count; ++i)
        std::swap(all[static_cast<size_t>(i)], all[static_cast<size_t>(i + next_u64() % (n - i))]);
    all.resize(static_cast<size_t>(count));
    std::sort(all.begin(), all.end());
    return all;
}

struct timing {
    double median = 0, min = 0;
};

timing summarize(std::vector<double> t) {
    std::sort(t.begin(), t.end());
    const size_t n = t.size();
    return {n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]), t.front()};
}

// One untimed warm-up call, then `reps` timed calls; call(c, r) runs on copy c. Every call moves
// to the next copy, so a copy is re-read only after all others (> LLC) have been.
template <typename F>
timing time_calls(int64_t n_copies, int reps, F&& call) {
    call(0, 0);
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        const int64_t c = (r + 1) % n_copies;
        const auto t0 = clock_type::now();
        call(c, r);
        t.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
    }
    return summarize(t);
}

// The calls of several cases over one set of copies, measured in rounds: each round runs a few
// calls of every case in turn, so when a shared host's memory bandwidth changes phase (the Zen 4 guest
// of stop 27 swings between ~30 and ~58 GB/s for minutes) every case sees the same mix of phases and
// their ratios (sparse over dense, kernel over plain read) stay meaningful. Calls take the copies in
// turn across all cases (each case modulo its own set): a copy is re-read only after the others. Case k's call(c, r)
// gets its own running call number r (sparse cases pick their index list by it) and has one untimed warm-up call before
// the first round.
class interleaved_timer {
public:
    // A case over a set of n_copies copies; returns its id for result().
    int add(int64_t n_copies, std::function<void(int64_t, int)> call) {
        m_calls.push_back(std::move(call));
        m_copies.push_back(std::max<int64_t>(1, n_copies));
        return static_cast<int>(m_calls.size()) - 1;
    }

    // reps timed calls per case, in rounds of k_per_round calls.
    void run(int reps) {
        m_times.assign(m_calls.size(), {});
        std::vector<int> next(m_calls.size(), 0);
        for (size_t k = 0; k < m_calls.size(); ++k) m_calls[k](take_copy(k), next[k]++);
        for (int done = 0; done < reps; done += k_per_round) {
            const int n = std::min(k_per_round, reps - done);
            for (size_t k = 0; k < m_calls.size(); ++k) {
                for (int i = 0; i < n; ++i) {
                    const int64_t c = take_copy(k);
                    const auto t0 = clock_type::now();
                    m_calls[k](c, next[k]++);
                    m_times[k].push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
                }
            }
        }
    }

    timing result(int k) const { return summarize(m_times[static_cast<size_t>(k)]); }

private:
    static constexpr int k_per_round = 3;
    int64_t take_copy(size_t k) { return m_next_copy++ % m_copies[k]; }

    int64_t m_next_copy = 0;
    std::vector<int64_t> m_copies;
    std::vector<std::function<void(int64_t, int)>> m_calls;
    std::vector<std::vector<double>> m_times;
};

bool wants(const kernel_bench_params& p, const char* kernel) {
    return std::find(p.kernels.begin(), p.kernels.end(), kernel) != p.kernels.end();
}

std::string shape_text(int64_t r, int64_t c) {
    return std::to_string(r) + "x" + std::to_string(c);
}

// Everything measured for one (shape, type).
class shape_bench {
public:
    shape_bench(const kernel_bench_params& p, mlp_shape s, dtype t, const std::vector<float>& gate_f,
                const std::vector<float>& up_f, const std::vector<float>& down_f, kernel_bench_result& out,
                const std::function<void(const std::string&)>& log)
        : m_p(p), m_s(s), m_t(t), m_out(out), m_log(log) {
        m_gate = encode(t, gate_f, s.hidden, s.dim);
        m_up = encode(t, up_f, s.hidden, s.dim);
        m_down = encode(t, down_f, s.dim, s.hidden);
        m_x_dim = random_floats(s.dim, 1.0f);
        m_x_hidden = random_floats(s.hidden, 1.0f);
        m_ws = p.working_set_gb * 1e9;
    }

    void run() {
        if (wants(m_p, "dense") || wants(m_p, "input_sparse")) down_projection();
        if (wants(m_p, "dense") || wants(m_p, "output_sparse")) up_projection();
        if (wants(m_p, "fused")) mlp();
        if (wants(m_p, "pairs")) pairs();
    }

private:
    tensor_view view(const uint8_t* data, int64_t rows, int64_t cols) const { return {m_t, rows, cols, data}; }

    kernel_bench_row& add(const char* kernel, const std::string& matrix, double density, int64_t active, timing tm,
                          double bytes, int64_t n_copies) {
        kernel_bench_row r;
        r.kernel = kernel;
        r.matrix = matrix;
        r.type = m_t;
        r.shape = m_s;
        r.density = density;
        r.active = active;
        r.median_s = tm.median;
        r.min_s = tm.min;
        r.bytes = bytes;
        r.gbs = bytes / tm.median / 1e9;
        r.copies = static_cast<int>(n_copies);
        m_out.rows.push_back(r);
        return m_out.rows.back();
    }

    void progress(const std::string& what, int64_t n_copies, int64_t bytes) const {
        if (m_log)
            m_log(std::string(dtype_name(m_t)) + " " + shape_text(m_s.dim, m_s.hidden) + " " + what + ": " +
                  std::to_string(n_copies) + " copies x " + std::to_string(bytes >> 20) + " MiB");
    }

    // Dense f32 GEMV baselines on the same copies, run after our kernels: OpenBLAS's pthread workers
    // spin for a while after each call, so they get a pause before anything else is timed.
    void baselines(const copies& set, int64_t rows, int64_t cols, const std::string& matrix, double dense_s) {
        if (m_t != dtype::f32 || !m_p.baselines) return;
        std::vector<float> y(static_cast<size_t>(rows));
        const double bytes = static_cast<double>(rows * cols * 4);
        const std::vector<float>& x = cols == m_s.hidden ? m_x_hidden : m_x_dim;
        auto speedup = [&](kernel_bench_row& r) {
            r.speedup = dense_s / r.median_s;
            r.baseline = "dense";
        };
        if (eigen_available()) {
            const timing tm = time_calls(set.size(), m_p.reps, [&](int64_t c, int) {
                eigen_gemv(reinterpret_cast<const float*>(set[c]), rows, cols, x.data(), y.data(), m_p.threads);
            });
            speedup(add("eigen_gemv", matrix, 1.0, rows, tm, bytes, set.size()));
        }
        if (openblas_available()) {
            const timing tm = time_calls(set.size(), m_p.reps, [&](int64_t c, int) {
                openblas_sgemv(reinterpret_cast<const float*>(set[c]), rows, cols, x.data(), y.data(), m_p.threads);
            });
            speedup(add("openblas_sgemv", matrix, 1.0, rows, tm, bytes, set.size()));
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
    }

    // Our dense gemv over set's copies, as a case of t (y outlives t.run()).
    int dense_case(interleaved_timer& t, const copies& set, int64_t rows, int64_t cols, std::vector<float>& y) const {
        const std::vector<float>& x = cols == m_s.hidden ? m_x_hidden : m_x_dim;
        return t.add(set.size(), [&, rows, cols](int64_t c, int) {
            k::gemv(view(set[c], rows, cols), x.data(), y.data(), m_p.threads);
        });
    }

    // Q4_K / Q4_0 / Q8_0: the same matrix in the engine's dense layout (Q4_Kx8r / Q4_0x8r / Q8_0x8r, where
    // this CPU has its kernel), timed beside the rows as "dense_x8" (its speed-up is over them); id -1 where
    // it does not apply.
    struct x8_cases {
        k::owned_matrix m;
        std::unique_ptr<copies> set;
        int id = -1;
    };
    void add_x8_case(interleaved_timer& t, x8_cases& c, const uint8_t* src, int64_t rows, int64_t cols,
                     std::vector<float>& y) const {
        if (rows % k_rows_x8 != 0 || cols % qk_k != 0 || !k::rows_x8_native(m_t)) return;
        c.m = k::to_rows_x8(view(src, rows, cols));
        c.set = std::make_unique<copies>(c.m.view.data, c.m.view.bytes(), copies_for(m_ws, c.m.view.bytes()),
                                         m_p.huge_pages);
        const std::vector<float>& x = cols == m_s.hidden ? m_x_hidden : m_x_dim;
        c.id = t.add(c.set->size(), [&, set = c.set.get(), rows, cols](int64_t i, int) {
            k::gemv(tensor_view{dtype_rows_x8_form(m_t), rows, cols, (*set)[i]}, x.data(), y.data(), m_p.threads);
        });
    }
    void x8_row(const interleaved_timer& t, const x8_cases& c, const std::string& matrix, int64_t rows, double bytes,
                double dense_s) {
        if (c.id < 0) return;
        kernel_bench_row& r = add("dense_x8", matrix, 1.0, rows, t.result(c.id), bytes, c.set->size());
        r.speedup = dense_s / r.median_s;
        r.baseline = "dense";
    }

    // A plain read of each whole copy of set (kernels::read_listed_rows over 64 KiB runs, hardware
    // prefetch alone and prefetching ahead into L1) in the dense case's rounds: the bandwidth that matrix
    // could be streamed at while its gemv ran, so a host whose memory speed drifts during the run (the
    // roofline probe runs before and after) moves both alike.
    struct whole_reads {
        std::vector<int32_t> all;
        int64_t run_bytes = int64_t{64} << 10;
        std::array<int, 2> ids{-1, -1};
    };
    void add_whole_reads(interleaved_timer& t, const copies& set, int64_t bytes, whole_reads& w) const {
        w.all.resize(static_cast<size_t>(bytes / w.run_bytes));
        if (w.all.empty()) return;
        std::iota(w.all.begin(), w.all.end(), 0);
        const int modes[2] = {0, 2};
        for (int i = 0; i < 2; ++i)
            w.ids[static_cast<size_t>(i)] = t.add(set.size(), [&set, &w, this, mode = modes[i]](int64_t c, int) {
                g_sink = g_sink + k::read_listed_rows(set[c], w.run_bytes, w.all.data(),
                                                      static_cast<int64_t>(w.all.size()), m_p.threads, mode);
            });
    }

    // The row of a dense case (kernel "dense" or "dense_mlp": its own baseline, `active` outputs), with the
    // same rounds' whole-matrix read as its read GB/s when given; returns its median.
    double dense_row(const interleaved_timer& t, int id, const char* kernel, const std::string& matrix, int64_t active,
                     double bytes, int64_t n_copies, const whole_reads* w = nullptr) {
        const timing tm = t.result(id);
        kernel_bench_row& r = add(kernel, matrix, 1.0, active, tm, bytes, n_copies);
        r.speedup = 1.0;
        r.baseline = kernel;
        for (int i = 0; w && i < 2; ++i)
            if (w->ids[static_cast<size_t>(i)] >= 0)
                r.pattern_gbs = std::max(r.pattern_gbs, static_cast<double>(w->all.size()) * w->run_bytes /
                                                            t.result(w->ids[static_cast<size_t>(i)]).median / 1e9);
        return tm.median;
    }

    // A pure read of the same listed rows on the same copies (kernels::read_listed_rows) in each of its
    // ways (no prefetching, listed rows ahead into L2, ahead within the row into L1, row groups side by
    // side as the chunk kernels walk them, with and without prefetching the next group): cases of t.
    using read_ids = std::array<int, k::k_read_listed_modes>;
    read_ids pattern_cases(interleaved_timer& t, const copies& set, int64_t row_bytes,
                           const std::vector<std::vector<int32_t>>& l) const {
        read_ids ids{};
        for (int mode = 0; mode < k::k_read_listed_modes; ++mode)
            ids[static_cast<size_t>(mode)] = t.add(set.size(), [&, row_bytes, mode](int64_t c, int r) {
                const auto& idx = list_for(l, set, r);
                g_sink = g_sink + k::read_listed_rows(set[c], row_bytes, idx.data(), static_cast<int64_t>(idx.size()),
                                                      m_p.threads, mode);
            });
        return ids;
    }

    // GB/s of the fastest of the reads: the ceiling of that access pattern, whatever the arithmetic.
    static double pattern_gbs(const interleaved_timer& t, const read_ids& ids, double bytes) {
        double best = 0;
        for (int id : ids) best = std::max(best, bytes / t.result(id).median / 1e9);
        return best;
    }

    // Index lists per density: a fresh random list for every pass over the copies.
    std::vector<std::vector<int32_t>> lists(int64_t n, double d) const {
        std::vector<std::vector<int32_t>> l;
        for (int i = 0; i < 3; ++i) l.push_back(random_idx(n, d));
        return l;
    }

    // The list of lists() a case's call r uses: the next one after each pass over the copies.
    static const std::vector<int32_t>& list_for(const std::vector<std::vector<int32_t>>& l, const copies& set, int r) {
        return l[static_cast<size_t>(r / set.size() % 3)];
    }

    // One sparse kernel's cases, one per density, each with the plain reads of its rows.
    struct sparse_cases {
        std::vector<std::vector<std::vector<int32_t>>> lists;  // per density: 3 index lists
        std::vector<int> ids;
        std::vector<read_ids> reads;
    };

    // Adds to t, for every density, kernel(copy, idx) over set (n_items rows or channels to pick from)
    // and the plain reads of the same rows; sc and what kernel refers to outlive t.run().
    template <typename F>
    void add_sparse_cases(interleaved_timer& t, const copies& set, int64_t n_items, int64_t row_bytes, sparse_cases& sc,
                          F kernel) const {
        for (double d : m_p.densities) sc.lists.push_back(lists(n_items, d));
        for (const auto& li : sc.lists) {
            sc.ids.push_back(t.add(set.size(), [&set, &li, kernel](int64_t c, int r) {
                kernel(set[c], list_for(li, set, r));
            }));
            sc.reads.push_back(pattern_cases(t, set, row_bytes, li));
        }
    }

    // Their rows after t.run(), with speed-ups over base_s (the median of the `baseline` case).
    void sparse_rows(const interleaved_timer& t, const sparse_cases& sc, const char* kernel, const std::string& matrix,
                     int64_t row_bytes, int64_t n_copies, double base_s, const char* baseline) {
        for (size_t i = 0; i < sc.ids.size(); ++i) {
            const int64_t n = static_cast<int64_t>(sc.lists[i][0].size());
            const timing tm = t.result(sc.ids[i]);
            const double bytes = static_cast<double>(n * row_bytes);
            kernel_bench_row& row = add(kernel, matrix, m_p.densities[i], n, tm, bytes, n_copies);
            row.speedup = base_s / tm.median;
            row.baseline = baseline;
            row.pattern_gbs = pattern_gbs(t, sc.reads[i], bytes);
        }
    }

    // down [dim, hidden]: dense gemv and the input-sparse kernel over active hidden channels (on the
    // input-major layout), interleaved; then the baselines.
    void down_projection() {
        const int64_t rows = m_s.dim, cols = m_s.hidden;
        const std::string matrix = "down " + shape_text(rows, cols);
        const int64_t bytes = view(nullptr, rows, cols).bytes();
        const copies set(m_down.data(), bytes, copies_for(m_ws, bytes), m_p.huge_pages);
        const bool sparse = wants(m_p, "input_sparse");
        // The layout's own type (Q4_K -> Q4_0, Q6_K -> Q8_0 ...), as the engine writes it.
        const dtype lt = k::input_major_type(view(m_down.data(), rows, cols));
        const k::owned_matrix im = sparse ? k::to_input_major(view(m_down.data(), rows, cols), lt) : k::owned_matrix{};
        const copies im_set(im.view.data, sparse ? im.view.bytes() : 0, sparse ? copies_for(m_ws, im.view.bytes()) : 0,
                            m_p.huge_pages);
        progress("dense" + std::string(sparse ? " + input-sparse " : " ") + matrix, set.size() + im_set.size(), bytes);
        std::vector<float> y(static_cast<size_t>(rows));
        interleaved_timer t;
        const int dense_id = dense_case(t, set, rows, cols, y);
        whole_reads whole;
        add_whole_reads(t, set, bytes, whole);
        x8_cases x8;
        add_x8_case(t, x8, m_down.data(), rows, cols, y);
        sparse_cases sc;
        if (sparse)
            add_sparse_cases(t, im_set, cols, im.view.row_bytes(), sc,
                             [&](const uint8_t* w, const std::vector<int32_t>& idx) {
                                 k::gemv_input_sparse(tensor_view{lt, cols, rows, w}, m_x_hidden.data(), idx.data(),
                                                      static_cast<int64_t>(idx.size()), y.data(), m_p.threads);
                             });
        t.run(m_p.reps);
        const double dense_s =
            dense_row(t, dense_id, "dense", matrix, rows, static_cast<double>(bytes), set.size(), &whole);
        x8_row(t, x8, matrix, rows, static_cast<double>(bytes), dense_s);
        sparse_rows(t, sc, "input_sparse", matrix, im.view.row_bytes(), im_set.size(), dense_s, "dense");
        baselines(set, rows, cols, matrix, dense_s);
    }

    // up [hidden, dim]: dense gemv and the output-sparse kernel over active rows, interleaved; then the
    // baselines.
    void up_projection() {
        const int64_t rows = m_s.hidden, cols = m_s.dim;
        const std::string matrix = "up " + shape_text(rows, cols);
        const int64_t bytes = view(nullptr, rows, cols).bytes();
        const copies set(m_up.data(), bytes, copies_for(m_ws, bytes), m_p.huge_pages);
        const bool sparse = wants(m_p, "output_sparse");
        progress("dense" + std::string(sparse ? " + output-sparse " : " ") + matrix, set.size(), bytes);
        std::vector<float> y(static_cast<size_t>(rows));
        interleaved_timer t;
        const int dense_id = dense_case(t, set, rows, cols, y);
        whole_reads whole;
        add_whole_reads(t, set, bytes, whole);
        x8_cases x8;
        add_x8_case(t, x8, m_up.data(), rows, cols, y);
        sparse_cases sc;
        if (sparse)
            add_sparse_cases(t, set, rows, dtype_row_bytes(m_t, cols), sc,
                             [&](const uint8_t* w, const std::vector<int32_t>& idx) {
                                 k::gemv_output_sparse(view(w, rows, cols), m_x_dim.data(), idx.data(),
                                                       static_cast<int64_t>(idx.size()), y.data(), m_p.threads);
                             });
        t.run(m_p.reps);
        const double dense_s =
            dense_row(t, dense_id, "dense", matrix, rows, static_cast<double>(bytes), set.size(), &whole);
        x8_row(t, x8, matrix, rows, static_cast<double>(bytes), dense_s);
        sparse_rows(t, sc, "output_sparse", matrix, dtype_row_bytes(m_t, cols), set.size(), dense_s, "dense");
        baselines(set, rows, cols, matrix, dense_s);
    }

    // The whole gated MLP: dense (gate, up, swiglu, down) vs the fused kernel over neuron bundles,
    // interleaved.
    void mlp() {
        const int64_t dim = m_s.dim, hidden = m_s.hidden;
        const std::string matrix = "mlp " + shape_text(dim, hidden);
        const int64_t mat_bytes = view(nullptr, hidden, dim).bytes();
        std::vector<float> g(static_cast<size_t>(hidden)), u = g, y(static_cast<size_t>(dim));
        // One buffer per copy holds gate, up and down back to back.
        std::vector<uint8_t> joined(static_cast<size_t>(3 * mat_bytes));
        std::memcpy(joined.data(), m_gate.data(), static_cast<size_t>(mat_bytes));
        std::memcpy(joined.data() + mat_bytes, m_up.data(), static_cast<size_t>(mat_bytes));
        std::memcpy(joined.data() + 2 * mat_bytes, m_down.data(), static_cast<size_t>(mat_bytes));
        const copies set(joined.data(), 3 * mat_bytes, copies_for(m_ws, 3 * mat_bytes), m_p.huge_pages);
        joined = {};
        // The bundles' type beside the down layout (x8 forms are the down parts' storage, bundle_view::down_type).
        const dtype lt = dtype_bundle_type(k::input_major_type(view(m_down.data(), dim, hidden)));
        const k::owned_bundles b = k::make_bundles(view(m_gate.data(), hidden, dim), view(m_up.data(), hidden, dim),
                                                   view(m_down.data(), dim, hidden), lt);
        const int64_t b_bytes = hidden * b.view.bundle_bytes();
        const copies b_set(b.view.data, b_bytes, copies_for(m_ws, b_bytes), m_p.huge_pages);
        progress("dense + fused " + matrix, set.size() + b_set.size(), 3 * mat_bytes);
        std::vector<float> scratch(static_cast<size_t>(k::fused_mlp_scratch_floats(dim, m_p.threads)));
        interleaved_timer t;
        const int dense_id = t.add(set.size(), [&](int64_t c, int) {
            k::gemv(view(set[c], hidden, dim), m_x_dim.data(), g.data(), m_p.threads);
            k::gemv(view(set[c] + mat_bytes, hidden, dim), m_x_dim.data(), u.data(), m_p.threads);
            k::swiglu(g.data(), g.data(), u.data(), hidden);
            k::gemv(view(set[c] + 2 * mat_bytes, dim, hidden), g.data(), y.data(), m_p.threads);
        });
        sparse_cases sc;
        add_sparse_cases(
            t, b_set, hidden, b.view.bundle_bytes(), sc, [&](const uint8_t* w, const std::vector<int32_t>& idx) {
                k::fused_sparse_mlp(k::bundle_view{lt, hidden, dim, w}, m_x_dim.data(), idx.data(),
                                    static_cast<int64_t>(idx.size()), y.data(), scratch.data(), nullptr, m_p.threads);
            });
        t.run(m_p.reps);
        const double dense_s =
            dense_row(t, dense_id, "dense_mlp", matrix, hidden, static_cast<double>(3 * mat_bytes), set.size());
        sparse_rows(t, sc, "fused_mlp", matrix, b.view.bundle_bytes(), b_set.size(), dense_s, "dense_mlp");
    }

    // The rest of the MLP once the gate is known (CATS, CHESS, gate pruning): dense up, SwiGLU and down
    // vs kernels::sparse_pairs over the pair layout (each neuron's up row and down column side by side),
    // interleaved. The gate's pre-activations are given (random), as the engine computes them first.
    void pairs() {
        const int64_t dim = m_s.dim, hidden = m_s.hidden;
        const std::string matrix = "up+down " + shape_text(dim, hidden);
        const int64_t mat_bytes = view(nullptr, hidden, dim).bytes();
        std::vector<float> u(static_cast<size_t>(hidden)), y(static_cast<size_t>(dim));
        const std::vector<float> pre = random_floats(hidden, 4.0f);
        std::vector<uint8_t> joined(static_cast<size_t>(2 * mat_bytes));
        std::memcpy(joined.data(), m_up.data(), static_cast<size_t>(mat_bytes));
        std::memcpy(joined.data() + mat_bytes, m_down.data(), static_cast<size_t>(mat_bytes));
        const copies set(joined.data(), 2 * mat_bytes, copies_for(m_ws, 2 * mat_bytes), m_p.huge_pages);
        joined = {};
        const tensor_view down = view(m_down.data(), dim, hidden);
        const k::owned_pairs pl = k::make_pairs(view(m_up.data(), hidden, dim), down, k::input_major_type(down), false);
        const k::pair_view pv = pl.view;
        const copies p_set(pv.data, pv.bytes(), copies_for(m_ws, pv.bytes()), m_p.huge_pages);
        progress("dense + pairs " + matrix, set.size() + p_set.size(), 2 * mat_bytes);
        std::vector<float> scratch(static_cast<size_t>(k::fused_mlp_scratch_floats(dim, m_p.threads)));
        interleaved_timer t;
        const int dense_id = t.add(set.size(), [&](int64_t c, int) {
            k::gemv(view(set[c], hidden, dim), m_x_dim.data(), u.data(), m_p.threads);
            k::swiglu(u.data(), pre.data(), u.data(), hidden);
            k::gemv(view(set[c] + mat_bytes, dim, hidden), u.data(), y.data(), m_p.threads);
        });
        sparse_cases sc;
        add_sparse_cases(t, p_set, hidden, pv.pair_bytes(), sc, [&](const uint8_t* w, const std::vector<int32_t>& idx) {
            k::pair_view at = pv;
            at.data = w;
            k::sparse_pairs(at, pre.data(), m_x_dim.data(), idx.data(), static_cast<int64_t>(idx.size()), y.data(),
                            scratch.data(), nullptr, nullptr, m_p.threads);
        });
        t.run(m_p.reps);
        const double dense_s =
            dense_row(t, dense_id, "dense_up_down", matrix, hidden, static_cast<double>(2 * mat_bytes), set.size());
        sparse_rows(t, sc, "pairs", matrix, pv.pair_bytes(), p_set.size(), dense_s, "dense_up_down");
    }

    const kernel_bench_params& m_p;
    mlp_shape m_s;
    dtype m_t;
    kernel_bench_result& m_out;
    const std::function<void(const std::string&)>& m_log;
    std::vector<uint8_t> m_gate, m_up, m_down;
    std::vector<float> m_x_dim, m_x_hidden;
    double m_ws = 0;
};

}  // namespace

kernel_bench_params kernel_bench_default_params() {
    kernel_bench_params p;
    p.shapes = {{4096, 14336}, {2048, 8192}};
    p.types = {dtype::f32, dtype::q8_0, dtype::q4_0};
    p.densities = {0.05, 0.10, 0.20, 0.30, 0.50, 0.70, 1.00};
    p.kernels = {"dense", "input_sparse", "output_sparse", "fused", "pairs"};
    p.threads = k::default_threads();
    return p;
}

kernel_bench_result run_kernel_bench(const kernel_bench_params& p, const std::function<void(const std::string&)>& log) {
    kernel_bench_result res;
    res.threads = p.threads;
    res.isa = k::isa_name(k::active_isa());
    res.working_set_gb = p.working_set_gb;
    res.reps = p.reps;
    res.have_openblas = p.baselines && openblas_available();
    res.have_eigen = p.baselines && eigen_available();
    res.huge_pages = p.huge_pages;
    const auto bw_bytes = static_cast<int64_t>(std::max(0.25, p.working_set_gb) * 1e9);
    res.read_bw_gbs = k::measure_read_bandwidth_gbs(p.threads, bw_bytes, 5);
    for (const mlp_shape& s : p.shapes) {
        // Weights ~ U(-1, 1) / sqrt(fan-in), like trained layers; one draw per shape for all types.
        const std::vector<float> gate = random_floats(s.hidden * s.dim, 1.0f / std::sqrt(static_cast<float>(s.dim)));
        const std::vector<float> up = random_floats(s.hidden * s.dim, 1.0f / std::sqrt(static_cast<float>(s.dim)));
        const std::vector<float> down = random_floats(s.dim * s.hidden, 1.0f / std::sqrt(static_cast<float>(s.hidden)));
        for (dtype t : p.types) shape_bench(p, s, t, gate, up, down, res, log).run();
    }
    res.read_bw_end_gbs = k::measure_read_bandwidth_gbs(p.threads, bw_bytes, 5);
    return res;
}

}  // namespace sl::cli

// Streaming-read bandwidth probe (median of timed parallel SIMD sums over a large buffer).
#include "sparselens/kernels/membw.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <omp.h>
#include <sys/mman.h>

#include "dense_internal.h"
#include "sparselens/kernels/sparse.h"

namespace sl::kernels {
namespace {

struct free_deleter {
    void operator()(float* p) const { std::free(p); }
};

}  // namespace

double measure_read_bandwidth_gbs(int n_threads, int64_t bytes, int reps) {
    const int nt = n_threads > 0 ? n_threads : omp_get_max_threads();
    const int64_t chunk = bytes / 4 / nt / 64 * 64;  // floats per thread, whole 256-byte groups
    if (chunk <= 0 || reps <= 0) return 0.0;
    const int64_t n = chunk * nt;
    // On 2 MiB-aligned memory advised to use transparent huge pages before the first touch, as the model
    // weights are read (mapped_file::copy_to_huge_pages, the layouts' aligned_buffer): on 4 KiB pages the
    // probe read ~7-10% slower than the dense kernels streamed their weights (Zen 4 guest, stop 28: 26-29
    // against 29-30 GB/s, alternating), so `%bw` columns passed 100%.
    constexpr size_t huge = size_t{2} << 20;
    const size_t size = (static_cast<size_t>(n) * 4 + huge - 1) / huge * huge;
    std::unique_ptr<float, free_deleter> buf(static_cast<float*>(std::aligned_alloc(huge, size)));
    if (!buf) return 0.0;
    float* p = buf.get();
#ifdef MADV_HUGEPAGE
    madvise(p, size, MADV_HUGEPAGE);  // advisory: 4 KiB pages where the kernel has no THP
#endif
    const detail::kernel_table& kt = detail::active_table();

    // Chunk c belongs to thread c % team size (the same mapping below), also if OpenMP grants
    // fewer threads than asked.
#pragma omp parallel num_threads(nt)
    for (int64_t c = omp_get_thread_num(); c < nt; c += omp_get_num_threads())
        std::fill(p + c * chunk, p + (c + 1) * chunk, 1.0f);

    // One timed pass of the whole buffer with stream_sum variant v.
    volatile float sink = 0.0f;  // keeps the sums observable so the reads cannot be elided
    auto pass = [&](int v) {
        float total = 0.0f;
        const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(nt) reduction(+ : total)
        for (int64_t c = omp_get_thread_num(); c < nt; c += omp_get_num_threads())
            total += kt.stream_sum[v](p + c * chunk, chunk);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        sink = sink + total;
        return static_cast<double>(n) * 4.0 / s / 1e9;
    };
    // Each rep takes the better of hardware-only and software prefetching: the ceiling is the
    // best plain streaming read this machine achieves, whichever way the kernels get there.
    std::vector<double> gbs;
    for (int r = 0; r < reps; ++r) gbs.push_back(std::max(pass(0), pass(1)));
    std::sort(gbs.begin(), gbs.end());
    return gbs[gbs.size() / 2];
}

uint64_t read_listed_rows(const void* base, int64_t row_bytes, const int32_t* idx, int64_t n, int n_threads,
                          int mode) {
    if (n <= 0 || row_bytes <= 0) return 0;
    const int nt = static_cast<int>(std::min<int64_t>(n_threads > 0 ? n_threads : omp_get_max_threads(), n));
    const auto* b = static_cast<const uint8_t*>(base);
    const int64_t ahead = std::max<int64_t>(1, (int64_t{4096} + row_bytes - 1) / row_bytes);
    // Rows of whole 128-byte groups at 32-byte aligned addresses go through the ISA's stream_sum (the
    // roofline probe's loads, 256-bit where the machine has them); others through 16-byte loads here.
    const bool simd = row_bytes % 128 == 0 && reinterpret_cast<uintptr_t>(base) % 32 == 0;
    const detail::stream_sum_fn sum = detail::active_table().stream_sum[mode == 2 ? 1 : 0];
    // Mode 3: the rows in groups, as the input-sparse chunk kernels walk them (input_sparse_chunk_channels).
    const int64_t group = input_sparse_chunk_channels(row_bytes);
    const detail::group_sum_fn gsum = detail::active_table().group_sum;
    uint64_t total = 0;
#pragma omp parallel num_threads(nt) reduction(+ : total) if (nt > 1)
    {
        const int t = omp_get_thread_num(), team = omp_get_num_threads();
        const int64_t k0 = n * t / team, k1 = n * (t + 1) / team;
        using u64x2 = uint64_t __attribute__((vector_size(16)));  // SSE2 loads without ISA flags
        u64x2 a0 = {0, 0}, a1 = a0;
        uint64_t tail = 0;
        float fsum = 0.0f;
        // Row p's bytes from `from` on: whole 32-byte groups as words, then single bytes.
        const auto add_words = [&](const uint8_t* p, int64_t from) {
            int64_t o = from;
            for (; o + 32 <= row_bytes; o += 32) {
                u64x2 w0, w1;
                std::memcpy(&w0, p + o, 16);
                std::memcpy(&w1, p + o + 16, 16);
                a0 += w0;
                a1 += w1;
            }
            for (; o < row_bytes; ++o) tail += p[o];
        };
        constexpr int64_t max_group = input_sparse_chunk_channels(0);  // the longer group (short rows)
        const uint8_t* cur[max_group];
        const uint8_t* next[max_group];
        const bool walk = mode == 3 || mode == 4;
        for (int64_t g = k0; walk && g < k1; g += group) {
            // One line of each row of the group per step (the ISA's widest loads), and (mode 3) the same
            // line of the next group's rows into L2; then the rows' bytes past their whole lines.
            const int nc = static_cast<int>(std::min(group, k1 - g));
            const int nn = mode == 3 ? static_cast<int>(std::clamp<int64_t>(k1 - g - nc, 0, group)) : 0;
            for (int i = 0; i < nc; ++i) cur[i] = b + idx[g + i] * row_bytes;
            for (int i = 0; i < nn; ++i) next[i] = b + idx[g + nc + i] * row_bytes;
            const int64_t lines = row_bytes / 64;
            tail += gsum(cur, nc, lines, next, nn);
            for (int i = 0; i < nc; ++i) add_words(cur[i], 64 * lines);
        }
        for (int64_t k = walk ? k1 : k0; k < k1; ++k) {
            if (mode == 1 && k + ahead < k1) {
                const uint8_t* q = b + idx[k + ahead] * row_bytes;
                for (int64_t o = 0; o < row_bytes; o += 64) __builtin_prefetch(q + o, 0, 2);  // 2: into L2
            }
            const uint8_t* p = b + idx[k] * row_bytes;
            if (simd) {
                fsum += sum(reinterpret_cast<const float*>(p), row_bytes / 4);
                continue;
            }
            add_words(p, 0);
        }
        const u64x2 a = a0 + a1;
        uint32_t fbits;
        std::memcpy(&fbits, &fsum, 4);
        total += a[0] + a[1] + tail + fbits;
    }
    return total;
}

}  // namespace sl::kernels

// Streaming read bandwidth of this machine: the ceiling memory-bound GEMV is measured against.
#pragma once

#include <cstdint>

namespace sl::kernels {

// Reads a `bytes` buffer (rounded down to a multiple of 64 floats per thread; use more than the
// last-level cache, 32 MiB here, for a DRAM figure) with a SIMD sum over n_threads OpenMP threads
// (<= 0: OpenMP's default) and returns the median over `reps` in GB/s (1e9 bytes/s); each rep is
// the faster of two timed passes, without and with software prefetch (as the gemv kernels use).
// The buffer is first-touched by the thread that later reads each part. Returns 0 when the buffer
// cannot be allocated or bytes/reps are not positive.
double measure_read_bandwidth_gbs(int n_threads, int64_t bytes = int64_t{1} << 30, int reps = 5);

// One pure read of the listed rows base + idx[k] * row_bytes (k < n), no arithmetic: the ceiling of that
// access pattern, which sparse kernels reading the same rows are measured against. Threads take
// contiguous shares of the list, as the sparse kernels split it; with `prefetch` each also prefetches
// the rows ~4 KiB ahead into L2, as the gathers do (without: the hardware prefetchers alone, as the
// dense rows stream). n_threads <= 0: OpenMP's default. Returns a checksum of the bytes (keep it
// observable, so the reads are not elided).
uint64_t read_listed_rows(const void* base, int64_t row_bytes, const int32_t* idx, int64_t n, int n_threads,
                          bool prefetch);

}  // namespace sl::kernels

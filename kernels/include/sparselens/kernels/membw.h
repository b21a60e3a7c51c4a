// Streaming read bandwidth of this machine: the ceiling memory-bound GEMV is measured against.
#pragma once

#include <cstdint>

namespace sl::kernels {

// Reads a `bytes` buffer (rounded down to a multiple of 64 floats per thread; use more than the
// last-level cache, 32 MiB here, for a DRAM figure) with a SIMD sum over n_threads OpenMP threads
// (<= 0: OpenMP's default) and returns the median over `reps` in GB/s (1e9 bytes/s); each rep is
// the faster of two timed passes, without and with software prefetch (as the gemv kernels use).
// The buffer is advised to use transparent huge pages (as the model weights are) and first-touched by
// the thread that later reads each part. Returns 0 when the buffer cannot be allocated or bytes/reps
// are not positive.
double measure_read_bandwidth_gbs(int n_threads, int64_t bytes = int64_t{1} << 30, int reps = 5);

// One pure read of the listed rows base + idx[k] * row_bytes (k < n), no arithmetic: the access pattern
// that sparse kernels reading the same rows are measured against. Threads take contiguous shares of the
// list, as the sparse kernels split it. mode 0: the hardware prefetchers alone (as dense rows stream);
// 1: each thread also prefetches the rows ~4 KiB ahead in its list into L2, as the gathers do; 2:
// prefetch ahead within each row into L1, as the dense kernels do; 3: the input-sparse chunk kernels'
// walk, input_sparse_chunk_channels(row_bytes) rows side by side, one 64-byte line of each per step,
// the same line of the next group's rows into L2; 4: that walk without software prefetch (stop 43, Zen 5,
// 2 threads: a /tmp walk of 16 rows of 3200 bytes read 28.5-29.5 GB/s without prefetching, 20.4-20.7
// with it; this function on 50% of 2048 rows of 3168 bytes, mode 3 32.3 / 31.3, mode 4 32.0 / 36.6, dense
// rows 58). In modes 0-2 rows of whole 128-byte groups at a
// 32-byte aligned base are read with the active ISA's widest loads, others with 16-byte loads (modes 3
// and 4: 64-byte lines, then as those). n_threads <= 0: OpenMP's default. Returns a checksum (keep it
// observable, so the reads are not elided): for rows not read by the SIMD path, the sum of their 8-byte
// words over whole 32-byte groups plus their remaining bytes.
inline constexpr int k_read_listed_modes = 5;
uint64_t read_listed_rows(const void* base, int64_t row_bytes, const int32_t* idx, int64_t n, int n_threads,
                          int mode);

}  // namespace sl::kernels

// Mask selection: the indices (or keys) that pass a comparison, in ascending order, without a branch per
// element, dispatched per ISA like the other kernels. Exact: every ISA returns the same list.
//
// Why kernels: a sparse token selects several masks per layer on one thread while the other waits. The
// portable loops (store every index, advance the count by the comparison) chain each element to the
// one before through the store address, ~2-4 cycles an element: DIP's top-k masks took 0.71 ms of a
// 14.2 ms llama-1b Q4_0 token. Vector compares and a compress per 8 or 16 elements remove the chain.
#pragma once

#include <cstdint>

namespace sl::kernels {

// `out` must have room for n entries: the vector paths store whole vectors at the count so far, which
// never passes the element being tested, so every write stays inside [0, n); entries past the returned
// count are left with scratch values.

// out[0, count) = the i < n with keys[i] >= t, ascending; returns count.
int64_t select_at_least(const uint32_t* keys, int64_t n, uint32_t t, int32_t* out);
// out[0, count) = the keys[i] with keys[i] >> shift == b (0 <= shift < 32), in order; returns count.
int64_t select_bucket(const uint32_t* keys, int64_t n, int shift, uint32_t b, uint32_t* out);
// out[0, count) = the i < n with |v[i]| >= t (strict: >), t = tv ? tv[i] : t0; NaN never passes.
int64_t select_abs(const float* v, int64_t n, float t0, const float* tv, bool strict, int32_t* out);

}  // namespace sl::kernels

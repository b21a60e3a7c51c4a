// Causal GQA attention, RMSNorm and SwiGLU: the non-GEMV arithmetic of one transformer layer.
#include "sparselens/kernels/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "attention_impl.h"
#include "sparselens/kernels/kernels.h"

namespace sl::kernels {

namespace {

// The attention_impl.h build for the active ISA (fetched per call: the AVX-512 table must not even be
// copied on a CPU without AVX-512).
detail::attention_fns active_fns() {
    switch (active_isa()) {
        case isa::avx512:
            return detail::attention_fns_avx512();
        case isa::avx2:
            return detail::attention_fns_avx2();
        case isa::scalar:
            break;
    }
    return detail::this_build_fns();
}

}  // namespace

int attention_threads(int n_threads) { return n_threads > 0 ? n_threads : omp_get_max_threads(); }

int64_t attention_scratch_floats(const attention_shape& shape, int n_threads, int32_t max_pos) {
    const int32_t group = shape.n_kv_heads > 0 ? shape.n_heads / shape.n_kv_heads : 1;
    return static_cast<int64_t>(attention_threads(n_threads)) * std::min(group, detail::k_max_group) * max_pos;
}

void attention_causal(const float* q, const float* k_cache, const float* v_cache, int32_t pos0, int32_t n,
                      const attention_shape& shape, float* out, float* scores, int n_threads) {
    const int32_t q_stride = shape.n_heads * shape.head_dim;
    const int64_t kv_stride =
        shape.kv_pos_stride > 0 ? shape.kv_pos_stride : int64_t{shape.n_kv_heads} * shape.head_dim;
    const int64_t head_stride = shape.kv_head_stride > 0 ? shape.kv_head_stride : shape.head_dim;
    const int32_t group = shape.n_heads / shape.n_kv_heads;
    const int32_t max_pos = pos0 + n;
    const int threads = attention_threads(n_threads);
    // Jobs are (token, KV head, part of its query heads): the heads of a part share their K and V loads
    // (attend_group). Parts of at most k_max_group heads, and more of them while there are fewer than two
    // jobs per thread (one decode token of a model with 4 KV heads is 4 jobs).
    int32_t parts = (group + detail::k_max_group - 1) / detail::k_max_group;
    while (parts < group && static_cast<int64_t>(n) * shape.n_kv_heads * parts < 2 * threads) ++parts;
    const int32_t part_heads = (group + parts - 1) / parts;
    const int64_t per_token = static_cast<int64_t>(shape.n_kv_heads) * parts;
    const int64_t total = static_cast<int64_t>(n) * per_token;
    // Tiny problems (tiny models, the first positions) stay serial. The line was 2^20 units (a llama-1b
    // decode token below position 512) after a Xeon harness ran one token at position 136 in 64 us on one
    // AVX2 core and 70-75 on two, with the worker asleep (10-90 us to wake on a VM). In the engine the
    // worker is still spinning from the q/k/v GEMV just before, and on the Zen 5 VM of stop 44 two threads
    // took llama-1b Q4_0's attention stage (positions 64-160) from 0.98-1.05 to 0.59-0.75 ms per token
    // (`bench --stages`, builds alternating x6); a harness with a parallel region before each call had two
    // threads ahead from position 8 on (3.6 -> 2.8 us per layer; 112: 25.8 -> 23.4).
    const bool parallel =
        static_cast<int64_t>(n) * shape.n_heads * max_pos * shape.head_dim > (1 << 14) && threads > 1;
    const detail::attend_fn attend = active_fns().attend;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) if (parallel)
    for (int64_t job = 0; job < total; ++job) {
        const int32_t t = static_cast<int32_t>(job / per_token);
        const int32_t g = static_cast<int32_t>(job % per_token / parts);
        const int32_t part = static_cast<int32_t>(job % parts);
        const int32_t h0 = g * group + part * part_heads;
        const int32_t heads = std::min(part_heads, (g + 1) * group - h0);
        if (heads <= 0) continue;
        float* att = scores + static_cast<int64_t>(omp_get_thread_num()) * part_heads * max_pos;
        attend(q + static_cast<int64_t>(t) * q_stride + static_cast<int64_t>(h0) * shape.head_dim, heads,
               k_cache + g * head_stride, v_cache + g * head_stride, pos0 + t + 1, kv_stride, shape,
               out + static_cast<int64_t>(t) * q_stride + static_cast<int64_t>(h0) * shape.head_dim, att);
    }
}

void rmsnorm_rows(float* y, const float* x, const float* w, int64_t n, int64_t d, float eps) {
    for (int64_t r = 0; r < n; ++r) {
        const float* xr = x + r * d;
        float* yr = y + r * d;
        float ss = 0.0f;
        for (int64_t i = 0; i < d; ++i) ss += xr[i] * xr[i];
        ss = ss / static_cast<float>(d) + eps;
        ss = 1.0f / std::sqrt(ss);
        for (int64_t i = 0; i < d; ++i) yr[i] = w[i] * (ss * xr[i]);
    }
}

// A vector exp instead of libm's expf per element: the scalar loop was 1.8% of a llama-1b Q4_0 dense
// decode and 1.5% with CATS, run on the master while the other threads wait (perf, stop 22).
void swiglu(float* y, const float* gate, const float* up, int64_t n) {
    active_fns().swiglu(y, gate, up, n);
}

// The same vector exp in GELU's sigmoid form. The scalar tanhf per element it replaced took 329 us per
// 16384 neurons against 20 us (one AVX2 core, /tmp harness, stop 23): 5.9 ms of serial work per Gemma-2B
// token (18 layers x 16384), on the master while the other threads waited.
void geglu(float* y, const float* gate, const float* up, int64_t n) {
    active_fns().geglu(y, gate, up, n);
}

// cap * tanh(x / cap) through the vector exp: libm's tanhf per logit was 2.8 ms per Gemma-2 token (256000
// logits; /tmp harness, stop 23).
void softcap(float* y, const float* x, int64_t n, float cap) {
    active_fns().softcap(y, x, n, cap);
}

}  // namespace sl::kernels

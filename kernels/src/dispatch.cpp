// Run-time CPU dispatch: detect the ISA once, honour SPARSELENS_ISA, let tests override it.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include <cpuid.h>
#include <omp.h>
#include <unistd.h>

#include "dense_internal.h"

namespace sl::kernels {
namespace {

// CPUID leaf 1, ECX bit 29: clang 14's __builtin_cpu_supports has no "f16c" (the fuzz build uses clang).
bool has_f16c() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}

isa detect() {
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    if (!avx2) return isa::scalar;
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    return avx512 ? isa::avx512 : isa::avx2;
}

isa clamp(isa wanted) {
    const isa best = detected_isa();
    return static_cast<uint8_t>(wanted) > static_cast<uint8_t>(best) ? best : wanted;
}

// Detected ISA lowered by SPARSELENS_ISA when set to a known name; unknown values are ignored.
isa initial_isa() {
    const char* env = std::getenv("SPARSELENS_ISA");
    if (env) {
        if (std::strcmp(env, "scalar") == 0) return clamp(isa::scalar);
        if (std::strcmp(env, "avx2") == 0) return clamp(isa::avx2);
        if (std::strcmp(env, "avx512") == 0) return clamp(isa::avx512);
    }
    return detected_isa();
}

std::atomic<isa>& active_slot() {
    static std::atomic<isa> slot{initial_isa()};
    return slot;
}

}  // namespace

isa detected_isa() {
    static const isa best = detect();
    return best;
}

isa active_isa() { return active_slot().load(std::memory_order_relaxed); }

isa set_active_isa(isa wanted) {
    const isa got = clamp(wanted);
    active_slot().store(got, std::memory_order_relaxed);
    return got;
}

const char* isa_name(isa i) {
    switch (i) {
        case isa::scalar: return "scalar";
        case isa::avx2: return "avx2";
        case isa::avx512: return "avx512";
    }
    return "?";
}

int default_threads() { return omp_get_max_threads(); }

namespace detail {

const kernel_table& active_table() {
    switch (active_isa()) {
        case isa::avx512: return avx512_table();
        case isa::avx2: return avx2_table();
        case isa::scalar: break;
    }
    return scalar_table();
}

}  // namespace detail
}  // namespace sl::kernels

namespace sl::kernels::detail {

bool cpu_prefers_row_streams() {
    static const bool intel = [] {
        __builtin_cpu_init();
        return __builtin_cpu_is("intel") != 0;
    }();
    return intel;
}

bool cpu_prefers_in_row_chunk_prefetch() {
    return cpu_prefers_row_streams();  // Intel
}

bool cpu_prefers_avx2_q4_0x8_chunk() {
    static const bool zen5 = [] {
        __builtin_cpu_init();
        if (!__builtin_cpu_is("amd")) return false;
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
        const unsigned base = (eax >> 8) & 0xf, ext = (eax >> 20) & 0xff;
        return (base == 0xf ? base + ext : base) >= 0x1a;
    }();
    return zen5;
}

bool float_x_fits_l1(int64_t cols) {
    static const int64_t limit = [] {
        const long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE);
        return (l1 > 0 ? static_cast<int64_t>(l1) : int64_t{32} << 10) * 2 / 3;
    }();
    return cols * static_cast<int64_t>(sizeof(float)) <= limit;
}

}  // namespace sl::kernels::detail

// Q8_0/Q4_0 streaming gemv rows with AVX-512 VNNI (vpdpbusd) and VBMI (vpermt2b), and the Q4_K/Q6_K rows
// of quant_rows_avx512.h on their VNNI path (vpdpbusd + vpdpwssd), compiled with those flags and installed over the plain AVX-512 rows only after a CPUID check. row_dots_avx512.h gives
// these the same integer lanes and float steps as the AVX-512BW versions, so which one runs (dense
// here, the sparse gathers there) never changes a result bit.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "q40_r8_avx512.h"
#include "q4k_r8_avx512.h"
#include "q80_r8_avx512.h"
#include "quant_rows_avx512.h"
#include "sparse_internal.h"

#if !defined(__AVX512VNNI__) || !defined(__AVX512VBMI__)
#error "dense_vnni_avx512.cpp needs -mavx512vnni -mavx512vbmi (kernels/CMakeLists.txt)"
#endif

namespace sl::kernels::detail {

void add_vnni_rows_avx512(kernel_table& k) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512vbmi")) return;
    // One row at a time: rows are contiguous, so the weights stay a single sequential stream (two rows
    // per pass share the activation loads and ran ~10% faster from L2, but decoded 30% slower from DRAM).
    k.rows[static_cast<int>(dtype::q8_0)] = rows_quant<1, q8_block, pf_l2>;
    k.rows[static_cast<int>(dtype::q4_0)] = rows_quant<1, q4_block, pf_l2>;
    k.rows_cached[static_cast<int>(dtype::q8_0)] = rows_quant<4, q8_block, false>;
    k.rows_cached[static_cast<int>(dtype::q4_0)] = rows_quant<4, q4_block, false>;
    k.rows[static_cast<int>(dtype::q4_k)] = k.rows_cached[static_cast<int>(dtype::q4_k)] = rows<q4k>;
    k.rows[static_cast<int>(dtype::q6_k)] = k.rows_cached[static_cast<int>(dtype::q6_k)] = rows<q6k>;
    k.rows[static_cast<int>(dtype::q4_k_r8)] = k.rows_cached[static_cast<int>(dtype::q4_k_r8)] = rows_x8;
    k.rows[static_cast<int>(dtype::q4_0_r8)] = k.rows_cached[static_cast<int>(dtype::q4_0_r8)] = rows_x8_q40;
    k.rows[static_cast<int>(dtype::q8_0_r8)] = k.rows_cached[static_cast<int>(dtype::q8_0_r8)] = rows_x8_q80;
}

// The same VNNI rows as the sparse gathers (output-sparse rows, the fused MLP's and the pairs' row dots).
// Until stop 33 the gathers kept the AVX-512BW build of these rows: Q4_0's four blocks side by side took
// three inserts instead of one VBMI byte permute, and every dot a maddubs + madd instead of vpdpbusd.
void add_vnni_dots_avx512(sparse_table& k) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512vbmi")) return;
    k.dots[static_cast<int>(dtype::q8_0)] =
        gather_dots<q8_act, quant_rows<1, q8_block, pf_l2>, quant_rows<1, q8_block, pf_none>>;
    k.dots[static_cast<int>(dtype::q4_0)] =
        quant_gather_dots<q4_block>;
    k.dots[static_cast<int>(dtype::q4_k)] = kquant_dots<q4k>;
    k.dots[static_cast<int>(dtype::q6_k)] = kquant_dots<q6k>;
}

}  // namespace sl::kernels::detail

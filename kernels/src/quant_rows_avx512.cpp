// AVX-512 integer-dot rows for the K-quant types of llama.cpp's common mixes (Q4_K, Q6_K: all of Q4_K_M),
// dense and gathered (kernels in quant_rows_avx512.h; the VNNI build of the dense rows is installed over
// these by dense_vnni_avx512.cpp). Bit-identical to the AVX2 kernels in quant_rows_avx2.cpp, which stay in
// place for the other unpacked types.
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC bug 105593, see dense_avx512.cpp
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "quant_rows_avx512.h"
#include "sparse_internal.h"

namespace sl::kernels::detail {

void add_kquant_rows_avx512(kernel_table& k) {
    k.rows[static_cast<int>(dtype::q4_k)] = k.rows_cached[static_cast<int>(dtype::q4_k)] = rows<q4k>;
    k.rows[static_cast<int>(dtype::q6_k)] = k.rows_cached[static_cast<int>(dtype::q6_k)] = rows<q6k>;
}

void add_kquant_dots_avx512(sparse_table& k) {
    k.dots[static_cast<int>(dtype::q4_k)] = kquant_dots<q4k>;
    k.dots[static_cast<int>(dtype::q6_k)] = kquant_dots<q6k>;
}

}  // namespace sl::kernels::detail

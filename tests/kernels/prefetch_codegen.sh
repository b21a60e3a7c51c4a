#!/bin/bash
# Every streaming row kernel and sparse gather in the kernels library must contain software prefetches,
# and the sparse axpy kernels must prefetch into L2 (below).
# GCC models __builtin_prefetch as free of side effects: a prefetch-only helper that is not inlined becomes a
# const function whose calls are deleted as dead code. That silently removed all prefetches of the AVX-512
# VNNI Q4_K rows for several releases (Q4_K_M decode 2-11% slower); this check reads the generated code.
# Usage: prefetch_codegen.sh LIBRARY.a BUILD_TYPE (unoptimised Debug builds keep helpers out of line: skipped)
set -euo pipefail
lib=$1
case "${2:-}" in
    Release | RelWithDebInfo | MinSizeRel) ;;
    *) echo "SKIP: build type '${2:-}' is not optimised"; exit 77 ;;
esac
command -v objdump >/dev/null || { echo "SKIP: objdump not found"; exit 77; }
# "count name" per function whose name marks it as a streaming kernel (rows<T>, rows_driver<1, ...>,
# gather_dots<...>); the scalar reference (rows_unpacked, rows_q4_0, ...) and the L1-resident variants
# (rows_driver<4, ...>) do not prefetch by design and do not match.
table=$(objdump -d --no-show-raw-insn -C "$lib" |
    awk '/^[0-9a-f]+ <.*>:$/ { if (name != "") print n " " name; name = $0; n = 0; next }
         /prefetch/ { n++ }
         END { if (name != "") print n " " name }' |
    grep -E '::rows<|::rows_driver<1,|::gather_dots<' || true)
total=$(grep -c . <<<"$table" || true)
q4k=$(grep -c 'rows<sl::kernels::detail::(anonymous namespace)::q4k>' <<<"$table" || true)
missing=$(grep -E '^0 ' <<<"$table" || true)
echo "streaming kernels found: $total (Q4_K rows: $q4k)"
if [ "$total" -lt 20 ] || [ "$q4k" -lt 1 ]; then
    echo "FAIL: expected at least 20 streaming kernels and the Q4_K rows in $lib (did the names change?)"
    exit 1
fi
if [ -n "$missing" ]; then
    echo "FAIL: streaming kernels without a single prefetch instruction:"
    echo "$missing" | cut -c1-300
    exit 1
fi
# The sparse axpy kernels (input-sparse float rows, and Q8_0/Q4_0 rows without the integer chunks)
# prefetch the next listed rows into L2: scattered rows prefetched into L1 filled its miss buffers (the
# AVX-512 file kept prefetcht0 for six stops after the AVX2 one moved: F32 input-sparse ran 20-30% slower).
axpy=$(objdump -d --no-show-raw-insn -C "$lib" |
    awk '/^[0-9a-f]+ <.*>:$/ { if (name != "") print t0 " " t1 " " name; name = $0; t0 = 0; t1 = 0; next }
         /prefetcht0/ { t0++ }
         /prefetcht1/ { t1++ }
         END { if (name != "") print t0 " " t1 " " name }' |
    grep -E '::axpy_dispatch<' || true)
echo "sparse axpy kernels found: $(grep -c . <<<"$axpy" || true)"
if [ "$(grep -c . <<<"$axpy" || true)" -lt 5 ]; then
    echo "FAIL: expected the sparse axpy kernels (axpy_dispatch<...>) in $lib (did the names change?)"
    exit 1
fi
wrong=$(awk '$1 > 0 || $2 == 0' <<<"$axpy")
if [ -n "$wrong" ]; then
    echo "FAIL: sparse axpy kernels that prefetch into L1 or not into L2 (prefetcht0 count, prefetcht1 count):"
    echo "$wrong" | cut -c1-300
    exit 1
fi
echo "OK: every streaming kernel prefetches, the sparse axpy kernels into L2"

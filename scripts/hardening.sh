#!/usr/bin/env bash
# Hardening stage of the test suite (scripts/test.sh runs it after the Release suite): the unit and model
# tests built with ASan + UBSan (preset asan), then every libFuzzer target for a short fixed time on seed
# corpora made from the real fixtures (preset fuzz, clang-14, ctest label fuzz). Extra arguments go to
# both ctest calls. SPARSELENS_FUZZ_SECONDS sets the time per fuzz target (default 20).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sl_install_deps
status=0
t0=$SECONDS
sl_build asan
sl_log "asan build: $((SECONDS - t0)) s"
t0=$SECONDS
ctest --preset asan -L 'unit|model' -j "$(nproc)" "$@" || status=1
sl_log "asan unit+model tests: $((SECONDS - t0)) s"

t0=$SECONDS
dir="$SL_ROOT/build/fuzz"
if [ ! -f "$dir/build.ninja" ]; then
  sl_log "configuring (fuzz)"
  cmake --preset fuzz -S "$SL_ROOT" -DSPARSELENS_SHARED_DIR="$SL_SHARED" >/dev/null
fi
[ -n "${SPARSELENS_FUZZ_SECONDS:-}" ] && cmake "$dir" -DSPARSELENS_FUZZ_SECONDS="$SPARSELENS_FUZZ_SECONDS" >/dev/null
sl_log "building (fuzz)"
cmake --build "$dir" -j "$(nproc)" --target sl_fuzz
sl_log "fuzz build: $((SECONDS - t0)) s"
t0=$SECONDS
ctest --preset fuzz "$@" || status=1
sl_log "fuzz runs: $((SECONDS - t0)) s"
exit $status

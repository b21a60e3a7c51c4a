#!/usr/bin/env bash
# One command: install what is missing, build (Release, Ninja) and run the whole ctest suite.
# Tests that need ../shared skip cleanly when it is absent. Extra arguments go to ctest (e.g. -L unit).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sl_install_deps
sl_build release
ctest --test-dir "$SL_ROOT/build/release" --output-on-failure -j "$(nproc)" "$@"

#!/usr/bin/env bash
# One command: install what is missing, build (Release, Ninja) and run the whole ctest suite.
# Tests that need ../shared skip cleanly when it is absent. Extra arguments go to ctest (e.g. -L unit).
# The GUI tests (label gui) need an X server with OpenGL: without a DISPLAY the run goes under one
# xvfb-run virtual screen (Mesa's software OpenGL), so they use the xcb platform as on a desktop.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sl_install_deps
sl_install_peer
sl_build release
run=(ctest --test-dir "$SL_ROOT/build/release" --output-on-failure -j "$(nproc)" "$@")
if [[ -z "${DISPLAY:-}" ]] && command -v xvfb-run >/dev/null; then
  exec xvfb-run -a -s "-screen 0 1600x1000x24" "${run[@]}"
fi
exec "${run[@]}"

#!/usr/bin/env bash
# One command: install what is missing, build (Release, Ninja) and run the whole ctest suite.
# Tests that need ../shared skip cleanly when it is absent. Extra arguments go to ctest (e.g. -L unit).
# The GUI tests (label gui) need an X server with OpenGL: without a DISPLAY the run goes under one
# xvfb-run virtual screen (Mesa's software OpenGL), so they use the xcb platform as on a desktop.
# -noreset: by default the X server resets whenever its last client disconnects, and a test that
# connects during that reset fails with "could not connect to display" (seen in CI; 3 of 300
# connections of two parallel xdpyinfo loops fail without it, none with it).
# Without arguments (the full suite, what CI runs) the hardening stage follows: ASan + UBSan unit and
# model tests and short libFuzzer runs (scripts/hardening.sh); SPARSELENS_HARDENING=0 skips it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sl_install_deps
sl_install_peer
sl_build release
run=(ctest --test-dir "$SL_ROOT/build/release" --output-on-failure -j "$(nproc)" "$@")
if [[ -z "${DISPLAY:-}" ]] && command -v xvfb-run >/dev/null; then
  run=(xvfb-run -a -s "-screen 0 1600x1000x24 -noreset" "${run[@]}")
fi
if [[ $# -gt 0 || "${SPARSELENS_HARDENING:-1}" == "0" ]]; then
  exec "${run[@]}"
fi
status=0
"${run[@]}" || status=1
bash "$SL_ROOT/scripts/hardening.sh" || status=1
exit $status

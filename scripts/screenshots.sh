#!/usr/bin/env bash
# Renders every main view of the desktop application under Xvfb to PNG files (docs/screenshots/ by
# default; README.md and docs/gui.md show them): installs what is missing, builds Release and runs
# `sparselens-gui MODEL --screenshots DIR` on the demo model, a fixed tour (DIP-CA, one generation, a small
# sweep into a throw-away session) in a 1600x1000 window with fresh settings.
#   --out DIR         write the PNGs there instead of docs/screenshots
#   --build-dir DIR   use the sparselens-gui of an existing build (no install, no Release build)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
out="$SL_ROOT/docs/screenshots"
build=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) sl_log "unknown option: $1 (see --help)"; exit 2 ;;
  esac
done
if [[ -z "$build" ]]; then
  sl_install_deps
  sl_build release
  build="$SL_ROOT/build/release"
fi
sl_demo_model
SL_MODEL="$(realpath "$SL_MODEL")"  # the Model panel shows the path
SL_TOKENIZER="$(realpath "$SL_TOKENIZER")"
gui="$build/app/sparselens-gui"
if [[ ! -x "$gui" ]]; then
  sl_log "$gui was not built (Qt 6 missing?)"
  exit 1
fi
if ! command -v xvfb-run >/dev/null; then
  sl_log "xvfb-run not found (Debian package xvfb)"
  exit 1
fi
sl_log "screenshot tour on $SL_MODEL -> $out"
# The GUI prints one written file per line on stdout; progress and skipped views go to stderr.
files="$(xvfb-run -a -s "-screen 0 1600x1000x24 -noreset" "$gui" "$SL_MODEL" --tokenizer "$SL_TOKENIZER" --screenshots "$out")"
sl_log "wrote $(printf '%s\n' "$files" | grep -c .) files:"
while IFS= read -r f; do
  [[ -n "$f" ]] && printf '  %s  %s bytes\n' "${f#"$SL_ROOT"/}" "$(stat -c %s "$f")"
done <<< "$files"

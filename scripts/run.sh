#!/usr/bin/env bash
# One command: install what is missing, build (Release, Ninja) and open the desktop application on the
# demo model with the default prompt (it generates once loaded). Extra arguments go to sparselens-gui
# (e.g. --prompt "The cat"). `scripts/run.sh --cli ...` runs the headless `sparselens generate` instead
# (extra arguments go to it: --prompt "The cat" --temp 0.8 --steps 200); so does a machine without a display.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cli=0
if [[ "${1:-}" == "--cli" ]]; then
  cli=1
  shift
fi
sl_install_deps
sl_build release
sl_demo_model
sl_log "model $SL_MODEL"
gui="$SL_ROOT/build/release/app/sparselens-gui"
if [[ $cli -eq 0 && -z "${DISPLAY:-}" && -z "${WAYLAND_DISPLAY:-}" ]]; then
  sl_log "no display (DISPLAY is not set): running the command-line generator instead of the GUI"
  cli=1
fi
if [[ $cli -eq 0 && ! -x "$gui" ]]; then
  sl_log "the GUI was not built (Qt 6 missing?): running the command-line generator instead"
  cli=1
fi
if [[ $cli -eq 0 ]]; then
  exec "$gui" "$SL_MODEL" --tokenizer "$SL_TOKENIZER" --generate "$@"
fi
# Defaults for what the caller did not set (the CLI accepts each option once).
defaults=()
[[ " $* " == *" --prompt "* || " $* " == *" -i "* ]] || defaults+=(--prompt "Once upon a time")
[[ " $* " == *" --temp "* || " $* " == *" -t "* ]] || defaults+=(--temp 0.8)
[[ " $* " == *" --steps "* || " $* " == *" -n "* ]] || defaults+=(--steps 200)
exec "$SL_ROOT/build/release/app/sparselens" generate "$SL_MODEL" --tokenizer "$SL_TOKENIZER" "${defaults[@]}" "$@"

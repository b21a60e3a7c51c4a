#!/usr/bin/env bash
# One command: install what is missing, build (Release, Ninja) and generate from the demo model.
# Extra arguments go to `sparselens generate` (e.g. --prompt "The cat" --temp 0.8 --steps 200).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sl_install_deps
sl_build release
sl_demo_model
sl_log "model $SL_MODEL"
# Defaults for what the caller did not set (the CLI accepts each option once).
defaults=()
[[ " $* " == *" --prompt "* || " $* " == *" -i "* ]] || defaults+=(--prompt "Once upon a time")
[[ " $* " == *" --temp "* || " $* " == *" -t "* ]] || defaults+=(--temp 0.8)
[[ " $* " == *" --steps "* || " $* " == *" -n "* ]] || defaults+=(--steps 200)
exec "$SL_ROOT/build/release/app/sparselens" generate "$SL_MODEL" --tokenizer "$SL_TOKENIZER" "${defaults[@]}" "$@"

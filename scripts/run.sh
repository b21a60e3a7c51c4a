#!/usr/bin/env bash
# One command: install what is missing, build (Release, Ninja) and generate from the demo model.
# Extra arguments go to `sparselens generate` (e.g. --prompt "The cat" --temp 0.8 --steps 200).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sl_install_deps
sl_build release
sl_demo_model
sl_log "model $SL_MODEL"
exec "$SL_ROOT/build/release/app/sparselens" generate "$SL_MODEL" --tokenizer "$SL_TOKENIZER" \
  --prompt "Once upon a time" --temp 0.8 --steps 200 "$@"

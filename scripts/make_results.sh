#!/usr/bin/env bash
# Regenerates docs/results.md: calibrate stories260K, sweep every method at 30-90% MLP density, render.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sl_build release
M="$SL_SHARED/models/stories260K_f32.bin"
TOK="$SL_SHARED/models/tok512.bin"
TEXT="$SL_SHARED/text/stories260K_samples.txt"
[ -f "$M" ] || { sl_log "needs $M"; exit 2; }
B="$SL_ROOT/build/release/app/sparselens"
OUT="$SL_ROOT/build/results"
mkdir -p "$OUT"
"$B" calibrate "$M" "$TEXT" -z "$TOK" --out "$OUT/stories260K.calib" --max-tokens 32768
METHODS=$("$B" eval --help | sed -n 's/.*--method.*{\(.*\)}.*/\1/p' | tr -d ' ' | sed 's/^dense,//')
[ -n "$METHODS" ] || METHODS="glu,gate,up,dip,dip-ca"
# Calibrated on the first 32768 tokens, evaluated on held-out windows from token 40000 on.
"$B" sweep "$M" "$TEXT" -z "$TOK" --calib "$OUT/stories260K.calib" --methods "$METHODS" \
  --densities 0.3,0.4,0.5,0.6,0.7,0.8,0.9 --windows 64 --offset 40000 --out "$OUT/sweep.json" --csv "$OUT/sweep.csv"
# Hand-measured sections (from the marker line on) survive the regeneration.
MARK='<!-- hand-measured (kept when regenerated) -->'
KEEP="$OUT/hand_measured.md"
: > "$KEEP"
[ -f "$SL_ROOT/docs/results.md" ] && sed -n "/^$MARK\$/,\$p" "$SL_ROOT/docs/results.md" > "$KEEP"
python3 "$SL_ROOT/scripts/results_table.py" "$OUT/sweep.json" "$SL_ROOT/docs/results.md"
if [ -s "$KEEP" ]; then printf '\n' >> "$SL_ROOT/docs/results.md"; cat "$KEEP" >> "$SL_ROOT/docs/results.md"; fi
sl_log "wrote docs/results.md"

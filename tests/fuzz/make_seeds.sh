#!/usr/bin/env bash
# Builds the fuzz seed corpora (ctest fixture `fuzz_seeds`): one folder per fuzz target under CORPUS,
# from the real fixtures (../shared models, tokenizers and texts; assets/ device profiles) and from files
# our own writers produce (sl_fuzz_seed_writer). Nothing here is committed; it is rebuilt on every run.
# Usage: make_seeds.sh CORPUS SHARED_DIR SOURCE_DIR SEED_WRITER
set -euo pipefail
corpus="$1" shared="$2" src="$3" writer="$4"
rm -rf "$corpus"
mkdir -p "$corpus"/{fuzz_gguf,fuzz_llama2c,fuzz_tokenizer,fuzz_tokenizer_encode,fuzz_calibration,fuzz_trace,fuzz_deploy_config,fuzz_session}

"$writer" "$corpus" "$shared" "$src/assets"

models="$shared/models"
if [[ -d "$models" ]]; then
  cp "$models"/gguf/*.gguf "$corpus/fuzz_gguf/" 2>/dev/null || true
  cp "$models"/stories260K_f32.bin "$models"/stories260K_q80.bin "$corpus/fuzz_llama2c/" 2>/dev/null || true
  cp "$models"/tok512.bin "$models"/tokenizer_llama2_32k.bin "$corpus/fuzz_tokenizer/" 2>/dev/null || true
else
  echo "make_seeds.sh: $models absent: only our own seeds" >&2
fi
cp "$src"/assets/devices/*.json "$src"/assets/models/*.json "$corpus/fuzz_deploy_config/"
# Inputs that once crashed a target (tests/fuzz/regressions/<target>/): every run replays them first.
for d in "$src"/tests/fuzz/regressions/*/; do
  if [[ -d "$d" ]]; then cp "$d"* "$corpus/$(basename "$d")/"; fi
done

# Text seeds: the first byte picks the vocabulary (and BOS/EOS), the rest is the text.
enc="$corpus/fuzz_tokenizer_encode"
i=0
add_text() {
  { printf "\\x$(printf %02x $((i % 64)))"; printf '%s' "$1"; } > "$enc/text_$i"
  i=$((i + 1))
}
add_text "Once upon a time, there was a little girl named Lily."
add_text $'  leading spaces,\ttabs\nand newlines\r\n'
add_text $'caf\xc3\xa9 na\xc3\xafve \xe2\x80\x94 \xf0\x9f\x99\x82 \xe4\xb8\xad\xe6\x96\x87'
add_text $'broken \xc3 utf-8 \xff\xfe \xe2\x82 \xf0\x9f end'
add_text "<s></s><unk><0x41> special-looking text"
if [[ -d "$shared/text" ]]; then
  for f in "$shared"/text/*.txt; do
    head -c 600 "$f" > "$enc/tmp" && add_text "$(cat "$enc/tmp")"
    tail -c 400 "$f" > "$enc/tmp" && add_text "$(cat "$enc/tmp")"
  done
  rm -f "$enc/tmp"
fi
for d in "$corpus"/*/; do
  echo "$(basename "$d"): $(ls "$d" | wc -l) seeds, $(du -sk "$d" | cut -f1) KiB"
done

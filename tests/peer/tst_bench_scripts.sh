#!/usr/bin/env bash
# The speed scripts end to end on stories260K (their shape, not their numbers: a tiny model says nothing
# about speed): scripts/bench_vs_llamacpp.sh with --method and with --isa avx2, and scripts/bench_methods.sh,
# each with --json on this build's binaries; then a bad method name must stop each with one line naming it.
#   tst_bench_scripts.sh SOURCE_DIR BUILD_DIR SHARED_DIR     (exit 77: skipped, no fixture or no peer)
set -euo pipefail
src="$1" build="$2" shared="$3"
gguf="$shared/models/gguf/stories260K-Q8_0.gguf"
[ -f "$gguf" ] || { echo "skipped: $gguf is absent"; exit 77; }
[ -x "$build/tests/peer/sl-llama-peer" ] || { echo "skipped: the llama.cpp peer is not built"; exit 77; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

bash "$src/scripts/bench_vs_llamacpp.sh" --build-dir "$build" --rounds 2 --gen 4 --prompt 8 --method dip \
  --density 0.5 --json "$gguf" > "$tmp/vs.json"
bash "$src/scripts/bench_methods.sh" --build-dir "$build" --methods dip,glu --rounds 1 --gen 4 --reps 2 \
  --json "$gguf" > "$tmp/methods.json"
python3 - "$tmp/vs.json" "$tmp/methods.json" <<'PY'
import json, sys
vs = json.load(open(sys.argv[1]))
assert len(vs) == 1, vs
r = vs[0]
for k in ("ours_decode", "llamacpp_decode", "ours_prefill", "llamacpp_prefill", "method_decode"):
    assert r[k] > 0, (k, r)
assert len(r["method_decode_all"]) == 2 and len(r["ours_decode_all"]) == 2, r
assert r["method"] == "dip" and r["density"] == 0.5, r
assert abs(r["method_decode_ratio"] - r["method_decode"] / r["llamacpp_decode"]) < 1e-9, r
cells = json.load(open(sys.argv[2]))
text = json.dumps(cells)
assert "dip" in text and "glu" in text, text[:400]
print("ok:", round(r["decode_ratio"], 2), round(r["method_decode_ratio"], 2))
PY

# --isa avx2: ours on its AVX2 kernels, llama.cpp offered only its haswell CPU variant (AVX2 CPUs only).
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  bash "$src/scripts/bench_vs_llamacpp.sh" --build-dir "$build" --rounds 1 --gen 4 --prompt 8 --isa avx2 --json \
    "$gguf" > "$tmp/avx2.json"
  python3 - "$tmp/avx2.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
assert r["ours_isa"] == "avx2" and r["llamacpp_cpu_variants"] == "haswell", r
assert r["ours_decode"] > 0 and r["llamacpp_decode"] > 0, r
print("ok: --isa avx2")
PY
fi

for script in bench_vs_llamacpp bench_methods; do
  flag=--method
  [ "$script" = bench_methods ] && flag=--methods
  if bash "$src/scripts/$script.sh" --build-dir "$build" --rounds 1 --gen 2 "$flag" nosuch "$gguf" \
       > "$tmp/out" 2> "$tmp/err"; then
    echo "FAIL: $script accepted an unknown method"; exit 1
  fi
  [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q "nosuch" "$tmp/err" || { echo "FAIL: $script error:"; cat "$tmp/err"; exit 1; }
done
echo "ok: unknown methods stop both scripts with one line"

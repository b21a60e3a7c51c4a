#!/usr/bin/env bash
# End-to-end decode speed-up of sparsity methods over dense on GGUF files, against two ideals: the bytes
# the method skipped (the issue-12 target: >= 90% of it) and the same ideal at the access pattern of the
# rows its kernels read (`bench --stages`: those rows replayed as plain reads against dense's whole
# matrices). Each cell is `sparselens bench FILE --method M --density D --stages --json` (dense and the
# method alternate token by token inside it); rounds repeat the whole grid, and the table gives each
# cell's median share and its range over the rounds.
#
#   scripts/bench_methods.sh [--methods dip,cats,chess,teal,griffin] [--density 0.5] [--rounds 3]
#                            [--threads 2] [--gen 16] [--reps 5] [--json] [--build-dir DIR] FILE.gguf...
#
# FILE.calib (or FILE without .gguf + .calib) beside a file is passed as its calibration (`sparselens
# calibrate FILE TEXT` writes the first; CATS, CHESS, TEAL and GRIFFIN need one). Needs a release build
# (build/release, or --build-dir). Never run it while something else compiles: the numbers would be noise.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

methods=dip,cats,chess,teal,griffin density=0.5 rounds=3 threads=2 gen=16 reps=5 json=0 build="$SL_ROOT/build/release"
files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --methods) methods="$2"; shift 2 ;;
    --density) density="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --gen) gen="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --json) json=1; shift ;;
    --build-dir) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) files+=("$1"); shift ;;
  esac
done
[ ${#files[@]} -gt 0 ] || { echo "bench_methods: no GGUF file given" >&2; exit 2; }
ours="$build/app/sparselens"
[ -x "$ours" ] || { echo "bench_methods: $ours is missing: build first (scripts/test.sh)" >&2; exit 2; }

pairs=()  # each file, then its calibration or ""
for f in "${files[@]}"; do pairs+=("$f" "$(sl_calib_for "$f")"); done

python3 - "$ours" "$methods" "$density" "$rounds" "$threads" "$gen" "$reps" "$json" "${pairs[@]}" <<'EOF'
import json, os, statistics, subprocess, sys
ours, methods, density, rounds, threads, gen, reps, as_json = sys.argv[1:9]
calibs = dict(zip(sys.argv[9::2], sys.argv[10::2]))
files, methods, rounds = sys.argv[9::2], methods.split(","), int(rounds)

def cell(path, method):
    cmd = [ours, "bench", path, "--method", method, "--density", density, "--threads", threads, "--gen", gen,
           "--prompt-len", "8", "--reps", reps, "--stages", "--json"]
    if calibs[path]:
        cmd += ["--calib", calibs[path]]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench_methods: {' '.join(cmd)} failed: {r.stderr.strip()}")
    m = json.loads(r.stdout)["method"]
    return {"speedup": m["speedup"], "ideal": m["ideal_speedup"], "share": m["fraction_of_ideal"],
            "pattern_ideal": m["pattern_ideal_speedup"], "pattern_share": m["fraction_of_pattern_ideal"]}

runs = {(f, m): [] for f in files for m in methods}
for r in range(rounds):
    for f in files:
        for m in methods:
            runs[(f, m)].append(cell(f, m))
    print(f"round {r + 1} of {rounds} done", file=sys.stderr)

def summary(xs, key):
    v = [x[key] for x in xs]
    return {"median": statistics.median(v), "min": min(v), "max": max(v)}

out = [{"file": f, "method": m, **{k: summary(xs, k) for k in xs[0]}} for (f, m), xs in runs.items()]
if as_json == "1":
    print(json.dumps({"density": float(density), "threads": int(threads), "rounds": rounds, "cells": out}, indent=1))
    sys.exit(0)
print(f"decode at {float(density):.0%} MLP density, {threads} threads, {rounds} rounds: median share (range) of")
print("the ideal speed-up from the bytes read, and of that ideal at the access pattern of the rows read")
print(f"{'file':<28} {'method':<8} {'speed-up':>8} {'ideal':>6} {'share':>13} {'at pattern':>10} {'share':>13}")
for c in out:
    pct = lambda s: f"{100 * s['median']:.0f}% ({100 * s['min']:.0f}-{100 * s['max']:.0f})"
    print(f"{os.path.basename(c['file']):<28} {c['method']:<8} {c['speedup']['median']:>7.2f}x"
          f" {c['ideal']['median']:>5.2f}x {pct(c['share']):>13} {c['pattern_ideal']['median']:>9.2f}x"
          f" {pct(c['pattern_share']):>13}")
EOF

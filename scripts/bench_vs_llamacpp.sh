#!/usr/bin/env bash
# Dense decode and prefill speed of SparseLens next to llama.cpp (the pinned peer) on the same GGUF files,
# same machine, same threads, in one command. Runs alternate (ours, theirs, ours, ...) so drifting load
# hits both alike; prints the median of each side and their ratio.
#
#   scripts/bench_vs_llamacpp.sh [--threads 2] [--rounds 6] [--prompt 128] [--gen 32] [--json]
#                                [--method M [--density 0.5]] [--isa avx2] [--build-dir DIR] FILE.gguf...
#
# --isa avx2 runs both on AVX2 kernels, as on a laptop without AVX-512: ours with SPARSELENS_ISA=avx2,
# llama.cpp with only its "haswell" CPU variant (AVX2 + FMA + F16C) on offer instead of the best one.
#
# --method also decodes with that sparsity method (at --density, in the same process as our dense run)
# and sets its speed beside llama.cpp's dense decode: what sparsity buys over the engine a user would
# pick instead. FILE.calib (or FILE without .gguf + .calib) beside a file is passed as its calibration.
# Needs a release build (build/release, made by scripts/test.sh or scripts/run.sh, or --build-dir) and the
# peer (.peer/, installed by scripts/test.sh). Never run it while something else compiles: the numbers
# would be noise.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

threads=2 rounds=6 prompt=128 gen=32 json=0 method="" density=0.5 isa="" build="$SL_ROOT/build/release" files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --prompt) prompt="$2"; shift 2 ;;
    --gen) gen="$2"; shift 2 ;;
    --json) json=1; shift ;;
    --method) method="$2"; shift 2 ;;
    --density) density="$2"; shift 2 ;;
    --isa) isa="$2"; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) files+=("$1"); shift ;;
  esac
done
[ ${#files[@]} -gt 0 ] || { echo "bench_vs_llamacpp: no GGUF file given" >&2; exit 2; }
ours="$build/app/sparselens"
peer="$build/tests/peer/sl-llama-peer"
[ -x "$ours" ] || { echo "bench_vs_llamacpp: $ours is missing: build first (scripts/test.sh)" >&2; exit 2; }
[ -x "$peer" ] || { echo "bench_vs_llamacpp: $peer is missing: the llama.cpp peer is not built (scripts/test.sh installs it)" >&2; exit 2; }
# Ours re-execs itself with OMP_WAIT_POLICY=passive and a short spin when idle (its default); llama.cpp runs with its own defaults
# (its CPU backend uses OpenMP too, and a user would not set the variable for it).
unset OMP_WAIT_POLICY
case "$isa" in
  "") ;;
  avx2)
    # The peer loads every CPU variant in SL_PEER_LIB_DIR and picks the best: offer it only haswell's.
    variants="$SL_PEER_DIR/lib"  # sl_install_peer's link to the package's CPU variants
    [ -f "$variants/libggml-cpu-haswell.so" ] || { echo "bench_vs_llamacpp: no $variants/libggml-cpu-haswell.so" >&2; exit 2; }
    only=$(mktemp -d)
    trap 'rm -rf "$only"' EXIT
    ln -s "$variants/libggml-cpu-haswell.so" "$only/"
    export SPARSELENS_ISA=avx2 SL_PEER_LIB_DIR="$only"
    ;;
  *) echo "bench_vs_llamacpp: --isa takes avx2 (default: each side's best)" >&2; exit 2 ;;
esac

pairs=()  # each file, then its calibration or ""
for f in "${files[@]}"; do pairs+=("$f" "$(sl_calib_for "$f")"); done

python3 - "$ours" "$peer" "$threads" "$rounds" "$prompt" "$gen" "$json" "$method" "$density" "${pairs[@]}" <<'EOF'
import json, os, statistics, subprocess, sys
ours, peer, threads, rounds, prompt, gen, as_json, method, density = sys.argv[1:10]
calibs = dict(zip(sys.argv[10::2], sys.argv[11::2]))
files = sys.argv[10::2]
rounds = int(rounds)

def method_args(path):
    if not method:
        return []
    return ["--method", method, "--density", density] + (["--calib", calibs[path]] if calibs[path] else [])

def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench_vs_llamacpp: {' '.join(cmd)} failed: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
    return json.loads(p.stdout)

rows = []
for f in files:
    o_pp, o_tg, m_tg, t_pp, t_tg, spins, isas = [], [], [], [], [], [], set()
    for r in range(rounds):
        o = run([ours, "bench", f, "--threads", threads, "--prompt-len", prompt, "--gen", gen, "--reps", "1", "--json"]
                + method_args(f))
        t = run([peer, "bench", f, "--threads", threads, "--prompt", prompt, "--gen", gen, "--reps", "1"])
        o_pp.append(o["prefill_tokens_per_second"]); o_tg.append(o["decode_tokens_per_second"])
        if method:
            m_tg.append(o["method"]["decode_tokens_per_second"])
        spins.append(o.get("gomp_spincount", "?"))
        isas.add(o.get("isa", "?"))
        t_pp.append(t["prefill_tok_s"]); t_tg.append(t["decode_tok_s"])
    med = statistics.median
    rows.append({"file": f, "threads": int(threads), "rounds": rounds,
                 "ours_decode": med(o_tg), "llamacpp_decode": med(t_tg), "decode_ratio": med(o_tg) / med(t_tg),
                 "ours_prefill": med(o_pp), "llamacpp_prefill": med(t_pp), "prefill_ratio": med(o_pp) / med(t_pp),
                 "ours_decode_all": o_tg, "llamacpp_decode_all": t_tg, "ours_spin_counts": spins,
                 "ours_isa": ",".join(sorted(isas)),
                 "llamacpp_cpu_variants": "haswell" if os.environ.get("SPARSELENS_ISA") == "avx2" else "best"})
    if method:
        rows[-1].update({"method": method, "density": float(density), "method_decode": med(m_tg),
                         "method_decode_ratio": med(m_tg) / med(t_tg), "method_decode_all": m_tg})
if as_json == "1":
    print(json.dumps(rows, indent=1))
else:
    print(f"{'file':40s} {'decode tok/s ours':>18s} {'llama.cpp':>10s} {'ratio':>6s}   {'prefill-'+prompt+' ours':>18s} {'llama.cpp':>10s} {'ratio':>6s}")
    for r in rows:
        name = r["file"].rsplit("/", 1)[-1]
        print(f"{name:40s} {r['ours_decode']:18.2f} {r['llamacpp_decode']:10.2f} {r['decode_ratio']:6.2f}   "
              f"{r['ours_prefill']:18.1f} {r['llamacpp_prefill']:10.1f} {r['prefill_ratio']:6.2f}")
    if method:
        print()
        label = f"{method} at {float(density):g}"
        print(f"{'file':40s} {'decode tok/s ' + label:>24s} {'llama.cpp dense':>16s} {'ratio':>6s}")
        for r in rows:
            name = r["file"].rsplit("/", 1)[-1]
            print(f"{name:40s} {r['method_decode']:24.2f} {r['llamacpp_decode']:16.2f} {r['method_decode_ratio']:6.2f}")
    print(f"medians of {rounds} alternating rounds, {threads} threads"
          + (", both on AVX2 kernels (--isa avx2)" if os.environ.get("SPARSELENS_ISA") == "avx2" else ""))
    counts = sorted({s for r in rows for s in r["ours_spin_counts"]})
    print(f"ours: OMP_WAIT_POLICY=passive, GOMP_SPINCOUNT {', '.join(counts)} (10000 when the CPUs were idle at start; "
          f"'default' = no spin, docs/development.md)")
EOF

#!/usr/bin/env bash
# Issue 13's acceptance runs in one command: for each GGUF file, dense offload, DIP at 50% and DIP-CA at 50%
# (gamma 0.2), each under a budget of its resident part plus half of its pack's MLP bytes (--dram +50%),
# measured next to the simulator with the pack probed before and after every run (--probe). Rounds
# alternate the three configurations so drifting storage hits all alike; prints per configuration the
# medians of measured and simulated tok/s, their ratio, and bytes read per token (measured = simulated).
#
#   scripts/offload_acceptance.sh [--rounds 3] [--steps 48] [--work DIR] FILE.gguf...
#
# Writes configs and packs (0.5-0.9 GB per file) into --work (default /tmp/sparselens-offload): on the disk
# under test, not tmpfs (O_DIRECT). Needs a release build. Run it on a quiet machine: compute time is part
# of every token.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rounds=3 steps=48 work=/tmp/sparselens-offload files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) files+=("$(realpath "$1")"); shift ;;
  esac
done
[ ${#files[@]} -gt 0 ] || { echo "offload_acceptance: no GGUF file given" >&2; exit 2; }
B="$SL_ROOT/build/release/app/sparselens"
[ -x "$B" ] || { echo "offload_acceptance: $B is missing: build first (scripts/test.sh)" >&2; exit 2; }
T="$SL_SHARED/text/tinystories_sample.txt"
[ -f "$T" ] || { echo "offload_acceptance: $T is missing (../shared)" >&2; exit 2; }
mkdir -p "$work"

python3 - "$B" "$T" "$work" "$rounds" "$steps" "${files[@]}" <<'PY'
import json, os, statistics, subprocess, sys
B, T, work, rounds, steps = sys.argv[1:6]
files = sys.argv[6:]
rounds = int(rounds)
specs = [("dense", ["--method", "dense"]), ("dip", ["--method", "dip", "--density", "0.5"]),
         ("dip-ca", ["--method", "dip-ca", "--density", "0.5", "--gamma", "0.2"])]

def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"offload_acceptance: {' '.join(cmd)} failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
    return p.stdout

print(f"{'file':24} {'run':8} {'meas tok/s':>10} {'sim tok/s':>10} {'meas/sim':>9} {'all meas/sim':>24} {'B read/token':>13} {'=sim':>5} {'hit':>6}")
for f in files:
    name = os.path.basename(f)
    link = os.path.join(work, name)
    if not os.path.exists(link):
        os.symlink(f, link)
    for tag, args in specs:
        cfg = os.path.join(work, f"{name}.{tag}.json")
        if not os.path.exists(cfg):
            run([B, "config", "export", link, "--text", T, *args, "--device", "apple-a18", "--bits", "4",
                 "--context", "64", "--ctx", "32", "--windows", "1", "--sim-tokens", "8", "--out", cfg])
    for layout_of in ("dip", "dense"):  # dip and dip-ca share the dip pack
        cfg = os.path.join(work, f"{name}.{layout_of}.json")
        pack = link + (".dip.slpack" if layout_of == "dip" else ".bundle.slpack")
        if not os.path.exists(pack):
            run([B, "pack", link, "--config", cfg])
    res = {tag: [] for tag, _ in specs}
    for r in range(rounds):
        for tag, _ in specs:
            cfg = os.path.join(work, f"{name}.{tag}.json")
            out = run([B, "eval", link, T, "--config", cfg, "--offload", "--dram", "+50%", "--probe",
                       "-n", steps, "--json"])
            res[tag].append(json.loads(out)["offload"])
    med = statistics.median
    for tag, _ in specs:
        rs = res[tag]
        meas = [x["measured"]["tokens_per_s"] for x in rs]
        sim = [x["simulated"]["tokens_per_s_with_run_compute"] for x in rs]
        ratios = [m / s for m, s in zip(meas, sim)]
        same = all(x["measured"]["bytes_read_per_token"] == x["simulated"]["bytes_read_per_token"] for x in rs)
        print(f"{name:24} {tag:8} {med(meas):10.2f} {med(sim):10.2f} {med(ratios):9.2f} "
              f"{' '.join(f'{q:.2f}' for q in ratios):>24} {rs[0]['measured']['bytes_read_per_token']:13.0f} "
              f"{'yes' if same else 'NO':>5} {100 * rs[0]['measured']['hit_rate']:5.1f}%")
PY

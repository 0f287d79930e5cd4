#!/usr/bin/env bash
# The load-test rows of docs/performance.md: each workload run by kinformer
# with the library's defaults, by kinformer with the object arenas
# (`--object-arenas --whole-release`), by kube-rs and by client-go (no
# relist row: `--impl client-go` does not measure one), one after the other
# in one sitting, ROUNDS times (default 1). Each run writes its --json file
# to OUT (default /tmp/peers); the summary is printed at the end, one line
# per run (python3 reads the JSON).
#
#   benches/scripts/peers.sh [OUT] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-/tmp/peers}
rounds=${2:-1}
mkdir -p "$out"
cargo build --release -p xtask -q
xt=./target/release/xtask
configs=(
  "default:--impl kinformer"
  "arenas:--impl kinformer --object-arenas --whole-release"
  "kube-rs:--impl kube-rs"
  "client-go:--impl client-go"
)
workloads=(
  "typed-burst:--objects 100000 --burst 200000 --readers 0"
  "meta-burst:--objects 1000000 --metadata-only --transform skip-managed-fields --burst 400000 --readers 0"
  "typed-churn:--objects 100000 --churn 10000 --duration 10"
  "typed-relist:--objects 100000 --duration 5 --relist"
)
for r in $(seq 1 "$rounds"); do
  for w in "${workloads[@]}"; do
    for c in "${configs[@]}"; do
      name="${w%%:*}-${c%%:*}-$r"
      [[ $name == typed-relist-client-go-* ]] && continue
      # shellcheck disable=SC2086
      $xt loadtest ${w#*:} ${c#*:} --quiet --json "$out/$name.json" > "$out/$name.txt" 2>&1 \
        || echo "$name failed, see $out/$name.txt"
    done
  done
done
python3 - "$out" <<'PY'
import json, pathlib, sys
rows = sorted(pathlib.Path(sys.argv[1]).glob("*.json"))
print(f"{'run':32} {'sync s':>7} {'updates/s':>10} {'p99 ms':>7} {'peak MiB':>9} {'relist':>7} {'B/obj':>6} match")
for p in rows:
    j = json.loads(p.read_text())
    relist = j.get("relist_peak_ratio")
    print(f"{p.stem:32} {j['initial_sync_seconds']:7.2f} {j['updates_per_second']:10.0f} "
          f"{j['lag_p99_us'] / 1000:7.1f} {j['peak_rss_bytes'] / 2**20:9.1f} "
          f"{relist if relist is None else round(relist, 2)!s:>7} {j['bytes_per_object']:6} "
          f"{j['cache_matches_source']}")
PY

#!/usr/bin/env bash
# Load-test runs of several arms taken in turn, N rounds (odd rounds in the
# order given, even ones reversed), all with the same
# loadtest arguments: one line per run (arm, round, updates/s through the
# handler, initial sync s, peak RSS MiB, informer CPU s, whether the cache
# matched the server), then each arm's medians. An arm is
# LABEL=COMMAND, the command word-split (so it can set the environment):
#
#   rotate.sh 3 base=/tmp/xtask "off=env SOME_SWITCH=1 /tmp/xtask" -- --burst 200000
#
# usage: rotate.sh N ARM... -- [loadtest args...]
set -u
n=$1; shift
arms=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do arms+=("$1"); shift; done
[ $# -gt 0 ] && shift
out=$(mktemp); log=$(mktemp)
for r in $(seq 1 "$n"); do
  # Even rounds take the arms in reverse: on this kind of VM the run that
  # opens a round was faster often enough to bias a fixed order.
  order=("${arms[@]}")
  if [ $((r % 2)) -eq 0 ]; then
    order=(); for ((i=${#arms[@]}-1; i>=0; i--)); do order+=("${arms[i]}"); done
  fi
  for arm in "${order[@]}"; do
    label=${arm%%=*}; cmd=${arm#*=}
    # shellcheck disable=SC2086 # the command is word-split on purpose
    $cmd loadtest "$@" > "$out" 2>&1
    line="$label $r $(grep -E 'updates/s \(handler\)' "$out" | awk '{print $NF}')"
    line="$line $(grep 'initial sync' "$out" | awk '{print $3}')"
    line="$line $(grep '^peak RSS  ' "$out" | awk '{print $3}')"
    line="$line $(grep -E '^CPU +[0-9]' "$out" | awk '{print $2}')"
    line="$line $(grep 'cache matches' "$out" | awk '{print $NF}')"
    echo "$line" | tee -a "$log"
  done
done
python3 - "$log" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 5:
        continue
    rows.setdefault(f[0], []).append(f)
def med(fs, i):
    try:
        return statistics.median(float(x[i].rstrip('s%')) for x in fs)
    except (ValueError, IndexError):
        return float('nan')
print(f"{'arm':16} {'runs':>4} {'updates/s':>10} {'sync s':>7} {'peak MiB':>9} {'CPU s':>6}")
for label, fs in rows.items():
    print(f"{label:16} {len(fs):4} {med(fs, 2):10.0f} {med(fs, 3):7.2f} {med(fs, 4):9.0f} {med(fs, 5):6.1f}")
PY
rm -f "$out" "$log"

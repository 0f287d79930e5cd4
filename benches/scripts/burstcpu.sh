#!/bin/bash
# CPU per update of each thread group over a whole `--burst` release: the
# ticks (1/100 s, utime + stime from /proc/<pid>/task/*/stat) of every
# thread of the load test and of the simulator, from the load test's
# `released:` line (printed as it releases the held events, after the
# simulator's commit and the sync) until the decode threads stop working,
# divided by N.
#
# usage: burstcpu.sh XTASK N [loadtest args, with --burst N...]
# The simulator is found by the name in KINFORMER_SIM_BINARY, else
# `kinformer-sim`.
set -u
X=$1; shift; N=$1; shift
log=$(mktemp); a=$(mktemp); b=$(mktemp); t=$(mktemp)
"$X" loadtest "$@" > "$log" 2>&1 &
lt=$!
while ! grep -q "^released:" "$log" 2>/dev/null; do sleep 0.01; kill -0 $lt 2>/dev/null || break; done
# One awk per sample over every thread's stat (field 2 is "(comm)"; these
# thread names have no spaces): forking per thread cost the machine ~0.25
# cores while sampling every 0.25 s.
ticks_of() { awk -v p="($1" 'index($2, p) == 1 {s += $14 + $15} END {print s + 0}' /proc/$lt/task/*/stat 2>/dev/null; }
sim=$(pgrep -f "${KINFORMER_SIM_BINARY:-kinformer-sim}" | head -1)
snap() {
  for p in $lt $sim; do
    n=x; [ "$p" = "$sim" ] && n=sim
    awk -v n="$n" '{c = $2; gsub(/[()]/, "", c); sub(/[0-9]*$/, "", c); a[n ":" c] += $14 + $15}
      END {for (k in a) print k, a[k]}' /proc/$p/task/*/stat 2>/dev/null
  done | sort
}
cpustat() { head -1 /proc/stat; }
snap > "$a"; t0=$(date +%s.%N); c0=$(cpustat)
prev=$(ticks_of kinformer-decod); snap > "$b"; t1=$(date +%s.%N); c1=$(cpustat)
while sleep 0.25; do
  cur=$(ticks_of kinformer-decod); [ "$cur" -le "$prev" ] && break; prev=$cur
  snap > "$t"; grep -q "kinformer-decod" "$t" || break
  cp "$t" "$b"; t1=$(date +%s.%N); c1=$(cpustat)
done
echo "window $(echo "$t1 - $t0" | bc) s"
# The whole machine over the same window, from /proc/stat's first line:
# idle (with iowait), time stolen by the hypervisor, and interrupts
# (softirq: the loopback network's receive path, mostly).
echo "$c0 $c1" | awk -v n="$N" '{
  d["idle"] = ($16 + $17) - ($5 + $6); d["steal"] = $20 - $9; d["irq"] = ($18 + $19) - ($7 + $8)
  d["user+system"] = ($13 + $14 + $15) - ($2 + $3 + $4)
  for (k in d) printf "machine:%s %d ticks %.2f us/update\n", k, d[k], d[k] * 10000 / n }'
join "$a" "$b" | awk -v n="$N" '{d=$3-$2; if (d>0) printf "%s %d ticks %.2f us/update\n", $1, d, d*10000/n}' | sort -k2 -nr
wait $lt
grep -E "updates/s|matches|deltas per batch" "$log"
rm -f "$log" "$a" "$b" "$t"

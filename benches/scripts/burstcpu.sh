#!/bin/bash
# CPU per update of each thread group over a whole `--burst` release: the
# ticks (1/100 s, utime + stime from /proc/<pid>/task/*/stat) of every
# thread of the load test and of the simulator, from the handler thread's
# first work until the decode threads stop working, divided by N.
#
# usage: burstcpu.sh XTASK N [loadtest args, with --burst N...]
# The simulator is found by the name in KINFORMER_SIM_BINARY, else
# `kinformer-sim`.
set -u
X=$1; shift; N=$1; shift
log=$(mktemp); a=$(mktemp); b=$(mktemp); t=$(mktemp)
"$X" loadtest "$@" > "$log" 2>&1 &
lt=$!
while ! grep -q "^burst:" "$log" 2>/dev/null; do sleep 0.05; kill -0 $lt 2>/dev/null || break; done
ticks_of() { for th in /proc/$lt/task/*; do grep -q "^$1" "$th/comm" 2>/dev/null && awk '{print $14+$15}' "$th/stat"; done | awk '{s+=$1} END {print s+0}'; }
prev=$(ticks_of pods-handler)
while sleep 0.02; do cur=$(ticks_of pods-handler); [ $((cur-prev)) -ge 1 ] && break; prev=$cur; done
sim=$(pgrep -f "${KINFORMER_SIM_BINARY:-kinformer-sim}" | head -1)
snap() {
  for p in $lt $sim; do
    n=x; [ "$p" = "$sim" ] && n=sim
    for th in /proc/$p/task/*; do
      echo "$n:$(tr ' ' '_' < "$th/comm" 2>/dev/null | sed 's/[0-9]*$//') $(awk '{print $14+$15}' "$th/stat" 2>/dev/null)"
    done
  done | awk '{a[$1]+=$2} END {for (k in a) print k, a[k]}' | sort
}
snap > "$a"; t0=$(date +%s.%N)
prev=$(ticks_of kinformer-decod); snap > "$b"; t1=$(date +%s.%N)
while sleep 0.25; do
  cur=$(ticks_of kinformer-decod); [ "$cur" -le "$prev" ] && break; prev=$cur
  snap > "$t"; grep -q "kinformer-decod" "$t" || break
  cp "$t" "$b"; t1=$(date +%s.%N)
done
echo "window $(echo "$t1 - $t0" | bc) s"
join "$a" "$b" | awk -v n="$N" '{d=$3-$2; if (d>0) printf "%s %d ticks %.2f us/update\n", $1, d, d*10000/n}' | sort -k2 -nr
wait $lt
grep -E "updates/s|matches" "$log"
rm -f "$log" "$a" "$b" "$t"

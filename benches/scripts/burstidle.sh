#!/bin/bash
# Where a burst's idle CPU time sits: `perf sched record` over 2 s of a
# `--burst` release (from 0.5 s after the load test's `released:` line),
# then, from `perf sched timehist`: each CPU's idle share, the idle periods
# by length, and which thread ended them (the thread that ran next on the
# idle CPU, with the idle time before it).
#
# usage: burstidle.sh XTASK OUT [loadtest args, with --burst N...]
# Writes OUT.log (the load test's output) and OUT.data (perf's record).
# The simulator is found beside XTASK (KINFORMER_SIM_BINARY overrides).
set -u
X=$1; O=$2; shift 2
export KINFORMER_SIM_BINARY=${KINFORMER_SIM_BINARY:-$(dirname "$X")/kinformer-sim}
"$X" loadtest "$@" > "$O.log" 2>&1 &
lt=$!
while ! grep -q "^released:" "$O.log" 2>/dev/null; do sleep 0.01; kill -0 $lt 2>/dev/null || break; done
sleep 0.5
perf sched record -o "$O.data" -- sleep 2 > /dev/null 2>&1
wait $lt
grep -E "updates/s|matches|deltas per batch" "$O.log"
perf sched timehist -i "$O.data" -s 2>/dev/null | sed -n '/Idle stats/,/^$/p'
# timehist -I rows: time, [cpu], task, wait, sched delay, run time (ms).
perf sched timehist -i "$O.data" -I 2>/dev/null | awk 'NR > 3 {
  cpu = $2
  if (pending[cpu] != "") {
    split($3, t, "["); ended[t[1]] += pending[cpu]; count[t[1]]++; pending[cpu] = ""
  }
  if ($3 == "<idle>") {
    ms = $NF; pending[cpu] = ms
    b = ms > 1 ? ">1ms" : ms > 0.2 ? "0.2-1ms" : ms > 0.05 ? "0.05-0.2ms" : "<0.05ms"
    n[b]++; s[b] += ms
  }
}
END {
  for (b in n) printf "idle periods %-10s %5d times, %8.1f ms\n", b, n[b], s[b]
  for (k in ended) printf "ended by %-18s %5d times, %8.1f ms idle before\n", k, count[k], ended[k]
}' | sort -k1,1 -k6,6nr

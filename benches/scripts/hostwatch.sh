#!/bin/bash
# What the hypervisor does to this VM while a command runs: every 100 ms,
# the CPU time it stole (/proc/stat `steal`, all CPUs, in cores over the
# interval), the guest's free page reporting passes and MB handed back to
# the host (where the kernel exports them), and the command's RSS. Lines
# with no steal and no reporting are left out unless ALL=1.
#
# usage: hostwatch.sh COMMAND [ARGS...]   (e.g. target/release/xtask loadtest ...)
# The command's own output goes to stderr.
set -u
P=/sys/module/page_reporting/parameters
"$@" 1>&2 &
pid=$!
read_state() {
  steal=$(awk '$1 == "cpu" {print $9}' /proc/stat)
  passes=$(cat $P/passes 2>/dev/null || echo 0)
  kib=$(cat $P/reported_kib 2>/dev/null || echo 0)
  rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status 2>/dev/null || echo 0)
  now=$(date +%s.%N)
}
read_state
t0=$now; s0=$steal; p0=$passes; k0=$kib; n0=$now
echo "seconds steal(cores) reporting-passes reported-MB rss-MB"
while kill -0 $pid 2>/dev/null; do
  sleep 0.1
  read_state
  awk -v t="$now" -v t0="$t0" -v n0="$n0" -v s="$steal" -v s0="$s0" -v p="$passes" -v p0="$p0" \
      -v k="$kib" -v k0="$k0" -v r="${rss:-0}" -v all="${ALL:-0}" 'BEGIN {
    st = (s - s0) / 100 / (t - n0); mb = (k - k0) / 1024
    if (all || st > 0 || p != p0 || mb > 0)
      printf "%7.2f %5.2f %d %6.0f %7.0f\n", t - t0, st, p - p0, mb, r / 1024 }'
  n0=$now; s0=$steal; p0=$passes; k0=$kib
done
wait $pid

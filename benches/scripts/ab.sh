#!/bin/bash
# Interleaved load-test pairs of two commands, each run with the same
# loadtest arguments; one line per run: updates/s delivered to the handler,
# initial sync (s), peak RSS (MiB), CPU, and whether the cache matched the
# source. A and B are word-split, so either can pin its simulator:
#
#   ab.sh 3 /tmp/xtask-a /tmp/xtask-b --burst 200000      # two informer builds
#   ab.sh 3 "env KINFORMER_SIM_BINARY=/tmp/sim-a /tmp/xtask" \
#           "env KINFORMER_SIM_BINARY=/tmp/sim-b /tmp/xtask" --burst 200000   # two simulators
#
# usage: ab.sh N A B [loadtest args...]
set -u
n=$1; a=$2; b=$3; shift 3
out=$(mktemp)
for _ in $(seq 1 "$n"); do
  for x in "$a" "$b"; do
    # shellcheck disable=SC2086 # the command is word-split on purpose
    $x loadtest "$@" > "$out" 2>&1
    echo "$x: $(grep -E 'updates/s \(handler\)' "$out" | awk '{print $NF}')" \
      "sync=$(grep 'initial sync' "$out" | awk '{print $3}')" \
      "peak=$(grep '^peak RSS  ' "$out" | awk '{print $3}')" \
      "cpu=$(grep '^CPU' "$out" | awk '{print $2}')" \
      "$(grep 'cache matches' "$out" | awk '{print $NF}')"
  done
done
rm -f "$out"

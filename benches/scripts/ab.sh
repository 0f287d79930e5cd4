#!/bin/bash
# Interleaved load-test pairs of two informer builds (copies of the release
# `xtask` binary), each run with the same arguments; one line per run:
# updates/s delivered to the handler, initial sync (s), peak RSS (MiB),
# CPU, and whether the cache matched the source.
#
# usage: ab.sh N XTASK_A XTASK_B [loadtest args...]
# Set KINFORMER_SIM_BINARY to pin the simulator for both.
set -u
n=$1; a=$2; b=$3; shift 3
out=$(mktemp)
for _ in $(seq 1 "$n"); do
  for x in "$a" "$b"; do
    "$x" loadtest "$@" > "$out" 2>&1
    echo "$(basename "$x") $(grep -E 'updates/s \(handler\)' "$out" | awk '{print $NF}')" \
      "sync=$(grep 'initial sync' "$out" | awk '{print $3}')" \
      "peak=$(grep '^peak RSS  ' "$out" | awk '{print $3}')" \
      "cpu=$(grep '^CPU' "$out" | awk '{print $2}')" \
      "$(grep 'cache matches' "$out" | awk '{print $NF}')"
  done
done
rm -f "$out"

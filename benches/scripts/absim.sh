#!/bin/bash
# Interleaved load-test pairs of two simulator binaries under one informer
# build (`/tmp/xt-cur` unless XTASK is set); output as ab.sh.
#
# usage: absim.sh N SIM_A SIM_B [loadtest args...]
set -u
n=$1; a=$2; b=$3; shift 3
xtask=${XTASK:-/tmp/xt-cur}
out=$(mktemp)
for _ in $(seq 1 "$n"); do
  for sim in "$a" "$b"; do
    KINFORMER_SIM_BINARY=$sim "$xtask" loadtest "$@" > "$out" 2>&1
    echo "$sim $(grep -E 'updates/s \(handler\)' "$out" | awk '{print $NF}')" \
      "sync=$(grep 'initial sync' "$out" | awk '{print $3}')" \
      "peak=$(grep '^peak RSS  ' "$out" | awk '{print $3}')" \
      "cpu=$(grep '^CPU' "$out" | awk '{print $2}')" \
      "$(grep 'cache matches' "$out" | awk '{print $NF}')"
  done
done
rm -f "$out"

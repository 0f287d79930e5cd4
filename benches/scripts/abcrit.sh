#!/bin/bash
# Interleaved runs of criterion bench binaries (built with `cargo bench
# --no-run` and copied aside, one per build): one line per bench and run,
# "binary bench-id median unit". Criterion's change lines are left out.
#
#   abcrit.sh 3 'indexer_updates/kinformer_batch4096/1000000$' /tmp/idx-a /tmp/idx-b
#
# usage: abcrit.sh N FILTER BINARY...
set -u
n=$1; f=$2; shift 2
for _ in $(seq 1 "$n"); do
  for x in "$@"; do
    "$x" --bench "$f" --noplot 2>&1 | awk -v b="$(basename "$x")" '
      /^[a-z_0-9]+\/[^ ]+/ { name = $1 }
      /time:/ && !/%/ {
        for (i = 1; i <= NF; i++) if ($i ~ /time:/) { print b, name, $(i + 3), $(i + 4); break }
      }'
  done
done

#!/bin/bash
# Interleaved burstcpu.sh runs of two load-test binaries over the 1M
# metadata-only burst.
#
# usage: bcpairs.sh N XTASK_A XTASK_B
set -u
n=$1; a=$2; b=$3
here=$(dirname "$0")
for _ in $(seq 1 "$n"); do
  for x in "$a" "$b"; do
    echo "== $x"
    "$here/burstcpu.sh" "$x" 1000000 --objects 1000000 --metadata-only \
      --transform skip-managed-fields --burst 1000000 --readers 0 2>&1 |
      grep -E "window|us/update|updates/s"
  done
done

#!/bin/bash
# A call-graph profile (`perf record --call-graph dwarf`, 3 s) of the whole
# load-test process from the moment it releases a burst's held events.
# Read it per thread group with, e.g.:
#   perf report -i OUT.data --comm kinformer-decod --children -g none --stdio
#
# usage: burstperf.sh XTASK OUT [loadtest args, with --burst N...]
set -u
X=$1; shift; O=$1; shift
"$X" loadtest "$@" > "$O.log" 2>&1 &
lt=$!
while ! grep -q "^released:" "$O.log" 2>/dev/null; do sleep 0.01; kill -0 $lt 2>/dev/null || break; done
perf record -F 499 --call-graph dwarf,16384 -p $lt -o "$O.data" -- sleep 3 2>/dev/null
wait $lt
grep -E "updates/s|matches" "$O.log"

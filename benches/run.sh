#!/usr/bin/env bash
# A sequential benchmark run: criterion benches, then the load tests
# (kinformer, then kube-rs, same sim and workload), one after the other on
# an otherwise idle machine. Results go to $1 (default /tmp/bench): raw
# criterion lines and the load tests' --json files.
set -u
cd "$(dirname "$0")/.."
O=${1:-/tmp/bench}
mkdir -p "$O"
uptime > "$O/uptime-start.txt"
cargo build --release -p xtask -q
cargo bench -p kinformer-benches --bench memory 2>&1 | grep "^|" > "$O/memory.txt"
cargo bench -p kinformer-benches --bench indexer 2>&1 | grep -E "^indexer|time:|thrpt:" > "$O/indexer.txt"
cargo bench -p kinformer-benches --bench reads 2>&1 | grep -E "^reads|time:" > "$O/reads.txt"
cargo bench -p kinformer-benches --bench pipeline 2>&1 | grep -E "^core|time:|thrpt:" > "$O/pipeline.txt"
cargo bench -p kinformer-benches --bench decode 2>&1 | grep -E "^decode|time:|thrpt:" > "$O/decode.txt"
cargo bench -p kinformer-benches --bench drop 2>&1 | grep -E "^free|time:|thrpt:" > "$O/drop.txt"
for impl in kinformer kube-rs; do
  ./target/release/xtask loadtest --objects 100000 --duration 10 --relist --quiet --impl $impl --json "$O/lt-100k-$impl.json" > "$O/lt-100k-$impl.txt" 2>&1
done
for impl in kinformer kube-rs; do
  ./target/release/xtask loadtest --objects 1000000 --metadata-only --transform skip-managed-fields --duration 10 --relist --quiet --impl $impl --json "$O/lt-1m-$impl.json" > "$O/lt-1m-$impl.txt" 2>&1
done
# Updates/s delivered through a held backlog (the sim's cost taken out).
for impl in kinformer kube-rs; do
  ./target/release/xtask loadtest --objects 100000 --burst 200000 --readers 0 --quiet --impl $impl --json "$O/lt-burst-100k-$impl.json" > "$O/lt-burst-100k-$impl.txt" 2>&1
  ./target/release/xtask loadtest --objects 1000000 --metadata-only --transform skip-managed-fields --burst 400000 --readers 0 --quiet --impl $impl --json "$O/lt-burst-1m-$impl.json" > "$O/lt-burst-1m-$impl.txt" 2>&1
done
./target/release/xtask loadtest --objects 20000 --duration 20 --faults chaos --quiet --json "$O/lt-chaos.json" > "$O/lt-chaos.txt" 2>&1
uptime > "$O/uptime-end.txt"

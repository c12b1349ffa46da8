#!/usr/bin/env bash
# The main job: set up, build, then check, analyze and simulate the example systems.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
cargo build --release --workspace --exclude 'bulkhead-bench-*'
bulkhead=target/release/bulkhead
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for f in examples/*.yaml; do
  echo "== bulkhead check $f"
  "$bulkhead" check "$f"
done
echo "== bulkhead check --canonical examples/demos-simplified.yaml"
"$bulkhead" check --canonical examples/demos-simplified.yaml
echo "== bulkhead analyze examples/driveos.yaml"
"$bulkhead" analyze examples/driveos.yaml
echo "== bulkhead sim examples/driveos.yaml --for 1s"
"$bulkhead" sim examples/driveos.yaml --for 1s --trace "$out/driveos.json" --stats-json "$out/stats.json"
echo "== bulkhead sim examples/demos-window-schedule.yaml --for 400ms (schedule log)"
"$bulkhead" sim examples/demos-window-schedule.yaml --for 400ms --schedule-log "$out/schedule.jsonl"
cat "$out/schedule.jsonl"
if [ "$(id -u)" -eq 0 ]; then
  echo "== bulkhead run examples/demos-window-schedule.yaml --timeout 1s (real cgroups)"
  "$bulkhead" run examples/demos-window-schedule.yaml --timeout 1s --schedule-log "$out/run.jsonl"
  head -n 8 "$out/run.jsonl"
else
  echo "== skipping bulkhead run: it needs root (or a delegated cgroup, see docs/runtime.md)"
fi

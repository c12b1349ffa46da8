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
echo "== bulkhead report: that simulation as one page (Gantt chart, response times, latencies)"
mkdir -p target/demo
"$bulkhead" report "$out/driveos.json" -o target/demo/report.html --system examples/driveos.yaml
echo "== bulkhead analyze examples/modes.yaml (every mode and mode switch)"
"$bulkhead" analyze examples/modes.yaml | sed -n '/^modes:/,$p'
echo "== bulkhead sim examples/modes.yaml with three mode switches (the steps in the schedule log)"
"$bulkhead" sim examples/modes.yaml --for 1s --mode-switch 200ms:urban --mode-switch 600ms:highway \
  --mode-switch 800ms:urban --schedule-log "$out/modes.jsonl" | grep '^mode switch'
grep -E '"event":"(mode_request|interface_change|agent_request|agent_ack|mode_done)"' "$out/modes.jsonl" | tail -n 10
echo "== bulkhead sim examples/demos-window-schedule.yaml --for 400ms (schedule log)"
"$bulkhead" sim examples/demos-window-schedule.yaml --for 400ms --schedule-log "$out/schedule.jsonl"
cat "$out/schedule.jsonl"
if [ "$(id -u)" -eq 0 ]; then
  echo "== bulkhead run examples/demos-window-schedule.yaml --timeout 1s (real cgroups)"
  "$bulkhead" run examples/demos-window-schedule.yaml --timeout 1s --schedule-log "$out/run.jsonl"
  head -n 8 "$out/run.jsonl"
  echo "== the CAN gateway: bulkhead run examples/can-gateway.yaml while the RAV4 log is replayed"
  export PATH="$PWD/target/release:$PATH"
  "$bulkhead" can bus rav4 >/dev/null & bus=$!
  trap 'kill "$bus" 2>/dev/null || true; rm -rf "$out"' EXIT
  sleep 0.2
  "$bulkhead" run examples/can-gateway.yaml --timeout 4s --schedule-log "$out/can.jsonl" & run=$!
  sleep 1
  timeout 2 "$bulkhead" can replay crates/can/tests/data/comma2k19_rav4_seg40_excerpt.log.gz --bus rav4 || true
  wait "$run"
  kill "$bus"; wait "$bus" 2>/dev/null || true
  echo "== the gateway's counters at the end (frames to the cluster are dropped once its mapper exits)"
  for c in rx_forwarded rx_dropped tx_sent tx_denied; do
    grep "\"name\":\"cluster.$c\"" "$out/can.jsonl" | tail -n 1
  done
  echo "== the DriveOS vehicle in closed loop: bulkhead run examples/driveos.yaml --timeout 8s"
  echo "   (set speed 72 km/h, stepped to 90 km/h at 2 s; docs/vehicle.md)"
  echo "   while it runs, open the dashboard: http://127.0.0.1:8080/ (IC, /ivi, /monitor; docs/dashboard.md)"
  "$bulkhead" run examples/driveos.yaml --timeout 8s --schedule-log "$out/vehicle.jsonl" \
    >"$out/vehicle.out" 2>"$out/vehicle.err" || { cat "$out/vehicle.err"; exit 1; }
  "$bulkhead" report "$out/vehicle.jsonl" -o target/demo/vehicle-report.html --system examples/driveos.yaml
  grep '^adas\[0\]: openpilot: ' "$out/vehicle.out"
  grep -E '^aml-(read|write): ' "$out/vehicle.err"
  grep '^hil\[0\]: plant: pipeline' "$out/vehicle.out" | tail -n 1
  grep -E "^  task " "$out/vehicle.err"
  echo "== the gateway's counters at the end (mhydra_rx, mhydra_tx)"
  grep -E '"event":"counter".*"task":"mhydra_(rx|tx)"' "$out/vehicle.jsonl" \
    | sed -E 's/.*"task":"([a-z_]+)","name":"([^"]+)","value":([0-9]+).*/\1 \2 \3/' \
    | awk '{v[$1 " " $2] = $3} END {for (k in v) print k "=" v[k]}' | sort
else
  echo "== skipping bulkhead run: it needs root (or a delegated cgroup, see docs/runtime.md)"
fi
echo "== reports: open them in a browser (they work offline)"
ls "$PWD"/target/demo/*report.html

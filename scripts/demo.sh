#!/usr/bin/env bash
# The main job: set up, build, then check, analyze and simulate the example systems and,
# as root, run them for real: a window schedule, the CAN gateway, the DriveOS vehicle in
# closed loop. Every step that fails says what failed and shows the last lines of its
# output, then the script exits non-zero; the last steps check the result (the vehicle's
# speed follows the set point, the gateways forwarded frames).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
cargo build --release --workspace --exclude 'bulkhead-bench-*'
bulkhead=target/release/bulkhead
out=$(mktemp -d)
bus=""
cleanup() {
  if [ -n "$bus" ]; then kill "$bus" 2>/dev/null || true; wait "$bus" 2>/dev/null || true; fi
  rm -rf "$out"
}
trap cleanup EXIT

# step TITLE COMMAND...: runs COMMAND, its output kept in $out/step.log and shown (not
# with show=0); on failure, says which step failed with its exit status and the last 40
# lines, exits 1.
step() {
  local title=$1 code=0 show=${show:-1}
  shift
  echo "== $title"
  "$@" >"$out/step.log" 2>&1 || code=$?
  if [ "$code" -ne 0 ]; then
    echo "demo: FAILED: $title (exit $code): $*" >&2
    echo "demo: the last lines of its output:" >&2
    tail -n 40 "$out/step.log" >&2
    exit 1
  fi
  if [ "$show" -eq 1 ]; then cat "$out/step.log"; fi
}

# expect WHAT PATTERN FILE...: prints the lines of FILEs matching PATTERN (extended
# regular expression); when there is none, says what was expected and shows the ends of
# the FILEs, then exits 1.
expect() {
  local what=$1 pattern=$2
  shift 2
  if ! grep -hE "$pattern" "$@"; then
    echo "demo: FAILED: $what: no line matches /$pattern/" >&2
    for f in "$@"; do
      echo "demo: the last lines of $(basename "$f"):" >&2
      tail -n 30 "$f" >&2
    done
    exit 1
  fi
}

# check WHAT CONDITION: fails with WHAT unless the shell test CONDITION holds.
check() {
  if ! eval "$2"; then
    echo "demo: FAILED: $1" >&2
    exit 1
  fi
}

# counter LOG NAME: the last value of counter NAME in a schedule log (empty if none).
counter() {
  { grep -F "\"name\":\"$2\"" "$1" || true; } | tail -n 1 | sed -E 's/.*"value":([0-9]+).*/\1/'
}

for f in examples/*.yaml; do
  step "bulkhead check $f" "$bulkhead" check "$f"
done
step "bulkhead check --canonical examples/demos-simplified.yaml" \
  "$bulkhead" check --canonical examples/demos-simplified.yaml
step "bulkhead analyze examples/driveos.yaml" "$bulkhead" analyze examples/driveos.yaml
step "bulkhead sim examples/driveos.yaml --for 1s" \
  "$bulkhead" sim examples/driveos.yaml --for 1s --trace "$out/driveos.json" --stats-json "$out/stats.json"
mkdir -p target/demo
step "bulkhead report: that simulation as one page (Gantt chart, response times, latencies)" \
  "$bulkhead" report "$out/driveos.json" -o target/demo/report.html --system examples/driveos.yaml
show=0 step "bulkhead analyze examples/modes.yaml (every mode and mode switch)" \
  "$bulkhead" analyze examples/modes.yaml
sed -n '/^modes:/,$p' "$out/step.log"
show=0 step "bulkhead sim examples/modes.yaml with three mode switches (the steps in the schedule log)" \
  "$bulkhead" sim examples/modes.yaml --for 1s --mode-switch 200ms:urban --mode-switch 600ms:highway \
  --mode-switch 800ms:urban --schedule-log "$out/modes.jsonl"
expect "mode switches in the simulation" '^mode switch' "$out/step.log"
grep -E '"event":"(mode_request|interface_change|agent_request|agent_ack|mode_done)"' "$out/modes.jsonl" | tail -n 10
step "bulkhead sim examples/demos-window-schedule.yaml --for 400ms (schedule log)" \
  "$bulkhead" sim examples/demos-window-schedule.yaml --for 400ms --schedule-log "$out/schedule.jsonl"
cat "$out/schedule.jsonl"

if [ "$(id -u)" -ne 0 ]; then
  echo "== skipping bulkhead run: it needs root (or a delegated cgroup, see docs/runtime.md)"
  echo "== reports: open them in a browser (they work offline)"
  ls "$PWD"/target/demo/*report.html
  exit 0
fi

step "bulkhead run examples/demos-window-schedule.yaml --timeout 1s (real cgroups)" \
  "$bulkhead" run examples/demos-window-schedule.yaml --timeout 1s --schedule-log "$out/run.jsonl"
head -n 8 "$out/run.jsonl"

echo "== the CAN gateway: bulkhead run examples/can-gateway.yaml while the RAV4 log is replayed"
"$bulkhead" can bus rav4 >"$out/bus.log" 2>&1 &
bus=$!
sleep 0.2
"$bulkhead" run examples/can-gateway.yaml --timeout 4s --schedule-log "$out/can.jsonl" \
  >"$out/can.out" 2>&1 &
run=$!
sleep 1
timeout 2 "$bulkhead" can replay crates/can/tests/data/comma2k19_rav4_seg40_excerpt.log.gz --bus rav4 \
  >"$out/replay.log" 2>&1 || true
code=0
wait "$run" || code=$?
kill "$bus"; wait "$bus" 2>/dev/null || true
bus=""
if [ "$code" -ne 0 ]; then
  echo "demo: FAILED: bulkhead run examples/can-gateway.yaml (exit $code)" >&2
  tail -n 40 "$out/can.out" >&2
  exit 1
fi
cat "$out/can.out"
echo "== the gateway's counters at the end (frames to the cluster are dropped once its mapper exits)"
for c in rx_forwarded rx_dropped tx_sent tx_denied; do
  echo "cluster.$c=$(counter "$out/can.jsonl" "cluster.$c")"
done
forwarded=$(counter "$out/can.jsonl" cluster.rx_forwarded)
check "the gateway forwarded no frame of the replayed log to the cluster" "[ '${forwarded:-0}' -gt 0 ]"

echo "== the DriveOS vehicle in closed loop: bulkhead run examples/driveos.yaml --timeout 8s"
echo "   (set speed 72 km/h, stepped to 90 km/h at 2 s; docs/vehicle.md)"
echo "   while it runs, open the dashboard: http://127.0.0.1:8080/ (IC, /ivi, /monitor; docs/dashboard.md)"
code=0
"$bulkhead" run examples/driveos.yaml --timeout 8s --schedule-log "$out/vehicle.jsonl" \
  >"$out/vehicle.out" 2>"$out/vehicle.err" || code=$?
if [ "$code" -ne 0 ]; then
  echo "demo: FAILED: bulkhead run examples/driveos.yaml (exit $code)" >&2
  tail -n 40 "$out/vehicle.err" >&2
  tail -n 10 "$out/vehicle.out" >&2
  exit 1
fi
step "bulkhead report of the vehicle's run" \
  "$bulkhead" report "$out/vehicle.jsonl" -o target/demo/vehicle-report.html --system examples/driveos.yaml
# A be process's lines carry its partition's label (`adas[0]: `); rt tasks write their own.
label='^([a-z_]+\[[0-9]+\]: )?'
expect "the controller's lines (openpilot)" "${label}openpilot: " "$out/vehicle.out" "$out/vehicle.err"
expect "the ADAS mappers' summaries" "${label}aml-(read|write): " "$out/vehicle.err" "$out/vehicle.out"
expect "the plant's pipeline figures" "${label}plant: pipeline" "$out/vehicle.out" "$out/vehicle.err" | tail -n 1
expect "the rt tasks' summaries" '^  task ' "$out/vehicle.err"
echo "== the vehicle's speed: 72 km/h before the step, 90 km/h at the end"
speeds=$(expect "the plant's speed lines" "${label}plant t=" "$out/vehicle.out" \
  | sed -E 's/^.*plant t=([0-9.]+)s v=([0-9.-]+)km\/h.*/\1 \2/')
first=$(echo "$speeds" | head -n 1)
last=$(echo "$speeds" | tail -n 1)
echo "first: t=${first% *} s v=${first#* } km/h; last: t=${last% *} s v=${last#* } km/h"
check "the speed before the step is not 72 km/h ($first)" \
  "awk -v v='${first#* }' 'BEGIN { exit !(v > 70 && v < 74) }'"
check "the speed at the end does not follow the set point 90 km/h ($last)" \
  "awk -v v='${last#* }' 'BEGIN { exit !(v > 86 && v < 94) }'"
echo "== the gateway's counters at the end (mhydra_rx, mhydra_tx)"
grep -E '"event":"counter".*"task":"mhydra_(rx|tx)"' "$out/vehicle.jsonl" \
  | sed -E 's/.*"task":"([a-z_]+)","name":"([^"]+)","value":([0-9]+).*/\1 \2 \3/' \
  | awk '{v[$1 " " $2] = $3} END {for (k in v) print k "=" v[k]}' | sort | tee "$out/counters"
check "the vehicle's gateway counters are all zero" "awk '{split(\$0, a, \"=\"); if (a[2] > 0) n++} END {exit !(n > 0)}' '$out/counters'"
echo "== reports: open them in a browser (they work offline)"
ls "$PWD"/target/demo/*report.html
echo "demo: ok"

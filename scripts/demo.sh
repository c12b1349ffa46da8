#!/usr/bin/env bash
# The main job: set up, build, then check and analyze the example systems.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
cargo build --release --workspace --exclude 'bulkhead-bench-*'
bulkhead=target/release/bulkhead
for f in examples/*.yaml; do
  echo "== bulkhead check $f"
  "$bulkhead" check "$f"
done
echo "== bulkhead check --canonical examples/demos-simplified.yaml"
"$bulkhead" check --canonical examples/demos-simplified.yaml

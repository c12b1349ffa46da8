#!/usr/bin/env bash
# Runs DEmOS's own test suite (its test/*.bats, with bats, bats-support and bats-assert)
# against bulkhead's demos-sched, unchanged (docs/demos.md).
#
# Usage: scripts/demos-tests.sh DEMOS_SRC
#   DEMOS_SRC  a source tree of DEmOS (a clone of github.com/CTU-IIG/demos-sched;
#              checked with its commit a70ef5264086609316cf9dd51283f14aac84b6a8).
# Needs root (the suite runs schedules on cgroups) and `cargo build --release` done.
#
# The suite finds its programs in ../build/{src,src/tests,lib} beside its test/
# directory, as DEmOS's build lays them out: the suite and its configurations are copied
# into a scratch directory where build/ holds bulkhead's demos-sched and
# demos-signal-completion, and bulkhead's stand-ins for DEmOS's test programs (api-test,
# api-init-test, dummy: crates/client/tests/demos), built here against demos-sch.h.
set -euo pipefail
cd "$(dirname "$0")/.."
src="${1:?usage: scripts/demos-tests.sh DEMOS_SRC}"
src="$(cd "$src" && pwd)"
[ -d "$src/test" ] && [ -d "$src/test_config" ] ||
    { echo "demos-tests: $src has no test/ and test_config/ (not a DEmOS source tree)" >&2; exit 1; }
release="${CARGO_TARGET_DIR:-target}/release"
for built in bulkhead demos-sched demos-signal-completion libbulkhead_client.a; do
    [ -e "$release/$built" ] ||
        { echo "demos-tests: $release/$built missing: run cargo build --release" >&2; exit 1; }
done
release="$(cd "$release" && pwd)"

work="$(mktemp -d /tmp/bulkhead-demos-tests.XXXXXX)"
trap 'rm -rf "$work"' EXIT
# The partitions' processes run as users of their own: they must reach their programs.
chmod 755 "$work"
cp -r "$src/test" "$src/test_config" "$work/"
mkdir -p "$work/build/src/tests" "$work/build/lib"
ln -s "$release/demos-sched" "$work/build/src/demos-sched"
ln -s "$release/demos-signal-completion" "$work/build/lib/demos-signal-completion"
programs=crates/client/tests/demos
include=crates/client/include
link=("$release/libbulkhead_client.a" -lpthread -ldl -lm)
cc "$programs/api-test.c" -I "$include" "${link[@]}" -o "$work/build/src/tests/api-test"
c++ "$programs/api-init-test.cpp" -I "$include" "${link[@]}" -o "$work/build/src/tests/api-init-test"
cc "$programs/dummy.c" -o "$work/build/src/tests/dummy"

commit="$(git -C "$src" rev-parse HEAD 2>/dev/null || echo "not a git checkout")"
echo "demos-tests: DEmOS's suite from $src ($commit) against $release/demos-sched"
cd "$work/test"
# Taken by the test suites that use CPUs exclusively (crates/cli/tests/common): a window
# on CPU 0 cannot run while one of them owns it.
flock /run/bulkhead-rt-tests.lock bats --tap .

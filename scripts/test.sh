#!/usr/bin/env bash
# The whole test suite: set up, build (release binaries are used by integration
# tests that spawn them), then every test of every crate. Benchmarks are not run.
set -euo pipefail
cd "$(dirname "$0")/.."
# What a new user gets: bulkhead's programs come from this checkout only. A copy in a
# system directory would let a missing step (a program not found from a partition)
# pass here and fail on a fresh machine, so it fails the tests instead.
installed=$(find /usr/local/bin /usr/local/sbin /usr/bin /usr/sbin /bin /sbin -maxdepth 1 \
  \( -name 'bulkhead*' -o -name 'demos-*' \) 2>/dev/null | sort -u)
if [ -n "$installed" ]; then
  echo "test: bulkhead programs are installed in system directories; remove them, the" >&2
  echo "test: tests must run what a fresh checkout builds:" >&2
  echo "$installed" >&2
  exit 1
fi
. scripts/setup.sh
# Property tests draw the same cases on every run of this script, so that a red run is
# reproducible and a green one is not luck; `cargo test` alone draws new cases each time
# (a failing case is saved in the test's .proptest-regressions file, kept in git).
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261128}"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo build --release
# The debug build of every package: integration tests run other packages' programs and
# link the C client's static library from target/debug, which `cargo test` alone does
# not build.
cargo build --workspace
# Every crate's tests, among them the conformance suite (docs/conformance.md): as root
# its `run` executor runs each scenario with target/release/bulkhead.
# Tests that need root are `#[ignore = "needs root: ..."]`: as root every test runs
# (`--include-ignored`; the child-process entries of other tests return at once, and the
# hyperperiod vector that takes minutes is left to `cargo test --release ... --ignored`);
# otherwise the plain suite runs and says how many it skipped.
if [ "$(id -u)" = 0 ]; then
  cargo test -- --include-ignored --skip long_hyperperiod_vector_over_its_full_hyperperiod
else
  log=$(mktemp)
  cargo test 2>&1 | tee "$log"
  skipped=$(grep -oE '; [0-9]+ ignored' "$log" | awk '{ n += $2 } END { print n + 0 }')
  rm -f "$log"
  echo "test: $skipped tests skipped (ignored: they need root; run this script as root to run them)"
fi
# DEmOS's own test suite against demos-sched (docs/demos.md), from a DEmOS source tree:
# $DEMOS_SRC, else target/demos/src (a clone of github.com/CTU-IIG/demos-sched you made).
demos_src="${DEMOS_SRC:-target/demos/src}"
if [ -d "$demos_src/test" ]; then
  scripts/demos-tests.sh "$demos_src"
else
  echo "test: DEmOS's test suite NOT run: no DEmOS source tree at $demos_src" \
    "(set DEMOS_SRC to a clone of DEmOS; docs/demos.md)"
fi
# Model checking of the channel algorithms (loom explores every interleaving).
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p bulkhead-chan --release --test loom
# The Python package (python/tests; the root tests skip without root).
.venv/bin/python -m pytest -q python/tests
# The browser tests (tests/browser): the dashboard and the report in a headless Chromium
# driven by Playwright (the dashboard's need root and are skipped otherwise).
.venv/bin/python -m pytest -q tests/browser
# The benchmark harness's shape (bench/run, docs/results.md): --list and two quick runs
# print the JSON the report reads; their figures are not judged.
python3 bench/harness/shape.py
# The README's main job, end to end, as a new user runs it: it checks its own results
# (as root: the vehicle follows its set point, the gateways forward frames).
bash scripts/demo.sh

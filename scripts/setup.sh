#!/usr/bin/env bash
# Installs what bulkhead needs on a Debian machine, only what is missing:
# Debian packages (C compiler for the C API tests, pkg-config, curl, iproute2 for the
# network-namespace tests, python3-venv for the Python test environment, chromium for the
# browser tests, bats with bats-support and bats-assert for DEmOS's test suite), a Rust
# toolchain through rustup, and .venv: a Python virtual environment in the repository
# with the pinned packages of python/requirements-test.txt (python-can, cantools,
# eclipse-zenoh, and maturin, pytest, numpy, pandas) and the Python package bulkhead
# built from python/.
# Safe to run again. Sourced by demo.sh and test.sh.
set -euo pipefail

apt_packages=(build-essential pkg-config curl ca-certificates git util-linux procps iproute2
  python3 python3-venv chromium bats bats-support bats-assert)

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

if ! command -v cargo >/dev/null 2>&1; then
  [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: installing the Rust toolchain with rustup"
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
  . "$HOME/.cargo/env"
fi
# rust-toolchain.toml names the channel and components (rustfmt, clippy); rustup
# installs them on first use.
cargo --version

# The Python test environment, made anew when the pinned requirements change.
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
requirements="$repo/python/requirements-test.txt"
if ! cmp -s "$requirements" "$repo/.venv/requirements-test.txt"; then
  echo "setup: making the Python test environment $repo/.venv"
  rm -rf "$repo/.venv"
  python3 -m venv "$repo/.venv"
  "$repo/.venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
  cp "$requirements" "$repo/.venv/requirements-test.txt"
fi
# The Python package bulkhead (python/), built from the Rust crates as a wheel and
# installed into .venv, as `pip install` would: the environment holds all of it, so a
# partition that runs .venv/bin/python sees the package with the interpreter (its
# prefix is shown in a private /tmp, the checkout is not; docs/security.md).
wheels="$repo/target/wheels"
rm -rf "$wheels"
"$repo/.venv/bin/maturin" build --release --quiet -i "$repo/.venv/bin/python" \
  -m "$repo/python/Cargo.toml" -o "$wheels"
"$repo/.venv/bin/pip" install --quiet --disable-pip-version-check --no-deps \
  --force-reinstall "$wheels"/bulkhead-*.whl
"$repo/.venv/bin/python" --version

#!/usr/bin/env bash
# Builds DEmOS (demos-sched, github.com/CTU-IIG/demos-sched) into target/demos/, where
# bench/window-switch finds it for its side-by-side figures.
#
# Usage: scripts/build-demos.sh [SOURCE]
#   SOURCE  a git URL or path of demos-sched (default: $DEMOS_REPO, else GitHub).
#   The commit built is $DEMOS_REF (default: the one the figures in docs were taken
#   with), so that the comparison is reproducible.
# Prints the path of the built demos-sched as its last line.
#
# DEmOS takes a patched libev from its own repository (a submodule at a commit of the same
# repository); yaml-cpp and spdlog come from Debian. One source change is applied: a
# `const` on a fmt formatter, which Debian's fmt 9 requires (DEmOS pins an older spdlog).
set -euo pipefail
cd "$(dirname "$0")/.."
src="${1:-${DEMOS_REPO:-https://github.com/CTU-IIG/demos-sched.git}}"
out="${CARGO_TARGET_DIR:-target}/demos"
ref="${DEMOS_REF:-a70ef5264086609316cf9dd51283f14aac84b6a8}"

need=()
for pkg in meson ninja-build g++ pkg-config libyaml-cpp-dev libspdlog-dev; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
    sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    echo "build-demos: installing ${need[*]}" >&2
    $sudo apt-get update -q >&2
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >&2
fi

rm -rf "$out/src"
mkdir -p "$out"
git clone -q "$src" "$out/src"
cd "$out/src"
git checkout -q "$ref"
# Only libev: the other two submodules come from Debian.
git -c protocol.file.allow=always submodule update -q --init subprojects/libev
sed -i -E 's/(auto format\([^)]*\))[[:space:]]*$/\1 const/' src/cpufreq_policy.hpp
grep -qE 'auto format\([^)]*\) const' src/cpufreq_policy.hpp ||
    { echo "build-demos: the fmt patch did not apply to src/cpufreq_policy.hpp" >&2; exit 1; }
meson setup build -Dbuildtype=release >&2
ninja -C build src/demos-sched >&2
cp build/src/demos-sched ..
cd ..
echo "$PWD/demos-sched"

#!/usr/bin/env bash
# Builds DEmOS's demos-sched (github.com/CTU-IIG/demos-sched) out of tree, for the
# benchmarks that run it beside bulkhead (DEMOS_SCHED=... bench/window-switch).
#
# Usage: scripts/build-demos.sh DEMOS_SRC [BUILD_DIR]
#   DEMOS_SRC  DEmOS's git repository: a clone or a bare git directory (its libev,
#              spdlog and yaml-cpp submodules point into the same repository, so their
#              pinned commits are taken from it: DEmOS needs its patched libev), or a
#              source tree whose subprojects/ are already filled in.
#   BUILD_DIR  where to build (default: /tmp/demos-build); the sources are exported
#              into BUILD_DIR/src, DEMOS_SRC is not changed.
# Installs meson, ninja-build, g++ and pkg-config from Debian (apt) when missing; never
# downloads anything else and installs nothing outside BUILD_DIR.
# Last line: the path of the built demos-sched.
set -euo pipefail
src="${1:?usage: scripts/build-demos.sh DEMOS_SRC [BUILD_DIR]}"
build="${2:-/tmp/demos-build}"
[ -d "$src" ] || { echo "build-demos: $src is not a directory" >&2; exit 1; }

missing=()
for pkg in meson ninja-build g++ pkg-config; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "build-demos: installing ${missing[*]} from Debian" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2
fi

mkdir -p "$build"
build="$(cd "$build" && pwd)"
tree="$build/src"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    # HEAD and the submodules' pinned commits, all from the repository itself (their
    # URL is `.`): no network.
    rm -rf "$tree" && mkdir -p "$tree"
    git -C "$src" archive HEAD | tar -x -C "$tree"
    git -C "$src" ls-tree HEAD subprojects/ | while read -r mode type commit path; do
        [ "$type" = commit ] || continue
        git -C "$src" cat-file -e "$commit^{commit}" 2>/dev/null ||
            { echo "build-demos: $src lacks $path's commit $commit (clone all of DEmOS's branches)" >&2; exit 1; }
        mkdir -p "$tree/$path"
        git -C "$src" archive "$commit" | tar -x -C "$tree/$path"
    done
    commit="$(git -C "$src" rev-parse HEAD)"
else
    [ -f "$src/subprojects/libev/ev.c" ] ||
        { echo "build-demos: $src/subprojects/libev is empty: give DEmOS's git repository, or run git submodule update --init in it" >&2; exit 1; }
    tree="$(cd "$src" && pwd)"
    commit="unknown (not a git repository)"
fi

echo "build-demos: DEmOS $commit in $build" >&2
if [ ! -f "$build/out/build.ninja" ]; then
    meson setup "$build/out" "$tree" --buildtype=release >&2
fi
ninja -C "$build/out" src/demos-sched >&2
# Beside the program, for the benchmarks' reports (bench/run demos-window-switch).
echo "$commit" > "$build/out/src/demos-sched.commit"
echo "$build/out/src/demos-sched"

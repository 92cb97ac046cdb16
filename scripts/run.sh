#!/bin/sh
# Install what is missing, build, and run spurctld in the foreground on its embedded
# defaults (one replica on loopback; see spur.yaml(5)). Extra arguments go to spurctld,
# e.g. scripts/run.sh -f examples/spur.yaml
set -eu
cd "$(dirname "$0")/.."

scripts/deps.sh
if [ ! -f build/build.ninja ]; then
    meson setup build
fi
meson compile -C build

# The default state dir is /var/spool/spur; a non-root user gets one under $HOME instead.
extra=""
if [ "$(id -u)" -ne 0 ] && ! [ -w /var/spool ] && [ -z "${SPUR_CONFIG:-}" ]; then
    dir="${XDG_STATE_HOME:-$HOME/.local/state}/spur"
    echo "run: not root: using state dir $dir"
    extra="--state-dir $dir"
fi
# shellcheck disable=SC2086
exec build/supervisor/spurctld $extra "$@"

#!/bin/sh
# Install the Debian 12 packages spurctld needs, and only those that are missing.
#   scripts/deps.sh          what building and running needs
#   scripts/deps.sh --test   plus what every test layer needs
# Runs apt-get as root (directly, or through sudo when not root).
set -eu

# libssl-dev: OpenSSL 3's libcrypto (cluster-key channels); libjwt-dev: tokens (it brings
# libjansson-dev, which reads their claims); libmunge-dev and the munge daemon: MUNGE
# credentials of users (the daemon is needed at run time wherever users authenticate).
BUILD_PKGS="gcc pkg-config meson ninja-build libevent-dev libprotobuf-c-dev protobuf-c-compiler
libpq-dev libyaml-dev libssl-dev libjwt-dev libjansson-dev libmunge-dev munge"
TEST_PKGS="check python3 python3-pytest python3-yaml postgresql wrk mandoc clang
libclang-rt-14-dev util-linux iproute2 procps systemd shellcheck
podman runc netavark aardvark-dns iptables debootstrap"

want="$BUILD_PKGS"
if [ "${1:-}" = "--test" ]; then
    want="$want $TEST_PKGS"
fi

missing=""
for p in $want; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    echo "deps: all packages present"
    exit 0
fi

echo "deps: installing:$missing"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing

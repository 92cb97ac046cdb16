#!/bin/sh
# Make the two Debian 12 base images that examples/k8s/Containerfile builds FROM, locally,
# for a machine that reaches Debian's mirror but no container registry.
#
#   eval "$(scripts/container-base.sh)"      # sets BUILD_BASE and RUNTIME_BASE
#   podman build -f examples/k8s/Containerfile \
#       --build-arg BUILD_BASE="$BUILD_BASE" --build-arg RUNTIME_BASE="$RUNTIME_BASE" \
#       -t spurctld:0.1.0 .
#
# What it guarantees:
# - Both images come from one debootstrap of Debian 12 (bookworm, minbase) from
#   $DEBIAN_MIRROR, imported with "podman import": BUILD_BASE stands in for debian:12,
#   RUNTIME_BASE for debian:12-slim (the same tree with documentation, man pages and
#   locales removed and dpkg told to keep them out, as the official slim image does).
# - They are cached in podman's storage, tagged with a hash of everything that made them
#   (this script, the suite, the mirror). A second run with the same inputs makes
#   nothing and prints the same names; a change to any input makes new images. A fresh
#   machine makes them from nothing. The mirror's content is not part of the key: set
#   SPUR_BASE_REFRESH=1 to make them again (for instance to pick up security updates).
# - Only the two "KEY=image" lines go to stdout, so eval is safe; progress goes to stderr.
# - Two runs at once on one machine do not both debootstrap: a lock file serialises them.
#
# Needs root (debootstrap and rootful podman), debootstrap, podman, and a few hundred MB
# in $TMPDIR (default /var/tmp: /tmp is often a small tmpfs).
set -eu

SUITE=bookworm
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
REPO=localhost/spur-debian
WORK_PARENT=${TMPDIR:-/var/tmp}

log() { printf 'container-base: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, rootful podman)"
command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
command -v podman >/dev/null || die "podman is not installed (apt-get install podman)"

# The key: this file's bytes plus the inputs that are not in it.
key=$( { cat "$0"; printf '%s\n%s\n' "$SUITE" "$DEBIAN_MIRROR"; } | sha256sum | cut -c1-16)
build_img="$REPO:12-$key"
runtime_img="$REPO:12-slim-$key"

emit() {
    printf 'BUILD_BASE=%s\nRUNTIME_BASE=%s\n' "$build_img" "$runtime_img"
}

have_both() {
    podman image exists "$build_img" && podman image exists "$runtime_img"
}

# Serialise concurrent runs; the second finds the images made by the first.
lock="$WORK_PARENT/spur-container-base.lock"
exec 9>"$lock"
flock 9

if [ "${SPUR_BASE_REFRESH:-0}" != 1 ] && have_both; then
    log "cached: $build_img $runtime_img"
    emit
    exit 0
fi

root=$(mktemp -d "$WORK_PARENT/spur-debootstrap.XXXXXX")
cleanup() { rm -rf "$root" "$root.log"; }
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

start=$(date +%s)
log "debootstrap $SUITE from $DEBIAN_MIRROR into $root"
# minbase: essential packages and apt, what debian:12 holds.
if ! debootstrap --variant=minbase "$SUITE" "$root" "$DEBIAN_MIRROR" >"$root.log" 2>&1; then
    tail -n 20 "$root.log" >&2
    rm -f "$root.log"
    die "debootstrap failed"
fi
rm -f "$root.log"

# Same sources as the official image, and no downloaded packages or lists kept.
printf 'deb %s %s main\ndeb %s %s-updates main\ndeb http://deb.debian.org/debian-security %s-security main\n' \
    "$DEBIAN_MIRROR" "$SUITE" "$DEBIAN_MIRROR" "$SUITE" "$SUITE" >"$root/etc/apt/sources.list"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log
# A container has no init of its own to start services that packages install.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
# Containers get their own /etc/hostname, /etc/hosts and resolv.conf from the runtime.
: >"$root/etc/hostname"

import_tree() { # tag
    # podman import gives an image no configuration: set what "docker run debian:12" has.
    tar --numeric-owner --xattrs -C "$root" -c . |
        podman import --quiet \
            --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            --change 'CMD ["bash"]' \
            --change "LABEL org.opencontainers.image.description=debootstrap-$SUITE-minbase" \
            --change "LABEL spur.base-key=$key" \
            - "$1" >/dev/null
}

log "import $build_img"
import_tree "$build_img"

# The slim variant: what debian:12-slim leaves out, and a dpkg rule that keeps it out of
# every package installed later (so the runtime stage's apt-get adds no documentation).
cat >"$root/etc/dpkg/dpkg.cfg.d/slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
EOF
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/lintian/*
find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias \
    -exec rm -rf {} +

log "import $runtime_img"
import_tree "$runtime_img"
log "made both in $(( $(date +%s) - start ))s"
emit

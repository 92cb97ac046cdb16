#!/bin/sh
# Install what is missing, build, and run every test layer that fits in CI's time:
#   1. unit and simulation suites (Check, meson test) on a -Werror build
#   2. integration and fault tests (pytest, real processes on 127.0.0.1)
#   3. both again on an ASan+UBSan build
#   4. the fuzzers, FUZZ_SECONDS each (default 20)
# Environment: SKIP_ASAN=1, SKIP_FUZZ=1 to leave a layer out (never in CI);
# PYTEST_ARGS to pass more pytest arguments (e.g. -k supervisor).
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)

scripts/deps.sh --test

start=$(date +%s)
step() { printf '\n==== %s (%ss)\n' "$1" "$(( $(date +%s) - start ))"; }

PYTEST="/usr/bin/python3 -m pytest"

build() { # dir, extra meson args...
    dir=$1; shift
    if [ ! -f "$dir/build.ninja" ]; then
        meson setup "$dir" -Dwerror=true "$@"
    else
        meson configure "$dir" -Dwerror=true "$@" >/dev/null
    fi
    meson compile -C "$dir"
}

# Check's own summary line per suite ("cfg: 100%: Checks: 183, Failures: 0, Errors: 0"),
# which meson keeps in its log; meson prints only its per-program verdicts.
check_summary() {
    awk '/^Running suite\(s\):/ { suite = $3 } /%: Checks: / { print "  " suite ": " $0 }' \
        "$1/meson-logs/testlog.txt"
}

step "build (release checks, -Werror)"
build build

step "unit + simulation (build)"
meson test -C build --print-errorlogs --num-processes 2
check_summary build

step "integration (build)"
# shellcheck disable=SC2086
SPUR_BUILD_DIR="$ROOT/build" $PYTEST -q -p no:cacheprovider tests/integration ${PYTEST_ARGS:-}

if [ "${SKIP_ASAN:-0}" != 1 ]; then
    step "build (ASan+UBSan)"
    build build-asan -Db_sanitize=address,undefined
    export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
    step "unit + simulation (ASan+UBSan)"
    meson test -C build-asan --print-errorlogs --num-processes 2 --timeout-multiplier 3
    check_summary build-asan
    step "integration (ASan+UBSan)"
    # shellcheck disable=SC2086
    SPUR_BUILD_DIR="$ROOT/build-asan" $PYTEST -q -p no:cacheprovider tests/integration \
        ${PYTEST_ARGS:-}
    unset ASAN_OPTIONS UBSAN_OPTIONS
fi

if [ "${SKIP_FUZZ:-0}" != 1 ] && [ -x scripts/fuzz.sh ]; then
    step "fuzz (${FUZZ_SECONDS:-20}s per target)"
    scripts/fuzz.sh
fi

step "all tests passed"

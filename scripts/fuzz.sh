#!/usr/bin/env bash
# scripts/fuzz.sh - build the libFuzzer targets and run each one for a while.
#
#   scripts/fuzz.sh [NAME ...]     (default: all of them)
#
# NAME: frame status cfg http wal chan token (frames, status frames, the config, HTTP, the
# WAL, sealed channels, tokens); raftwire snapfile (Raft peer messages and handshakes,
# snapshot files and recovery); fsmsnap fsmcmd (the state machine's snapshot reader and
# log entries); agentmsg (the agent's messages and spool).
#
# FUZZ_SECONDS (default 20) is each fuzzer's -max_total_time. The build lives in
# build-fuzz (clang, ASan+UBSan, -Dfuzz=true), set up on first use. Each fuzzer starts from
# a copy of tests/fuzz/corpus/<name> in a temporary directory, so nothing is written into
# the source tree; the directory is removed after a clean run and kept (its path printed)
# when a fuzzer finds something. Prints one summary line per fuzzer and exits non-zero if
# any of them crashed, leaked, hit undefined behaviour or timed out.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$root/build-fuzz"
seconds=${FUZZ_SECONDS:-20}
all=(frame status cfg http wal chan token raftwire snapfile fsmsnap fsmcmd agentmsg)
if [ "$#" -gt 0 ]; then
    names=("$@")
else
    names=("${all[@]}")
fi
for n in "${names[@]}"; do
    case " ${all[*]} " in
    *" $n "*) ;;
    *) echo "fuzz.sh: unknown fuzzer \"$n\" (have: ${all[*]})" >&2; exit 64 ;;
    esac
done

if [ ! -f "$build/build.ninja" ]; then
    if ! out=$(cd "$root" && CC=clang meson setup build-fuzz -Dfuzz=true \
        -Db_sanitize=address,undefined -Db_lundef=false 2>&1); then
        printf '%s\n' "$out" >&2
        echo "fuzz.sh: meson setup failed" >&2
        exit 1
    fi
fi
targets=()
for n in "${names[@]}"; do
    targets+=("fuzz_$n")
done
if ! out=$(meson compile -C "$build" "${targets[@]}" 2>&1); then
    printf '%s\n' "$out" >&2
    echo "fuzz.sh: build failed" >&2
    exit 1
fi

# Undefined behaviour is a finding, not a warning; leaks are findings too.
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1

work=$(mktemp -d "${TMPDIR:-/tmp}/spur-fuzz.XXXXXX")
failed=0
for n in "${names[@]}"; do
    dir="$work/$n"
    mkdir -p "$dir/corpus" "$dir/artifacts"
    cp "$root/tests/fuzz/corpus/$n/"* "$dir/corpus/"
    seeds=$(find "$dir/corpus" -type f | wc -l)
    log="$dir/fuzz.log"
    rc=0
    (cd "$dir" && "$build/tests/fuzz/fuzz_$n" -max_total_time="$seconds" -timeout=10 \
        -artifact_prefix="$dir/artifacts/" -print_final_stats=1 corpus) >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n 1)
    inputs=$(find "$dir/corpus" -type f | wc -l)
    if [ "$rc" -eq 0 ]; then
        printf 'fuzz_%-8s ok     %10s execs in %3s s, corpus %s -> %s inputs\n' \
            "$n" "${execs:-?}" "${took:-?}" "$seeds" "$inputs"
    else
        failed=1
        printf 'fuzz_%-8s FAILED %10s execs (exit %s): see %s, artifacts in %s\n' \
            "$n" "${execs:-?}" "$rc" "$log" "$dir/artifacts"
        grep -m 5 -E 'ERROR|runtime error|check failed|SUMMARY' "$log" | sed 's/^/    /' || true
    fi
done

if [ "$failed" -ne 0 ]; then
    echo "fuzz.sh: findings kept in $work" >&2
    exit 1
fi
rm -rf "$work"

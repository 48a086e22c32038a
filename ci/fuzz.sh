#!/usr/bin/env bash
# Builds the `server_frames` fuzz target (fuzz/, stable Rust: plain cargo with libFuzzer's
# coverage instrumentation, no nightly, no cargo-fuzz) and runs it for SECONDS (default 120)
# over a copy of the seed corpus. Prints the executions and the coverage reached; exits
# non-zero on a finding, printing where the input that caused it was kept
# (fuzz/artifacts/server_frames/). See fuzz/README.md.
#
#   ci/fuzz.sh [SECONDS]
#
# Environment: FUZZ_ARGS extra libFuzzer flags (e.g. "-max_len=8192"); FUZZ_KEEP_CORPUS=DIR
# starts from the inputs in DIR too and copies the grown corpus back there at the end (to resume
# a long run).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:${CARGO_HOME:-$HOME/.cargo}/bin"
seconds="${1:-120}"
root="$PWD"

host="$(rustc -vV | sed -n 's/^host: //p')"
# libFuzzer's coverage feedback, as cargo-fuzz sets it, minus the sanitizer (which needs
# nightly). `--target` keeps these flags off build scripts and proc macros.
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing"
t0=$SECONDS
(cd fuzz && cargo build --locked --release --target "$host" --bin server_frames)
echo "fuzz: build took $((SECONDS - t0)) s"
bin="$root/fuzz/target/$host/release/server_frames"

work="$(mktemp -d /tmp/xlfs-fuzz.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/artifacts" "$work/brick"
cp fuzz/corpus/server_frames/* "$work/corpus/"
if [ -n "${FUZZ_KEEP_CORPUS:-}" ] && [ -d "$FUZZ_KEEP_CORPUS" ]; then
    find "$FUZZ_KEEP_CORPUS" -maxdepth 1 -type f -exec cp -n {} "$work/corpus/" \;
fi
artifacts="$root/fuzz/artifacts/server_frames"

# Inputs of bugs found before run first, every time (read-only: new inputs go to the first
# directory only).
regressions=()
if ls fuzz/regressions/server_frames/* >/dev/null 2>&1; then
    regressions=("$root/fuzz/regressions/server_frames")
fi
run=("$bin" "$work/corpus" "${regressions[@]}" -max_total_time="$seconds" -timeout=60
     -print_final_stats=1 -artifact_prefix="$work/artifacts/" ${FUZZ_ARGS:-})
export XLFS_FUZZ_DIR="$work/brick"
status=0
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
    # As root, the fuzzed requests run as root on this machine's disk: in a mount namespace
    # of its own, everything but the work directory is read-only, so a path bug the fuzzer
    # finds in storage/posix cannot write outside the brick. The namespace ends with the run.
    unshare --mount --propagation private -- sh -c '
        mount --bind "$1" "$1" && mount -o remount,bind,ro / || exit 97
        shift; exec "$@"' sh "$work" "${run[@]}" 2>&1 | tee "$work/log" || status=$?
else
    "${run[@]}" 2>&1 | tee "$work/log" || status=$?
fi

# Whatever TIME_WAIT sockets the run left must be gone before other tests bind ports.
for _ in $(seq 90); do
    [ "$(ss -Htan state time-wait 2>/dev/null | wc -l)" -lt 500 ] && break
    sleep 1
done

# The last stats line: executions, coverage (edges) and features.
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -1)
cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -1 | cut -d' ' -f2)
ft=$(grep -o 'ft: [0-9]*' "$work/log" | tail -1 | cut -d' ' -f2)
corpus=$(ls "$work/corpus" | wc -l)
echo "fuzz: ${execs:-?} executions (${rate:-?}/s), coverage ${cov:-?} edges, ${ft:-?} features, corpus $corpus inputs"
if [ -n "${FUZZ_KEEP_CORPUS:-}" ]; then
    mkdir -p "$FUZZ_KEEP_CORPUS" && cp -n "$work/corpus/"* "$FUZZ_KEEP_CORPUS/"
    echo "fuzz: corpus kept in $FUZZ_KEEP_CORPUS"
fi
if ls "$work/artifacts/"* >/dev/null 2>&1; then
    mkdir -p "$artifacts"
    cp "$work/artifacts/"* "$artifacts/"
    for f in "$work/artifacts/"*; do
        echo "fuzz: FINDING kept in $artifacts/$(basename "$f") (reproduce: $bin $artifacts/$(basename "$f"))"
    done
    exit 1
fi
if [ "$status" != 0 ]; then
    echo "fuzz: the fuzzer exited with status $status and kept no input"
    exit "$status"
fi

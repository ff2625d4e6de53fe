#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer (shipped with the Swift toolchain on Linux): builds the
# nested Fuzz/ package with -sanitize=fuzzer,address and runs it for SECONDS (default 300) over
# every decoder of stored or received bytes and over a store whose index root is the input
# (Fuzz/Sources/ArborFuzz/FuzzTarget.swift). The corpus grows in .build-fuzz/corpus; an input
# that crashes, leaks past the memory limit or hangs is written to .build-fuzz/crashes/ and
# the script fails. Replay one with: .build-fuzz/release/arbor-fuzz FILE
# Arguments after SECONDS go to libFuzzer (scripts/test.sh passes -runs=N -seed=S under CI).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-300}"
shift || true
build=.build-fuzz
swift build -c release --package-path Fuzz --build-path "$build" \
  -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library -Xswiftc -enable-testing \
  2>&1 | { grep -v "Cannot export local symbol" || true; }
binary="$build/release/arbor-fuzz"
mkdir -p "$build/corpus" "$build/crashes"
# A decoder may use memory in proportion to its input, never more: 64 MB per allocation.
# No leak checks: a store input's task is freed after the input returns, and LeakSanitizer
# then scans the heap after nearly every input (about ten times slower).
"$binary" "$build/corpus" -max_total_time="$seconds" -max_len=8192 -timeout=10 -detect_leaks=0 \
  -rss_limit_mb=2048 -malloc_limit_mb=64 -artifact_prefix="$build/crashes/" -print_final_stats=1 "$@"

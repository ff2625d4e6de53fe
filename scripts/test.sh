#!/usr/bin/env bash
# Installs what is missing, builds everything (the multi-process tests run the arbor binary),
# starts a throwaway PostgreSQL cluster (scripts/postgres-fixture.sh) for the PostgreSQL tests
# and runs the whole test suite. The cluster is stopped and removed when the script ends, also on
# failure or Ctrl-C; one left by a run that was killed outright is removed by the next run.
set -euo pipefail
cd "$(dirname "$0")/.."
# A cluster this shell started by hand is not this run's to stop.
unset ARBOR_TEST_POSTGRES_DIR ARBOR_TEST_POSTGRES_URL
bash scripts/install-dependencies.sh
swift build --build-tests

child=""
cleanup() {
  status=$?
  trap - EXIT INT TERM
  if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null || true; wait "$child" 2>/dev/null || true; fi
  bash scripts/postgres-fixture.sh stop "${ARBOR_TEST_POSTGRES_DIR:-}" || true
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Swift Testing starts every test case at once, and the Swift pool has a thread per processor:
# on two processors, some 500 cases with child processes of their own queued a task that wakes
# every 100 ms for 4 to 17 s at a time (a probe task writing the time, watched from outside), so
# exchanges could not claim their target within their 25 s margin, and timed tests failed. At
# most three cases per processor at once (Swift 6.3's testing library; earlier ones ignore it),
# the same probe never waited 2 s, and the run took no longer. A value set by the caller wins.
cores=$(nproc 2>/dev/null || true)
case "$cores" in ''|*[!0-9]*|0) cores=2 ;; esac
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-$((3 * cores))}"

fixture=$(bash scripts/postgres-fixture.sh start --owner $$)
eval "$fixture"
# In the background and waited for, so that a signal reaches the trap at once.
swift test "$@" &
child=$!
wait "$child"
child=""

# Under CI, also coverage-guided fuzzing with AddressSanitizer (scripts/fuzz.sh): 300,000
# inputs from a fixed seed, about two minutes with its build. A crashing input fails the run.
if [ "${CI:-}" = "true" ]; then
  bash scripts/fuzz.sh 300 -runs=300000 -seed=1 &
  child=$!
  wait "$child"
fi

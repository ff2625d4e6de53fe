#!/usr/bin/env bash
# Installs what is missing, builds everything (the multi-process tests run the arbor binary)
# and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-dependencies.sh
swift build --build-tests
swift test "$@"

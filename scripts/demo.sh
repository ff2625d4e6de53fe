#!/usr/bin/env bash
# Installs what is missing, builds Arbor and runs its main job on an embedded store (a JSON
# store in a temporary folder): value trees, versions, property-level diffs, history,
# concurrent writers, history independence. Pass --folder PATH to keep the store.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-dependencies.sh
swift build -c release --product arbor
.build/release/arbor demo "$@"

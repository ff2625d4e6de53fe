#!/usr/bin/env bash
# Installs what is missing, builds Arbor and runs its main job on embedded stores in a temporary
# folder: value trees committed on a JSON store, cloned to SQLite, edited on both at once (with a
# conflict), synced to one head, migrated to LMDB and verified. Pass --folder PATH to keep the
# stores, --postgres URL to migrate to an empty PostgreSQL database too.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-dependencies.sh
swift build -c release --product arbor
.build/release/arbor demo "$@"

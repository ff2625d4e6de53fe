#!/usr/bin/env bash
# Installs the system packages Arbor builds and tests against, skipping those already present.
# Debian/Ubuntu; needs root or sudo. The Swift toolchain (6.1 or later) must already be on PATH.
set -euo pipefail

packages=(libsqlite3-dev libpq-dev liblmdb-dev postgresql)

if ! command -v swift >/dev/null 2>&1; then
  echo "error: swift is not on PATH; install a Swift 6.1+ toolchain from swift.org first" >&2
  exit 1
fi

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  # Not Debian or Ubuntu: nothing to install here; say what the build needs and go on.
  case "$(uname -s)" in
    Darwin) echo "note: not a Debian/Ubuntu system; on macOS: brew install sqlite libpq lmdb postgresql" >&2 ;;
    *) echo "note: not a Debian/Ubuntu system; install the SQLite, libpq and LMDB development packages and PostgreSQL with this system's package manager" >&2 ;;
  esac
  exit 0
fi

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done

if [ ${#missing[@]} -gt 0 ]; then
  sudo=()
  # sudo resets the environment: the non-interactive setting goes through env, after it.
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  echo "Installing: ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

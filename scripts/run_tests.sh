#!/usr/bin/env bash
# The test command: installs what it needs (the .venv, and Debian's chromium for
# the report-page test), then lints (ruff) and runs the whole suite.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
if ! command -v chromium >/dev/null 2>&1; then
    echo "[setup] installing Debian's chromium (headless page test)" >&2
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >&2
fi
# lint first: configured in pyproject.toml ([tool.ruff])
ruff check .
exec python -m pytest "$@"

#!/usr/bin/env bash
# The test command: installs what it needs, then runs the whole suite.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
exec python -m pytest "$@"

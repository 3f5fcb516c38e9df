#!/usr/bin/env bash
# The README's picture: the committed example's report page (results/vm-demo-main-job; another machine
# as the first argument), rendered from the stored runs and photographed by headless Chromium into
# docs/report-page.png.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
[ -d demo-target ] || mbaphases demo-repo --path demo-target >/dev/null
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# the verdict (0 or 1) is the example's, not a failure of this script
mbaphases report --machine "${1:-vm-demo-main-job}" --out "$tmp/report" --html "$tmp/page" --quiet || [ $? -le 1 ]
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,1100 \
    --screenshot="$ROOT/docs/report-page.png" "file://$tmp/page/index.html" 2>/dev/null
echo "docs/report-page.png"

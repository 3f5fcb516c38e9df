# Sourced by the top-level commands: creates .venv and installs the project
# and its pinned dependencies into it (a no-op when already current).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
if [ ! -x "$ROOT/.venv/bin/python" ]; then
    echo "[setup] creating $ROOT/.venv" >&2
    "$PY" -m venv "$ROOT/.venv"
fi
STAMP="$ROOT/.venv/.installed-$(cat "$ROOT/pyproject.toml" "$ROOT"/asv-plugin/pyproject.toml "$ROOT"/asv-plugin/asv_bench_mbaphases/benchmarks/*.py | sha256sum | cut -c1-16)"
if [ ! -f "$STAMP" ]; then
    echo "[setup] installing pinned dependencies (torch is the CPU build)" >&2
    "$ROOT/.venv/bin/python" -m pip install -q --upgrade pip >&2
    # torch first and pinned, so nothing pulls a CUDA build
    "$ROOT/.venv/bin/python" -m pip install -q "torch==2.13.0" >&2
    "$ROOT/.venv/bin/python" -m pip install -q -e "$ROOT[dev]" >&2
    # the asv benchmark type that declares rounds (also installed into every asv environment)
    "$ROOT/.venv/bin/python" -m pip install -q "$ROOT/asv-plugin" >&2
    touch "$STAMP"
fi
export PATH="$ROOT/.venv/bin:$PATH"

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
    echo "[setup] installing pinned dependencies with uv (torch from pip's find-links where configured)" >&2
    # uv: about 20 s with the bytecode compiled, where pip took about 50 s (docs/log/measurements.md)
    "$ROOT/.venv/bin/python" -m pip install -q "uv>=0.9" >&2
    # uv reads no pip configuration: the local wheels pip is configured with, as mbaphases.targets.uv_env
    # passes them (with them, pyproject's torch pin resolves to their CPU build, not a CUDA one)
    links="${PIP_FIND_LINKS:-$("$ROOT/.venv/bin/python" -m pip config get global.find-links 2>/dev/null || true)}"
    find_links=()
    if [ -n "$links" ]; then find_links=(--find-links "${links%%[[:space:]]*}"); fi
    # with the asv benchmark type that declares rounds (asv-plugin/; also installed into every asv environment);
    # compiled as pip compiles, or every run's interpreter compiles torch again where bytecode is not written
    # (PYTHONDONTWRITEBYTECODE): about a second more a run
    "$ROOT/.venv/bin/python" -m uv pip install -q --compile-bytecode --python "$ROOT/.venv/bin/python" \
        "${find_links[@]}" -e "$ROOT[dev]" "$ROOT/asv-plugin" >&2
    touch "$STAMP"
fi
export PATH="$ROOT/.venv/bin:$PATH"

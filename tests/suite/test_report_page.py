"""The report page and its pictures; the page is checked in headless Chromium."""
import functools
import http.server
import re
import shutil
import subprocess
import threading
from pathlib import Path

import entry_docs as E
import matplotlib.pyplot as plt
import pytest

from mbaphases import analysis, load, plots
from mbaphases import page as page_mod

ROOT = Path(__file__).resolve().parents[2]
CASES = ["sac/g1_walk_flat/mujoco", "sac/g1_walk_flat/motrix", "flashsac/go2_joystick_flat/mujoco"]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture
def rep(tmp_path):
    sides = []
    for name, scale in (("b", 1.0), ("c", 1.2)):
        paths = []
        for k in range(4):  # 4 a side: a rank interval exists at the family level of 3 cases (97.1%)
            results = [E.case_result(c, env_step=9.0 * scale + 0.1 * k, update_state=1.5 * scale) for c in CASES]
            paths.append(E.write(tmp_path / f"{name}_run{k + 1}.json", E.doc(results)))
        sides.append(load.load_raw_side({"b": "main direct", "c": "MBA dev"}[name], paths))
    return analysis.build(sides[0], sides[1], input_kind="raw entry JSON")


def test_figures_have_the_expected_axes_and_bars(rep):
    fig = plots.ratio_figure(rep)
    assert len(fig.axes) == 1 and len(fig.axes[0].patches) == len(CASES)
    plt.close(fig)
    fig = plots.runs_figure(rep)
    assert sum(ax.axison for ax in fig.axes) == len(CASES)
    plt.close(fig)
    fig = plots.phase_figure(rep)
    assert len(fig.axes[0].patches) == len(CASES) * 2 * len(plots.STACK)
    plt.close(fig)
    fig = plots.attribution_figure(rep)
    # physics is one of the parts in every case here: at least one bar per case
    assert len(fig.axes[0].patches) >= len(CASES)
    plt.close(fig)


def test_draw_all_writes_png_and_svg(rep, tmp_path):
    files = plots.draw_all(rep, tmp_path / "plots")
    assert set(files) == {"ratio", "runs", "phases", "attribution"}
    for png, svg in files.values():
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
        assert svg.read_text().lstrip().startswith("<?xml") and svg.stat().st_size > 5000


def test_page_links_from_asv_index_once(rep, tmp_path):
    html_root = tmp_path / "html"
    html_root.mkdir()
    (html_root / "index.html").write_text("<html><body>asv</body></html>")
    for _ in range(2):
        page_mod.write_page(rep, html_root / "mbaphases")
        page_mod.link_from_asv(html_root, html_root / "mbaphases")
    index = (html_root / "index.html").read_text()
    assert index.count('href="mbaphases/index.html"') == 1
    assert (html_root / "mbaphases" / "raw" / "baseline" / "01-b_run1.json").is_file()


def open_in_chromium(root, page_url: str, tmp_path, shot_name: str, height: int = 2400):
    """Serve ``root`` over HTTP, load the page in headless Chromium: its DOM (with the browser's
    console on stderr) and a screenshot under test-artifacts/."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/{page_url}"
    profile = tmp_path / "chromium-profile"
    artifacts = ROOT / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    shot = artifacts / shot_name
    try:
        dom = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr",
                              "--v=0", "--virtual-time-budget=10000", "--dump-dom", url],
                             capture_output=True, text=True, timeout=120)
        subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size=1280,{height}",
                        "--virtual-time-budget=10000", f"--screenshot={shot}", url],
                       capture_output=True, text=True, timeout=120)
    finally:
        server.shutdown()
    return dom, shot


def test_page_renders_in_headless_chromium(rep, tmp_path):
    assert CHROMIUM, "Debian's chromium is needed (scripts/run_tests.sh installs it)"
    html_root = tmp_path / "html"
    html_root.mkdir()
    (html_root / "index.html").write_text("<html><body>asv</body></html>")
    page = page_mod.write_page(rep, html_root / "mbaphases")
    page_mod.link_from_asv(html_root, html_root / "mbaphases")
    dom, shot = open_in_chromium(html_root, "mbaphases/index.html", tmp_path, "report-page.png")
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body, dom.stderr[-2000:]
    images = len(re.findall(r"<img ", page.read_text()))
    assert images == 4
    assert f'data-images="{images}/{images}"' in body.group(0)
    assert 'data-errors="0"' in body.group(0)
    assert 'id="verdict"' in dom.stdout and "Verdict: FAIL" in dom.stdout
    assert dom.stdout.count("<table") >= 6 and "sac/g1_walk_flat/motrix" in dom.stdout
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line and ("rror" in line or "Uncaught" in line)]
    assert not console, console
    assert shot.stat().st_size > 20000


def test_the_same_stored_runs_give_the_same_files_byte_for_byte(tmp_path, monkeypatch):
    """Reports are data derived from stored runs: with the report's date fixed (SOURCE_DATE_EPOCH)
    two reports of the same runs are the same files, pictures included (a refactor is checked
    against this: scripts/same_report.sh)."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1796000000")
    sides = []
    for name, scale in (("b", 1.0), ("c", 0.8)):  # the candidate slower: a decision section with exceptions
        paths = [E.write(tmp_path / f"{name}_run{k + 1}.json",
                         E.doc([E.case_result(c, env_step=9.0 * scale + 0.3 * k, update_state=1.5 * scale) for c in CASES]))
                 for k in range(3)]
        sides.append(load.load_raw_side({"b": "main direct", "c": "MBA dev"}[name], paths))
    for out in ("one", "two"):
        page_mod.write_page(analysis.build(sides[0], sides[1], input_kind="raw entry JSON"), tmp_path / out)
    one = {p.relative_to(tmp_path / "one"): p.read_bytes() for p in (tmp_path / "one").rglob("*") if p.is_file()}
    two = {p.relative_to(tmp_path / "two"): p.read_bytes() for p in (tmp_path / "two").rglob("*") if p.is_file()}
    assert {p.suffix for p in one} >= {".html", ".md", ".json", ".csv", ".svg", ".png"}
    assert one.keys() == two.keys()
    assert [p for p in one if one[p] != two[p]] == []
    assert b"2026-11-30" in one[Path("summary.json")]  # the fixed date, not today's

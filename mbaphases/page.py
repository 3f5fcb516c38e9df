"""One self-contained HTML page for the A/B decision: verdict first, then the
gate, the pictures (embedded), the tables, environment and pins, definitions
and links to the raw runs (copied beside the page). It works from asv
preview, any static file server, or opened as a file."""
from __future__ import annotations

import base64
import html
import re
import shutil
from pathlib import Path

import jinja2
from markupsafe import Markup

from mbaphases import analysis, outputs, views
from mbaphases import gate as gate_mod

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1200px;color:#222;padding:0 1rem}
h1{font-size:1.5rem} h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}
table{border-collapse:collapse;font-size:.82rem;margin:.5rem 0} th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:right}
th{background:#f4f4f4} td:first-child,th:first-child{text-align:left}
.verdict{font-size:1.3rem;padding:.6rem 1rem;border-radius:.4rem;display:inline-block;color:#fff}
.PASS{background:#2ca02c}.FAIL{background:#d62728}.INCONCLUSIVE{background:#ff9f1c}.INCOMPLETE{background:#7f7f7f}
td.g-PASS{background:#dff3df}td.g-FAIL{background:#f8d7d7}td.g-INCONCLUSIVE{background:#fff0d6}
td.g-MISSING,td.g-MISALIGNED{background:#e8e8e8}td.g-EXCEPTED{background:#d7f2f5}
img{max-width:100%;border:1px solid #eee;margin:.4rem 0} .diff{color:#d62728;font-weight:bold}
.defs li{margin:.3rem 0} code{background:#f4f4f4;padding:0 .2rem} td.noise{color:#999;background:#f7f7f7}
"""
# Sets data-images and data-errors on <body>, so a headless browser can tell
# from the DOM that every picture loaded and no script error happened.
CHECK_JS = """
window.__errors=0;window.addEventListener('error',function(){window.__errors++;document.body.dataset.errors=window.__errors;});
window.addEventListener('load',function(){var imgs=[].slice.call(document.images);
var ok=imgs.filter(function(i){return i.complete&&i.naturalWidth>0;}).length;
document.body.dataset.images=ok+'/'+imgs.length;document.body.dataset.errors=window.__errors;});
"""


def markdown_to_html(text: str) -> str:
    """The decision section's few forms: paragraphs, bullets, a fenced snippet, `code`, **bold**."""
    out = []
    for block in text.split("\n\n"):
        if block.startswith("```"):
            body = block.split("\n", 1)[1].rsplit("```", 1)[0]
            out.append(f"<pre><code>{html.escape(body)}</code></pre>")
            continue
        esc = html.escape(block)
        esc = re.sub(r"`([^`]+)`", r"<code>\1</code>", esc)
        esc = re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", esc)
        if esc.startswith("- "):
            out.append("<ul>" + "".join(f"<li>{line[2:]}</li>" for line in esc.split("\n")) + "</ul>")
        else:
            out.append(f"<p>{esc}</p>")
    return "\n".join(out)


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _table(df, gate_col: str | None = None) -> str:
    out = df.to_html(index=False, escape=True, border=0, na_rep="n/a")
    # a change not distinguishable from run-to-run noise is greyed
    out = re.sub(r"<td>([^<]*" + re.escape(views.NOISE_MARK) + r"[^<]*)</td>", r'<td class="noise">\1</td>', out)
    if gate_col:
        for status in gate_mod.STATUSES:
            out = out.replace(f"<td>{status}</td>", f'<td class="g-{status}">{status}</td>')
    return out


def _copy_raw(rep: analysis.Report, out: Path) -> list[tuple[str, list[str]]]:
    """Copy each side's raw run files next to the page; return links per side."""
    links = []
    for name, side in (("baseline", rep.baseline), ("candidate", rep.candidate)):
        dest = out / "raw" / name
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        files = []
        for k, src in enumerate(side.sources):
            p = Path(src)
            if p.is_file() and p.suffix == ".json":
                # runs are files, not names: three run1.json from three folders stay three
                stem = p.name.removesuffix(".meta.json").removesuffix(".json")
                for f in sorted(p.parent.glob(f"{stem}.*")):
                    target = f"{k + 1:02d}-{f.name}"
                    shutil.copy2(f, dest / target)
                    files.append(f"raw/{name}/{target}")
        links.append((f"{side.label} ({side.revision[:12]})", sorted(set(files))))
    return links


def _render(template: str, **context) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    return env.get_template(template).render(css=CSS, check_js=Markup(CHECK_JS), noise=views.NOISE_MARK, **context)


def _svg_src(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()


def write_page(rep: analysis.Report, out: Path) -> Path:
    """The page, its plots, raw runs and report files in ``out`` (a staging directory:
    the caller moves it into place and links it from asv's page)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    # matplotlib is imported where a page is drawn: every command parser loads this module
    from mbaphases import plots  # noqa: PLC0415
    pics = plots.draw_all(rep, out / "plots")
    shown = views.view_tables(rep)
    b, c = rep.baseline, rep.candidate
    tables = {name: Markup(_table(shown[name], gate_col="gate" if name == "gate" else None))
              for name in ("gate", "throughput", "phases", "attribution", "dispersion", "functions") if len(shown[name])}
    tables["environment"] = Markup(_table(shown["environment"]).replace("<td>≠</td>", '<td class="diff">≠</td>'))
    images = {"ratio": _img(pics["ratio"][0], "candidate/baseline ratio per case with the gate threshold"),
              "runs": _img(pics["runs"][0], "throughput of every run per case and side"),
              "phases": _img(pics["phases"][0], "stacked phases per case and side"),
              "attribution": _img(pics["attribution"][0], "attribution of the gap per case")}
    page = out / "index.html"
    page.write_text(_render(
        "page.html.j2", rep=rep, b=b, c=c, tables=tables, images={k: Markup(v) for k, v in images.items()},
        counts=", ".join(f"{n} {s}" for s, n in rep.gate.gate.value_counts().items()),
        functions=len(rep.functions) > 0, functions_text=views.FUNCTIONS_TEXT,
        flames=[(case, _svg_src(svg)) for case, svg in rep.flames.items()],
        run_notes=[(s.label, n) for s in (b, c) for n in s.notes], raw_links=_copy_raw(rep, out),
        decision=Markup(markdown_to_html(views.decision_section(rep))), definitions=list(views.DEFINITIONS.items())))
    outputs.write(rep, out)
    return page


def write_overview_page(ov: analysis.Overview, out: Path, folders: dict[str, str]) -> Path:
    """The page over all candidates: gate per candidate, the ledger (table and stacked
    gains), additivity, the history line; each candidate's own page in its folder."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    from mbaphases import plots  # noqa: PLC0415 -- as in write_page
    pics = plots.draw_overview(ov, out / "plots")
    v = views.overview_tables(ov)
    page = out / "index.html"
    page.write_text(_render(
        "overview.html.j2", ov=ov, n=len(ov.reports), b=ov.reports[0].baseline, verdicts=v["verdicts"],
        verdict_rows=[list(row.items()) for row in v["verdicts"].to_dict("records")], folders=folders,
        images={"history": Markup(_img(pics["history"][0], "ratio to the baseline per candidate in history order, "
                                                            "with the gate")),
                "ledger": Markup(_img(pics["ledger"][0], "gains by phase per candidate and case"))},
        tables={"ledger": Markup(_table(v["ledger"])),
                "additivity": Markup(_table(v["additivity"])) if len(v["additivity"]) else ""}))
    outputs.write_overview(ov, out)
    return page


def write_hardware_page(built, out: Path) -> Path:
    """The page over comparisons on several hardwares: one verdict each, links to each page."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table = views.hardware_verdicts(built)
    page = out / "index.html"
    page.write_text(_render("hardware.html.j2", built=built, rows=table.to_dict("records"),
                            verdict=analysis.overall_verdict(list(table.verdict))))
    outputs.write_hardware_index(built, out)
    return page


LINK_MARK = "<!-- mbaphases report link -->"


def linked_page(asv_html: Path) -> Path | None:
    """The report folder asv's index page links to (link_from_asv), if any."""
    index = Path(asv_html) / "index.html"
    if not index.is_file():
        return None
    m = re.search(re.escape(LINK_MARK) + r'<a href="([^"]+)/index\.html"', index.read_text())
    return Path(asv_html) / m.group(1) if m else None


TARGETS_MARK = "<!-- mbaphases: other targets -->"


def link_targets(asv_html: Path, pages: dict[str, Path]) -> bool:
    """Links from asv's index page to the asv pages of the other targets (pins files), each
    published into a folder of its own under it (idempotent: the list is replaced)."""
    index = Path(asv_html) / "index.html"
    if not index.is_file():
        return False
    text = re.sub(re.escape(TARGETS_MARK) + ".*?" + re.escape(TARGETS_MARK), "", index.read_text(), flags=re.S)
    if pages:
        links = " · ".join(f'<a href="{Path(d).resolve().relative_to(Path(asv_html).resolve()).as_posix()}/index.html" '
                           f'style="color:#fff">{html.escape(name)}</a>' for name, d in sorted(pages.items()))
        text = text.replace("</body>", f'{TARGETS_MARK}<div style="position:fixed;bottom:8px;right:12px;z-index:9999;'
                            f'background:#1f77b4;color:#fff;padding:6px 10px;border-radius:4px;font:14px sans-serif">'
                            f'other targets: {links}</div>{TARGETS_MARK}</body>', 1)
    index.write_text(text)
    return True


def link_from_asv(asv_html: Path, page_dir: Path) -> bool:
    """Add a link to the report on asv's own index page (idempotent)."""
    index = Path(asv_html) / "index.html"
    if not index.is_file():
        return False
    rel = Path(page_dir).resolve().relative_to(Path(asv_html).resolve())
    text = re.sub(re.escape(LINK_MARK) + ".*?" + re.escape(LINK_MARK), "", index.read_text(), flags=re.S)
    link = (f'{LINK_MARK}<a href="{rel.as_posix()}/index.html" style="position:fixed;top:8px;right:12px;z-index:9999;'
            f'background:#d62728;color:#fff;padding:6px 10px;border-radius:4px;font:14px sans-serif">A/B report</a>{LINK_MARK}')
    index.write_text(text.replace("</body>", link + "</body>", 1))
    return True

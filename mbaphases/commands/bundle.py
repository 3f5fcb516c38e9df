"""mbaphases bundle: the report's sides, raw runs, results, pins and report in one verified archive."""
from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from mbaphases import bundle as bundle_mod
from mbaphases import inputs
from mbaphases.commands.report import ReportOptions, make_report
from mbaphases.errors import UsageError


def add_parser(sub) -> None:
    bd = sub.add_parser("bundle", help="one archive with the sides' raw runs, asv results, pins and report")
    bd.add_argument("--out", required=True, help="the archive to write (.tar.gz)")
    # the sides and the gate are chosen as `mbaphases report` chooses them
    same = "as for `mbaphases report`"
    for flag in ("--config", "--pins", "--results", "--machine", "--baseline", "--candidate", "--sides",
                 "--reference", "--exceptions", "--baseline-label", "--candidate-label", "--batch"):
        bd.add_argument(flag, default="asv.conf.json" if flag == "--config" else None, help=same)
    for flag, kind in (("--threshold", float), ("--min-runs", int), ("--confidence", float)):
        bd.add_argument(flag, type=kind, default=None, help=same)
    bd.add_argument("--dispersion-limit", type=float, default=0.05, help=same)
    bd.add_argument("--cross-machine", action="store_true", help=same)
    bd.set_defaults(handler=main)


def main(args) -> int:
    """The report's sides, raw runs, results, pins and report in one verified archive."""
    out = inputs.writable_file(Path(args.out), "--out")
    with tempfile.TemporaryDirectory() as tmp:
        opts = dataclasses.replace(ReportOptions.from_args(args), out=str(Path(tmp) / "report"), html=None, quiet=True,
                                   baseline_raw=None, candidate_raw=None)
        status, made = make_report(opts)
        loaded = made.loaded
        if loaded.results_dir is None:
            raise UsageError("a bundle is made from asv results (not from raw inputs)")
        bundle_mod.write(out, [loaded.baseline, *loaded.candidates], loaded.results_dir, loaded.machine,
                         made.pins_path, made.exceptions_path, Path(tmp) / "report", made.reference, made.history)
    print(f"bundle: {out} ({out.stat().st_size / 1024:.0f} KiB)")
    return status

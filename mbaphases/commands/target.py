"""Which asv config a run or a search uses: as given, the field repository's, or the pin
repository of a [published] pins file (generated first); and which targets can run duets."""
from __future__ import annotations

from pathlib import Path

from mbaphases import published, runner
from mbaphases.errors import UsageError


def target_conf(config: Path, pins: dict, field_repo: str | None, field_package: str | None) -> Path:
    """The asv config of the pins' target: as given, the field repository's, or the pin
    repository of a [published] pins file (generated first)."""
    conf = Path(config)
    if not conf.is_file():
        raise UsageError(f"asv config {conf} not found")
    if published.is_published(pins):
        if field_repo:
            raise UsageError("--field-repo with a [published] pins file: the published target's sides are what "
                             "its pins install; give one or the other")
        # the sides' pin repository (one commit per side: its lock, entry and assets), then asv as usual
        return published.asv_conf(pins, conf.resolve().parent, published.generate(pins, conf.resolve().parent))
    if field_repo:
        # asv resolves relative paths against the config's folder: the copy sits beside it
        template = conf.parent / "asv.field.conf.json"
        if not template.is_file():
            raise UsageError(f"field asv config {template} not found")
        field = pins.get("field", {})
        return runner.field_conf(template, field_repo, field_package or field.get("package"),
                                 conf.parent / "asv.field.resolved.conf.json", field)
    return conf


def duet_setting(flag: bool | None, pins: dict, field_repo: str | None) -> bool:
    """Whether to run duets (--duet, else pins 'duet'); refused for sides that are installed
    packages (a release, a field repository's commit): the two sides of a pair run from one
    environment at once, each from its own checkout, which only the demo target's sides can."""
    duet = flag if flag is not None else bool(pins.get("duet", False))
    if duet and (published.is_published(pins) or field_repo):
        raise UsageError("--duet runs both sides of a pair from one environment, each from its own checkout: the "
                         "demo target's sides; a side that is an installed release or a field repository's commit "
                         "needs an environment of its own (run without --duet)")
    return duet

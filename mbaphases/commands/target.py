"""Which asv config a run or a search uses: as given, the field repository's, or the pin
repository of a [published] pins file (generated first)."""
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

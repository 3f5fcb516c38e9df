"""Which design a run or an A/B takes: the pins' (duets, pairs in turns on one CPU) unless the
command line says otherwise, and the pins file `mbaphases ab` keeps says the design it ran."""
import pytest
import tomli_w
from test_suite_asv import ROOT

from mbaphases import cli, inputs
from mbaphases.commands import ab, target


@pytest.mark.parametrize("pins, duet, share, expect", [
    ({}, None, None, (False, None)),
    ({"duet_share_cpu": True}, None, None, (True, True)),
    ({"duet_share_cpu": True}, False, None, (False, True)),  # --no-duet: one side at a time
    ({"duet_share_cpu": True}, None, False, (True, False)),  # --no-duet-share-cpu: a duet, one CPU a side
    ({"duet_share_cpu": True}, True, False, (True, False)),
    ({}, None, True, (True, True)),  # asking to share a CPU asks for a duet
    ({"duet": True}, None, None, (True, None)),
])
def test_the_command_line_overrides_the_pins_design(pins, duet, share, expect):
    assert (target.duet_setting(duet, pins, share), pins.get("duet_share_cpu")) == expect


@pytest.mark.parametrize("argv, expect", [
    ([], (True, True)),  # the published template's design
    (["--no-duet"], (False, False)),
    (["--no-duet-share-cpu"], (True, False)),
])
def test_ab_keeps_the_design_it_runs_in_its_pins(tmp_path, monkeypatch, argv, expect):
    for name in ("asv.conf.json", "pins.unilab.toml"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    monkeypatch.chdir(tmp_path)
    args = cli.build_parser().parse_args(["ab", "unilab==1.4.0", "unilab==1.5.2", *argv])
    doc = ab.pins_doc(args, "published")
    assert (doc["duet"], doc["duet_share_cpu"]) == expect
    # the file a user repeats with `mbaphases run --pins` takes the same design
    (tmp_path / "pins.ab.toml").write_text(tomli_w.dumps(doc))
    assert target.duet_setting(None, inputs.load_active_pins(tmp_path / "pins.ab.toml")) == expect[0]


def test_the_published_pins_run_pairs_in_turns_by_default():
    for name in ("pins.unilab.toml", "pins.unilab-deps.toml"):
        pins = inputs.load_active_pins(ROOT / name)
        assert target.duet_setting(None, pins) and pins["duet_share_cpu"] and pins["duet_turn_ms"] == 25, name

"""The one design setting: which design a run, a search or an A/B takes (the command line, else the
pins, else pairs in turns for an entry that takes turns), the earlier flags as its aliases, the pins
file `mbaphases ab` keeps saying the design it ran, and the slots a design gets from the CPUs there are."""
import io
import time

import pytest
import tomli_w
from test_suite_asv import ROOT

from mbaphases import cli, inputs
from mbaphases.commands import ab, target
from mbaphases.errors import UsageError
from mbaphases.run import design as design_mod
from mbaphases.run.executors.local import LocalExecutor, Slots, slots_for


@pytest.mark.parametrize("pins, argv, expect", [
    ({}, [], "turns"),  # no design named: the entry takes turns
    ({"design": "solo"}, [], "solo"),
    ({"design": "turns"}, ["--design", "pairs"], "pairs"),
    ({"duet_share_cpu": True}, [], "turns"),  # the earlier pins keys
    ({"duet": True}, [], "pairs"),
    ({"duet": False}, [], "solo"),
    ({"design": "turns"}, ["--no-duet"], "solo"),  # the earlier flags
    ({"design": "turns"}, ["--no-duet-share-cpu"], "pairs"),
    ({}, ["--duet-share-cpu"], "turns"),
    ({"design": "turns"}, ["--duet"], "turns"),  # --duet keeps the pins' paired design
    ({"design": "solo"}, ["--duet"], "pairs"),
    ({"design": "turns"}, ["--design", "solo", "--duet-share-cpu"], "solo"),  # --design wins
])
@pytest.mark.parametrize("command", ["run", "find", "ab"])
def test_run_find_and_ab_take_one_design_setting(command, pins, argv, expect):
    positional = {"run": [], "find": ["a", "b", "--phase", "physics", "--case", "x/y/z"], "ab": ["a==1", "a==2"]}
    args = cli.build_parser().parse_args([command, *positional[command], *argv])
    chosen = target.design_setting(args, {"path": "pins.toml", **pins})
    assert chosen.kind == expect and chosen.why


def test_pairing_and_turn_length_are_options_of_the_design():
    args = cli.build_parser().parse_args(["run", "--pairing", "round-robin", "--turn-ms", "40"])
    chosen = target.design_setting(args, {"path": "p", "design": "turns", "turn_ms": 25})
    assert (chosen.pairing, chosen.turn_ms) == ("round-robin", 40.0)
    alias = cli.build_parser().parse_args(["run", "--duet-pairing", "round-robin"])
    assert target.design_setting(alias, {"path": "p"}).pairing == "round-robin"
    pinned = target.design_setting(cli.build_parser().parse_args(["run"]), {"path": "p", "duet_turn_ms": 30})
    assert pinned.turn_ms == 30.0 and pinned.as_pins() == {"design": "turns", "pairing": "star", "turn_ms": 30.0}


def test_a_field_repository_runs_solo_unless_asked_its_entry_takes_no_turns():
    args = cli.build_parser().parse_args(["run"])
    chosen = target.design_setting(args, {"path": "p"}, field_repo="../unilab")
    assert chosen.kind == "solo" and "does not take turns" in chosen.why
    asked = cli.build_parser().parse_args(["run", "--design", "turns"])
    assert target.design_setting(asked, {"path": "p"}, field_repo="../unilab").kind == "turns"


def test_a_bad_design_is_one_usage_error(capsys):
    code = cli.main(["run", "--design", "trio"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error:") and "trio" in err[0], err
    with pytest.raises(UsageError, match="--turn-ms -1"):
        design_mod.settle({}, "turns", turn_ms=-1)


@pytest.mark.parametrize("argv, expect", [
    ([], "turns"),  # the published template's design
    (["--no-duet"], "solo"),
    (["--design", "pairs"], "pairs"),
])
def test_ab_keeps_the_design_it_runs_in_its_pins(tmp_path, monkeypatch, argv, expect):
    for name in ("asv.conf.json", "pins.unilab.toml"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    monkeypatch.chdir(tmp_path)
    args = cli.build_parser().parse_args(["ab", "unilab==1.4.0", "unilab==1.5.2", *argv])
    doc = ab.pins_doc(args, "published")
    assert doc["design"] == expect and "duet_share_cpu" not in doc
    # the file a user repeats with `mbaphases run --pins` takes the same design
    (tmp_path / "pins.ab.toml").write_text(tomli_w.dumps(doc))
    assert design_mod.settle(inputs.load_active_pins(tmp_path / "pins.ab.toml")).kind == expect


def test_the_published_and_demo_pins_run_pairs_in_turns():
    for name in ("pins.unilab.toml", "pins.unilab-deps.toml", "pins.toml"):
        chosen = design_mod.settle(inputs.load_active_pins(ROOT / name))
        assert chosen.kind == "turns" and chosen.turn_ms == 25, name


def test_slots_are_the_profiles_cpus_and_one_cpu_still_takes_turns():
    turns, pairs, solo = (design_mod.Design(k) for k in ("turns", "pairs", "solo"))
    both = slots_for(turns, 2, [0, 1])
    assert both.slots == [[0, 1]] and not both.short  # the demo profile: a pair on both CPUs
    assert slots_for(turns, 1, [0, 1]).slots == [[0], [1]]  # one-thread profiles: two pairs at once
    one = slots_for(turns, 2, [0])
    assert one.slots == [[0]] and one.short
    said = " ".join(one.lines(turns))
    assert "asks for 2 CPUs" in said and "gives 1" in said
    assert slots_for(pairs, 2, [0, 1]).slots == [[0], [1]] and slots_for(pairs, 2, [0, 1]).short
    assert slots_for(pairs, 1, [0, 1, 2, 3]).slots == [[0], [1], [2], [3]]
    assert slots_for(pairs, 2, [0, 1, 2, 3]).slots == [[0, 1], [2, 3]]
    with pytest.raises(UsageError, match="--design turns runs a pair on one CPU"):
        slots_for(pairs, 1, [0])
    assert slots_for(solo, 2, [0, 1]).slots == [[0, 1]]


def test_the_deadline_starts_no_unit_that_would_end_late_and_no_profiles_after_it(tmp_path):
    """The executor's deadline: the first unit always starts (nothing estimates it), then each starts
    only if the median unit so far would end in time; those kept back are counted, said once, and the
    function profiles are skipped when they would end late (tests/suite/test_duet.py runs it for real)."""
    out = io.StringIO()
    ex = LocalExecutor([], {}, tmp_path / "asv.conf.json", tmp_path, None, {}, {}, "b", Slots([[0]], 1, [0]), out,
                       deadline=time.time() + 60)
    assert ex.fits("the first pair")
    ex.unit_seconds = [10.0]
    assert ex.fits("the second pair") and ex.late_by() is None
    ex.unit_seconds = [10.0, 120.0, 130.0]
    assert ex.late_by() > 0 and not ex.fits("pair r3p1") and not ex.fits("pair r4p1", 2)
    assert ex.not_started == 3 and out.getvalue().count("[deadline] not starting") == 1
    assert ex.profile_sides([{"sha": "a" * 40, "label": "x"}], tmp_path, {"a" * 40: ["case"]}) == []
    assert "no function profiles" in out.getvalue()

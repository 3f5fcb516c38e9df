"""The design of a batch: which units of work it has and how they are paired.

* ``solo``: one side at a time, asv interleaving the sides round by round.
* ``pairs``: two sides at once, each on a slot of its own, every case started together.
* ``turns``: a pair's two sides on one slot, their collector loops taking turns between steps
  (mbaphases/turns.py), so whatever slows the slot's CPUs for longer than a turn slows both alike.

One setting (``--design``, pins ``design``, with ``pairing`` and ``turn_ms`` as its options) for
``run``, ``find``, ``ab`` and the main job; the earlier flags and pins keys are its aliases. Where the
pins name none, pairs in turns for every target whose entry takes turns (the design this host class
decides with, on one CPU as on many), solo where the entry cannot.
"""
from __future__ import annotations

from dataclasses import dataclass

from mbaphases.errors import UsageError

KINDS = ("solo", "pairs", "turns")
PAIRINGS = ("star", "round-robin")


@dataclass(frozen=True)
class Design:
    kind: str
    pairing: str = "star"
    turn_ms: float | None = None  # None: the entry's default (mbaphases/turns.py)
    why: str = ""

    @property
    def paired(self) -> bool:
        return self.kind != "solo"

    @property
    def share_cpu(self) -> bool:
        return self.kind == "turns"

    def text(self) -> str:
        if not self.paired:
            return "solo (one side at a time)"
        what = "pairs in turns" if self.share_cpu else "pairs at once, a slot a side"
        turn = f", turns of {self.turn_ms:g} ms" if self.share_cpu and self.turn_ms else ""
        return f"{what} ({self.pairing}{turn})"

    def as_pins(self) -> dict:
        """The keys a pins file names this design with."""
        return {"design": self.kind, "pairing": self.pairing, **({"turn_ms": self.turn_ms} if self.turn_ms else {})}

    def as_record(self) -> dict:
        return {"kind": self.kind, "pairing": self.pairing, "turn_ms": self.turn_ms, "why": self.why}


def _legacy_flags(duet: bool | None, share_cpu: bool | None, pinned: str | None) -> str | None:
    """The earlier flags as a design: --no-duet solo, --duet-share-cpu turns, --no-duet-share-cpu
    pairs (a slot a side), --duet the pins' paired design (else pairs)."""
    if duet is False:
        return "solo"
    if share_cpu is not None:
        return "turns" if share_cpu else "pairs"
    if duet:
        return pinned if pinned in ("pairs", "turns") else "pairs"
    return None


def _pinned(pins: dict) -> str | None:
    """The pins' design: ``design``, else the earlier keys (``duet_share_cpu``, ``duet``)."""
    if pins.get("design"):
        return pins["design"]
    if pins.get("duet_share_cpu"):
        return "turns"
    if "duet" in pins:
        return "pairs" if pins["duet"] else "solo"
    return None


def settle(pins: dict, asked: str | None = None, *, duet: bool | None = None, share_cpu: bool | None = None,
           pairing: str | None = None, turn_ms: float | None = None, takes_turns: bool = True,
           target: str = "this target") -> Design:
    """The batch's design: ``--design``, else the earlier flags, else the pins', else the default.
    ``takes_turns``: whether the target's entry takes turns (the default is solo where it cannot)."""
    if asked is not None and asked not in KINDS:
        raise UsageError(f"--design {asked!r} is not a design; valid: {', '.join(KINDS)}")
    pinned = _pinned(pins)
    legacy = _legacy_flags(duet, share_cpu, pinned)
    if asked is not None:
        kind, why = asked, f"asked: --design {asked}"
    elif legacy is not None:
        kind, why = legacy, f"asked with the earlier flags (now --design {legacy})"
    elif pinned is not None:
        kind, why = pinned, f"the pins' design ({pins['path'] if 'path' in pins else 'pins'})"
    elif takes_turns:
        kind, why = "turns", ("default: the entry takes turns, and pairs in turns is the design a shared host "
                              "decides with (docs/log/noise.md)")
    else:
        kind, why = "solo", f"default: the entry of {target} does not take turns"
    pairing = pairing or pins.get("pairing") or pins.get("duet_pairing") or "star"
    if pairing not in PAIRINGS:
        raise UsageError(f"--pairing {pairing!r} is not a pairing; valid: {', '.join(PAIRINGS)}")
    turn_ms = turn_ms if turn_ms is not None else pins.get("turn_ms") or pins.get("duet_turn_ms")
    if turn_ms is not None and not turn_ms > 0:
        raise UsageError(f"--turn-ms {turn_ms} must be > 0")
    return Design(kind, pairing, float(turn_ms) if turn_ms else None, why)


def from_record(record: dict) -> Design:
    """The design a batch recorded (a batch of the earlier record names it in ``duet``)."""
    if record.get("design"):
        d = record["design"]
        return Design(d["kind"], d.get("pairing") or "star", d.get("turn_ms"), "the resumed batch's design")
    duet = record.get("duet")
    if not duet:
        return Design("solo", why="the resumed batch's design")
    return Design("turns" if duet.get("share_cpu") else "pairs", duet.get("pairing") or "star", duet.get("turn_ms"),
                  "the resumed batch's design")


def pairs_of_round(sides: list[dict], reference: str | None, pairing: str = "star", k: int = 0) -> list[tuple[dict, dict]]:
    """Which sides run together in round ``k``.

    star (the default): every candidate with the baseline (the gate's comparisons), and every
    other candidate with the ledger's reference (what each optimization bought); each comparison
    the report makes is then paired, at up to 2n-3 pairs a round.
    round-robin: each round one pairing of all sides (the circle method: the baseline stays, the
    others turn one place a round), so every side runs once a round and every two sides meet once
    in n-1 rounds; the rest of a comparison's runs are compared unpaired, inside the batch. With an
    odd number of sides, the side left without a partner runs with the baseline, which so runs
    in every round."""
    base, cands = sides[0], sides[1:]
    if pairing == "round-robin" and len(cands) > 1:
        ring = cands + ([None] if len(sides) % 2 else [])
        turn = k % len(ring)
        ring = ring[turn:] + ring[:turn]
        pairs = [(base, ring[0])] + [(ring[i], ring[-i]) for i in range(1, len(ring) // 2 + 1) if i != len(ring) - i]
        # the side that meets the bye runs with the baseline; on the baseline's own bye it runs
        # with the first side of another pair (twice this round): every round measures the baseline
        rest = [(base, a or b) if a is None or b is None else (a, b) for a, b in pairs[1:]]
        return [pairs[0] if pairs[0][1] is not None else (base, rest[0][0])] + rest
    pairs = [(base, c) for c in cands]
    ref = next((c for c in cands if c["label"] == reference), None)
    if ref is not None and len(cands) > 1:
        pairs += [(ref, c) for c in cands if c is not ref]
    return pairs

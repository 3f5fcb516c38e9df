"""Every file a user hands the suite, read and checked in one place.

pins.toml, the maintainer's exceptions file and the asv config are validated
against JSON schemas (jsonschema), so a wrong type, a missing key or an unknown
key (a typo such as ``[[exceptions]]``) is one message naming the file, the key
and what is valid.
"""
from __future__ import annotations

import math
import os
import re
import tomllib
from pathlib import Path

import asv.util
import jsonschema

from mbaphases import pins
from mbaphases.errors import UsageError

_POSITIVE_INT = {"type": "integer", "minimum": 1}
_THRESHOLD = {"type": "number", "exclusiveMinimum": 0, "finite": True}
_REQUIREMENT = "^[A-Za-z0-9][A-Za-z0-9._-]*(\\[.*\\])?\\s*(==|>=|<=|~=|!=|<|>|@).+$"  # a name and a version or URL
_REQUIREMENTS = {"type": "array", "items": {"type": "string", "pattern": _REQUIREMENT}}


def _about(text: str, schema: dict) -> dict:
    """A key's schema with its meaning, which docs/reference/pins.md is generated from."""
    return {**schema, "description": text}


_SIDE = {"type": "object", "required": ["label"], "additionalProperties": False,
         "anyOf": [{"required": ["ref"]}, {"required": ["install"]}, {"required": ["checkout", "commit"]}],
         "properties": {
             "ref": _about("a commit of the target repository: SHA, tag or branch", {"type": "string", "minLength": 1}),
             "label": _about("the side's name in every table", {"type": "string", "minLength": 1}),
             "install": _about("a [published] target's side: the requirement to install, e.g. "
                               "'unilab[mujoco,motrix]==1.4.0'", {"type": "string", "minLength": 1}),
             "overrides": _about("requirements installed over the side's own", _REQUIREMENTS),
             "checkout": _about("a checkout of the framework's repository (with commit)",
                                {"type": "string", "minLength": 1}),
             "commit": _about("the commit of that checkout", {"type": "string", "minLength": 1}),
             "extras": _about("the package's extras", {"type": "array", "items": {"type": "string",
                                                                               "pattern": "^[A-Za-z0-9._-]+$"}}),
             "swap": _about("dependencies pinned to another version in the side's lock, each NAME==VERSION",
                            {"type": "array", "items": {"type": "string",
                                                        "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*==.+$"}})}}
_CANDIDATE = {**_SIDE, "properties": {**_SIDE["properties"], "combines": _about(
    "the labels of the candidates this one combines: its additivity is checked against them",
    {"type": "array", "items": {"type": "string"}, "uniqueItems": True})}}
PROFILE_KEYS = ("num_envs", "warmup_steps", "measure_steps", "replay_capacity_steps", "torch_threads")
_PROFILE_ABOUT = {"num_envs": "parallel environments", "warmup_steps": "collector steps before the timed ones",
                  "measure_steps": "timed collector steps", "replay_capacity_steps": "the replay buffer's steps",
                  "torch_threads": "torch's threads, and the CPUs a slot of this profile has"}

PINS_SCHEMA = {
    "type": "object",
    "required": ["profile", "runs", "cases", "baseline", "profiles"],
    "additionalProperties": False,
    "properties": {
        "profile": _about("the profile runs use (MBAPHASES_PROFILE and --profile override)", {"type": "string"}),
        "runs": _about("independent runs per side (--runs overrides)", _POSITIVE_INT),
        "cases": _about("the cases, each <algo>/<task>/<sim>",
                        {"type": "array", "minItems": 1, "uniqueItems": True,
                         "items": {"type": "string", "pattern": "^[^/]+/[^/]+/[^/]+$"}}),
        "baseline": _about("the side every candidate is gated against", _SIDE),
        "candidate": _about("the one candidate of a two-sided pins file", _CANDIDATE),
        "candidates": _about("the candidates, each a side", {"type": "array", "minItems": 1, "items": _CANDIDATE}),
        "reference": _about("the candidate the ledger measures every other against (default: the first)",
                            {"type": "string", "minLength": 1}),
        "profile_functions": _about("profile the functions after the runs (--profile-functions)", {"type": "boolean"}),
        "design": _about("solo, pairs (at once, a slot each) or turns (one slot, taking turns): --design",
                         {"enum": ["solo", "pairs", "turns"]}),
        "pairing": _about("which sides run together in a round: star or round-robin (--pairing)",
                          {"enum": ["star", "round-robin"]}),
        "turn_ms": _about("how long a side's turn lasts in turns (default 25)",
                          {"type": "number", "exclusiveMinimum": 0}),
        # earlier versions' names of design, pairing and turn_ms: still read, not documented
        "duet": {"type": "boolean"},
        "duet_pairing": {"enum": ["star", "round-robin"]},
        "duet_share_cpu": {"type": "boolean"},
        "duet_turn_ms": {"type": "number", "exclusiveMinimum": 0},
        "profile_native": _about("the function profiles also sample native frames", {"type": "boolean"}),
        "target_half_width": _about("the interval half-width a batch's allocation plans for (default 0.03)",
                                    {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}),
        # lower where native unwinding of many threads (a large framework) stalls the target at every sample
        "profile_rate_hz": _about("py-spy's sampling rate for the function profiles",
                                  {"type": "integer", "minimum": 10, "maximum": 1000}),
        # above it, the sampler's stops, not the program, chose what was caught
        "profile_overhead_limit": _about("a profiled run this many times slower than the measured runs has its "
                                         "function table marked DISTORTED", {"type": "number", "exclusiveMinimum": 1}),
        "profiles": _about("the run sizes, by name", {"type": "object", "minProperties": 1, "additionalProperties": {
            "type": "object", "required": list(PROFILE_KEYS), "additionalProperties": False,
            "properties": {**{k: _about(_PROFILE_ABOUT[k], _POSITIVE_INT) for k in PROFILE_KEYS},
                           "overrides": _about("extra overrides of the target's entry, each KEY=VALUE (e.g. the "
                                               "reference target's sim.nthread)",
                                               {"type": "array", "items": {"type": "string",
                                                                           "pattern": "^[^=]+=.+$"}})}}}),
        "field": _about("the field's repository as a target (--field-repo)", {
            "type": "object", "additionalProperties": False, "properties": {
                "extras": _about("the package's extras", {"type": "array", "items": {"type": "string", "minLength": 1}}),
                "python": _about("the environments' python, 3.N", {"type": "string", "pattern": "^3\\.[0-9]+$"}),
                "prepare": _about("a command run once per environment after its install (e.g. fetching assets)", {"type": "string"}),
                "package": _about("the repository's package name", {"type": "string", "minLength": 1})}}),
        "published": _about("the field's published framework as a target: sides name what to install", {
            "type": "object", "additionalProperties": False, "properties": {
                "repo": _about("the pin repository made for the sides: one commit a side (default published-sides)",
                               {"type": "string", "minLength": 1}),
                "python": _about("the environments' python, 3.N", {"type": "string", "pattern": "^3\\.[0-9]+$"}),
                "overrides": _about("requirements installed over every side's own", _REQUIREMENTS),
                "assets": _about("the assets manifest: each asset's registry package and sha256 (default: the "
                                 "suite's own)", {"type": "string", "minLength": 1})}}),
        "ledger": _about("what each optimization bought", {
            "type": "object", "additionalProperties": False, "properties": {
                "additivity_margin": _about("the interaction a combined candidate may have and still add up, as a "
                                            "share of the reference's active time per case (default 0.05)",
                                            {"type": "number", "exclusiveMinimum": 0, "finite": True}),
                "additivity_margin_ms": _about("the same margin in ms, instead of the share",
                                               {"type": "number", "exclusiveMinimum": 0, "finite": True})}}),
        "marks": _about("the attribution's marks", {"type": "object", "additionalProperties": False, "properties": {
            "min_share": _about("a change below this share of the baseline's active time is never marked",
                                {"type": "number", "minimum": 0, "exclusiveMaximum": 1})}}),
        "fleet": _about("the fleet the pair blocks run on (--fleet, --fleet-insecure, --fleet-files)", {
            "type": "object", "additionalProperties": False, "properties": {
                "address": _about("ray, HOST:PORT, ray://HOST:PORT, slurm or slurm:PARTITION",
                                  {"type": "string", "minLength": 1}),
                "insecure": _about("send blocks to a cluster without token authentication", {"type": "boolean"}),
                "files": _about("shared (one file system) or shipped (the suite and commits sent)",
                                {"enum": ["shared", "shipped"]})}}),
        "gate": _about("the verdict per case", {"type": "object", "additionalProperties": False, "properties": {
            "threshold": _about("the candidate's throughput at least this share of the baseline's (default 0.90)",
                                _THRESHOLD),
            "min_runs": _about("fewest runs a side for a verdict (default 3)", _POSITIVE_INT),
            "exceptions": _about("the maintainer's exceptions file (TOML)", {"type": "string", "minLength": 1}),
            "confidence": _about("the level of the intervals the gate decides on (default 0.90)",
                                 {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})}}),
    },
}

EXCEPTIONS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"exception": {"type": "array", "items": {
        "type": "object", "required": ["case", "reason"], "additionalProperties": False,
        "properties": {"case": {"type": "string", "minLength": 1}, "reason": {"type": "string", "minLength": 1},
                       "threshold": _THRESHOLD, "decided_by": {"type": "string"}, "decided_on": {}}}}},
}

ASV_CONF_SCHEMA = {
    "type": "object",
    "required": ["version", "repo"],
    "properties": {"repo": {"type": "string", "minLength": 1}, "results_dir": {"type": "string"},
                   "html_dir": {"type": "string"}, "branches": {"type": "array", "items": {"type": "string"}}},
}


def _finite_keyword(validator, value, instance, schema):
    if value and isinstance(instance, float) and not math.isfinite(instance):
        yield jsonschema.ValidationError(f"{instance!r} is not a finite number")


_Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"finite": _finite_keyword})


def _where(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "top level"


def _describe(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        return f"unknown key {', '.join(map(repr, extra))}; valid: {', '.join(allowed)}"
    if error.validator == "type":
        return f"{error.instance!r} is not of type {error.validator_value}"
    if error.validator in ("minimum", "exclusiveMinimum"):
        op = ">=" if error.validator == "minimum" else ">"
        return f"{error.instance!r} must be {op} {error.validator_value}"
    return error.message


def validate(doc, schema: dict, what: str) -> None:
    errors = sorted(_Validator(schema).iter_errors(doc), key=lambda e: (len(e.absolute_path), e.path))
    if errors:
        e = errors[0]
        raise UsageError(f"{what}: {_where(e)}: {_describe(e)}")


def read_text(path: Path, what: str) -> str:
    """A file the user named: it must exist, be a file and be UTF-8."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{what} {path} not found")
    if path.is_dir():
        raise UsageError(f"{what} {path} is a directory, not a file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{what} {path} is not UTF-8 text") from None
    except OSError as e:
        raise UsageError(f"cannot read {what} {path}: {e.strerror}") from None


def read_toml(path: Path, what: str) -> dict:
    text = read_text(path, what)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{what} {path} is not valid TOML: {e}") from None


def load_pins(path: Path) -> dict:
    doc = read_toml(path, "pins file")
    validate(doc, PINS_SCHEMA, f"pins file {path}")
    if doc["profile"] not in doc["profiles"]:
        raise UsageError(f"pins file {path}: profile {doc['profile']!r} is not one of its profiles "
                         f"({', '.join(doc['profiles'])})")
    return normalize_sides(doc, f"pins file {path}")


def load_active_pins(path: Path, profile: str | None = None) -> dict:
    """The validated pins with the active profile resolved (mbaphases.pins.activate)."""
    path = Path(path)
    try:
        doc = pins.activate(load_pins(path), profile)
    except pins.UnknownProfile as e:
        raise UsageError(str(e)) from None
    doc["path"] = str(path.resolve())
    return doc


def normalize_sides(doc: dict, what: str) -> dict:
    """One baseline and a list of candidates (``candidate`` is the two-sided form), with
    distinct labels, the ledger's reference among them and ``combines`` naming candidates."""
    if ("candidate" in doc) == ("candidates" in doc):
        raise UsageError(f"{what}: give either [candidate] or [[candidates]], not {'both' if 'candidate' in doc else 'neither'}")
    cands = doc.pop("candidates", None) or [doc.pop("candidate")]
    labels = [doc["baseline"]["label"]] + [c["label"] for c in cands]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise UsageError(f"{what}: the label {dup[0]!r} names more than one side; each side needs its own")
    names = [c["label"] for c in cands]
    ref = doc.get("reference", names[0])
    if ref not in names:
        raise UsageError(f"{what}: reference {ref!r} is not a candidate; valid: {', '.join(names)}")
    for c in cands:
        for other in c.get("combines", []):
            if other not in names or other == c["label"]:
                raise UsageError(f"{what}: {c['label']!r} combines {other!r}, which is not another candidate; "
                                 f"valid: {', '.join(n for n in names if n != c['label'])}")
    doc["candidates"], doc["reference"] = cands, ref
    for side in [doc["baseline"], *cands]:
        if ("install" in side or "checkout" in side) and "published" not in doc:
            raise UsageError(f"{what}: side {side['label']!r} names what to install, which needs a [published] "
                             "table (the target that installs sides)")
        if "install" in side and "checkout" in side:
            raise UsageError(f"{what}: side {side['label']!r} names both install and checkout; give one")
        if "ref" not in side:
            # the side's commit in the generated pin repository
            side["ref"] = published_tag(side["label"])
    return doc


PUBLISHED_TAG_PREFIX = "side/"


def published_tag(label: str) -> str:
    """The tag of a published side's commit in the pin repository (mbaphases.published)."""
    return PUBLISHED_TAG_PREFIX + re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-")


def load_exceptions_doc(path: Path) -> dict:
    doc = read_toml(path, "exceptions file")
    validate(doc, EXCEPTIONS_SCHEMA, f"exceptions file {path}")
    return doc


def check_asv_conf(conf: dict, path: Path) -> dict:
    validate(conf, ASV_CONF_SCHEMA, f"asv config {path}")
    return conf


def writable_dir(path: Path, flag: str) -> Path:
    """An output directory: a directory or a path that can be made one."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path} is a file; give a directory")
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise UsageError(f"{flag} {path}: {probe} is a file, not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path} is not writable")
    return path


def writable_file(path: Path, flag: str) -> Path:
    """An output file: not a directory, in a directory that is or can be made writable."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a directory; give a file path")
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"{flag} {path} is not writable")
    writable_dir(path.parent, flag)
    return path


def load_asv_conf(path: Path) -> dict:
    read_text(Path(path), "asv config")
    try:
        conf = asv.util.load_json(str(path), js_comments=True)
    except (OSError, ValueError, asv.util.UserError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UsageError(f"asv config {path}: {first}") from None
    return check_asv_conf(conf, Path(path))

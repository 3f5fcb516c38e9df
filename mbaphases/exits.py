"""Every exit status the commands end with, and what each means: the one table the CLI, the
scripts and docs/reference/exit-codes.md (generated from it) share."""
from __future__ import annotations

from dataclasses import dataclass

PASS = 0
VERDICT_OTHER = 1
USAGE = 2
INTERNAL = 3
LOCK_TIMEOUT = 75  # EX_TEMPFAIL: another formal run kept the machine
INTERRUPTED = 130  # 128 + SIGINT, also for SIGTERM and SIGHUP


@dataclass(frozen=True)
class Exit:
    code: int
    name: str
    meaning: str
    tested_by: str  # tests/<file>::<test> that ends a real command with this code


TABLE = (
    Exit(PASS, "verdict: PASS",
         "`report`, `ab`, the CI gate: every candidate PASSes. `run`: every planned run recorded. "
         "`find`: it named the commit that moved the phase.",
         "tests/suite/test_bad_input.py::test_runs_are_files_not_names"),
    Exit(VERDICT_OTHER, "verdict: anything else",
         "`report`, `ab`, the CI gate: a candidate FAILs, is INCONCLUSIVE or MISALIGNED. `run`: a case-run "
         "failed or a planned run is missing (each listed; every other run kept). `find`: no commit named.",
         "tests/suite/test_ci_gate.py::test_the_gate_script_decides_on_one_cpu_and_writes_its_summary"),
    Exit(USAGE, "bad input",
         "One `error:` line on stderr naming the bad value and what is valid; nothing written, nothing "
         "measured lost.",
         "tests/suite/test_design_choice.py::test_a_bad_design_is_one_usage_error"),
    Exit(INTERNAL, "internal error",
         "One `error:` line naming the log file that holds the traceback; completed runs are kept.",
         "tests/suite/test_bad_input.py::test_internal_error_is_exit_3_with_a_log"),
    Exit(LOCK_TIMEOUT, "machine busy",
         "Another formal run held this machine's lock past `--lock-timeout-min`; the line names the "
         "holder. Nothing was measured: run again later.",
         "tests/suite/test_faults.py::test_a_run_that_finds_the_formal_lock_held_waits_then_exits_75_having_measured_nothing"),
    Exit(INTERRUPTED, "interrupted",
         "Ctrl-C, SIGTERM or SIGHUP: no process of the command left, staged outputs discarded, every "
         "completed run kept; `mbaphases run --resume` goes on.",
         "tests/suite/test_local_blocks.py::test_an_interrupted_star_leaves_nothing_running_and_resume_completes_it"),
)


def markdown() -> str:
    rows = [f"| {e.code} | {e.name} | {e.meaning} | `{e.tested_by}` |" for e in TABLE]
    return "\n".join(["| exit | name | meaning | tested by |", "|---|---|---|---|", *rows]) + "\n"

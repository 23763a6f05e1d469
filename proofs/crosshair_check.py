"""Run CrossHair over the invariants in proofs/properties.py and tell its outcomes apart.

CrossHair 0.0.113 exits 1 both when it finds a counterexample and when it crashes (for
example on a ``typing.Literal`` parameter), so the exit code alone cannot be trusted.
This runner reads its output instead: a line ``<file>:<line>: error: ... when calling
...`` is a counterexample; any other failure is a crash. Neither passes.

    python proofs/crosshair_check.py [--timeout SECONDS] [--json PATH] [TARGET ...]

Each target (by default every property) runs in its own CrossHair process with
``--per_condition_timeout SECONDS``; the number of paths (iterations) CrossHair explored
is read from its verbose log. Exit 0 when every target passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import enum
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

PROOFS = Path(__file__).resolve().parent
COUNTEREXAMPLE = re.compile(r"^.+:\d+: error: .+ when calling .+$")
CONFIRMED = re.compile(r": info: Confirmed over all paths\.$")
ITERATIONS = re.compile(r"Number of iterations:\s+(\d+)")
PROPERTIES = (
    "decide_answers_execute_only_for_ready_or_released",
    "no_claim_is_rearmed_but_by_its_owners_release",
    "next_validates_one_revision_on",
    "foreign_ids_never_finish_a_claim",
    "a_changed_binding_field_conflicts",
    "a_composed_step_is_its_parts_in_one_write",
)


class Verdict(enum.StrEnum):
    """What one CrossHair run means."""

    PASSED = "passed"
    COUNTEREXAMPLE = "counterexample"
    CRASHED = "crashed"


@dataclass
class Outcome:
    """One target's result."""

    target: str
    verdict: Verdict
    confirmed: bool
    paths: int
    seconds: float
    detail: str


def classify(returncode: int, stdout: str, stderr: str) -> tuple[Verdict, str]:
    """Tell a pass, a counterexample and a crash apart from CrossHair's output."""
    findings = [line for line in stdout.splitlines() if COUNTEREXAMPLE.match(line)]
    if findings:
        return Verdict.COUNTEREXAMPLE, findings[0]
    errors = [line for line in stdout.splitlines() if ": error: " in line]
    if returncode == 0 and not errors:
        return Verdict.PASSED, ""
    tail = (stdout + stderr).strip().splitlines()[-1:] or [f"exit code {returncode}"]
    return Verdict.CRASHED, tail[0]


def check(target: str, timeout: float, pythonpath: str | None = None) -> Outcome:
    """Run CrossHair on ``module.function`` (resolved from proofs/) and classify it."""
    environment = dict(os.environ)
    # A mutated copy of the core comes first, before the installed package.
    paths = [*([pythonpath] if pythonpath else []), str(PROOFS)]
    if environment.get("PYTHONPATH"):
        paths.append(environment["PYTHONPATH"])
    environment["PYTHONPATH"] = os.pathsep.join(paths)
    # The properties state the core's promises themselves. With the core's own icontract
    # postconditions on, CrossHair would treat a callee's broken postcondition as a path
    # to skip, and so miss exactly the bugs they guard against.
    environment["TOOL_CHECKPOINT_CONTRACTS"] = "0"
    command = [
        sys.executable,
        "-m",
        "crosshair",
        "check",
        "--analysis_kind=icontract",
        f"--per_condition_timeout={timeout}",
        "--report_all",
        "--verbose",
        target,
    ]
    began = time.perf_counter()
    run = subprocess.run(
        command, capture_output=True, text=True, cwd=PROOFS, env=environment, check=False
    )
    seconds = time.perf_counter() - began
    verdict, detail = classify(run.returncode, run.stdout, run.stderr)
    return Outcome(
        target=target,
        verdict=verdict,
        confirmed=bool(CONFIRMED.search(run.stdout.strip())),
        paths=sum(int(found) for found in ITERATIONS.findall(run.stderr)),
        seconds=round(seconds, 1),
        detail=detail,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("targets", nargs="*", help="module.function targets in proofs/")
    parser.add_argument("--timeout", type=float, default=15.0, help="per condition, seconds")
    parser.add_argument("--pythonpath", help="put this first on the path (a mutated core)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", help="write the outcomes to this file")
    args = parser.parse_args(argv)
    targets = args.targets or [f"properties.{name}" for name in PROPERTIES]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        outcomes = list(pool.map(lambda t: check(t, args.timeout, args.pythonpath), targets))
    for outcome in outcomes:
        proof = "all paths" if outcome.confirmed else f"{outcome.paths} paths"
        print(f"{outcome.verdict:<15}{outcome.target:<60}{proof:>12}{outcome.seconds:>8.1f}s")
        if outcome.detail:
            print(f"    {outcome.detail}")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(o) for o in outcomes], indent=2) + "\n")
    return 0 if all(o.verdict is Verdict.PASSED for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())

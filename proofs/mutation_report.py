"""Summarise the last mutmut run: the score, and every mutant not killed, by function.

Run from the repository root after ``mutmut run`` (``make mutate`` does both):

    python proofs/mutation_report.py > proofs/results-mutmut.txt

The score counts a mutant as killed when a test failed on it (mutmut's "killed") or it
timed out; every other verdict (survived, no tests, suspicious, skipped, not checked)
counts against it.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

MUTMUT = Path(sys.executable).with_name("mutmut")
KILLED = {"killed", "timeout"}


def verdicts() -> dict[str, str]:
    """Every mutant's name and verdict, from ``mutmut results --all true``."""
    listing = subprocess.run(
        [str(MUTMUT), "results", "--all", "true"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found: dict[str, str] = {}
    for line in listing.splitlines():
        name, separator, verdict = line.strip().rpartition(": ")
        if separator and name:
            found[name] = verdict
    return found


def report(found: dict[str, str]) -> str:
    """The text of proofs/results-mutmut.txt."""
    counts = Counter(found.values())
    killed = sum(counts[verdict] for verdict in KILLED)
    total = len(found)
    score = 100 * killed / total if total else 0.0
    lines = [
        f"# mutmut over the core and the runner (make mutate), {datetime.now(UTC):%Y-%m-%d}",
        f"# {total} mutants: {killed} killed ({score:.1f}%); "
        + ", ".join(f"{verdict} {count}" for verdict, count in sorted(counts.items())),
        "# not killed, by function (each one's reason is in docs/proofs.md, section 4):",
    ]
    by_function = Counter(
        name.rsplit("__mutmut_", 1)[0] for name, verdict in found.items() if verdict not in KILLED
    )
    lines += [f"#   {count:3d}  {function}" for function, count in by_function.most_common()]
    lines.append("")
    lines += [
        f"{name}: {verdict}" for name, verdict in sorted(found.items()) if verdict not in KILLED
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    sys.stdout.write(report(verdicts()))


if __name__ == "__main__":
    main()

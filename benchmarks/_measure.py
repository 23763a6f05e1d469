"""What every benchmark here shares: paired rounds, medians, figures and the table.

The machine is shared and noisy (2 cores), so no figure is an absolute time on its own:
each is measured against a baseline in the same process and run, in paired rounds
(baseline, subject, baseline, subject, ... with the order rotating each round, so that
neither side always runs first), and reported as the median over the rounds. A ratio
is the median of the per-round ratios, so a slow moment hits both sides of its pair.

A :class:`Figure` is one row of the table that ``run_all.py`` prints and writes to
``results.json``: a value, its baseline, their ratio (subject cost / baseline cost:
above 1 is slower), the target ratio and whether it was met.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "Figure",
    "Paired",
    "calibrate",
    "compare",
    "machine",
    "main_of",
    "paired_rounds",
    "per_call",
    "print_table",
    "run_with_contracts",
    "threaded",
    "write_json",
]

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def paired_rounds(sides: Mapping[str, Callable[[], T]], rounds: int) -> dict[str, list[T]]:
    """Run every side once per round and return each side's measurements, in round order.

    A side returns one measurement (for :func:`compare`, seconds per unit of work). The
    order rotates by one each round, so with two sides it alternates: A B, B A, A B, ...
    """
    names = list(sides)
    samples: dict[str, list[T]] = {name: [] for name in names}
    for number in range(rounds):
        shift = number % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(sides[name]())
    return samples


@dataclass(frozen=True)
class Paired:
    """Medians of paired rounds: seconds per unit for each side, and each side's median
    per-round ratio to the baseline side."""

    baseline: str
    seconds: dict[str, float]
    ratios: dict[str, float]
    rounds: int

    def us(self, side: str) -> float:
        """Median microseconds per unit of ``side``."""
        return self.seconds[side] * 1e6

    def per_second(self, side: str) -> float:
        """Units per second of ``side``, from its median."""
        return 1.0 / self.seconds[side]


def compare(samples: Mapping[str, Sequence[float]], baseline: str) -> Paired:
    """The medians of ``samples`` and every side's median ratio to ``baseline``."""
    base = samples[baseline]
    return Paired(
        baseline=baseline,
        seconds={name: statistics.median(values) for name, values in samples.items()},
        ratios={
            name: statistics.median(v / b for v, b in zip(values, base, strict=True))
            for name, values in samples.items()
        },
        rounds=len(base),
    )


def per_call(run: Callable[[], object], count: int) -> float:
    """Seconds per call of ``run``, over ``count`` calls in a row."""
    started = time.perf_counter()
    for _ in range(count):
        run()
    return (time.perf_counter() - started) / count


def threaded(work: Sequence[Callable[[], object]]) -> float:
    """Run each callable of ``work`` on a thread of its own, all released at once by a
    barrier; return the wall time from the release until the last one finished. The
    first error raised in a thread is raised here."""
    start = threading.Barrier(len(work) + 1)
    errors: list[BaseException] = []

    def body(job: Callable[[], object]) -> None:
        start.wait()
        try:
            job()
        except BaseException as error:
            errors.append(error)

    pool = [threading.Thread(target=body, args=(job,)) for job in work]
    for thread in pool:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - began
    if errors:
        raise errors[0]
    return elapsed


@dataclass
class Figure:
    """One row of the results table.

    ``ratio`` is always subject cost over baseline cost (for a rate, baseline rate over
    subject rate), so a target is a ceiling on it: ``passed`` is ``ratio <= target``.
    A figure without a target is informative only (``passed`` is None).
    """

    key: str
    label: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_label: str = ""
    ratio: float | None = None
    target: float | None = None
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool | None:
        if self.target is None or self.ratio is None:
            return None
        return self.ratio <= self.target

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["passed"] = self.passed
        return data


def _number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        text = f"{value:,.0f}"
    elif abs(value) >= 100:
        text = f"{value:.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return f"{text} {unit}".rstrip()


def table_rows(figures: Iterable[Figure]) -> list[tuple[str, ...]]:
    """The table's rows, as text: figure, value, baseline, ratio, target, pass/miss."""
    rows: list[tuple[str, ...]] = []
    for figure in figures:
        verdict = {True: "pass", False: "MISS", None: "-"}[figure.passed]
        baseline = _number(figure.baseline, figure.unit)
        if figure.baseline_label:
            baseline = f"{baseline} ({figure.baseline_label})"
        rows.append(
            (
                figure.label,
                _number(figure.value, figure.unit),
                baseline,
                "-" if figure.ratio is None else f"{figure.ratio:.2f}x",
                "-" if figure.target is None else f"<= {figure.target:g}x",
                verdict,
            )
        )
    return rows


HEADER = ("figure", "value", "baseline", "ratio", "target", "result")


def print_table(figures: Sequence[Figure], out: Any = None) -> None:
    """Print the figures as one aligned table."""
    stream = out or sys.stdout
    rows = [HEADER, *table_rows(figures)]
    widths = [max(len(row[column]) for row in rows) for column in range(len(HEADER))]
    for index, row in enumerate(rows):
        cells = [
            cell.ljust(width) if column in (0, 2) else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells).rstrip(), file=stream)
        if index == 0:
            print("  ".join("-" * width for width in widths), file=stream)


def markdown_table(figures: Sequence[Figure]) -> str:
    """The same table in Markdown, for the README."""
    lines = [
        "| " + " | ".join(HEADER) + " |",
        "| " + " | ".join(("---", "---:", "---", "---:", "---:", "---")) + " |",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(figures)]
    return "\n".join(lines) + "\n"


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }


def main_of(
    doc: str | None,
    measure: Callable[[bool], dict[str, Any]],
    report: Callable[[dict[str, Any]], None],
) -> None:
    """The command line of a benchmark that runs on its own: ``[--quick] [--json PATH]``;
    ``measure(quick)`` (warnings silenced) and ``report`` its results, written with the
    machine to PATH when asked. ``doc``'s first line describes it."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--quick", action="store_true", help="small batches, 3 rounds")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = measure(args.quick)
    report(results)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"machine": machine(), **results}, indent=2) + "\n", encoding="utf-8"
        )


def write_json(path: str | Path, figures: Sequence[Figure], extra: Mapping[str, Any]) -> None:
    """Write ``{"machine", "figures": {key: figure}, **extra}`` to ``path``."""
    document = {
        "machine": machine(),
        "figures": {figure.key: figure.to_json() for figure in figures},
        **extra,
    }
    Path(path).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def run_with_contracts(contracts: bool, command: Sequence[str], timeout: float) -> str:
    """Run ``command`` (a benchmark running itself as a worker) in a fresh interpreter
    with the core's contracts on or off (``TOOL_CHECKPOINT_CONTRACTS``; they are read at
    import) and return its stdout; raise RuntimeError with its stderr if it fails."""
    environment = {**os.environ, "TOOL_CHECKPOINT_CONTRACTS": "1" if contracts else "0"}
    done = subprocess.run(
        [sys.executable, *command],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
    if done.returncode != 0:
        setting = "on" if contracts else "off"
        raise RuntimeError(f"the run with contracts {setting} failed:\n{done.stderr}")
    return done.stdout


def calibrate(run: Callable[[], object], seconds: float) -> int:
    """How many calls of ``run`` take about ``seconds`` (at least 1), after a warm-up."""
    count = 1
    while True:
        elapsed = per_call(run, count) * count
        if elapsed >= seconds / 4 or count >= 1 << 24:
            return max(1, round(count * seconds / max(elapsed, 1e-9)))
        count *= 4

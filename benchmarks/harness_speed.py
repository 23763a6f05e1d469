"""Examples per second of the model-based harness, against a baseline in the same run.

The baseline is a state machine with the same rules and strategies whose steps do
nothing: it is what Hypothesis itself costs. The harness runs on MemoryStore and on
SQLiteStore (a fresh file per example, durable commits). The three run in paired rounds
(order rotating), and each figure is reported as examples per second and as the median
per-round ratio to the baseline, so the number survives a busy machine.

    python benchmarks/harness_speed.py [--quick] [--examples N] [--steps N] [--json PATH]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _measure import Figure, compare, paired_rounds, print_table, write_json
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from tool_execution_checkpoint import MemoryStore, SQLiteStore
from tool_execution_checkpoint.testing import Fault, protocol_machine


class Baseline(RuleBasedStateMachine):
    """The harness's rule shapes with empty bodies."""

    @rule(
        worker=st.integers(0, 3),
        key=st.integers(0, 1),
        fault=st.sampled_from((Fault.NONE,) * 7 + tuple(Fault)[1:]),
        send_ok=st.booleans(),
    )
    def step(self, worker: int, key: int, fault: Fault, send_ok: bool) -> None:
        del worker, key, fault, send_ok

    @rule(worker=st.integers(0, 3))
    def crash_worker(self, worker: int) -> None:
        del worker

    @rule(position=st.integers(0, 63))
    def replay_stale_write(self, position: int) -> None:
        del position

    @rule(key=st.integers(0, 1))
    def foreign_fence(self, key: int) -> None:
        del key

    @rule(key=st.integers(0, 1), mark_uncertain_first=st.booleans())
    def operator_reconciles(self, key: int, mark_uncertain_first: bool) -> None:
        del key, mark_uncertain_first

    @invariant()
    def protocol_holds(self) -> None:
        pass


def seconds_per_example(machine: type[RuleBasedStateMachine], examples: int, steps: int) -> float:
    """Run ``examples`` examples of ``machine``; return the seconds per example."""
    budget = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    start = time.perf_counter()
    run_state_machine_as_test(machine, settings=budget)
    return (time.perf_counter() - start) / examples


def sqlite_factory(directory: Path) -> Callable[[], SQLiteStore]:
    """A fresh SQLiteStore file per example (the harness closes each one)."""
    numbers = itertools.count()

    def make() -> SQLiteStore:
        path = directory / f"example-{next(numbers)}.db"
        for leftover in directory.glob("example-*.db*"):
            leftover.unlink()  # the previous example's file, closed by the harness
        return SQLiteStore(path)

    return make


def run(
    quick: bool = False, examples: int | None = None, steps: int = 50
) -> tuple[list[Figure], dict[str, Any]]:
    """Examples per second of the harness on MemoryStore and SQLiteStore, each against
    the empty-steps baseline, in paired rounds."""
    count = examples if examples is not None else (20 if quick else 200)
    rounds = 3 if quick else 5
    with tempfile.TemporaryDirectory(prefix="tec-bench-harness-") as name:
        machines: dict[str, type[RuleBasedStateMachine]] = {
            "baseline": Baseline,
            "MemoryStore": protocol_machine(MemoryStore),
            "SQLiteStore": protocol_machine(sqlite_factory(Path(name))),
        }
        samples = paired_rounds(
            {
                label: functools.partial(seconds_per_example, machine, count, steps)
                for label, machine in machines.items()
            },
            rounds,
        )
    paired = compare(samples, "baseline")
    details: dict[str, Any] = {"examples": count, "steps": steps, "rounds": rounds}
    figures = []
    for label in ("MemoryStore", "SQLiteStore"):
        details[label] = {
            "examples_per_second": round(paired.per_second(label), 1),
            "baseline_examples_per_second": round(paired.per_second("baseline"), 1),
            "cost_vs_baseline": round(paired.ratios[label], 3),
        }
        figures.append(
            Figure(
                key=f"harness.{label.lower()}",
                label=f"harness examples/s, {label}",
                value=round(paired.per_second(label), 1),
                unit="examples/s",
                baseline=round(paired.per_second("baseline"), 1),
                baseline_label="empty steps",
                ratio=round(paired.ratios[label], 3),
                note=f"{steps} steps per example",
                details=details[label],
            )
        )
    return figures, details


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="few examples, 3 rounds")
    parser.add_argument("--examples", type=int, help="examples per round (default 200)")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    figures, details = run(args.quick, args.examples, args.steps)
    print_table(figures)
    if args.json:
        write_json(args.json, figures, {"harness": details})


if __name__ == "__main__":
    main()

"""Examples per second of the model-based harness, against a baseline in the same run.

The baseline is a state machine with the same rules and strategies whose steps do
nothing: it is what Hypothesis itself costs. The harness figure is reported as examples
per second and as a ratio to that baseline, so the number survives a busy machine.

    python benchmarks/harness_speed.py [--examples N] [--steps N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from tool_execution_checkpoint import MemoryStore
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


def examples_per_second(machine: type[RuleBasedStateMachine], examples: int, steps: int) -> float:
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
    return examples / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--examples", type=int, default=300)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    baseline = examples_per_second(Baseline, args.examples, args.steps)
    harness = examples_per_second(protocol_machine(MemoryStore), args.examples, args.steps)
    results = {
        "examples": args.examples,
        "steps": args.steps,
        "baseline_examples_per_second": round(baseline, 1),
        "memory_store_examples_per_second": round(harness, 1),
        "harness_cost_vs_baseline": round(baseline / harness, 2),
    }
    print(f"{'machine':<28}{'examples/s':>12}{'x baseline':>12}")
    print(f"{'baseline (empty steps)':<28}{baseline:>12.1f}{1:>12.2f}")
    print(f"{'harness on MemoryStore':<28}{harness:>12.1f}{baseline / harness:>12.2f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=2)


if __name__ == "__main__":
    main()

"""Real processes, really killed: worker processes run the host protocol over shared keys
while the parent kills them with SIGKILL at random moments, then a recovery pass checks
what survived.

Each worker builds its store as ``callable(argument)`` from a ``"module:callable"``
factory, so any store that several processes can share works (SQLite on one file, a
PostgreSQL or Redis server). The tool's external effect is one line appended to a shared
log (``run <call id> <attempt> <payload>``), written only after the claim's CAS won; a
completion acknowledged by the store is logged as ``completed <call id> <attempt>``.

    python -m tool_execution_checkpoint.testing.processes worker FACTORY ARGUMENT ...

is the worker's entry point; use :func:`kill_storm` from tests.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CheckpointError
from ..records import Binding, Checkpoint
from ..store import CheckpointStore, StoreError, checkpoint_key
from ..table import Action, Status
from ..transitions import (
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
    release_delivery,
)

__all__ = ["KillStormReport", "kill_storm", "load_factory"]

NOW = "2026-01-01T00:00:00Z"
_FINISHED = (Status.COMPLETED, Status.DELIVERING, Status.DELIVERED)


def load_factory(spec: str) -> Callable[[str], CheckpointStore]:
    """Import ``"module:callable"`` (the callable may be dotted, e.g. ``Class.from_url``)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"a factory is 'module:callable', not {spec!r}")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"{spec} is not callable")
    factory: Callable[[str], CheckpointStore] = target
    return factory


def _binding(call: int) -> Binding:
    return Binding("storm", f"call-{call}", "tool", "1", "sha256:0")


def _serve_once(store: CheckpointStore, call: int, me: str, rng: random.Random, log: int) -> None:
    """One pass of the host protocol for one call, as any host would run it."""
    binding = _binding(call)
    key = checkpoint_key(binding)
    store.create_if_absent(key, create_checkpoint(binding, created_at=NOW))
    raw = store.get(key)
    if raw is None:
        return
    decision = decide_checkpoint(raw, binding)
    record: Checkpoint = decision.checkpoint
    if decision.action is Action.EXECUTE:
        claim = claim_execution(record, attempt_id=me, at=NOW)
        if not store.compare_and_swap(key, claim.expected_revision, claim.next):
            return
        payload = {"by": me}
        os.write(log, f"run {binding.call_id} {me} {json.dumps(payload)}\n".encode())
        done = complete_execution(claim.next, attempt_id=me, at=NOW, result=payload)
        if not store.compare_and_swap(key, done.expected_revision, done.next):
            return
        os.write(log, f"completed {binding.call_id} {me}\n".encode())
        record = done.next
    if record.status is Status.COMPLETED:
        delivery = claim_delivery(record, delivery_id=me, at=NOW)
        if not store.compare_and_swap(key, delivery.expected_revision, delivery.next):
            return
        finish = complete_delivery if rng.random() < 0.7 else release_delivery
        after = finish(delivery.next, delivery_id=me, at=NOW)
        store.compare_and_swap(key, after.expected_revision, after.next)


_PASSED = frozenset(
    status.value
    for status in (Status.EXECUTING, Status.UNCERTAIN, Status.DELIVERING, Status.DELIVERED)
)
"""The statuses in which no worker of the storm can move a call on (delivered, or a claim
that only its owner, alive or killed, may finish): the workers' window passes them."""


def _passed(store: CheckpointStore, call: int) -> bool:
    raw = store.get(checkpoint_key(_binding(call)))
    return raw is not None and raw.get("status") in _PASSED


def _worker(
    factory: str, argument: str, *, keys: int, log_path: str, name: str, seed: int, window: int = 0
) -> None:
    store = load_factory(factory)(argument)
    rng = random.Random(seed)
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    print("ready", flush=True)  # the parent kills only workers that got this far
    base = 0
    for number in range(sys.maxsize):
        try:
            if window and base < keys:
                # Every worker works on the same few lowest calls it can still move on,
                # so claims race all the time, not only at the start of the storm (a call
                # left claimed by a killed worker would otherwise stall the window).
                while base < keys and _passed(store, base):
                    base += 1
                call = min(keys - 1, base + rng.randrange(window))
            else:
                call = rng.randrange(keys)
            _serve_once(store, call, f"{name}-{number}", rng, log)
        except StoreError:
            continue  # an unknown outcome: the next pass reloads and decides


@dataclass
class KillStormReport:
    """What the recovery pass found after a kill storm."""

    executions: dict[str, list[str]] = field(default_factory=dict)
    """Call id -> the attempts whose tool ran (logged effects)."""
    statuses: dict[str, str] = field(default_factory=dict)
    """Call id -> the stored status after the storm."""
    kills: int = 0
    """How many worker processes were killed with SIGKILL."""
    problems: list[str] = field(default_factory=list)
    """Every broken promise, one line each; empty when all held."""

    def check(self) -> None:
        """Raise AssertionError listing every problem, if there is one."""
        if self.problems:
            raise AssertionError("the kill storm broke the protocol:\n" + "\n".join(self.problems))


def _recover(store: CheckpointStore, keys: int, log_path: Path, report: KillStormReport) -> None:
    runs: dict[str, list[tuple[str, str]]] = defaultdict(list)
    completed: dict[str, str] = {}
    if log_path.exists():
        for line in log_path.read_text(encoding="utf-8").splitlines():
            kind, call_id, attempt, *rest = line.split(" ", 3)
            if kind == "run":
                runs[call_id].append((attempt, rest[0]))
            else:
                completed[call_id] = attempt
    for call in range(keys):
        binding = _binding(call)
        call_id = binding.call_id
        report.executions[call_id] = [attempt for attempt, _ in runs[call_id]]
        if len(runs[call_id]) > 1:
            report.problems.append(f"{call_id}: the tool ran {len(runs[call_id])} times")
        raw = store.get(checkpoint_key(binding))
        if raw is None:
            if runs[call_id]:
                report.problems.append(f"{call_id}: the tool ran but no record is stored")
            continue
        try:
            record = decide_checkpoint(raw, binding).checkpoint
        except CheckpointError as error:
            report.problems.append(f"{call_id}: the stored record is invalid: {error}")
            continue
        report.statuses[call_id] = record.status.value
        if runs[call_id] and record.status is Status.READY:
            report.problems.append(f"{call_id}: the tool ran but the record is ready")
        if call_id in completed:
            owner = record.execution.attempt_id if record.execution else None
            if record.status not in _FINISHED or owner != completed[call_id]:
                report.problems.append(f"{call_id}: an acknowledged completion was lost")
        if record.result is not None:
            produced = [payload for attempt, payload in runs[call_id]]
            if not produced or json.loads(produced[0]) != record.result.payload:
                report.problems.append(f"{call_id}: the stored payload is not the one produced")
        _finish(store, binding, record, runs[call_id], report)


def _finish(
    store: CheckpointStore,
    binding: Binding,
    record: Checkpoint,
    runs: list[tuple[str, str]],
    report: KillStormReport,
) -> None:
    """Act as the operator: drive a record left mid-flight to delivered, completing an
    execution with the payload it logged (or a "did not run" error). In a quiet system
    every CAS from the revision the store returned must win; one that loses means the
    store returned a record that is not the one it holds (a torn or lost write)."""
    key = checkpoint_key(binding)
    while record.status is not Status.DELIVERED and record.status is not Status.READY:
        if record.status in (Status.EXECUTING, Status.UNCERTAIN):
            assert record.execution is not None
            owner = record.execution.attempt_id
            ran = [json.loads(payload) for attempt, payload in runs if attempt == owner]
            result = ran[0] if ran else {"error": "reconciled: the tool did not run"}
            step = complete_execution(record, attempt_id=owner, at=NOW, result=result)
        elif record.status is Status.DELIVERING:
            assert record.delivery is not None
            step = release_delivery(record, delivery_id=record.delivery.delivery_id, at=NOW)
        elif record.status is Status.COMPLETED:
            step = claim_delivery(record, delivery_id="recovery", at=NOW)
        if not store.compare_and_swap(key, step.expected_revision, step.next):
            report.problems.append(
                f"{binding.call_id}: the store refused a CAS from the revision it returned"
                " (a torn or lost write)"
            )
            return
        record = step.next
        if record.status is Status.DELIVERING:
            done = complete_delivery(record, delivery_id="recovery", at=NOW)
            if not store.compare_and_swap(key, done.expected_revision, done.next):
                report.problems.append(f"{binding.call_id}: the recovery delivery lost its CAS")
                return
            record = done.next


def kill_storm(
    factory: str,
    argument: str,
    *,
    directory: Path,
    workers: int = 6,
    keys: int = 2_000,
    seconds: float = 4.0,
    seed: int = 0,
    window: int = 3,
) -> KillStormReport:
    """Run ``workers`` worker processes over ``keys`` calls for ``seconds``; every 20 to
    200 ms kill a random started worker with SIGKILL and start a fresh one in its place.
    Then kill them all and run the recovery pass with a store built the same way: it
    checks every record, then finishes each one left mid-flight as an operator would.

    With ``window`` (default 3) every worker serves the ``window`` lowest calls it has
    not seen delivered, so all workers race for the same claims throughout the storm
    and fresh calls keep coming (``keys`` is more than they can finish); ``window=0``
    picks calls at random from all ``keys``. Measured on 2 shared cores with a store
    whose compare-and-swap is atomic only within one process (tests/storm_stores.py,
    ProcessLocalStore): at these defaults (6 workers, window 3, 4 s) the storm caught it
    in 6 of 6 runs once the window passed calls left claimed (before, a killed worker's
    claim could stall the window: 11 of 12). A handful of runs is not a guarantee: give
    such a check ``seconds`` to spare, or run it more than once."""
    directory.mkdir(parents=True, exist_ok=True)
    log_path = directory / "effects.log"
    rng = random.Random(seed)
    generation = 0

    def spawn(slot: int) -> subprocess.Popen[bytes]:
        nonlocal generation
        generation += 1
        command = [sys.executable, "-m", __name__, "worker", factory, argument]
        command += [str(keys), str(log_path), f"w{slot}g{generation}", str(seed + generation)]
        command += [str(window)]
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def started(process: subprocess.Popen[bytes]) -> bool:
        """Whether the worker said it opened its store (never blocks). Only started
        workers are killed: on a busy machine a storm of half-started workers would test
        nothing."""
        assert process.stdout is not None
        readable, _, _ = select.select([process.stdout], [], [], 0)
        return bool(readable) and process.stdout.readline() == b"ready\n"

    report = KillStormReport()
    processes = [spawn(slot) for slot in range(workers)]
    ready = [False] * workers
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(0.02, 0.2))
            for slot, process in enumerate(processes):
                if not ready[slot] and process.poll() is None:
                    ready[slot] = started(process)
                if process.poll() is not None:
                    _, errors = process.communicate()
                    report.problems.append(f"a worker died by itself: {errors.decode()[-2000:]}")
                    processes[slot], ready[slot] = spawn(slot), False
            candidates = [slot for slot in range(workers) if ready[slot]]
            if not candidates:
                continue
            slot = rng.choice(candidates)
            processes[slot].send_signal(signal.SIGKILL)
            processes[slot].wait()
            report.kills += 1
            processes[slot], ready[slot] = spawn(slot), False
    finally:
        for process in processes:
            process.kill()
            process.wait()
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
    store = load_factory(factory)(argument)
    try:
        _recover(store, keys, log_path, report)
    finally:
        close = getattr(store, "close", None)
        if callable(close):
            close()
    return report


def main(argv: list[str] | None = None) -> None:
    """The worker's command line."""
    parser = argparse.ArgumentParser(prog="python -m tool_execution_checkpoint.testing.processes")
    commands = parser.add_subparsers(dest="command", required=True)
    worker = commands.add_parser("worker", help="run the protocol until killed")
    worker.add_argument("factory")
    worker.add_argument("argument")
    worker.add_argument("keys", type=int)
    worker.add_argument("log")
    worker.add_argument("name")
    worker.add_argument("seed", type=int)
    worker.add_argument("window", type=int, nargs="?", default=0)
    args = parser.parse_args(argv)
    _worker(
        args.factory,
        args.argument,
        keys=args.keys,
        log_path=args.log,
        name=args.name,
        seed=args.seed,
        window=args.window,
    )


if __name__ == "__main__":
    main()

"""Real processes, really killed: worker processes race for the same claims and run the
host protocol while the parent kills them with SIGKILL, then a recovery pass checks what
the store holds.

Each worker (:mod:`.storm_worker`) builds its store as ``callable(argument)`` from a
``"module:callable"`` factory, so any store that several processes can share works
(SQLite on one file, a PostgreSQL or Redis server; :func:`url_store` opens one by URL).

    python -m tool_execution_checkpoint.testing.processes worker FACTORY KEYS LOG WINDOW NAME SEED

is the worker's entry point (the argument comes on standard input, then the parent's
commands); use :func:`kill_storm` from tests. docs/harness.md has the storm's design and
its measured detection rates.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CheckpointError
from ..records import Binding, Checkpoint
from ..stores.core import CheckpointStore, checkpoint_key
from ..table import Status
from ..transitions import (
    claim_delivery,
    complete_delivery,
    complete_execution,
    decide_checkpoint,
    release_delivery,
)
from .storm_worker import NOW, call_binding, load_factory, round_binding, run_worker, url_store

__all__ = ["ROUNDS", "KillStormReport", "kill_storm", "load_factory", "url_store"]

_FINISHED = (Status.COMPLETED, Status.DELIVERING, Status.DELIVERED)
ROUNDS = 60
"""The kill storm's default number of rounds (see :func:`kill_storm`)."""


@dataclass
class KillStormReport:
    """What the storm saw and what the recovery pass found after it."""

    executions: dict[str, list[str]] = field(default_factory=dict)
    """Call id -> the attempts whose tool ran (logged effects)."""
    statuses: dict[str, str] = field(default_factory=dict)
    """Call id -> the stored status after the storm."""
    kills: int = 0
    """How many worker processes were killed with SIGKILL."""
    rounds: int = 0
    """How many rounds were raced (fewer than asked when one broke the protocol)."""
    problems: list[str] = field(default_factory=list)
    """Every broken promise, one line each; empty when all held."""

    def check(self) -> None:
        """Raise AssertionError listing every problem, if there is one."""
        if self.problems:
            raise AssertionError("the kill storm broke the protocol:\n" + "\n".join(self.problems))


def _recover(
    store: CheckpointStore, bindings: list[Binding], log_path: Path, report: KillStormReport
) -> None:
    runs: dict[str, list[tuple[str, str]]] = defaultdict(list)
    completed: dict[str, str] = {}
    if log_path.exists():
        for line in log_path.read_text(encoding="utf-8").splitlines():
            kind, call_id, attempt, *rest = line.split(" ", 3)
            if kind == "run":
                runs[call_id].append((attempt, rest[0]))
            else:
                completed[call_id] = attempt
    for binding in bindings:
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


_STALL = 60.0
"""Seconds the storm waits for a worker's answer before it calls the round stalled."""


@dataclass(eq=False)
class _Process:
    """One worker process and the bytes of its unfinished output line."""

    popen: subprocess.Popen[bytes]
    ready: bool = False
    pending: bytes = b""

    def send(self, line: str) -> None:
        assert self.popen.stdin is not None
        with contextlib.suppress(OSError):  # it died: the next read of its output says so
            os.write(self.popen.stdin.fileno(), f"{line}\n".encode())

    def close(self) -> None:
        for stream in (self.popen.stdin, self.popen.stdout, self.popen.stderr):
            if stream is not None:
                stream.close()


class _Storm:
    """The parent's side: spawns, reads, kills and replaces the workers."""

    def __init__(
        self,
        command: list[str],
        argument: str,
        workers: int,
        rng: random.Random,
        report: KillStormReport,
    ) -> None:
        self.command, self.argument, self.rng, self.report = command, argument, rng, report
        self.generation, self.free = 0, False
        self.slots = [self._spawn(slot) for slot in range(workers)]

    def _spawn(self, slot: int) -> _Process:
        self.generation += 1
        name, seed = f"w{slot}g{self.generation}", self.rng.randrange(1 << 30)
        command = [*self.command, name, str(seed)]
        popen = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        process = _Process(popen)
        process.send(self.argument)
        if self.free:
            process.send("free")
        return process

    def kill(self, process: _Process) -> None:
        """SIGKILL one worker and start a fresh one in its place."""
        process.popen.send_signal(signal.SIGKILL)
        process.popen.wait()
        process.close()
        self.report.kills += 1
        slot = self.slots.index(process)
        self.slots[slot] = self._spawn(slot)

    def start(self) -> None:
        """Wait until every worker opened its store (at most ``_STALL`` seconds)."""
        since = time.monotonic()
        while len(self.ready()) < len(self.slots) and time.monotonic() - since < _STALL:
            self.read(0.05)

    def ready(self) -> list[_Process]:
        return [process for process in self.slots if process.ready]

    def read(self, timeout: float) -> list[tuple[_Process, str]]:
        """The lines the workers wrote within ``timeout`` seconds (``ready`` lines mark
        the worker started); a worker that died by itself is a problem and is replaced."""
        streams: dict[int, _Process] = {}
        for process in self.slots:
            assert process.popen.stdout is not None
            streams[process.popen.stdout.fileno()] = process
        readable, _, _ = select.select(list(streams), [], [], timeout)
        lines: list[tuple[_Process, str]] = []
        for stream in readable:
            process = streams[stream]
            data = os.read(stream, 65_536)
            if not data:
                process.popen.wait()
                assert process.popen.stderr is not None
                errors = process.popen.stderr.read().decode(errors="replace")[-2000:]
                self.report.problems.append(f"a worker died by itself: {errors}")
                process.close()
                slot = self.slots.index(process)
                self.slots[slot] = self._spawn(slot)
                lines.append((process, "died"))
                continue
            *complete, process.pending = (process.pending + data).split(b"\n")
            for line in complete:
                if line == b"ready":
                    process.ready = True
                lines.append((process, line.decode()))
        return lines

    def race(self, number: int) -> int:
        """Round ``number``: every started worker prepares the claim of the round's call;
        once all said ``armed``, all are told ``go`` at once, so their compare-and-swaps
        from the same revision overlap. A kill lands in most rounds while every worker is
        up: the round's winner held between its claim and its result, the winner a few
        milliseconds after its claim, or any worker mid-claim. Returns how many workers
        won the claim (more than one breaks the protocol), or -1 when the round stalled."""
        since = time.monotonic()
        while len(self.ready()) < 2:
            if time.monotonic() - since > _STALL:
                self.report.problems.append(f"round {number}: fewer than 2 workers started")
                return -1
            self.read(0.05)
        racers = self.ready()
        for process in racers:
            process.send(f"arm {number}")
        if not self._await(racers, f"armed {number}", number):
            return -1
        kill = "none"
        if len(racers) >= len(self.slots) - 1:  # at most one fresh worker starting
            kill = self.rng.choice(["hold", "winner", "any", "none"])
        for process in racers:
            process.send(f"go {number} {'hold' if kill == 'hold' else 'run'}")
        if kill == "any":
            time.sleep(self.rng.uniform(0, 0.002))
            self.kill(self.rng.choice(racers))
        winners = 0
        since = time.monotonic()
        while any(process in self.slots for process in racers):
            lines = self.read(0.5)
            if lines:
                since = time.monotonic()
            elif time.monotonic() - since > _STALL:
                self.report.problems.append(f"round {number}: a worker did not finish")
                return -1
            for process, line in lines:
                if process not in racers or process not in self.slots:
                    continue
                if line == f"won {number}":
                    winners += 1
                    if kill == "winner":
                        time.sleep(self.rng.uniform(0, 0.005))
                    if kill in ("hold", "winner"):
                        self.kill(process)
                        kill = "hold" if kill == "hold" else "none"
                elif line == f"done {number}":
                    racers.remove(process)
        return winners

    def _await(self, racers: list[_Process], answer: str, number: int) -> bool:
        """Wait until every racer still alive said ``answer`` (the dead leave ``racers``);
        False, a problem noted, when one has not within ``_STALL`` seconds."""
        waiting = list(racers)
        since = time.monotonic()
        while waiting:
            lines = self.read(0.5)
            for process, line in lines:
                if process in waiting and line == answer:
                    waiting.remove(process)
            waiting = [process for process in waiting if process in self.slots]
            racers[:] = [process for process in racers if process in self.slots]
            if waiting and time.monotonic() - since > _STALL:
                self.report.problems.append(f"round {number}: a worker did not arm")
                return False
        return True

    def run_free(self, seconds: float) -> None:
        """Every 20 to 200 ms kill a random started worker and start a fresh one."""
        self.free = True
        for process in self.slots:
            process.send("free")
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            pause = time.monotonic() + self.rng.uniform(0.02, 0.2)
            while time.monotonic() < pause:
                self.read(max(0.0, pause - time.monotonic()))
            candidates = self.ready()
            if candidates:
                self.kill(self.rng.choice(candidates))

    def stop(self) -> None:
        for process in self.slots:
            process.popen.kill()
            process.popen.wait()
            process.close()


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
    rounds: int = ROUNDS,
) -> KillStormReport:
    """Race ``workers`` worker processes for the same calls while killing them with
    SIGKILL, then check what the store holds. Each worker builds its store as
    ``factory(argument)``; the recovery pass builds one the same way, checks every record
    against the effects the workers logged (no tool ran twice, no acknowledged result
    lost, no record torn), then finishes each one left mid-flight as an operator would.

    Two phases:

    - ``rounds`` rounds, one fresh call each: every started worker creates and reads the
      call, prepares its claim, and waits at a barrier; the parent releases them at once,
      so their compare-and-swaps from the same revision overlap in time, and exactly one
      may win. While every worker is up, most rounds also kill one (the winner held
      between its claim and its result, the winner a few milliseconds after its claim,
      or any worker mid-claim), and a fresh worker replaces it. The first round that two
      workers win ends the storm (the recovery pass then reports the tool run twice).
    - then ``seconds`` of free running over ``keys`` calls: every 20 to 200 ms a random
      started worker is killed and replaced. With ``window`` (default 3) every worker
      serves the ``window`` lowest calls it has not seen delivered or claimed, so claims
      keep racing and fresh calls keep coming; ``window=0`` picks calls at random.

    The budget at the defaults is 6 workers, ``ROUNDS`` (60) rounds and 4 s. Detection is
    a rate, each round an independent chance (docs/harness.md has the measured rates);
    raise ``rounds`` for a store whose window between its read and its write is narrower
    still."""
    directory.mkdir(parents=True, exist_ok=True)
    log_path = directory / "effects.log"
    rng = random.Random(seed)
    command = [sys.executable, "-m", __name__, "worker", factory]
    command += [str(keys), str(log_path), str(window)]
    report = KillStormReport()
    storm = _Storm(command, json.dumps(argument), workers, rng, report)
    try:
        broken = False
        storm.start()
        for number in range(rounds):
            winners = storm.race(number)
            report.rounds = number + 1
            if winners not in (0, 1):  # two claims won, or a stalled round
                broken = True
                break
        if not broken and seconds > 0:
            storm.run_free(seconds)
    finally:
        storm.stop()
    bindings = [round_binding(number) for number in range(report.rounds)]
    bindings += [call_binding(call) for call in range(keys)]
    store = load_factory(factory)(argument)
    try:
        _recover(store, bindings, log_path, report)
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
    worker.add_argument("keys", type=int)
    worker.add_argument("log")
    worker.add_argument("window", type=int)
    worker.add_argument("name")
    worker.add_argument("seed", type=int)
    args = parser.parse_args(argv)
    run_worker(
        args.factory,
        keys=args.keys,
        log_path=args.log,
        name=args.name,
        seed=args.seed,
        window=args.window,
    )


if __name__ == "__main__":
    main()

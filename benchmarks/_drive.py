"""Driving a measured subject of peers.py: its callers, its batches and their checks.

A subject's guarded call takes a job id and runs the guarded function at most once for
it. With 1 worker its calls run one after another; with more, each worker makes its own
calls on its own job ids, all at once: a thread each for a synchronous subject, a task
each on one event loop for an asyncio one.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import threading
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, cast

from _measure import threaded

__all__ = [
    "PAYLOAD",
    "POOL",
    "WORKERS",
    "Drive",
    "Loop",
    "Opener",
    "Ran",
    "Subject",
    "async_drive",
    "sync_drive",
    "timed",
    "warm",
]

PAYLOAD: dict[str, Any] = {"data": "x" * (1024 - len('{"data":""}'))}
"""The guarded function's result: 1,024 bytes of compact JSON."""
WORKERS = (1, 8)
POOL = max(WORKERS)
"""Connections in every subject's pool (PostgreSQL): one per worker."""
WARM = 6
"""Warm-up calls per pool connection: psycopg prepares a statement on a connection's
fifth use of it, and a preparation is one more round trip."""

Drive = Callable[[str, int, int], float]
"""``drive(run, workers, calls)``: ``workers`` callers each run the guarded function for
their own ``calls`` job ids ``{run}-{worker}-{n}``, all at once; the wall seconds."""


@dataclass(frozen=True)
class Subject:
    name: str
    """What the table calls it: the library and its API, and the store for this one."""
    library: str
    drive: Drive


Opener = Callable[[], AbstractContextManager[Subject]]
"""Open a subject (its pools, clients and backends) for the ``with`` block, close it
after."""


class Ran:
    """How often the guarded function really ran, per job id ``{run}-{worker}-{n}``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: dict[str, Counter[str]] = {}

    def __call__(self, job: str) -> dict[str, Any]:
        with self.lock:
            self.runs.setdefault(job.rsplit("-", 2)[0], Counter())[job] += 1
        return PAYLOAD

    def check(self, run: str, calls: int) -> None:
        with self.lock:
            mine = dict(self.runs.pop(run, Counter()))
        if len(mine) != calls or set(mine.values()) != {1}:
            raise AssertionError(f"{run}: expected {calls} jobs run once each: {mine}")


class Loop:
    """One event loop, in this thread, for the asyncio subjects."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    def close(self) -> None:
        self.loop.close()


def sync_drive(call: Callable[[str], None], ran: Ran) -> Drive:
    """Drive a synchronous subject: the caller's thread for 1 worker, else 1 thread each."""

    def drive(run: str, workers: int, calls: int) -> float:
        def worker(number: int) -> None:
            for index in range(calls):
                call(f"{run}-{number}-{index}")

        if workers == 1:
            began = time.perf_counter()
            worker(0)
            elapsed = time.perf_counter() - began
        else:
            elapsed = threaded([functools.partial(worker, number) for number in range(workers)])
        ran.check(run, workers * calls)
        return elapsed

    return drive


def async_drive(call: Callable[[str], Awaitable[None]], ran: Ran, loop: Loop) -> Drive:
    """Drive an asyncio subject: ``workers`` tasks on one event loop."""

    async def worker(run: str, number: int, calls: int) -> None:
        for index in range(calls):
            await call(f"{run}-{number}-{index}")

    async def many(run: str, workers: int, calls: int) -> float:
        began = time.perf_counter()
        await asyncio.gather(*(worker(run, number, calls) for number in range(workers)))
        return time.perf_counter() - began

    def drive(run: str, workers: int, calls: int) -> float:
        elapsed = cast(float, loop.run(many(run, workers, calls)))
        ran.check(run, workers * calls)
        return elapsed

    return drive


_runs = itertools.count()


def _run_id(subject: Subject) -> str:
    return f"{subject.library[:4]}-{uuid.uuid4().hex[:8]}-{next(_runs)}"


def timed(subject: Subject, workers: int, calls: int) -> tuple[float, float]:
    """Wall seconds per call and client CPU seconds per call of one batch."""
    cpu = time.process_time()
    elapsed = subject.drive(_run_id(subject), workers, calls)
    total = workers * calls
    return elapsed / total, (time.process_time() - cpu) / total


def warm(subject: Subject, workers: int) -> None:
    """Connections open, statements prepared, scripts loaded, on every connection."""
    subject.drive(_run_id(subject), workers, WARM * POOL // workers)

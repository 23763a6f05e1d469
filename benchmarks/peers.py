"""The same guarded function through this library and through its peers, on the same
servers, in the same run, with 1 caller and with 8 concurrent callers.

The guarded function takes a job id and returns a 1 KiB JSON result. Each subject makes
it run at most once per job id and hands its result to the caller:

- this library, with its default settings (contracts off, ``synchronous_delivered=False``
  on PostgreSQL): ``run_once`` on PostgresStore or RedisStore, ``run_once_async`` on
  AsyncPostgresStore or AsyncRedisStore. Three writes: create the record already claimed,
  store the result with its delivery claim, mark it delivered. It also fences the
  delivery: a result is handed over once, and a host that dies mid-send leaves a record
  saying so. On PostgreSQL the delivered mark is acknowledged before its WAL is flushed;
- idemkit 1.0.2 (``idempotent_sync`` and ``idempotent`` with ``MethodConfig``; its
  PostgresBackend over asyncpg, its RedisBackend over redis.asyncio): claim with a
  lease, run, complete. Two durable writes; the result is returned, not fenced;
- aws-lambda-powertools 3.37.0 (``idempotent`` with ``RedisCachePersistenceLayer``, a
  minimal fake Lambda context): SET NX of an in-progress item, run, SET of the result.
  Two writes; no fencing of the completion. It has no PostgreSQL layer;
- the same three writes, raw: not a peer but the protocol's floor, what ``run_once``
  sends for a call with none of the library (stores.raw_lifecycle: dict records,
  ``json.dumps``, the store's own SQL or Lua scripts with its relaxed delivered mark,
  through psycopg or plain redis-py, one synchronous caller per worker). Its ratio to
  the fastest peer is what the three writes alone cost against the peer's two;
- the first two writes, raw: the same without the delivered mark (the result with its
  delivery claim is the last write). No call of this library stops there; it is the
  lower bound of any call that does not wait for its delivered mark (one that wrote it
  behind, say), so its ratio says whether such a protocol change could reach the target.

Both servers are throwaway and durable, as each library asks for its guarantees:
PostgreSQL with fsync and synchronous_commit on; Redis with appendonly yes and
appendfsync always (every write is fsynced before Redis answers).

Concurrency. With 1 worker a subject's calls run one after another; with 8 workers, 8
callers each make their own calls on their own job ids: 8 threads for a synchronous
subject, 8 tasks on one event loop for an asyncio one, and every pool holds 8
connections. Threads, not processes: that is how a Python host runs 8 tool calls at once,
a call spends most of its time waiting on a socket (the GIL is released there), the GIL
weighs on every subject alike, and the client CPU per call is recorded beside each row
(``cpu_us_per_call``) to show how much of the wall time it is.

Timing. Each worker count has its own paired rounds: every round runs each subject once,
in an order that rotates each round, and a subject's ratio is its median per-round ratio
to the fastest peer at the same worker count (seconds per call at 1 worker, calls per
second at 8; see _measure.py). The contracts-on interpreter of ``run_all.py`` measures
this part in a fresh interpreter with the library's defaults (contracts off).

Counting, in a separate pass, one subject at a time, through a TCP proxy
(benchmarks/_proxy.py), with the same worker counts:

- round trips per call: the proxy's turns of the conversation, whatever the driver;
- PostgreSQL: write transactions per call (transaction ids used: a read uses none) and
  WAL fsyncs per call (``pg_stat_wal.wal_sync``: every process's WAL fsyncs, backends'
  commits and the WAL writer's background flushes alike). Backends report their counters
  late, so that figure comes from a pass of its own: a fresh instance makes the calls
  and closes, and the counter is read once its backends have exited (a backend reports
  at exit) and the WAL is flushed to its end. A durable commit waits for one fsync of its own
  with one caller, and shares one with other callers' commits at 8 (group commit); a
  relaxed commit waits for none (the WAL writer flushes it within ``wal_writer_delay``);
- Redis: commands per call and write commands per call (``INFO commandstats``, those run
  inside Lua scripts included; a write command is one whose ``COMMAND INFO`` flags say
  write, whether or not it changed anything), AOF bytes per call (``aof_current_size``),
  and fsyncs per call: Redis counts none (``INFO persistence`` has no fsync counter in
  Redis 7), so they are the ``fdatasync``/``fsync`` calls of the server's process counted
  by ``strace -c`` while the subject runs (left out, with a note, when strace is
  missing or may not attach). With appendfsync always, Redis fsyncs once per event-loop
  turn in which a command changed the data, before it answers: a write that changed
  nothing needs none, and concurrent writes share one.

Target: this library no slower than the fastest peer on the same server at the same
worker count; where it is slower, the table says by how much and the counts say why.

    python benchmarks/peers.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import itertools
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import psycopg
import redis
import redis.asyncio
from _measure import (
    Figure,
    compare,
    paired_rounds,
    print_table,
    run_with_contracts,
    threaded,
    write_json,
)
from _proxy import CountingProxy
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent
from aws_lambda_powertools.utilities.idempotency.persistence.redis import (
    RedisCachePersistenceLayer,
)
from idemkit import MethodConfig, idempotent_sync
from idemkit import idempotent as idemkit_async
from idemkit.backends.postgres import PostgresBackend, init_pg
from idemkit.backends.redis import RedisBackend
from idemkit.core.sync_bridge import run_sync
from psycopg_pool import ConnectionPool
from stores import RawPostgres, RawRedisRecords, raw_binding, raw_lifecycle

from tool_execution_checkpoint import Binding, RunStatus, run_once, run_once_async
from tool_execution_checkpoint.stores.postgres import AsyncPostgresStore, PostgresStore
from tool_execution_checkpoint.stores.redis import AsyncRedisStore, RedisStore
from tool_execution_checkpoint.transitions import CONTRACTS_ENABLED

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from postgres_server import PostgresServer
from redis_server import RedisServer, start_redis_server, stop_redis_server

PAYLOAD: dict[str, Any] = {"data": "x" * (1024 - len('{"data":""}'))}
TARGET = 1.0
WORKERS = (1, 8)
POOL = max(WORKERS)
"""Connections in every subject's pool (PostgreSQL): one per worker."""
SERVERS = {"postgres": "PostgreSQL", "redis": "Redis"}
FLOOR = "no library"
"""The library of the subjects that send the protocol's writes raw (all three, or the
first two): neither this library nor a peer, never the baseline."""

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


class FakeLambdaContext:
    """What powertools reads from a Lambda context."""

    function_name = "bench"
    function_version = "$LATEST"
    memory_limit_in_mb = 128
    invoked_function_arn = "arn:aws:lambda:eu-west-1:000000000000:function:bench"
    aws_request_id = "bench-request"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 300_000


class Loop:
    """One event loop, in this thread, for the asyncio subjects."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    def close(self) -> None:
        self.loop.close()


# --- driving a subject's calls -----------------------------------------------------------


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


# --- each subject's one guarded call -------------------------------------------------------


def _binding(job: str) -> Binding:
    return Binding("bench", job, "tool", "1", "sha256:0")


def tec_sync(store: Any, ran: Ran) -> Callable[[str], None]:
    def call(job: str) -> None:
        delivered: list[object] = []
        outcome = run_once(store, _binding(job), functools.partial(ran, job), delivered.append)
        if outcome.status is not RunStatus.EXECUTED_AND_DELIVERED or delivered != [PAYLOAD]:
            raise AssertionError(f"run_once: {outcome.status}")

    return call


def tec_async(store: Any, ran: Ran) -> Callable[[str], Awaitable[None]]:
    async def call(job: str) -> None:
        delivered: list[object] = []

        async def tool() -> dict[str, Any]:
            return ran(job)

        async def deliver(payload: object) -> None:
            delivered.append(payload)

        outcome = await run_once_async(store, _binding(job), tool, deliver)
        if outcome.status is not RunStatus.EXECUTED_AND_DELIVERED or delivered != [PAYLOAD]:
            raise AssertionError(f"run_once_async: {outcome.status}")

    return call


def raw_writes(raw: Any, ran: Ran, *, mark: bool = True) -> Callable[[str], None]:
    """The protocol's floor: the same three writes run_once makes (the claimed record,
    the result with its delivery claim, the relaxed delivered mark), as dict records
    through the same driver with none of the library (stores.raw_lifecycle); without
    ``mark``, the first two only."""

    def call(job: str) -> None:
        delivered: list[object] = []
        tool = functools.partial(ran, job)
        binding = raw_binding(job)
        if not raw_lifecycle(
            raw,
            f"bench/{job}",
            binding=binding,
            me=job,
            tool=tool,
            deliver=delivered.append,
            mark=mark,
        ):
            raise AssertionError("a job of its own was created by another caller")
        if delivered != [PAYLOAD]:
            raise AssertionError("the raw writes delivered another result")

    return call


def _one_tenant(arguments: Any) -> str:
    del arguments
    return "bench"


def _method_config() -> MethodConfig:
    # key_fields: the job id is the operation's identity; scope: one tenant, said so.
    return MethodConfig(key_fields=["job"], scope=_one_tenant)


def idemkit_sync_call(backend: Any, ran: Ran) -> Callable[[str], None]:
    def tool(job: str) -> dict[str, Any]:
        return ran(job)

    guarded = idempotent_sync(backend=backend, config=_method_config())(tool)

    def call(job: str) -> None:
        if guarded(job=job) != PAYLOAD:
            raise AssertionError("idemkit returned another result")

    return call


def idemkit_async_call(backend: Any, ran: Ran) -> Callable[[str], Awaitable[None]]:
    async def tool(job: str) -> dict[str, Any]:
        return ran(job)

    guarded = idemkit_async(backend=backend, config=_method_config())(tool)

    async def call(job: str) -> None:
        if await guarded(job=job) != PAYLOAD:
            raise AssertionError("idemkit returned another result")

    return call


def powertools_call(client: redis.Redis, ran: Ran) -> Callable[[str], None]:
    layer = RedisCachePersistenceLayer(client=cast(Any, client))
    config = IdempotencyConfig(event_key_jmespath="job")
    context = FakeLambdaContext()

    def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
        del context
        return ran(event["job"])

    handler = idempotent(persistence_store=layer, config=config)(handle)

    def call(job: str) -> None:
        if handler({"job": job}, context) != PAYLOAD:
            raise AssertionError("powertools returned another result")

    return call


# --- the subjects on each server ---------------------------------------------------------


def _with_port(url: str, port: int, proxy_port: int) -> str:
    return url.replace(f"127.0.0.1:{port}", f"127.0.0.1:{proxy_port}")


RAW_SUBJECTS = (("the same three writes, raw", True), ("the first two writes, raw", False))
"""The floor subjects on each server: their names, and whether they write the delivered
mark."""


def postgres_openers(url: str, loop: Loop, tag: str) -> list[Opener]:
    """Every subject on PostgreSQL at ``url``; ``tag`` keeps each instance's tables apart
    (an opener opened again uses the same tables)."""
    for table in (f"idemkit_sync_{tag}", f"idemkit_async_{tag}"):
        asyncio.run(init_pg(url, table=table))
    ran = Ran()

    @contextlib.contextmanager
    def tec_sync_subject() -> Iterator[Subject]:
        store = PostgresStore(url, table=f"tec_sync_{tag}", min_size=POOL, max_size=POOL)
        try:
            yield Subject(
                "run_once, PostgresStore", "this library", sync_drive(tec_sync(store, ran), ran)
            )
        finally:
            store.close()

    @contextlib.contextmanager
    def tec_async_subject() -> Iterator[Subject]:
        store = AsyncPostgresStore(url, table=f"tec_async_{tag}", min_size=POOL, max_size=POOL)
        try:
            yield Subject(
                "run_once_async, AsyncPostgresStore",
                "this library",
                async_drive(tec_async(store, ran), ran, loop),
            )
        finally:
            loop.run(store.aclose())

    @contextlib.contextmanager
    def idemkit_sync_subject() -> Iterator[Subject]:
        table = f"idemkit_sync_{tag}"
        backend = PostgresBackend.from_url(url, table=table, min_size=POOL, max_size=POOL)
        try:
            yield Subject(
                "idemkit sync", "idemkit", sync_drive(idemkit_sync_call(backend, ran), ran)
            )
        finally:
            run_sync(backend.aclose())  # on idemkit's own loop, before the server stops

    @contextlib.contextmanager
    def idemkit_async_subject() -> Iterator[Subject]:
        table = f"idemkit_async_{tag}"
        backend = PostgresBackend.from_url(url, table=table, min_size=POOL, max_size=POOL)
        try:
            yield Subject(
                "idemkit async",
                "idemkit",
                async_drive(idemkit_async_call(backend, ran), ran, loop),
            )
        finally:
            loop.run(backend.aclose())

    @contextlib.contextmanager
    def raw_subject(name: str, mark: bool) -> Iterator[Subject]:
        table = f"raw_{tag}_{int(mark)}"
        with PostgresStore(url, table=table) as setup:
            setup.get("set-up")  # the same table, made by the store's DDL on first use
        kwargs = {"autocommit": True}
        with ConnectionPool(url, min_size=POOL, max_size=POOL, kwargs=kwargs) as pool:
            pool.wait()
            raw = RawPostgres(pool, table)
            yield Subject(name, FLOOR, sync_drive(raw_writes(raw, ran, mark=mark), ran))

    return [
        tec_sync_subject,
        tec_async_subject,
        idemkit_sync_subject,
        idemkit_async_subject,
        *(functools.partial(raw_subject, name, mark) for name, mark in RAW_SUBJECTS),
    ]


def redis_openers(url: str, loop: Loop, tag: str) -> list[Opener]:
    ran = Ran()

    @contextlib.contextmanager
    def tec_sync_subject() -> Iterator[Subject]:
        store = RedisStore.from_url(url, prefix=f"tec-sync-{tag}:")
        try:
            yield Subject(
                "run_once, RedisStore", "this library", sync_drive(tec_sync(store, ran), ran)
            )
        finally:
            store.close()

    @contextlib.contextmanager
    def tec_async_subject() -> Iterator[Subject]:
        store = AsyncRedisStore.from_url(url, prefix=f"tec-async-{tag}:")
        try:
            yield Subject(
                "run_once_async, AsyncRedisStore",
                "this library",
                async_drive(tec_async(store, ran), ran, loop),
            )
        finally:
            loop.run(store.aclose())

    @contextlib.contextmanager
    def idemkit_sync_subject() -> Iterator[Subject]:
        backend = RedisBackend.from_url(url, namespace=f"idemkit-sync-{tag}")
        try:
            yield Subject(
                "idemkit sync", "idemkit", sync_drive(idemkit_sync_call(backend, ran), ran)
            )
        finally:
            run_sync(backend.aclose())

    @contextlib.contextmanager
    def idemkit_async_subject() -> Iterator[Subject]:
        backend = RedisBackend.from_url(url, namespace=f"idemkit-async-{tag}")
        try:
            yield Subject(
                "idemkit async",
                "idemkit",
                async_drive(idemkit_async_call(backend, ran), ran, loop),
            )
        finally:
            loop.run(backend.aclose())

    @contextlib.contextmanager
    def powertools_subject() -> Iterator[Subject]:
        client = redis.Redis.from_url(url)
        try:
            yield Subject("powertools", "powertools", sync_drive(powertools_call(client, ran), ran))
        finally:
            client.close()

    @contextlib.contextmanager
    def raw_subject(name: str, mark: bool) -> Iterator[Subject]:
        client = redis.Redis.from_url(url)
        try:
            raw = RawRedisRecords(client, f"raw-{tag}-{int(mark)}:")
            yield Subject(name, FLOOR, sync_drive(raw_writes(raw, ran, mark=mark), ran))
        finally:
            client.close()

    return [
        tec_sync_subject,
        tec_async_subject,
        idemkit_sync_subject,
        idemkit_async_subject,
        powertools_subject,
        *(functools.partial(raw_subject, name, mark) for name, mark in RAW_SUBJECTS),
    ]


@contextlib.contextmanager
def all_open(openers: Sequence[Opener]) -> Iterator[list[Subject]]:
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(opener()) for opener in openers]


# --- timing ----------------------------------------------------------------------------


_runs = itertools.count()


def _run_id(subject: Subject) -> str:
    return f"{subject.library[:4]}-{uuid.uuid4().hex[:8]}-{next(_runs)}"


def _timed(subject: Subject, workers: int, calls: int) -> tuple[float, float]:
    """Wall seconds per call and client CPU seconds per call of one batch."""
    cpu = time.process_time()
    elapsed = subject.drive(_run_id(subject), workers, calls)
    total = workers * calls
    return elapsed / total, (time.process_time() - cpu) / total


WARM = 6
"""Warm-up calls per pool connection: psycopg prepares a statement on a connection's
fifth use of it, and a preparation is one more round trip."""


def _warm(subject: Subject, workers: int) -> None:
    """Connections open, statements prepared, scripts loaded, on every connection."""
    subject.drive(_run_id(subject), workers, WARM * POOL // workers)


def speed(subjects: list[Subject], workers: int, calls: int, rounds: int) -> dict[str, Any]:
    """Paired rounds of every subject at ``workers`` callers of ``calls`` calls each."""
    for subject in subjects:
        _warm(subject, workers)
    samples = paired_rounds(
        {subject.name: functools.partial(_timed, subject, workers, calls) for subject in subjects},
        rounds,
    )
    walls = {name: [wall for wall, _ in values] for name, values in samples.items()}
    cpus = {name: [cpu for _, cpu in values] for name, values in samples.items()}
    libraries = {subject.name: subject.library for subject in subjects}
    peers = [name for name in walls if libraries[name] not in ("this library", FLOOR)]
    fastest = min(peers, key=lambda name: statistics.median(walls[name]))
    paired = compare(walls, fastest)
    return {
        "workers": workers,
        "calls_per_worker_per_round": calls,
        "rounds": rounds,
        "fastest_peer": fastest,
        "us_per_call": {name: round(paired.us(name), 1) for name in walls},
        "calls_per_second": {name: round(paired.per_second(name), 1) for name in walls},
        "ratio_to_fastest_peer": {name: round(paired.ratios[name], 3) for name in walls},
        "cpu_us_per_call": {name: round(statistics.median(v) * 1e6, 1) for name, v in cpus.items()},
        "library": libraries,
    }


# --- counting: PostgreSQL ------------------------------------------------------------------


def _scalar(connection: psycopg.Connection[Any], query: str) -> Any:
    row = connection.execute(query.encode()).fetchone()
    assert row is not None
    return row[0]


def _next_xid(admin_url: str) -> int:
    """The next transaction id: it moves by one for each transaction that writes, and
    not for reads."""
    with psycopg.connect(admin_url, autocommit=True) as connection:
        return int(_scalar(connection, "SELECT pg_snapshot_xmax(pg_current_snapshot())"))


def _settled_wal(admin_url: str, timeout: float = 30.0) -> dict[str, int]:
    """``pg_stat_wal``'s counters once no other client is connected (a backend reports
    its pending counters when it exits, before it leaves pg_stat_activity) and the WAL is
    flushed up to its end (the WAL writer reports its flushes as it makes them)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(admin_url, autocommit=True) as connection:
        while True:
            others = _scalar(
                connection,
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
            )
            flushed = _scalar(
                connection, "SELECT pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn()"
            )
            if (others == 0 and flushed) or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        time.sleep(0.05)  # the WAL writer reports right after its flush
        row = connection.execute(b"SELECT wal_sync, wal_write FROM pg_stat_wal").fetchone()
        sync, write = cast(tuple[Any, Any], row)
    return {"wal_syncs": int(sync), "wal_writes": int(write)}


def _minus(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {name: after[name] - before[name] for name in after}


def count_postgres(
    opener: Opener, proxy: CountingProxy, admin_url: str, workers: int, calls: int
) -> dict[str, Any]:
    """Round trips, write transactions and WAL fsyncs per call of one subject, alone.

    Round trips and transaction ids are counted around the calls of a warmed instance.
    The WAL fsyncs are counted around a whole instance (backends report theirs when they
    exit), opened cold for the calls alone: opening connections and preparing
    statements write no WAL."""
    with opener() as subject:
        _warm(subject, workers)
        time.sleep(0.05)
        xid = _next_xid(admin_url)
        proxy.reset()
        _timed(subject, workers, calls)
        trips = proxy.round_trips
        transactions = _next_xid(admin_url) - xid
    start = _settled_wal(admin_url)
    with opener() as subject:
        _timed(subject, workers, calls)
    wal = _minus(_settled_wal(admin_url), start)
    total = workers * calls
    return {
        "round_trips_per_call": round(trips / total, 2),
        "write_transactions_per_call": round(transactions / total, 2),
        "wal_fsyncs_per_call": round(wal["wal_syncs"] / total, 2),
        "wal_writes_per_call": round(wal["wal_writes"] / total, 2),
    }


# --- counting: Redis ---------------------------------------------------------------------


class FsyncCount:
    """``with FsyncCount(pid) as count:`` the fdatasync and fsync calls of process ``pid``
    (all its threads) during the block, counted by ``strace -c``; ``count.calls`` is None
    when strace is missing or could not attach (``count.problem`` says why)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.calls: int | None = None
        self.problem = ""
        self._process: subprocess.Popen[str] | None = None
        self._directory = tempfile.TemporaryDirectory(prefix="tec-bench-strace-")
        self._output = Path(self._directory.name) / "summary.txt"

    def __enter__(self) -> FsyncCount:
        strace = shutil.which("strace")
        if strace is None:
            self.problem = "strace is not installed"
            return self
        command = [strace, "-f", "-c", "-e", "trace=fsync,fdatasync"]
        command += ["-o", str(self._output), "-p", str(self.pid)]
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        assert process.stderr is not None
        line = process.stderr.readline()  # "strace: Process N attached with M threads"
        if "attached" not in line:
            process.kill()
            process.wait()
            self.problem = f"strace could not attach: {line.strip()}"
            return self
        self._process = process
        return self

    def __exit__(self, *exception: object) -> None:
        process = self._process
        if process is None:
            self._directory.cleanup()
            return
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
        calls = 0
        for line in self._output.read_text(encoding="utf-8").splitlines():
            fields = line.split()
            if fields and fields[-1] in ("fsync", "fdatasync"):
                calls += int(fields[3])
        self.calls = calls
        self._directory.cleanup()


class RedisCounters:
    """The server's own counts on ``client``: commands, write commands (by their
    ``COMMAND INFO`` flags) and the AOF's size."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.writes: dict[str, bool] = {}

    def _is_write(self, name: str) -> bool:
        if name not in self.writes:
            info: Any = cast(Any, self.client).execute_command("COMMAND", "INFO", name)
            flags = info.get(name, {}).get("flags", []) if isinstance(info, dict) else []
            self.writes[name] = "write" in [str(flag) for flag in flags]
        return self.writes[name]

    def read(self) -> dict[str, int]:
        stats: dict[str, Any] = self.client.info("commandstats")
        calls = {key.removeprefix("cmdstat_"): int(value["calls"]) for key, value in stats.items()}
        aof: dict[str, Any] = self.client.info("persistence")
        return {
            "commands": sum(calls.values()),
            "write_commands": sum(n for name, n in calls.items() if self._is_write(name)),
            "aof_bytes": int(aof["aof_current_size"]),
        }


def count_redis(
    opener: Opener, proxy: CountingProxy, server: RedisServer, workers: int, calls: int
) -> dict[str, Any]:
    """Round trips, commands, write commands, AOF bytes and fsyncs per call of one
    subject, alone. The counters' own commands (INFO, measured with nothing between)
    are subtracted."""
    watcher = server.client()
    counters = RedisCounters(watcher)
    try:
        counters.read()  # every command name seen so far is classified
        first = counters.read()
        idle = _minus(counters.read(), first)
        with opener() as subject:
            _warm(subject, workers)
            counters.read()
            with FsyncCount(server.process.pid) as fsyncs:
                before = counters.read()
                proxy.reset()
                _timed(subject, workers, calls)
                trips = proxy.round_trips
                work = _minus(_minus(counters.read(), before), idle)
    finally:
        watcher.close()
    total = workers * calls
    return {
        "round_trips_per_call": round(trips / total, 2),
        "commands_per_call": round(work["commands"] / total, 2),
        "write_commands_per_call": round(work["write_commands"] / total, 2),
        "aof_bytes_per_call": round(work["aof_bytes"] / total),
        "fsyncs_per_call": None if fsyncs.calls is None else round(fsyncs.calls / total, 2),
        "fsyncs_not_counted": fsyncs.problem,
    }


# --- the whole measurement -----------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    calls: dict[int, int]
    """Calls per worker per round, for each worker count."""
    rounds: int
    counted: dict[int, int]
    """Calls per worker in the counting pass."""


def sizes(quick: bool) -> Sizes:
    if quick:
        return Sizes(calls={1: 8, 8: 2}, rounds=3, counted={1: 5, 8: 2})
    return Sizes(calls={1: 100, 8: 30}, rounds=21, counted={1: 40, 8: 10})


def _timings(openers: Sequence[Opener], plan: Sizes) -> dict[str, Any]:
    with all_open(openers) as subjects:
        return {
            str(workers): speed(subjects, workers, plan.calls[workers], plan.rounds)
            for workers in WORKERS
        }


def measure_postgres(plan: Sizes, loop: Loop) -> dict[str, Any]:
    with PostgresServer() as server, CountingProxy("127.0.0.1", server.port) as proxy:
        results: dict[str, Any] = {
            "workers": _timings(postgres_openers(server.url, loop, "d"), plan)
        }
        with psycopg.connect(server.admin_url, autocommit=True) as admin:
            # No autovacuum worker or timed checkpoint writes WAL while a subject is counted.
            admin.execute(b"ALTER SYSTEM SET autovacuum = off")
            admin.execute(b"SELECT pg_reload_conf()")
            admin.execute(b"CHECKPOINT")
            version = _scalar(admin, "SHOW server_version")
        proxied = _with_port(server.url, server.port, proxy.port)
        openers = postgres_openers(proxied, loop, "p")
        results["counts"] = {
            str(workers): {
                name: count_postgres(opener, proxy, server.admin_url, workers, counted)
                for name, opener in zip(results["workers"]["1"]["library"], openers, strict=True)
            }
            for workers, counted in plan.counted.items()
        }
    results["server"] = f"PostgreSQL {version}, fsync and synchronous_commit on"
    return results


def measure_redis(plan: Sizes, loop: Loop) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tec-bench-peers-") as name:
        server = start_redis_server(Path(name) / "redis")
        try:
            results: dict[str, Any] = {
                "workers": _timings(redis_openers(server.url(), loop, "d"), plan)
            }
            with CountingProxy("127.0.0.1", server.port) as proxy:
                proxied = _with_port(server.url(), server.port, proxy.port)
                openers = redis_openers(proxied, loop, "p")
                names = list(results["workers"]["1"]["library"])
                results["counts"] = {
                    str(workers): {
                        name: count_redis(opener, proxy, server, workers, counted)
                        for name, opener in zip(names, openers, strict=True)
                    }
                    for workers, counted in plan.counted.items()
                }
            watcher = server.client()
            version = watcher.info("server")["redis_version"]
            watcher.close()
        finally:
            stop_redis_server(server)
    results["server"] = f"Redis {version}, appendonly yes, appendfsync always"
    return results


def measure(quick: bool) -> dict[str, Any]:
    plan = sizes(quick)
    loop = Loop()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # idemkit's single-tenant and key advice
            results: dict[str, Any] = {
                "postgres": measure_postgres(plan, loop),
                "redis": measure_redis(plan, loop),
            }
    finally:
        loop.close()
    results["contracts_enabled"] = CONTRACTS_ENABLED
    return results


# --- figures ---------------------------------------------------------------------------


def _many(value: float, unit: str) -> str:
    return f"{value:g} {unit}" if value == 1 else f"{value:g} {unit}s"


def _counts_text(server: str, counted: dict[str, Any]) -> str:
    """What the label shows of the counts: round trips and the durable writes."""
    parts = [_many(counted["round_trips_per_call"], "round trip")]
    if server == "postgres":
        parts.append(_many(counted["write_transactions_per_call"], "write transaction"))
        parts.append(_many(counted["wal_fsyncs_per_call"], "WAL fsync"))
    else:
        parts.append(_many(counted["write_commands_per_call"], "write command"))
        fsyncs = counted["fsyncs_per_call"]
        parts.append("fsyncs not counted" if fsyncs is None else _many(fsyncs, "fsync"))
    return ", ".join(parts)


def _slug(name: str) -> str:
    return name.lower().replace(", ", ".").replace(" ", "_")


def figures_for(server: str, result: dict[str, Any]) -> list[Figure]:
    figures = []
    for workers_text, timing in result["workers"].items():
        workers = int(workers_text)
        single = workers == 1
        fastest = timing["fastest_peer"]
        value = timing["us_per_call"] if single else timing["calls_per_second"]
        for name, library in timing["library"].items():
            mine = library == "this library"
            counted = result["counts"][workers_text][name]
            ratio = timing["ratio_to_fastest_peer"][name]
            details = {
                **counted,
                "us_per_call": timing["us_per_call"][name],
                "calls_per_second": timing["calls_per_second"][name],
                "cpu_us_per_call": timing["cpu_us_per_call"][name],
                "library": library,
            }
            if mine:
                details["missed_by"] = round(max(ratio - TARGET, 0.0), 3)
            where = f"{SERVERS[server]} guarded call, {workers} worker{'' if single else 's'}"
            figures.append(
                Figure(
                    key=f"peers.{server}.{workers}_worker{'' if single else 's'}.{_slug(name)}",
                    label=f"{where}: {name} [{_counts_text(server, counted)} per call]",
                    value=value[name],
                    unit="µs" if single else "calls/s",
                    baseline=value[fastest],
                    baseline_label=fastest,
                    ratio=ratio,
                    target=TARGET if mine else None,
                    note=f"{timing['cpu_us_per_call'][name]:g} µs client CPU per call",
                    details=details,
                )
            )
    return figures


def verdicts(figures: Sequence[Figure]) -> list[str]:
    """One line per target: met, or missed and by how much."""
    lines = []
    for figure in figures:
        if figure.passed is None or figure.ratio is None:
            continue
        where = figure.label.split(" [")[0]
        if figure.passed:
            lines.append(f"met:    {where}: {figure.ratio:.2f}x {figure.baseline_label}")
        else:
            over = (figure.ratio - TARGET) * 100
            lines.append(
                f"MISSED: {where}: {figure.ratio:.2f}x {figure.baseline_label}, {over:.0f}% over"
            )
    return lines


def measured(quick: bool) -> dict[str, Any]:
    """The measurement with the library's defaults: here if this interpreter has the
    contracts off (the default), else in a fresh interpreter that has."""
    if not CONTRACTS_ENABLED:
        return measure(quick)
    with tempfile.TemporaryDirectory(prefix="tec-bench-peers-") as name:
        output = Path(name) / "peers.json"
        command = [str(Path(__file__).resolve()), "--measure-only", "--json", str(output)]
        command += ["--quick"] if quick else []
        run_with_contracts(False, command, timeout=3600)
        details: dict[str, Any] = json.loads(output.read_text(encoding="utf-8"))["peers"]
    if details["contracts_enabled"] is not False:
        raise RuntimeError("the contracts were on in the library's default run")
    return details


def run(quick: bool = False) -> tuple[list[Figure], dict[str, Any]]:
    details = measured(quick)
    figures = [f for server in SERVERS for f in figures_for(server, details[server])]
    return figures, details


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small batches, 3 rounds")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_only:  # the fresh interpreter of measured()
        details = measure(args.quick)
        write_json(args.json, [], {"peers": details})
        return
    figures, details = run(args.quick)
    print_table(figures)
    print()
    for line in verdicts(figures):
        print(line)
    for server in SERVERS:
        print(details[server]["server"])
    if args.json:
        write_json(args.json, figures, {"peers": details})


if __name__ == "__main__":
    main()

"""The same guarded function through this library and through its peers, on the same
servers, in the same run.

The guarded function takes a job id and returns a 1 KiB JSON result. Each subject makes
it run at most once per job id and hands its result to the caller:

- this library: ``run_once`` on PostgresStore or RedisStore (and ``run_once_async`` on
  AsyncPostgresStore or AsyncRedisStore): create, read and decide, claim the execution,
  run, store the result, claim the delivery, deliver, record the delivery. Five durable
  writes, since it also fences the delivery: a result is handed over once, and a host
  that dies mid-send leaves a record saying so;
- idemkit 1.0.2 (``idempotent_sync`` and ``idempotent`` with ``MethodConfig``; its
  PostgresBackend over asyncpg, its RedisBackend over redis.asyncio): claim with a
  lease, run, complete. Two durable writes; the result is returned, not fenced;
- aws-lambda-powertools 3.37.0 (``idempotent`` with ``RedisCachePersistenceLayer``, a
  minimal fake Lambda context): SET NX of an in-progress item, run, SET of the result.
  Two writes; no fencing of the completion. It has no PostgreSQL layer.

Both servers are throwaway and durable, as each library asks for its guarantees:
PostgreSQL with fsync and synchronous_commit on; Redis with appendonly yes and
appendfsync always (every write is fsynced before Redis answers). Every subject runs one
caller, calls one after another, each on a new job id; the rounds rotate the subjects'
order, and the ratio is each subject's median per-round ratio to the fastest peer.

Round trips per call are counted by a TCP proxy that every subject's second instance
talks through (benchmarks/_proxy.py: a turn of the conversation, whatever the driver).
The server's own count of the work: write transactions per call on PostgreSQL (the
transaction ids used; each waits for its WAL fsync at commit), commands per call on Redis
(``INFO commandstats``, those inside Lua scripts included).

Target: this library no slower than the fastest peer on the same server; where it is
slower, the round trips and the server's work per call say why.

    python benchmarks/peers.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import itertools
import statistics
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import psycopg
import redis
import redis.asyncio
from _measure import Figure, compare, paired_rounds, print_table, write_json
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

from tool_execution_checkpoint import Binding, RunStatus, run_once, run_once_async
from tool_execution_checkpoint.postgres import AsyncPostgresStore, PostgresStore
from tool_execution_checkpoint.redis_store import AsyncRedisStore, RedisStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from postgres_server import PostgresServer
from redis_server import RedisServer, start_redis_server, stop_redis_server

PAYLOAD: dict[str, Any] = {"data": "x" * (1024 - len('{"data":""}'))}
TARGET = 1.0
WRITES = {"this library": 5, "idemkit": 2, "powertools": 2}

Batch = Callable[[str, int], None]
"""Run the guarded function for job ids ``{run}-0`` .. ``{run}-{n-1}``, one at a time."""


@dataclass(frozen=True)
class Subject:
    name: str
    """What the table calls it: the library and its API, and the store for this one."""
    library: str
    batch: Batch


class Ran:
    """How often the guarded function really ran, per job id."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def __call__(self, job: str) -> dict[str, Any]:
        with self.lock:
            self.counts[job] += 1
        return PAYLOAD

    def check(self, run: str, calls: int) -> None:
        mine = {job: count for job, count in self.counts.items() if job.startswith(run + "-")}
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


def _binding(job: str) -> Binding:
    return Binding("bench", job, "tool", "1", "sha256:0")


def tec_sync(store: Any, ran: Ran) -> Batch:
    def batch(run: str, calls: int) -> None:
        delivered: list[object] = []
        for number in range(calls):
            job = f"{run}-{number}"
            outcome = run_once(store, _binding(job), functools.partial(ran, job), delivered.append)
            if outcome.status is not RunStatus.EXECUTED_AND_DELIVERED:
                raise AssertionError(f"run_once: {outcome.status}")
        ran.check(run, calls)

    return batch


def tec_async(store: Any, ran: Ran, loop: Loop) -> Batch:
    async def deliver(payload: object) -> None:
        del payload

    async def many(run: str, calls: int) -> None:
        for number in range(calls):
            job = f"{run}-{number}"

            async def tool(job: str = job) -> dict[str, Any]:
                return ran(job)

            outcome = await run_once_async(store, _binding(job), tool, deliver)
            if outcome.status is not RunStatus.EXECUTED_AND_DELIVERED:
                raise AssertionError(f"run_once_async: {outcome.status}")

    def batch(run: str, calls: int) -> None:
        loop.run(many(run, calls))
        ran.check(run, calls)

    return batch


def _one_tenant(arguments: Any) -> str:
    del arguments
    return "bench"


def _method_config() -> MethodConfig:
    # key_fields: the job id is the operation's identity; scope: one tenant, said so.
    return MethodConfig(key_fields=["job"], scope=_one_tenant)


def idemkit_sync_batch(backend: Any, ran: Ran) -> Batch:
    def tool(job: str) -> dict[str, Any]:
        return ran(job)

    guarded = idempotent_sync(backend=backend, config=_method_config())(tool)

    def batch(run: str, calls: int) -> None:
        for number in range(calls):
            if guarded(job=f"{run}-{number}") != PAYLOAD:
                raise AssertionError("idemkit returned another result")
        ran.check(run, calls)

    return batch


def idemkit_async_batch(backend: Any, ran: Ran, loop: Loop) -> Batch:
    async def tool(job: str) -> dict[str, Any]:
        return ran(job)

    guarded = idemkit_async(backend=backend, config=_method_config())(tool)

    async def many(run: str, calls: int) -> None:
        for number in range(calls):
            if await guarded(job=f"{run}-{number}") != PAYLOAD:
                raise AssertionError("idemkit returned another result")

    def batch(run: str, calls: int) -> None:
        loop.run(many(run, calls))
        ran.check(run, calls)

    return batch


def powertools_batch(client: redis.Redis, ran: Ran) -> Batch:
    layer = RedisCachePersistenceLayer(client=cast(Any, client))
    config = IdempotencyConfig(event_key_jmespath="job")
    context = FakeLambdaContext()

    def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
        del context
        return ran(event["job"])

    handler = idempotent(persistence_store=layer, config=config)(handle)

    def batch(run: str, calls: int) -> None:
        for number in range(calls):
            if handler({"job": f"{run}-{number}"}, context) != PAYLOAD:
                raise AssertionError("powertools returned another result")
        ran.check(run, calls)

    return batch


# --- the subjects on each server ---------------------------------------------------------


def _with_port(url: str, port: int, proxy_port: int) -> str:
    return url.replace(f"127.0.0.1:{port}", f"127.0.0.1:{proxy_port}")


@contextlib.contextmanager
def postgres_subjects(url: str, loop: Loop, tag: str) -> Iterator[list[Subject]]:
    """Every subject on PostgreSQL at ``url``; ``tag`` keeps each instance's tables apart."""
    for table in (f"idemkit_sync_{tag}", f"idemkit_async_{tag}"):
        asyncio.run(init_pg(url, table=table))
    ran = Ran()
    store = PostgresStore(url, table=f"tec_sync_{tag}", min_size=2, max_size=2)
    async_store = AsyncPostgresStore(url, table=f"tec_async_{tag}", min_size=2, max_size=2)
    sync_backend = PostgresBackend.from_url(url, table=f"idemkit_sync_{tag}", min_size=2)
    async_backend = PostgresBackend.from_url(url, table=f"idemkit_async_{tag}", min_size=2)
    try:
        yield [
            Subject("run_once, PostgresStore", "this library", tec_sync(store, ran)),
            Subject(
                "run_once_async, AsyncPostgresStore",
                "this library",
                tec_async(async_store, ran, loop),
            ),
            Subject(
                "idemkit sync",
                "idemkit",
                idemkit_sync_batch(sync_backend, ran),
            ),
            Subject(
                "idemkit async",
                "idemkit",
                idemkit_async_batch(async_backend, ran, loop),
            ),
        ]
    finally:
        store.close()
        loop.run(async_store.aclose())
        loop.run(async_backend.aclose())
        run_sync(sync_backend.aclose())  # on idemkit's own loop, before the server stops


@contextlib.contextmanager
def redis_subjects(url: str, loop: Loop, tag: str) -> Iterator[list[Subject]]:
    ran = Ran()
    sync_client = redis.Redis.from_url(url)
    async_client = redis.asyncio.Redis.from_url(url)
    powertools_client = redis.Redis.from_url(url)
    sync_backend = RedisBackend.from_url(url, namespace=f"idemkit-sync-{tag}")
    async_backend = RedisBackend.from_url(url, namespace=f"idemkit-async-{tag}")
    try:
        yield [
            Subject(
                "run_once, RedisStore",
                "this library",
                tec_sync(RedisStore(sync_client, prefix=f"tec-sync-{tag}:"), ran),
            ),
            Subject(
                "run_once_async, AsyncRedisStore",
                "this library",
                tec_async(AsyncRedisStore(async_client, prefix=f"tec-async-{tag}:"), ran, loop),
            ),
            Subject("idemkit sync", "idemkit", idemkit_sync_batch(sync_backend, ran)),
            Subject(
                "idemkit async",
                "idemkit",
                idemkit_async_batch(async_backend, ran, loop),
            ),
            Subject(
                "powertools",
                "powertools",
                powertools_batch(powertools_client, ran),
            ),
        ]
    finally:
        sync_client.close()
        powertools_client.close()
        loop.run(async_client.aclose())
        loop.run(async_backend.aclose())
        run_sync(sync_backend.aclose())


# --- measuring ------------------------------------------------------------------------


_runs = itertools.count()


def _timed(subject: Subject, calls: int) -> float:
    run = f"{subject.library[:4]}-{uuid.uuid4().hex[:8]}-{next(_runs)}"
    started = time.perf_counter()
    subject.batch(run, calls)
    return (time.perf_counter() - started) / calls


def speed(subjects: list[Subject], calls: int, rounds: int) -> dict[str, Any]:
    for subject in subjects:
        _timed(subject, max(4, calls // 4))  # warm up: pools, prepared statements, scripts
    samples = paired_rounds(
        {subject.name: functools.partial(_timed, subject, calls) for subject in subjects},
        rounds,
    )
    medians = {name: statistics.median(values) for name, values in samples.items()}
    libraries = {subject.name: subject.library for subject in subjects}
    peers = [name for name in medians if libraries[name] != "this library"]
    fastest = min(peers, key=medians.__getitem__)
    paired = compare(samples, fastest)
    return {
        "calls_per_round": calls,
        "rounds": rounds,
        "fastest_peer": fastest,
        "us_per_call": {name: round(paired.us(name), 1) for name in medians},
        "ratio_to_fastest_peer": {name: round(paired.ratios[name], 3) for name in medians},
        "library": libraries,
    }


def _write_transactions(admin_url: str) -> int:
    """The next transaction id: it moves by one for each transaction that writes (and so
    waits for its WAL flush at commit), not for reads. (pg_stat_wal would count the WAL
    fsyncs themselves, but backends report to it up to seconds late.)"""
    with psycopg.connect(admin_url, autocommit=True) as connection:
        row = connection.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())").fetchone()
    assert row is not None
    return int(row[0])


def _redis_commands(client: redis.Redis) -> int:
    stats: dict[str, Any] = client.info("commandstats")
    return sum(int(value["calls"]) for value in stats.values())


def counts(
    subjects: list[Subject],
    proxy: CountingProxy,
    calls: int,
    server_work: Callable[[], int],
) -> dict[str, dict[str, float]]:
    """Round trips and the server's work per call, one subject at a time, through the
    proxy. The server count's own query is subtracted (measured with no calls between)."""
    idle_before = server_work()
    idle = server_work() - idle_before
    results = {}
    for subject in subjects:
        _timed(subject, 2)  # connections open, statements prepared, scripts loaded
        time.sleep(0.05)
        before = server_work()
        proxy.reset()
        _timed(subject, calls)
        trips = proxy.round_trips
        work = server_work() - before - idle
        results[subject.name] = {
            "round_trips_per_call": round(trips / calls, 2),
            "server_work_per_call": round(work / calls, 2),
        }
    return results


def measure(quick: bool) -> dict[str, Any]:
    calls, rounds, counted = (8, 3, 5) if quick else (40, 9, 20)
    loop = Loop()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tec-bench-peers-") as name:
        with PostgresServer() as server, CountingProxy("127.0.0.1", server.port) as proxy:
            with postgres_subjects(server.url, loop, "direct") as subjects:
                results["postgres"] = speed(subjects, calls, rounds)
            proxied = _with_port(server.url, server.port, proxy.port)
            with postgres_subjects(proxied, loop, "proxied") as subjects:
                results["postgres"]["counts"] = counts(
                    subjects,
                    proxy,
                    counted,
                    functools.partial(_write_transactions, server.admin_url),
                )
            results["postgres"]["server_work"] = "write transactions (transaction ids used)"
        redis_server: RedisServer = start_redis_server(Path(name) / "redis")
        try:
            with CountingProxy("127.0.0.1", redis_server.port) as proxy:
                with redis_subjects(redis_server.url(), loop, "direct") as subjects:
                    results["redis"] = speed(subjects, calls, rounds)
                proxied = _with_port(redis_server.url(), redis_server.port, proxy.port)
                watcher = redis_server.client()
                with redis_subjects(proxied, loop, "proxied") as subjects:
                    results["redis"]["counts"] = counts(
                        subjects, proxy, counted, functools.partial(_redis_commands, watcher)
                    )
                watcher.close()
            results["redis"]["server_work"] = "commands (INFO commandstats, scripts' included)"
        finally:
            stop_redis_server(redis_server)
    loop.close()
    return results


def figures_for(server: str, result: dict[str, Any]) -> list[Figure]:
    fastest = result["fastest_peer"]
    figures = []
    for name, us in result["us_per_call"].items():
        library = result["library"][name]
        counted = result["counts"][name]
        mine = library == "this library"
        slug = name.lower().replace(", ", ".").replace(" ", "_")
        where = {"postgres": "PostgreSQL", "redis": "Redis"}[server]
        work = f"{counted['server_work_per_call']:g} {result['server_work'].split(' (')[0]}"
        figures.append(
            Figure(
                key=f"peers.{server}.{slug}",
                label=f"{where} guarded call: {name}",
                value=us,
                unit="µs",
                baseline=result["us_per_call"][fastest],
                baseline_label=fastest,
                ratio=result["ratio_to_fastest_peer"][name],
                target=TARGET if mine else None,
                note=(
                    f"{counted['round_trips_per_call']:g} round trips, "
                    f"{counted['server_work_per_call']:g} {result['server_work'].split(' (')[0]}"
                    f" per call; {WRITES[library]} writes"
                ),
                details={**counted, "writes_per_call": WRITES[library]},
            )
        )
        figures.append(
            Figure(
                key=f"peers.{server}.{slug}.round_trips",
                label=f"{where} round trips per call: {name} ({work})",
                value=counted["round_trips_per_call"],
                unit="",
                baseline=result["counts"][fastest]["round_trips_per_call"],
                baseline_label=fastest,
                ratio=round(
                    counted["round_trips_per_call"]
                    / max(result["counts"][fastest]["round_trips_per_call"], 1e-9),
                    3,
                ),
                note=f"{counted['server_work_per_call']:g} {result['server_work']} per call",
                details=counted,
            )
        )
    return figures


def run(quick: bool = False) -> tuple[list[Figure], dict[str, Any]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # idemkit's single-tenant and key advice
        details = measure(quick)
    figures = [f for server in ("postgres", "redis") for f in figures_for(server, details[server])]
    return figures, details


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small batches, 3 rounds")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    figures, details = run(args.quick)
    print_table(figures)
    for server in ("postgres", "redis"):
        print(f"{server}: server work = {details[server]['server_work']}")
    if args.json:
        write_json(args.json, figures, {"peers": details})


if __name__ == "__main__":
    main()

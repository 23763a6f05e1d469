"""The same guarded function through this library and through its peers, on the same
servers, in the same run, with 1 caller and with 8 concurrent callers.

The guarded function takes a job id and returns a 1 KiB JSON result. Each subject makes
it run at most once per job id and hands its result to the caller. The subjects are one
table, :data:`CONTENDERS`, each with its role:

- runner rows: this library's ``run_once`` (PostgresStore, RedisStore) and
  ``run_once_async`` (AsyncPostgresStore, AsyncRedisStore), with its default settings
  (contracts off, ``synchronous_delivered=False`` on PostgreSQL). It fences the delivery:
  a result is handed over once, and a host that dies mid-send leaves a record saying so;
- guard rows: ``@checkpointed`` on a sync tool and on an async tool over the same stores,
  with the job id as the call id, as a user writes it (its delivery is the hand-back);
- peer rows: idemkit 1.0.2 (``idempotent_sync`` and ``idempotent`` with ``MethodConfig``;
  its PostgresBackend over asyncpg, its RedisBackend over redis.asyncio): claim with a
  lease, run, complete, two durable writes, the result returned, not fenced; and
  aws-lambda-powertools 3.37.0 on Redis (it has no PostgreSQL layer), both its
  decorators with ``RedisCachePersistenceLayer``: ``idempotent`` on a handler with a
  minimal fake Lambda context, and ``idempotent_function`` keyed by a keyword argument;
  a SET NX of an in-progress item, run, a SET of the result, two writes;
- floor rows, neither this library nor a peer and never the baseline: the three writes
  ``run_once`` sends, raw (_raw.raw_lifecycle: dict records, ``json.dumps``, the store's
  own SQL or Lua scripts with its relaxed delivered mark, through psycopg or plain
  redis-py), and the first two of them alone, the lower bound of any call that does not
  wait for its delivered mark.

Targets (:func:`figures_for`): a runner row at or below :data:`RUNNER_TARGET` of the
fastest peer of any kind; a guard row at or below :data:`TARGET` of the fastest peer of
its own kind (sync against sync, async against async), and the best guard row at or below
:data:`TARGET` of the fastest peer of any kind. Where one is missed, the table says by how
much and the counts say why.

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

Counting, in a separate pass, one subject at a time, through a TCP proxy, with the same
worker counts: round trips per call; write transactions and WAL fsyncs per call on
PostgreSQL; commands, write commands, AOF bytes and fsyncs per call on Redis (_counts.py
says how each is counted).

    python benchmarks/peers.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import statistics
import sys
import tempfile
import warnings
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, cast

import psycopg
import redis
from _calls import (
    guard_async,
    guard_sync,
    idemkit_async_call,
    idemkit_sync_call,
    powertools_call,
    powertools_function_call,
    raw_writes,
    tec_async,
    tec_sync,
)
from _counts import count_postgres, count_redis
from _drive import (
    POOL,
    WORKERS,
    Loop,
    Opener,
    Ran,
    Subject,
    async_drive,
    sync_drive,
    timed,
    warm,
)
from _measure import (
    Figure,
    compare,
    paired_rounds,
    print_table,
    run_with_contracts,
    write_json,
)
from _proxy import CountingProxy
from _raw import RawPostgres, RawRedis
from idemkit.backends.postgres import PostgresBackend, init_pg
from idemkit.backends.redis import RedisBackend
from idemkit.core.sync_bridge import run_sync
from psycopg_pool import ConnectionPool

from tool_execution_checkpoint.stores.postgres import AsyncPostgresStore, PostgresStore
from tool_execution_checkpoint.stores.redis import AsyncRedisStore, RedisStore
from tool_execution_checkpoint.transitions import CONTRACTS_ENABLED

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from postgres_server import PostgresServer
from redis_server import start_redis_server, stop_redis_server

__all__ = ["CONTENDERS", "Contender", "run"]

TARGET = 1.0
"""A guard row's ceiling: its ratio to the fastest peer of its own kind."""
RUNNER_TARGET = {"postgres": 1.0, "redis": 1.10}
"""A runner row's ceiling: its ratio to the fastest peer of any kind. On Redis it fences
the delivery, which no peer does, and is given 10 %."""
SERVERS = {"postgres": "PostgreSQL", "redis": "Redis"}
FLOOR = "no library"
"""The library of the subjects that send the protocol's writes raw (all three, or the
first two): neither this library nor a peer, never the baseline."""


# --- the contenders: one table ---------------------------------------------------------


@dataclass(frozen=True)
class Place:
    """Where a contender is opened: its server's URL, a name of its own (its table,
    prefix or namespace), and ``run``, which runs a coroutine where the contender's own
    coroutines run (this process's loop for an asyncio contender, idemkit's bridge loop
    for a synchronous one: idemkit's sync API runs its coroutines there)."""

    url: str
    name: str
    run: Callable[[Coroutine[Any, Any, Any]], Any]


@contextlib.contextmanager
def _closed_on(resource: Any, place: Place) -> Iterator[Any]:
    """``resource`` for the block, then its ``aclose()`` run where it belongs."""
    try:
        yield resource
    finally:
        place.run(resource.aclose())


def pg_store(place: Place) -> AbstractContextManager[Any]:
    return PostgresStore(place.url, table=place.name, min_size=POOL, max_size=POOL)


def async_pg_store(place: Place) -> AbstractContextManager[Any]:
    store = AsyncPostgresStore(place.url, table=place.name, min_size=POOL, max_size=POOL)
    return _closed_on(store, place)


def idemkit_pg(place: Place) -> AbstractContextManager[Any]:
    backend = PostgresBackend.from_url(place.url, table=place.name, min_size=POOL, max_size=POOL)
    return _closed_on(backend, place)


def idemkit_table(place: Place) -> None:
    asyncio.run(init_pg(place.url, table=place.name))


@contextlib.contextmanager
def raw_pg(place: Place) -> Iterator[Any]:
    kwargs = {"autocommit": True}
    with ConnectionPool(place.url, min_size=POOL, max_size=POOL, kwargs=kwargs) as pool:
        raw = RawPostgres(pool, place.url, place.name)
        pool.wait()
        yield raw


def redis_store(place: Place) -> AbstractContextManager[Any]:
    return RedisStore.from_url(place.url, prefix=f"{place.name}:")


def async_redis_store(place: Place) -> AbstractContextManager[Any]:
    return _closed_on(AsyncRedisStore.from_url(place.url, prefix=f"{place.name}:"), place)


def idemkit_redis(place: Place) -> AbstractContextManager[Any]:
    return _closed_on(RedisBackend.from_url(place.url, namespace=place.name), place)


def redis_client(place: Place) -> AbstractContextManager[Any]:
    return redis.Redis.from_url(place.url)


@contextlib.contextmanager
def raw_redis(place: Place) -> Iterator[Any]:
    with redis.Redis.from_url(place.url) as client:
        yield RawRedis(client, f"{place.name}:")


Role = Literal["runner", "guard", "peer", "floor"]
"""What a contender is to the targets: this library's ``run_once`` (a runner row) or its
``@checkpointed`` (a guard row), a peer library's decorator, or the raw writes (a floor)."""


@dataclass(frozen=True)
class Contender:
    """One measured subject, as data: what the table calls it, its :data:`Role`, the
    server it runs on, whether its guarded call is a function or a coroutine function,
    what it opens (``open``: its store, backend, client or pool, for the ``with`` block),
    and how it makes one guarded call with that (``call``)."""

    name: str
    role: Role
    server: Literal["postgres", "redis"]
    kind: Literal["sync", "async"]
    open: Callable[[Place], AbstractContextManager[Any]]
    call: Callable[[Any, Ran], Callable[[str], Any]]
    prepare: Callable[[Place], None] | None = None
    """What its server needs once before it is opened (idemkit's table)."""

    @property
    def library(self) -> str:
        """Whose it is, as the table names it."""
        if self.role in ("runner", "guard"):
            return MINE
        return FLOOR if self.role == "floor" else self.name.split()[0]


PG: Final = "postgres"
REDIS: Final = "redis"
SYNC: Final = "sync"
ASYNC: Final = "async"
MINE, THREE, TWO = "this library", "the same three writes, raw", "the first two writes, raw"
_ALL = functools.partial(raw_writes, mark=True)
_FIRST_TWO = functools.partial(raw_writes, mark=False)

CONTENDERS = (
    Contender("run_once, PostgresStore", "runner", PG, SYNC, pg_store, tec_sync),
    Contender("run_once_async, AsyncPostgresStore", "runner", PG, ASYNC, async_pg_store, tec_async),
    Contender("@checkpointed, PostgresStore", "guard", PG, SYNC, pg_store, guard_sync),
    Contender(
        "@checkpointed async, AsyncPostgresStore", "guard", PG, ASYNC, async_pg_store, guard_async
    ),
    Contender("idemkit sync", "peer", PG, SYNC, idemkit_pg, idemkit_sync_call, idemkit_table),
    Contender("idemkit async", "peer", PG, ASYNC, idemkit_pg, idemkit_async_call, idemkit_table),
    Contender(THREE, "floor", PG, SYNC, raw_pg, _ALL),
    Contender(TWO, "floor", PG, SYNC, raw_pg, _FIRST_TWO),
    Contender("run_once, RedisStore", "runner", REDIS, SYNC, redis_store, tec_sync),
    Contender(
        "run_once_async, AsyncRedisStore", "runner", REDIS, ASYNC, async_redis_store, tec_async
    ),
    Contender("@checkpointed, RedisStore", "guard", REDIS, SYNC, redis_store, guard_sync),
    Contender(
        "@checkpointed async, AsyncRedisStore",
        "guard",
        REDIS,
        ASYNC,
        async_redis_store,
        guard_async,
    ),
    Contender("idemkit sync", "peer", REDIS, SYNC, idemkit_redis, idemkit_sync_call),
    Contender("idemkit async", "peer", REDIS, ASYNC, idemkit_redis, idemkit_async_call),
    Contender("powertools idempotent", "peer", REDIS, SYNC, redis_client, powertools_call),
    Contender(
        "powertools idempotent_function",
        "peer",
        REDIS,
        SYNC,
        redis_client,
        powertools_function_call,
    ),
    Contender(THREE, "floor", REDIS, SYNC, raw_redis, _ALL),
    Contender(TWO, "floor", REDIS, SYNC, raw_redis, _FIRST_TWO),
)
"""Every subject, in the order they are timed and listed."""


@contextlib.contextmanager
def opened(contender: Contender, place: Place, ran: Ran, loop: Loop) -> Iterator[Subject]:
    """``contender`` open at ``place``, as a :class:`Subject` whose calls ``ran`` counts."""
    with contender.open(place) as resource:
        call = contender.call(resource, ran)
        if contender.kind == "sync":
            drive = sync_drive(call, ran)
        else:
            drive = async_drive(cast(Callable[[str], Awaitable[None]], call), ran, loop)
        yield Subject(contender.name, contender.library, drive)


def openers(server: str, url: str, loop: Loop, tag: str) -> dict[str, Opener]:
    """An opener for every contender on ``server`` at ``url``, by name; ``tag`` keeps each
    instance's tables and prefixes apart (an opener opened again uses the same ones)."""
    ran = Ran()
    found: dict[str, Opener] = {}
    for number, contender in enumerate(CONTENDERS):
        if contender.server != server:
            continue
        place = Place(url, f"s{number}_{tag}", loop.run if contender.kind == "async" else run_sync)
        if contender.prepare is not None:
            contender.prepare(place)
        found[contender.name] = functools.partial(opened, contender, place, ran, loop)
    return found


def _with_port(url: str, port: int, proxy_port: int) -> str:
    return url.replace(f"127.0.0.1:{port}", f"127.0.0.1:{proxy_port}")


@contextlib.contextmanager
def all_open(openers: Mapping[str, Opener]) -> Iterator[list[Subject]]:
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(opener()) for opener in openers.values()]


# --- timing ----------------------------------------------------------------------------


def speed(
    subjects: list[Subject], roster: Mapping[str, Contender], workers: int, calls: int, rounds: int
) -> dict[str, Any]:
    """Paired rounds of every subject at ``workers`` callers of ``calls`` calls each, with
    each subject's ratio to the fastest peer of any kind and to the fastest peer of its
    own kind (sync or async); ``roster`` is the subjects' contenders by name."""
    for subject in subjects:
        warm(subject, workers)
    samples = paired_rounds(
        {subject.name: functools.partial(timed, subject, workers, calls) for subject in subjects},
        rounds,
    )
    walls = {name: [wall for wall, _ in values] for name, values in samples.items()}
    cpus = {name: [cpu for _, cpu in values] for name, values in samples.items()}

    def fastest_peer(kinds: Sequence[str]) -> str:
        peers = [n for n in walls if roster[n].role == "peer" and roster[n].kind in kinds]
        return min(peers, key=lambda name: statistics.median(walls[name]))

    fastest = fastest_peer((SYNC, ASYNC))
    of_kind = {kind: fastest_peer((kind,)) for kind in (SYNC, ASYNC)}
    paired = compare(walls, fastest)
    by_kind = {kind: compare(walls, peer) for kind, peer in of_kind.items()}
    return {
        "workers": workers,
        "calls_per_worker_per_round": calls,
        "rounds": rounds,
        "fastest_peer": fastest,
        "fastest_peer_of_kind": of_kind,
        "us_per_call": {name: round(paired.us(name), 1) for name in walls},
        "calls_per_second": {name: round(paired.per_second(name), 1) for name in walls},
        "ratio_to_fastest_peer": {name: round(paired.ratios[name], 3) for name in walls},
        "ratio_to_fastest_of_kind": {
            name: round(by_kind[roster[name].kind].ratios[name], 3) for name in walls
        },
        "cpu_us_per_call": {name: round(statistics.median(v) * 1e6, 1) for name, v in cpus.items()},
        "library": {name: roster[name].library for name in walls},
        "role": {name: roster[name].role for name in walls},
        "kind": {name: roster[name].kind for name in walls},
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


def roster(server: str) -> dict[str, Contender]:
    """The contenders on ``server``, by name."""
    return {contender.name: contender for contender in CONTENDERS if contender.server == server}


def _timings(server: str, url: str, loop: Loop, plan: Sizes) -> dict[str, Any]:
    with all_open(openers(server, url, loop, "d")) as subjects:
        return {
            str(workers): speed(subjects, roster(server), workers, plan.calls[workers], plan.rounds)
            for workers in WORKERS
        }


def measure_postgres(plan: Sizes, loop: Loop) -> dict[str, Any]:
    with PostgresServer() as server, CountingProxy("127.0.0.1", server.port) as proxy:
        results: dict[str, Any] = {"workers": _timings("postgres", server.url, loop, plan)}
        with psycopg.connect(server.admin_url, autocommit=True) as admin:
            # No autovacuum worker or timed checkpoint writes WAL while a subject is counted.
            admin.execute(b"ALTER SYSTEM SET autovacuum = off")
            admin.execute(b"SELECT pg_reload_conf()")
            admin.execute(b"CHECKPOINT")
            row = admin.execute(b"SHOW server_version").fetchone()
            version = row[0] if row else "?"
        proxied = _with_port(server.url, server.port, proxy.port)
        counted_openers = openers("postgres", proxied, loop, "p")
        results["counts"] = {
            str(workers): {
                name: count_postgres(opener, proxy, server.admin_url, workers, counted)
                for name, opener in counted_openers.items()
            }
            for workers, counted in plan.counted.items()
        }
    results["server"] = f"PostgreSQL {version}, fsync and synchronous_commit on"
    return results


def measure_redis(plan: Sizes, loop: Loop) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tec-bench-peers-") as name:
        server = start_redis_server(Path(name) / "redis")
        try:
            results: dict[str, Any] = {"workers": _timings("redis", server.url(), loop, plan)}
            with CountingProxy("127.0.0.1", server.port) as proxy:
                proxied = _with_port(server.url(), server.port, proxy.port)
                counted_openers = openers("redis", proxied, loop, "p")
                results["counts"] = {
                    str(workers): {
                        name: count_redis(opener, proxy, server, workers, counted)
                        for name, opener in counted_openers.items()
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
    """A figure per subject and worker count, and one for the best guard row. A runner row
    is held to :data:`RUNNER_TARGET` of the fastest peer of any kind; a guard row to
    :data:`TARGET` of the fastest peer of its own kind (sync or async), and the best guard
    row to :data:`TARGET` of the fastest peer of any kind. Peers and floors have no target."""
    return [f for workers in result["workers"] for f in _figures_at(server, result, workers)]


def _figures_at(server: str, result: dict[str, Any], workers_text: str) -> list[Figure]:
    """:func:`figures_for` at one worker count."""
    timing = result["workers"][workers_text]
    workers = int(workers_text)
    single = workers == 1
    value = timing["us_per_call"] if single else timing["calls_per_second"]
    where = f"{SERVERS[server]} guarded call, {workers} worker{'' if single else 's'}"
    stem = f"peers.{server}.{workers}_worker{'' if single else 's'}"
    figures = []

    def figure(name: str, key: str, label: str, baseline: str, ratio: float) -> Figure:
        role = timing["role"][name]
        target = {"runner": RUNNER_TARGET[server], "guard": TARGET}.get(role)
        counted = result["counts"][workers_text][name]
        details = {
            **counted,
            "us_per_call": timing["us_per_call"][name],
            "calls_per_second": timing["calls_per_second"][name],
            "cpu_us_per_call": timing["cpu_us_per_call"][name],
            "library": timing["library"][name],
            "role": role,
            "subject": name,
        }
        if target is not None:
            details["missed_by"] = round(max(ratio - target, 0.0), 3)
        return Figure(
            key=key,
            label=f"{label} [{_counts_text(server, counted)} per call]",
            value=value[name],
            unit="µs" if single else "calls/s",
            baseline=value[baseline],
            baseline_label=baseline,
            ratio=ratio,
            target=target,
            note=f"{timing['cpu_us_per_call'][name]:g} µs client CPU per call",
            details=details,
        )

    for name, role in timing["role"].items():
        if role == "guard":
            baseline = timing["fastest_peer_of_kind"][timing["kind"][name]]
            ratio = timing["ratio_to_fastest_of_kind"][name]
        else:
            baseline, ratio = timing["fastest_peer"], timing["ratio_to_fastest_peer"][name]
        figures.append(figure(name, f"{stem}.{_slug(name)}", f"{where}: {name}", baseline, ratio))
    guards = [name for name, role in timing["role"].items() if role == "guard"]
    best = min(guards, key=lambda name: timing["ratio_to_fastest_peer"][name])
    figures.append(
        figure(
            best,
            f"{stem}.best_guard",
            f"{where}: the best guard row ({best}) against every peer",
            timing["fastest_peer"],
            timing["ratio_to_fastest_peer"][best],
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
            over = (figure.ratio - (figure.target or TARGET)) * 100
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
